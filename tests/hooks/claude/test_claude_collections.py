"""Claude Code hook collections in the shapes real repositories ship, ported with one
``import claude``, then audited and fired as a user would: in the box and on the host.
Each either does what its author meant or is stopped at import or audit with the cause
and the fix. The hooks are our own, written in those shapes; every program is real."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.claude_world import ClaudeWorld, made
from helpers.procs import Done

from launchers.claude.lint import wrapped


class World(ClaudeWorld):
    """The user, and what the collection tests do as that user."""

    def settings(self, doc: dict[str, Any], name: str = "settings.json") -> Path:
        path = self.project / ".claude" / name
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    def hook_file(self, name: str, text: str, mode: int = 0o755) -> Path:
        path = self.project / ".claude" / "hooks" / name
        path.write_text(text, encoding="utf-8")
        path.chmod(mode)
        return path

    def import_claude(self, *files: Path, write: bool = True) -> Done:
        """Import, run the copy lines it prints (as its user would), then --write."""
        args = ["import", "claude", *map(str, files), "--project", str(self.project)]
        first = self.cli(*args)
        assert first.code == 0, first.err
        lines = [ln.strip() for ln in first.err.splitlines()
                 if ln.startswith(("  mkdir -p ", "  cp "))]
        if lines:
            subprocess.run(["/bin/sh", "-c", " && ".join(lines)], check=True)
        if not write:
            return first
        done = self.cli(*args, "--write")
        return Done(done.code, first.out, first.err + done.err)

    def fire(self, event: str, *, host: bool = False, tool: str = "bash",
             data: str = "") -> dict[str, Any]:
        args = ["hook", event, "--project", str(self.project), "--json"]
        args += (["--tool", tool, "--input", json.dumps({"command": data})]
                 if event == "PreToolUse" else ["--prompt", data])
        done = self.cli(*args, *(["--no-sandbox"] if host else []))
        doc: dict[str, Any] = json.loads(done.out)
        doc["stderr"] = done.err
        return doc


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with made(tmp_path, "claude-coll-") as (home, harness, project):
        yield World(home, harness, project)


def _cmd(text: str) -> dict[str, Any]:
    return {"type": "command", "command": text}


GUARD_PY = """import json, sys
cmd = json.load(sys.stdin).get("tool_input", {}).get("command", "")
if "rm -rf /" in cmd:
    print("rm -rf / is not allowed", file=sys.stderr)
    sys.exit(2)
"""

# uv's own behaviour for `uv run SCRIPT`: its cache first (uv exits 2 on its errors),
# then the script's dependencies from an index (here one on 127.0.0.1, which the box's
# own network namespace cannot reach).
FAKE_UV = """#!/bin/sh
cache="$HOME/.cache/uv"
if ! mkdir -p "$cache" 2>/dev/null || ! touch "$cache/.lock" 2>/dev/null; then
  echo "error: Failed to initialize cache at \\`$cache\\`" >&2
  echo "  Caused by: failed to create directory \\`$cache\\`:" \\
       "Read-only file system (os error 30)" >&2
  exit 2
fi
shift
connect="import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2)"
if [ -n "$UV_TEST_INDEX" ] && ! /usr/bin/python3 -c "$connect" "$UV_TEST_INDEX" 2>/dev/null
then
  echo "error: Failed to fetch: \\`http://127.0.0.1:$UV_TEST_INDEX/simple/requests/\\`" >&2
  echo "  Caused by: error sending request for url" >&2
  exit 2
