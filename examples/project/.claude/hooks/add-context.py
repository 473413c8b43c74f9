#!/usr/bin/env python3
"""UserPromptSubmit: add a line of context, as hook JSON."""
import json
import sys

data = json.load(sys.stdin)
size = len(data["prompt"])
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "UserPromptSubmit",
    "additionalContext": f"Project rule: keep functions short ({size}-character prompt).",
}}))
