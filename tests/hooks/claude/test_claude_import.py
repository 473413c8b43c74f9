"""``harness-sandbox import claude``: Claude Code settings files in the shapes its
documentation gives (user, project, local; plain, ``|``-joined and regex matchers;
command strings with and without shell syntax; ``$CLAUDE_PROJECT_DIR``), converted,
their files copied as the import says, written with ``--write``, then loaded and fired
for real: hook programs in bash+jq, Python and Node, in the box."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.claude_world import ClaudeWorld, made
from helpers.procs import Done

from launchers.claude.command import convert
from launchers.claude.importer import map_matcher

BLOCK_RM = r"""#!/usr/bin/env bash
# Block dangerous rm commands (reads the call as JSON on stdin).
cmd=$(jq -r '.tool_input.command // empty')
if echo "$cmd" | grep -qE 'rm -rf /( |$)'; then
  echo "Blocked: rm -rf / is not allowed" >&2
  exit 2
fi
exit 0
"""

NO_SECRETS = """#!/usr/bin/env python3
import json
import sys

data = json.load(sys.stdin)
if "password" in data.get("prompt", "").lower():
    print(json.dumps({"decision": "block", "reason": "Prompt contains a password"}))
sys.exit(0)
"""

CONTEXT_JS = """let raw = '';
process.stdin.on('data', (d) => { raw += d; });
process.stdin.on('end', () => {
  const input = JSON.parse(raw);
  const text = `prompt of ${input.prompt.length} characters; main is protected`;
  console.log(JSON.stringify({hookSpecificOutput: {hookEventName: 'UserPromptSubmit',
                                                   additionalContext: text}}));
});
"""

NO_ENV = ("jq -e '.tool_input.path | test(\"[.]env$\")' >/dev/null "
          "&& { echo 'no edits to .env files' >&2; exit 2; } || exit 0")


World = ClaudeWorld


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with made(tmp_path, "claude-import-") as (home, harness, project):
        (home / ".claude" / "hooks").mkdir(parents=True)
        yield World(home, harness, project)


def _write(path: Path, text: str, mode: int = 0o755) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def settings(w: World) -> None:
    """The user's, the project's and the local settings file, as Claude Code has them."""
    _write(w.home / ".claude" / "hooks" / "block-rm.sh", BLOCK_RM)
    _write(w.project / ".claude" / "hooks" / "no-secrets.py", NO_SECRETS)
    _write(w.project / ".claude" / "hooks" / "context.js", CONTEXT_JS, 0o644)
    (w.home / ".claude" / "settings.json").write_text(json.dumps({
        "model": "opus",
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "~/.claude/hooks/block-rm.sh", "timeout": 10}]}],
            "PostToolUse": [{"matcher": "Edit|Write", "hooks": [
                {"type": "command", "command": "npx prettier --write"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
        }}))
    (w.project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {
        "UserPromptSubmit": [{"hooks": [{
            "type": "command",
            "command": 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/no-secrets.py'}]}],
        "PreToolUse": [{"matcher": "Edit|MultiEdit|Write|NotebookEdit", "hooks": [
            {"type": "command", "command": NO_ENV, "timeout": 1200}]}],
    }}))
    (w.project / ".claude" / "settings.local.json").write_text(json.dumps({"hooks": {
        "UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "node $CLAUDE_PROJECT_DIR/.claude/hooks/context.js"},
            {"type": "prompt", "prompt": "Is this prompt safe?"}]}],
        "PreToolUse": [{"matcher": "Web.*", "hooks": [
            {"type": "command", "command": "~/.claude/hooks/block-rm.sh"}]}],
    }}))


def expected_toml(w: World) -> str:
    g = w.home / ".claude" / "settings.json"
    p = w.project / ".claude" / "settings.json"
    loc = w.project / ".claude" / "settings.local.json"
    dest = w.hooks_home
    return f"""# {g}: hooks.PreToolUse[0].hooks[0]: matcher "Bash"
# ~/.claude/hooks/block-rm.sh
[[hooks]]
name = "block-rm"
event = "PreToolUse"
tools = ["bash"]
# tools = ["bash", "exec"]   # covers exec (an argv, no shell) as well
command = ["{dest}/block-rm.sh"]
timeout = 10

