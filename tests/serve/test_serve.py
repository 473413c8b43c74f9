"""``harness-sandbox serve``: the real command on pipes, the real box, real hooks.

Every line the server writes and every request the tests send is checked against
``launchers/serve/schema.json`` (helpers.serve_client).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.procs import left_after, running_with
from helpers.serve_client import CLI, Serve

from launchers.serve import params
from launchers.serve.wire import REQUEST_LINE_BYTES
from sandbox.policy import private_tmp_root
from serve.conftest import env_for

pytestmark = pytest.mark.isolation


def toml_hook(name: str, command: list[str], **extra: object) -> str:
    lines = ["[[hooks]]", f'name = "{name}"', f"command = {json.dumps(command)}"]
    extra.setdefault("event", "PreToolUse")
    lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


_SLEEP = 'python3 -c "import time; time.sleep(1000)" "$0"'


def sleeper(word: str) -> list[str]:
    """A run that sleeps in two processes (one in the background), each carrying
    ``word`` as an argument so that the host can find them."""
    return ["sh", "-c", f"{_SLEEP} & {_SLEEP}; wait", word]


def sessions_of(pid: int) -> list[str]:
    root = private_tmp_root()
    return [n for n in os.listdir(root) if n.startswith(f"session-{pid}-")] \
        if os.path.isdir(root) else []


def wait_for(word: str) -> None:
    """Until both processes of :func:`sleeper` run."""
    for _ in range(300):
        if len(running_with(word)) >= 3:
            return
        time.sleep(0.1)
    raise AssertionError(f"the run never started: {running_with(word)}")


# -- the session ---------------------------------------------------------------------


def test_the_first_message_names_the_protocol_version(served: Serve) -> None:
    assert served.hello["version"] == 1
    assert served.hello["limits"]["request_line_bytes"] == REQUEST_LINE_BYTES


def test_open_answers_with_the_banner_and_audits_document(served: Serve, project: Path,
                                                          config: Path,
                                                          programs: Path) -> None:
    config.write_text(toml_hook("no-force-push", [str(programs / "no-force-push.sh")],
                                tools=["bash"], timeout=10))
    opened = served.result("open")
    assert opened["banner"] == "hooks: no-force-push (bash)"
    audit = subprocess.run([*CLI, "audit", "--project", str(project), "--json"],
                           capture_output=True, text=True, env=env_for(config), cwd=REPO,
                           check=True)
    assert opened["audit"] == json.loads(audit.stdout)


def test_a_run_in_the_box_writes_the_project_and_nothing_hidden(project: Path, config: Path,
                                                                outside: Path) -> None:
    (outside / ".ssh").mkdir(mode=0o700)
    (outside / ".ssh" / "id_rsa").write_text("PRIVATE")
    s = Serve("--project", str(project), env={**env_for(config), "HOME": str(outside)},
              cwd=REPO)
    try:
        s.result("open")
        wrote = s.result("run", {"argv": ["sh", "-c", "echo hi > note.txt; echo done"]})
        read = s.result("run", {"argv": ["cat", str(outside / ".ssh" / "id_rsa")]})
    finally:
        s.close()
    assert (wrote["exit"], wrote["stdout"], wrote["timed_out"]) == (0, "done\n", False)
    assert (project / "note.txt").read_text() == "hi\n"
    assert read["exit"] != 0 and "PRIVATE" not in read["stdout"]


def test_a_run_in_the_box_has_no_network(served: Serve) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        served.result("open")
        r = served.result("run", {"argv": ["python3", "-c",
                                           f"import socket; socket.create_connection("
                                           f"('127.0.0.1', {port}), timeout=5)"]})
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached the host's server
    finally:
        server.close()
    assert r["exit"] == 1 and "Error" in r["stderr"]


def test_run_takes_stdin_env_cwd_and_a_timeout(served: Serve, project: Path) -> None:
    (project / "sub").mkdir()
    served.result("open")
    r = served.result("run", {"argv": ["sh", "-c", 'cat; echo "$GREETING"; pwd'],
                              "stdin": "in\n", "env": {"GREETING": "hello"}, "cwd": "sub"})
    assert r["stdout"] == f"in\nhello\n{os.path.realpath(project / 'sub')}\n"
    slow = served.result("run", {"argv": ["sleep", "30"], "timeout": 0.5})
    assert (slow["exit"], slow["outcome"], slow["timed_out"]) == (124, "timed_out", True)
    outside = served.call("run", {"argv": ["pwd"], "cwd": "../.."})
    assert outside["error"]["code"] == "invalid_params"
    assert "is not inside the project" in outside["error"]["message"]


def test_a_host_run_starts_from_root(served: Serve) -> None:
    served.result("open")
    r = served.result("run", {"argv": ["pwd"], "host": True})
    assert (r["exit"], r["stdout"]) == (0, "/\n")
    missing = served.result("run", {"argv": ["no-such-program-here"], "host": True})
    assert (missing["exit"], missing["outcome"]) == (127, "failed_to_start")


def test_replies_come_in_any_order_and_a_cancel_ends_the_whole_tree(served: Serve) -> None:
    served.result("open")
    word = f"serve-cancel-{uuid.uuid4().hex}"
    slow = served.request("run", {"argv": sleeper(word)})
    fast = served.request("run", {"argv": ["echo", "fast"]})
    assert served.reply(fast)["result"]["stdout"] == "fast\n"
    wait_for(word)
    assert slow not in [m.get("id") for m in served.received]
    assert served.result("cancel", {"id": slow}) == {"cancelled": True}
    ended = served.reply(slow)["result"]
    assert (ended["outcome"], ended["exit"]) == ("cancelled", 130)
    assert left_after(word, 5.0) == []
    assert served.result("cancel", {"id": slow}) == {"cancelled": False}


# -- hooks ---------------------------------------------------------------------------


def cli_hook_json(project: Path, config: Path, *args: str) -> dict[str, object]:
    r = subprocess.run([*CLI, "hook", *args, "--project", str(project), "--json"],
                       capture_output=True, text=True, env=env_for(config), cwd=REPO,
                       check=False)
    return dict(json.loads(r.stdout))


def test_hook_answers_with_hook_json_s_document(served: Serve, project: Path, config: Path,
                                               programs: Path) -> None:
    config.write_text(
        toml_hook("no-force-push", [str(programs / "no-force-push.sh")], tools=["bash"],
                  timeout=10)
        + toml_hook("keywords", ["/usr/bin/python3", str(programs / "keyword-detector.py")],
                    event="UserPromptSubmit", timeout=5, on_failure="continue"))
    served.result("open")
    push = {"command": "git push --force origin main"}
    blocked = served.result("hook", {"event": "PreToolUse", "tool": "bash", "input": push})
    assert blocked["outcome"] == "blocked"
    assert blocked == cli_hook_json(project, config, "PreToolUse", "--tool", "bash",
                                    "--input", json.dumps(push))
    prompt = served.result("hook", {"event": "UserPromptSubmit",
                                    "prompt": "ooo seed my requirements"})
    assert prompt["outcome"] == "allowed"
    assert "<skill-suggestion>" in prompt["contexts"][0]
    bad = served.call("hook", {"event": "PreToolUse"})
    assert bad["error"]["code"] == "invalid_params"
    assert bad["error"]["message"] == 'hook: PreToolUse needs "tool"'


def test_a_refused_hook_refuses_the_session(served: Serve, project: Path,
                                            config: Path) -> None:
    inside = project / "hook.sh"
    inside.write_text("#!/bin/sh\nexit 0\n")
    inside.chmod(0o755)
    config.write_text(toml_hook("in-project", [str(inside)]))
    refused = served.call("open")["error"]
    assert refused["code"] == "refused"
    assert refused["data"]["audit"]["ok"] is False
    assert "in-project" in json.dumps(refused["data"]["audit"]["hooks"])
    assert served.call("run", {"argv": ["true"]})["error"]["code"] == "not_open"
    assert sessions_of(served.proc.pid) == []


def test_a_hook_file_changed_after_open_does_not_run(served: Serve, config: Path,
                                                     outside: Path) -> None:
    program = outside / "allow.sh"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    config.write_text(toml_hook("gate", [str(program)], tools=["bash"]))
    served.result("open")
    program.unlink()
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    r = served.result("hook", {"event": "PreToolUse", "tool": "bash",
                               "input": {"command": "ls"}})
    assert r["outcome"] == "blocked"
    assert "changed since the session started" in json.dumps(r["failures"])


def test_records_are_written_and_a_replay_starts_nothing(project: Path, config: Path,
                                                         outside: Path,
                                                         tmp_path: Path) -> None:
    log, ran = tmp_path / "records.jsonl", outside / "ran.txt"
    program = outside / "count.sh"
    program.write_text(f"#!/bin/sh\necho x >> {ran}\nexit 0\n")
    program.chmod(0o755)
    config.write_text(toml_hook("count", [str(program)], tools=["bash"], sandbox=False))
    call = {"event": "PreToolUse", "tool": "bash", "input": {"command": "ls"},
            "session_id": "S1", "tool_use_id": "T1"}
    for options in ({"records": str(log)}, {"replay": str(log)}):
        s = Serve("--project", str(project), env=env_for(config), cwd=REPO)
        s.result("open", {**options, "session_id": "S1"})
        assert s.result("hook", call)["outcome"] == "allowed"
        s.result("close")
        assert s.close() == 0
    kinds = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert kinds[0] == "session.started" and "hook.effect" in kinds
    assert ran.read_text() == "x\n"  # the replay served the effect


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(("line", "code"), [
    (b"not json", "parse_error"),
    (b"\xff\xfe{}", "parse_error"),
    (b"[" * 101 + b"]" * 101, "too_deep"),
    (b"[1, 2]", "invalid_request"),
    (b'{"method": "run"}', "invalid_request"),
    (b'{"id": 5, "method": "fly"}', "unknown_method"),
    (b'{"id": 6, "method": "run", "params": {}}', "invalid_params"),
    (b'{"id": 7, "method": "run", "params": {"argv": "ls"}}', "invalid_params"),
    (b'{"id": 8, "method": "run", "params": {"argv": ["ls"], "timeout": -1}}',
     "invalid_params"),
    (b'{"id": 9, "method": "run", "params": {"argv": ["ls"], "colour": 1}}',
     "invalid_params"),
    (b'{"id": 10, "method": "cancel", "params": {"id": true}}', "invalid_params"),
    (b'{"id": 11, "method": "open", "params": []}', "invalid_params"),
])
def test_bad_input_gets_a_coded_error_and_the_session_goes_on(served: Serve, line: bytes,
                                                              code: str) -> None:
    served.result("open")
    served.send_line(line)
    error = served.next_message()
    assert error["error"]["code"] == code, error
    rid = json.loads(line).get("id") if code not in ("parse_error", "too_deep") \
        and line.startswith(b"{") else None
    assert error["id"] == rid
    assert served.result("run", {"argv": ["echo", "still here"]})["stdout"] == "still here\n"


def test_a_line_past_the_limit_is_refused_by_name(served: Serve) -> None:
    served.send_line(b'{"id": 1, "method": "run", "params": {"stdin": "'
                     + b"x" * REQUEST_LINE_BYTES + b'"}}')
    error = served.next_message()
    assert error == {"id": None, "error": {
        "code": "line_too_long",
        "message": "the request line is larger than 32 MiB (REQUEST_LINE_BYTES)"}}
    assert served.call("run", {"argv": ["true"]})["error"]["code"] == "not_open"


def test_an_id_in_flight_twice_and_a_second_open_are_refused(served: Serve) -> None:
    served.result("open")
    assert served.call("open")["error"]["code"] == "already_open"
    served.request("run", {"argv": ["sleep", "30"]}, rid="a")
    served.request("run", {"argv": ["true"]}, rid="a")
    dup = served.reply("a")
    assert dup["error"]["code"] == "duplicate_id"
    served.result("cancel", {"id": "a"})
    assert served.reply("a")["result"]["outcome"] == "cancelled"


def test_the_param_table_and_the_schema_agree() -> None:
    from helpers.schema_check import load_schema

    defs = load_schema()["$defs"]
    for method, (known, required) in params.METHODS.items():
        schema = defs[f"{method}_params"]
        assert set(schema["properties"]) == set(known), method
        assert set(schema["required"]) == set(required), method


# -- the end -------------------------------------------------------------------------


def test_close_ends_every_run_and_removes_the_session(served: Serve, tmp_path: Path) -> None:
    served.result("open")
    assert sessions_of(served.proc.pid) != []
    word = f"serve-close-{uuid.uuid4().hex}"
    long_run = served.request("run", {"argv": sleeper(word)})
    wait_for(word)
    closed = served.request("close")
    assert served.reply(long_run)["result"]["outcome"] == "cancelled"
    assert served.reply(closed)["result"] == {"warnings": []}
    assert served.close() == 0
    assert left_after(word, 5.0) == []
    assert sessions_of(served.proc.pid) == []


def test_stdins_end_ends_the_session_cleanly(served: Serve) -> None:
    served.result("open")
    word = f"serve-eof-{uuid.uuid4().hex}"
    served.request("run", {"argv": sleeper(word)})
    wait_for(word)
    assert served.close() == 0
    assert left_after(word, 5.0) == []
    assert sessions_of(served.proc.pid) == []


HARNESS = r"""
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
proc.stdout.readline()
proc.stdin.write(b'{"id": 1, "method": "open"}\n'); proc.stdin.flush()
proc.stdout.readline()
proc.stdin.write(json.dumps({"id": 2, "method": "run", "params": {
    "argv": json.loads(os.environ["ARGV"])}}).encode() + b"\n")