fi
exec /usr/bin/python3 "$@"
"""


def _uv(w: World) -> Path:
    uv = w.home / "bin" / "uv"
    uv.parent.mkdir()
    uv.write_text(FAKE_UV, encoding="utf-8")
    uv.chmod(0o755)
    return uv


def test_a_uv_run_hook_whose_cache_is_read_only_in_the_box_says_so(world: World) -> None:
    uv = _uv(world)
    world.hook_file("guard.py", GUARD_PY, 0o644)
    world.settings({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        _cmd(f'{uv} run "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py')]}]}})
    done = world.import_claude(world.project / ".claude" / "settings.json")
    assert done.code == 0, done.err
    assert world.cli("audit", "--project", str(world.project)).code == 0
    boxed = world.fire("PreToolUse", data="ls")
    # uv's exit 2 is a block, as the seed says; the warning names the cause and the fix.
    assert boxed["outcome"] == "blocked"
    hint = [w for w in boxed["warnings"] if "uv could not write its cache" in w]
    assert hint and '[sandbox] writable = ["~/.cache/uv"]' in hint[0], boxed["warnings"]
    assert world.fire("PreToolUse", host=True, data="ls")["outcome"] == "allowed"
    assert world.fire("PreToolUse", host=True, data="rm -rf /")["outcome"] == "blocked"
    # The fix the hint gives makes the boxed hook work as its author meant.
    (world.home / ".cache" / "uv").mkdir(parents=True, exist_ok=True)
    text = world.config.read_text(encoding="utf-8")
    world.config.write_text('[sandbox]\nwritable = ["~/.cache/uv"]\n\n' + text,
                            encoding="utf-8")
    assert world.fire("PreToolUse", data="ls")["outcome"] == "allowed"
    assert world.fire("PreToolUse", data="rm -rf /")["outcome"] == "blocked"


def test_a_uv_hook_that_needs_the_network_says_the_box_has_none(world: World) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    uv = _uv(world)
    world.hook_file("context.py", "print('{}')\n", 0o644)
    (world.home / ".cache" / "uv").mkdir(parents=True)
    world.harness_home.mkdir()
    world.config.write_text('[sandbox]\nwritable = ["~/.cache/uv"]\n', encoding="utf-8")
    port = server.getsockname()[1]
    world.settings({"hooks": {"UserPromptSubmit": [{"hooks": [
        _cmd(f"env UV_TEST_INDEX={port} {uv} run .claude/hooks/context.py")]}]}})
    try:
        done = world.import_claude(world.project / ".claude" / "settings.json")
        assert done.code == 0, done.err
        boxed = world.fire("UserPromptSubmit", data="hello")
        assert boxed["outcome"] == "blocked"
        assert any("needs the network, which the box does not have" in w
                   for w in boxed["warnings"]), boxed["warnings"]
        assert world.fire("UserPromptSubmit", host=True, data="hi")["outcome"] == "allowed"
    finally:
        server.close()


PLAIN = """#!/bin/sh
echo "Sprint 12: main is frozen"
"""


def test_a_plain_text_prompt_hook_is_flagged_with_the_wrapper_that_fixes_it(
        world: World) -> None:
    world.hook_file("sprint.sh", PLAIN)
    world.settings({"hooks": {"UserPromptSubmit": [{"hooks": [
        _cmd(".claude/hooks/sprint.sh")]}]}})
    done = world.import_claude(world.project / ".claude" / "settings.json")
    target = str(world.hooks_home / "sprint.sh")
    assert "prints plain text" in done.err and "Wrap it: command = " in done.err
    assert json.dumps(wrapped([target])) in done.err
    audit = world.cli("audit", "--project", str(world.project))
    assert audit.code == 0 and "line 2 prints plain text" in audit.err
    # As the seed says, plain text is a failure, and it blocks with on_failure = "block".
    failed = world.fire("UserPromptSubmit", data="hi")
    assert failed["outcome"] == "blocked"
    assert failed["failures"][0]["kind"] == "printed output that is not hook JSON"
    # The wrapper the lint offers makes it context, in the box and on the host.
    text = world.config.read_text(encoding="utf-8")
    world.config.write_text(text.replace(f'command = ["{target}"]',
                                         f"command = {json.dumps(wrapped([target]))}"),
                            encoding="utf-8")
    assert "prints plain text" not in world.cli("audit", "--project", str(world.project)).err
    for host in (False, True):
        doc = world.fire("UserPromptSubmit", host=host, data="hi")
        assert doc["outcome"] == "allowed", doc
        assert "Sprint 12: main is frozen" in doc["contexts"][0]


ASK = """import json, sys
cmd = json.load(sys.stdin)["tool_input"].get("command", "")
if cmd.startswith("sudo "):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                      "permissionDecision": "ask",
                      "permissionDecisionReason": "sudo needs a human"}}))
