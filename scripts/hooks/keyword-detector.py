#!/usr/bin/env python3
"""UserPromptSubmit hook: suggest a skill for prompts that start with "ooo".

"ooo seed my requirements" -> a <skill-suggestion> naming /ouroboros:seed, returned as
hookSpecificOutput.additionalContext. It suggests and loads nothing: the model decides.
It exits 0 whatever happens, so it fails open on its own.
"""

from __future__ import annotations

import json
import re
import sys

PREFIX = "ooo"
DEFAULT_SKILL = "help"
# The word after the prefix names the skill when it looks like a skill name.
SKILL_WORD = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def suggestion(prompt: str) -> str | None:
    words = prompt.strip().split()
    if not words or words[0].lower() != PREFIX:
        return None
    word = words[1].lower() if len(words) > 1 else DEFAULT_SKILL
    skill = word if SKILL_WORD.fullmatch(word) else DEFAULT_SKILL
    return (
        "<skill-suggestion>\n"
        f"The prompt starts with the keyword \"{PREFIX}\". The skill /ouroboros:{skill} "
        "fits it; load it if it helps. Nothing has been loaded.\n"
        "</skill-suggestion>"
    )


def main() -> int:
    try:
        envelope = json.loads(sys.stdin.read() or "{}")
        prompt = envelope.get("prompt") if isinstance(envelope, dict) else None
        text = suggestion(prompt) if isinstance(prompt, str) else None
        if text is not None:
            json.dump({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                              "additionalContext": text}}, sys.stdout)
    except Exception as err:  # advisory: never block a prompt
        print(f"keyword-detector: {err}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