proc.stdin.flush()
print(proc.pid, flush=True)
import time; time.sleep(1000)
"""


@pytest.mark.parametrize("victim", ["harness", "server"])
def test_a_killed_harness_or_server_leaves_nothing_behind(project: Path, config: Path,
                                                          victim: str) -> None:
    word = f"serve-killed-{uuid.uuid4().hex}"
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, *CLI, "serve", "--project", str(project)],
        stdout=subprocess.PIPE, env={**env_for(config), "ARGV": json.dumps(sleeper(word))},
        cwd=REPO)
    assert harness.stdout is not None
    server = int(harness.stdout.readline())
    try:
        wait_for(word)
        os.kill(harness.pid if victim == "harness" else server, signal.SIGKILL)
        assert left_after(word, 10.0) == []
        for _ in range(100):
            if not sessions_of(server):
                break
            time.sleep(0.1)
        assert sessions_of(server) == []
    finally:
        harness.kill()
        harness.wait()


def test_a_streamed_run_sends_its_output_as_it_comes(served: Serve) -> None:
    served.result("open")
    # A line, then a pause the result cannot come before: the first event is there
    # while the command still runs.
    rid = served.request("run", {"argv": ["sh", "-c", "echo one; echo err >&2; sleep 1; "
                                          "printf 'caf\\303'; printf '\\251 t\\377\\n'"],
                                 "stream": True})
    first = served.next_message()
    assert first == {"id": rid, "event": "output", "stream": "stdout", "data": "one\n"}
    reply = served.reply(rid)
    events = served.events.pop(json.dumps(rid))
    assert events[0] == first
    out = "".join(e["data"] for e in events if e["stream"] == "stdout")
    err = "".join(e["data"] for e in events if e["stream"] == "stderr")
    # UTF-8 split across writes comes whole; a byte that is not UTF-8 as \udcXX.
    assert out == "one\ncafé t\udcff\n"
    assert err == "err\n"
    result = reply["result"]
    assert (result["exit"], result["stdout"], result["stderr"]) == (0, "", "")