"""


def test_an_ask_hook_is_flagged_at_import_and_audit(world: World) -> None:
    world.hook_file("ask.py", ASK, 0o644)
    world.settings({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        _cmd('python3 "$CLAUDE_PROJECT_DIR/.claude/hooks/ask.py"')]}]}})
    done = world.import_claude(world.project / ".claude" / "settings.json")
    said = 'line 5 answers "ask". Here ask is no objection'
    assert said in done.err
    assert said in world.cli("audit", "--project", str(world.project)).err
    # The seed's rule stands: ask is no objection, boxed and on the host.
    for host in (False, True):
        assert world.fire("PreToolUse", host=host, data="sudo ls")["outcome"] == "allowed"


BLOCK_SH = """#!/bin/sh
grep -q 'git push --force' && { echo "no force-push" >&2; exit 2; }
exit 0
"""


def test_a_relative_command_gets_a_copy_line_and_a_missing_execute_bit_is_refused(
        world: World) -> None:
    world.hook_file("pre-bash.sh", BLOCK_SH, 0o644)
    world.settings({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        _cmd(".claude/hooks/pre-bash.sh")]}]}})
    target = world.hooks_home / "pre-bash.sh"
    first = world.import_claude(world.project / ".claude" / "settings.json", write=False)
    assert f"  cp {world.project}/.claude/hooks/pre-bash.sh {target}" in first.err
    assert f'command = ["{target}"]' in first.out
    refused = world.cli("import", "claude", str(world.project / ".claude" / "settings.json"),
                        "--project", str(world.project), "--write")
    assert refused.code == 1
    assert f"hook pre-bash: {target} is not executable by you" in refused.err
    assert f"chmod +x {target}" in refused.err
    target.chmod(0o755)
    assert world.import_claude(world.project / ".claude" / "settings.json").code == 0
    assert world.cli("audit", "--project", str(world.project)).code == 0
    target.chmod(0o644)
    audit = world.cli("audit", "--project", str(world.project))
    assert audit.code == 1 and f"chmod +x {target}" in audit.err
    # At run time the hint names the execute bit, not a read-only folder.
    doc = world.fire("PreToolUse", data="ls")
    hints = doc["failures"][0]["hints"]
    assert any("chmod +x" in h for h in hints) and not any("read-only" in h for h in hints)
    target.chmod(0o755)
    for host in (False, True):
        assert world.fire("PreToolUse", host=host, data="ls")["outcome"] == "allowed"
        blocked = world.fire("PreToolUse", host=host, data="git push --force")
        assert blocked["outcome"] == "blocked" and "no force-push" in blocked["message"]


PROJECT_DIR = """#!/bin/sh
[ -n "$CLAUDE_PROJECT_DIR" ] || { echo "CLAUDE_PROJECT_DIR is not set" >&2; exit 1; }
cd "$CLAUDE_PROJECT_DIR" || exit 1
if [ -f .deploy-freeze ] && grep -q deploy; then
  echo "deploys are frozen in $(basename "$PWD")" >&2
  exit 2