# {p}: hooks.UserPromptSubmit[0].hooks[0]
# python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/no-secrets.py
[[hooks]]
name = "no-secrets"
event = "UserPromptSubmit"
command = ["python3", "{dest}/no-secrets.py"]

# {p}: hooks.PreToolUse[0].hooks[0]: matcher "Edit|MultiEdit|Write|NotebookEdit"
# {NO_ENV}
# run through /bin/sh: a path inside the -c string is not seen by the check (best effort),
# so keep every file it names outside the project.
[[hooks]]
name = "jq"
event = "PreToolUse"
tools = ["edit_file", "write_file"]
command = ["/bin/sh", "-c", {json.dumps(NO_ENV)}]
timeout = 600

# {loc}: hooks.UserPromptSubmit[0].hooks[0]
# node $CLAUDE_PROJECT_DIR/.claude/hooks/context.js
[[hooks]]
name = "context"
event = "UserPromptSubmit"
command = ["node", "{dest}/context.js"]
"""


def expected_report(w: World) -> list[str]:
    g = w.home / ".claude" / "settings.json"
    p = w.project / ".claude" / "settings.json"
    loc = w.project / ".claude" / "settings.local.json"
    claude = w.home / ".claude"
    src_rm = claude / "hooks" / "block-rm.sh"
    src_py = w.project / ".claude" / "hooks" / "no-secrets.py"
    src_js = w.project / ".claude" / "hooks" / "context.js"
    dest = w.hooks_home
    agents = ("is in the project, so the agent could have written it: read each entry it "
              "gives before you add it to your config.")
    return [
        f"⚠ {p} {agents}",
        f"⚠ {loc} {agents}",
        f'⚠ {g}: hooks.PreToolUse[0]: matcher "Bash" becomes bash; harness also runs '
        "commands through exec (an argv, no shell), which Claude Code does not have and this "
        'hook would not see. To cover it too, write tools = ["bash", "exec"] (the entry '
        "shows the line).",
        f"⚠ {g}: PostToolUse is not imported (1 hook): harness has only PreToolUse and "
        "UserPromptSubmit.",
        f"⚠ {g}: Notification is not imported (1 hook): harness has only PreToolUse and "
        "UserPromptSubmit.",
        f'⚠ {p}: hooks.PreToolUse[0]: matcher "Edit|MultiEdit|Write|NotebookEdit": '
        "NotebookEdit is not a tool here; the hook covers edit_file, write_file.",
        f"⚠ {p}: hooks.PreToolUse[0].hooks[0]: timeout 1200 s is kept as 600 s (harness "
        "takes whole seconds from 1 to 600).",
        f"⚠ {loc}: hooks.UserPromptSubmit[0].hooks[1]: a \"prompt\" hook is not imported; "
        "only command hooks run here.",
        f'⚠ {loc}: hooks.PreToolUse[0]: matcher "Web.*" matches no tool here; not imported.',
        f"⚠ hook block-rm: {src_rm} is in a folder the sandbox hides ({claude}), so the "
        f"hook could not read it. The entry names {dest}/block-rm.sh; copy it there (below).",
        f"⚠ hook no-secrets: {src_py} is in the project, so the agent could change it. "
        f"The entry names {dest}/no-secrets.py; copy it there (below).",
        f"⚠ hook context: {src_js} is in the project, so the agent could change it. "
        f"The entry names {dest}/context.js; copy it there (below).",
        "Copy the hook files to their new place before a session (read them first: a file in "
        "the project is the agent's to change):",
        f"  mkdir -p {dest}",
        f"  cp {src_rm} {dest}/block-rm.sh",
        f"  cp {src_py} {dest}/no-secrets.py",
        f"  cp {src_js} {dest}/context.js",
    ]


def test_settings_files_are_converted_to_hooks_entries(world: World) -> None:
    settings(world)
    r = world.cli("import", "claude", "--project", str(world.project))
    assert r.code == 0, r.err
    assert r.out == expected_toml(world)
    assert r.err.splitlines() == [*expected_report(world), "import: 4 hooks from 3 files"]
    tomllib.loads(r.out)  # valid TOML
    assert not world.config.exists()
    assert not world.hooks_home.exists()  # nothing is copied, nothing run


@pytest.mark.isolation
def test_converted_hooks_load_and_fire_for_real(world: World) -> None:
    settings(world)
    # Before the files are copied, --write refuses and writes nothing.
    early = world.cli("import", "claude", "--project", str(world.project), "--write")
    dest = world.hooks_home
    assert early.code == 1
    assert early.err.splitlines()[-4:] == [
        f"hook block-rm: {dest}/block-rm.sh was not found.",
        f"hook no-secrets: {dest}/no-secrets.py was not found.",
        f"hook context: {dest}/context.js was not found.",
        f"import: nothing written to {world.config}: 3 refusals; fix them and run it again"]
    assert not world.config.exists()

    # The copy lines, run as the import printed them.
    for line in early.err.splitlines():
        if line.startswith(("  mkdir -p ", "  cp ")):
            subprocess.run(["/bin/sh", "-c", line], check=True)
    done = world.cli("import", "claude", "--project", str(world.project), "--write")
    assert done.code == 0, done.err
    assert done.err.splitlines()[-1] == f"import: 4 hooks appended to {world.config}"
    assert world.config.read_text() == expected_toml(world)

    audit = world.cli("audit", "--project", str(world.project))
    assert audit.code == 0, audit.err
    assert audit.err.splitlines()[0] == ("hooks: block-rm (bash) · no-secrets (prompts) · "
                                         "jq (edit_file, write_file) · context (prompts)")

    def fire(*args: str) -> Done:
        return world.cli("hook", *args, "--project", str(world.project))

    rm = fire("PreToolUse", "--tool", "bash", "--input", '{"command": "rm -rf /"}')
    assert (rm.code, rm.err) == (
        1, 'blocked by the user\'s hook "block-rm": Blocked: rm -rf / is not allowed\n')
    ls = fire("PreToolUse", "--tool", "bash", "--input", '{"command": "ls -la"}')
    assert (ls.code, ls.out, ls.err) == (0, "", "")
    env = fire("PreToolUse", "--tool", "write_file", "--input",
               json.dumps({"path": str(world.project / ".env"), "content": "X=1"}))
    assert (env.code, env.err) == (1, 'blocked by the user\'s hook "jq": no edits to .env '
                                      "files\n")
    ok = fire("PreToolUse", "--tool", "write_file", "--input", '{"path": "a.py"}')
    assert ok.code == 0, ok.err
    secret = fire("UserPromptSubmit", "--prompt", "my password is hunter2")
    assert (secret.code, secret.err) == (
        1, '✗ prompt blocked by hook "no-secrets": Prompt contains a password\n')
    hello = fire("UserPromptSubmit", "--prompt", "hello")
    assert (hello.code, hello.out) == (
        0, 'Context from the user\'s hook "context":\nprompt of 5 characters; main is '
           "protected\n")


def test_write_appends_and_never_overwrites(world: World) -> None:
    world.harness_home.mkdir()
    before = ('# mine\n[model]\nname = "x"\n\n[[hooks]]\nname = "guard"\nevent = '
              '"UserPromptSubmit"\ncommand = ["/bin/true"]')  # no final newline
    world.config.write_text(before)
    script = world.home / "bin" / "guard.py"
    script.parent.mkdir()
    _write(script, NO_SECRETS)
    settings_file = world.home / "s.json"
    settings_file.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Read|Gr.*",
        "hooks": [{"type": "command", "command": f"python3 {script}"}]}]}}))
    r = world.cli("import", "claude", str(settings_file), "--project", str(world.project),
                  "--write")
    assert r.code == 0, r.err
    entry = (f"# {settings_file}: hooks.PreToolUse[0].hooks[0]: matcher \"Read|Gr.*\"\n"
             f"# python3 {script}\n[[hooks]]\nname = \"guard-2\"\nevent = \"PreToolUse\"\n"
             f"tools = [\"read_file\", \"search\"]\ncommand = [\"python3\", \"{script}\"]\n")
    assert r.out == entry
    assert world.config.read_text() == before + "\n\n" + entry


def test_control_characters_from_a_settings_file_are_escaped(world: World) -> None:
    settings_file = world.home / "s.json"
    settings_file.write_text(json.dumps({"hooks": {"Stop\x1b[2J": [], "PreToolUse": [
        {"matcher": "Bash",
         "hooks": [{"type": "command", "command": "/bin/true # \x1b]0;x\x07"}]}]}}))
    r = world.cli("import", "claude", str(settings_file))
    assert "\x1b" not in r.err + r.out and "\x07" not in r.out
    assert r.err.splitlines()[0] == (f"⚠ {settings_file}: Stop\\x1b[2J is not imported (0 "
                                     "hooks): harness has only PreToolUse and UserPromptSubmit.")
    assert "# /bin/true # \\x1b]0;x\\x07\n" in r.out
    doc = tomllib.loads(r.out)
    assert doc["hooks"][0]["command"] == ["/bin/sh", "-c", "/bin/true # \x1b]0;x\x07"]


def test_nothing_to_import_says_where_it_looked(world: World) -> None:
    shutil.rmtree(world.home / ".claude")
    r = world.cli("import", "claude", "--project", str(world.project))
    p = world.project / ".claude"
    assert (r.code, r.out) == (2, "")
    assert r.err == (f"import: no Claude Code settings found (looked at "
                     f"{world.home}/.claude/settings.json, {p}/settings.json, "
                     f"{p}/settings.local.json)\n")
    bad = world.home / "bad.json"
    bad.write_text("{")
    r = world.cli("import", "claude", str(bad))
    assert r.code == 2
    assert r.err.startswith(f"{bad}: not valid JSON: ")
    bad.write_text("[" * 200_000 + "]" * 200_000)  # too deep for the parser: no traceback
    r = world.cli("import", "claude", str(bad))
    assert (r.code, r.err.startswith(f"{bad}: not valid JSON: "), "Traceback" in r.err) == \
        (2, True, False)


# -- the parts --------------------------------------------------------------------


@pytest.mark.parametrize(("matcher", "tools", "unmapped", "mcp_named"), [
    (None, None, [], False),
    ("", None, [], False),
    ("*", None, [], False),
    (".*", None, [], False),
    ("Bash", ("bash",), [], False),
    ("Edit|MultiEdit|Write", ("edit_file", "write_file"), [], False),
    ("Task|WebFetch", ("agent",), ["WebFetch"], False),
    ("Notebook.*", (), [], False),
    ("^(Read|Glob|Grep)$", ("read_file", "glob", "search"), [], False),
    ("mcp__github__create_issue", ("mcp",), [], True),
    ("mcp__.*", ("mcp",), [], False),
    ("mcp__memory__.*", ("mcp",), [], True),
    ("bash", (), ["bash"], False),  # matched exactly, and case counts in Claude Code
])
def test_matchers_map_through_the_table(matcher: str | None, tools: tuple[str, ...] | None,
                                        unmapped: list[str], mcp_named: bool) -> None:
    assert map_matcher(matcher) == (tools, unmapped, mcp_named)


@pytest.mark.parametrize(("text", "argv"), [
    ("python3 /h/x/check.py", ("python3", "/h/x/check.py")),
    ('"$CLAUDE_PROJECT_DIR"/.claude/hooks/a.sh --strict',
     ("/p q/.claude/hooks/a.sh", "--strict")),
    ("${CLAUDE_PROJECT_DIR}/a.sh '$HOME' \"$HOME\"/b", ("/p q/a.sh", "$HOME", "/h/b")),
    ("~/.claude/hooks/a.sh", ("/h/.claude/hooks/a.sh",)),
    ("uv run --script /h/a.py", ("uv", "run", "--script", "/h/a.py")),
    ("jq -r .tool_input.command | tee -a ~/log.txt",
     ("/bin/sh", "-c", "jq -r .tool_input.command | tee -a /h/log.txt")),
    ('cd "$CLAUDE_PROJECT_DIR" && ./check.sh', ("/bin/sh", "-c", 'cd "/p q" && ./check.sh')),
    ("$CLAUDE_PROJECT_DIR/a.sh > /dev/null", ("/bin/sh", "-c", "'/p q'/a.sh > /dev/null")),
    ("echo $PATH", ("/bin/sh", "-c", "echo $PATH")),
    ("DEBUG=1 /h/a.sh", ("/bin/sh", "-c", "DEBUG=1 /h/a.sh")),
    ("/h/a.sh *.py", ("/bin/sh", "-c", "/h/a.sh *.py")),
    ("/h/a.sh # note", ("/bin/sh", "-c", "/h/a.sh # note")),
    ("/h/a.sh 'x|y'", ("/h/a.sh", "x|y")),
])
def test_command_strings_become_argvs(text: str, argv: tuple[str, ...]) -> None:
    assert convert(text, project="/p q", home="/h").argv == argv
