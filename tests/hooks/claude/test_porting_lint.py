"""The porting lint: hook scripts written the way public Claude Code hook collections
write them (bash+jq, Python, Node) are read as text, and each line that tests for a
Claude Code tool or field name gets the warning that the hook will object to nothing
here. Run through ``audit`` (stderr and ``--json``) and on the parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO

from launchers.claude.lint import (
    FINDINGS_LIMIT,
    READ_LIMIT,
    Finding,
    lint_command,
    read_text,
    scan_text,
)

BASH_JQ = """#!/bin/bash
# Block writes to .env files. "Write" in a comment is not a test.
input=$(cat)
tool_name=$(echo "$input" | jq -r '.tool_name')
file_path=$(echo "$input" | jq -r '.tool_input.file_path // empty')
if [[ "$tool_name" == "Write" || "$tool_name" == "Edit" ]]; then
  case "$file_path" in
    *.env) echo "Blocked: .env files are protected" >&2; exit 2 ;;
  esac
fi
case "$tool_name" in
  MultiEdit|NotebookEdit) exit 0 ;;
esac
if [[ "$tool_name" =~ ^(Edit|Write)$ ]]; then :; fi
exit 0
"""

PYTHON = """#!/usr/bin/env python3
import json
import sys

input_data = json.load(sys.stdin)
tool_name = input_data.get("tool_name", "")
command = input_data.get("tool_input", {}).get("command", "")
if tool_name != "Bash" or not command:
    sys.exit(0)
if tool_name.startswith("mcp__github__"):
    sys.exit(0)
print("Read the docs")  # a sentence is not a tool name
"""

NODE = """#!/usr/bin/env node
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
// 'Edit' in a comment is not a test
if (['Edit', 'MultiEdit', 'Write'].includes(input.tool_name)) {
  const target = input.tool_input.file_path;
  if (target.endsWith('.lock')) { console.error('lock files are generated'); process.exit(2); }
}
"""

PORTS_AS_IS = """#!/bin/sh
cmd=$(jq -r '.tool_input.command')
case "$cmd" in *"git push"*"--force"*) echo "no force-push" >&2; exit 2 ;; esac
"""


def test_bash_jq_script_is_read_line_by_line() -> None:
    assert scan_text(BASH_JQ) == [
        Finding(5, "file_path"), Finding(6, "Write"), Finding(6, "Edit"),
        Finding(7, "file_path"), Finding(12, "MultiEdit"), Finding(12, "NotebookEdit"),
        Finding(14, "Edit"), Finding(14, "Write")]


def test_python_script() -> None:
    assert scan_text(PYTHON) == [Finding(8, "Bash"), Finding(10, "mcp__")]


def test_node_script() -> None:
    assert scan_text(NODE) == [Finding(4, "Edit"), Finding(4, "MultiEdit"),
                               Finding(4, "Write"), Finding(5, "file_path")]


def test_a_script_that_reads_only_the_command_ports_as_it_is() -> None:
    assert scan_text(PORTS_AS_IS) == []


def test_the_warning_texts(tmp_path: Path) -> None:
    script = tmp_path / "guard.py"
    script.write_text(PYTHON)
    node = tmp_path / "guard.js"
    node.write_text(NODE)
    assert lint_command("guard", ["python3", str(script)], project=str(tmp_path)) == [
        f'⚠ hook guard: {script} line 8 tests for the Claude Code tool name "Bash" (the '
        "tool here is bash), so as written it will object to nothing.",
        f'⚠ hook guard: {script} line 10 tests for a Claude Code MCP tool name ("mcp__…"; '
        "here MCP tools are called through the mcp tool, named in tool_input.server and "
        "tool_input.tool), so as written it will object to nothing."]
    assert lint_command("locks", ["node", "guard.js"], project=str(tmp_path))[-1] == (
        f"⚠ hook locks: {node} line 5 reads file_path, a Claude Code field that the tools "
        "here do not send, so as written it will object to nothing.")
    assert lint_command("sh", ["/bin/sh", "-c", "jq -r .tool_input.file_path | xargs cat"],
                        project=str(tmp_path)) == [
        "⚠ hook sh: the -c string line 1 reads file_path, a Claude Code field that the "
        "tools here do not send, so as written it will object to nothing."]
    web = tmp_path / "web.sh"
    web.write_text('[ "$t" = "WebFetch" ] && exit 2\n' * (FINDINGS_LIMIT + 2))
    out = lint_command("web", [str(web)], project=str(tmp_path))
    assert out[0] == (f'⚠ hook web: {web} line 1 tests for the Claude Code tool name '
                      '"WebFetch" (no tool here has that name), so as written it will object '
                      "to nothing.")
    assert out[FINDINGS_LIMIT:] == [f"⚠ hook web: {web} has 2 more such lines."]


def test_binary_files_fifos_and_big_files_are_read_safely(tmp_path: Path) -> None:
    assert read_text(sys.executable) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_text(str(fifo)) is None  # returns at once: nothing blocks on a FIFO
    big = tmp_path / "big.sh"
    big.write_text("x\n" * READ_LIMIT + 'tool = "Bash"\n')
    assert scan_text(read_text(str(big)) or "") == []  # past the cap, not read
    assert read_text(str(tmp_path / "missing")) is None


def test_audit_warns_with_the_lint_on_stderr_and_in_json(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    guard = hooks / "guard.sh"
    guard.write_text(BASH_JQ)
    guard.chmod(0o755)
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[[hooks]]\nname = "env-guard"\nevent = "PreToolUse"\ncommand = ["{guard}"]\n'
        'sandbox = false\n')
    project = tmp_path / "proj"
    project.mkdir()
    env = {**os.environ, "HARNESS_HOME": str(home)}
    r = subprocess.run([sys.executable, "-m", "launchers.cli", "audit", "--project",
                        str(project), "--json"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    first = (f"⚠ hook env-guard: {guard} line 5 reads file_path, a Claude Code field that "
             "the tools here do not send, so as written it will object to nothing.")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == "hooks: env-guard (every tool, on the host)"
    assert lines[1] == first
    assert lines[6] == f"⚠ hook env-guard: {guard} has 3 more such lines."
    assert lines[7] == "audit: 1 hook may run"
    doc = json.loads(r.stdout)
    assert doc["warnings"][0] == first and len(doc["warnings"]) == 6