fi
exit 0
"""


def test_a_claude_project_dir_hook_names_the_settings_project_and_gets_the_variable(
        world: World, tmp_path: Path) -> None:
    world.hook_file("freeze.sh", PROJECT_DIR)
    settings = world.settings({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        _cmd("$CLAUDE_PROJECT_DIR/.claude/hooks/freeze.sh")]}]}})
    # Imported while working in another folder: the variable is this settings' project.
    other = tmp_path / "elsewhere"
    other.mkdir()
    done = world.cli("import", "claude", str(settings), "--project", str(other))
    assert done.code == 0, done.err
    assert f"cp {world.project}/.claude/hooks/freeze.sh" in done.err
    assert "//.claude" not in done.out
    world.import_claude(settings)
    (world.project / ".deploy-freeze").write_text("", encoding="utf-8")
    for host in (False, True):
        blocked = world.fire("PreToolUse", host=host, data="make deploy")
        assert blocked["outcome"] == "blocked", blocked
        assert "deploys are frozen in proj" in blocked["message"]
        assert world.fire("PreToolUse", host=host, data="ls")["outcome"] == "allowed"


def test_the_older_settings_shape_by_tool_name_is_imported(world: World) -> None:
    world.hook_file("pre-bash.sh", BLOCK_SH)
    settings = world.settings({"hooks": {"Bash": [_cmd(".claude/hooks/pre-bash.sh")]}})
    done = world.import_claude(settings)
    assert "hooks.Bash is the older settings shape" in done.err
    assert 'matcher "Bash" becomes bash; harness also runs commands through exec' in done.err
    assert 'tools = ["bash", "exec"]' in done.err
    assert '# tools = ["bash", "exec"]' in done.out
    assert 'tools = ["bash"]\n' in done.out
    for host in (False, True):
        assert world.fire("PreToolUse", host=host, data="git push --force")["outcome"] == \
            "blocked"


GUARD_JS = """const rules = require('./rules.json');
const { matches } = require('./lib');
const extra = (() => { try { return require('../shared/extra.js'); } catch { return {}; } })();
let raw = '';
process.stdin.on('data', (d) => { raw += d; });
process.stdin.on('end', () => {
  const cmd = JSON.parse(raw).tool_input.command || '';
  if (matches(cmd, rules.deny)) { console.error('denied by rules.json'); process.exit(2); }
});
"""
LIB_JS = "exports.matches = (cmd, deny) => deny.some((d) => cmd.includes(d));\n"


def test_a_hook_with_files_beside_it_is_copied_with_them(world: World) -> None:
    world.hook_file("guard.js", GUARD_JS, 0o644)
    world.hook_file("lib.js", LIB_JS, 0o644)
    world.hook_file("rules.json", json.dumps({"deny": ["rm -rf"]}), 0o644)
    world.hook_file("package.json", json.dumps({"type": "commonjs"}), 0o644)
    world.hook_file("unrelated.sh", "#!/bin/sh\n", 0o644)
    settings = world.settings({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        _cmd('node "$CLAUDE_PROJECT_DIR/.claude/hooks/guard.js"')]}]}})
    done = world.import_claude(settings)
    folder = world.hooks_home / "guard"
    for name in ("guard.js", "lib.js", "rules.json", "package.json"):
        assert (folder / name).is_file(), done.err
    assert not (folder / "unrelated.sh").exists()
    assert "names ../shared/extra.js, which the import could not follow" in done.err
    assert f'command = ["node", "{folder}/guard.js"]' in done.out
    for host in (False, True):
        doc = world.fire("PreToolUse", host=host, data="rm -rf build")
        assert doc["outcome"] == "blocked" and "denied by rules.json" in doc["message"], doc
        assert world.fire("PreToolUse", host=host, data="ls")["outcome"] == "allowed"


def test_import_write_twice_adds_each_hook_once_named_after_what_it_runs(
        world: World) -> None:
    world.hook_file("pre-bash.sh", BLOCK_SH)
    settings = world.settings({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [_cmd(".claude/hooks/pre-bash.sh"),
                                      _cmd("jq -e . >/dev/null")]},
        {"matcher": "Write", "hooks": [_cmd("npx prettier --check")]}]}})
    world.import_claude(settings)
    again = world.import_claude(settings)
    assert again.code == 0 and "nothing to add" in again.err
    text = world.config.read_text(encoding="utf-8")
    assert text.count("[[hooks]]") == 3
    for name in ("pre-bash", "jq", "npx-prettier"):
        assert f'name = "{name}"\n' in text
