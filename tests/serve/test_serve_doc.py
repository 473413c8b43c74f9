"""docs/serve.md says what ``serve`` does: its ten-line Python client runs against the
real server, and every whole message it shows is one the schema allows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO
from helpers.schema_check import check
from helpers.serve_client import CLI, Serve

from serve.conftest import env_for

PAGE = (REPO / "docs" / "serve.md").read_text()


@pytest.mark.isolation
def test_the_ten_line_python_client_runs_against_the_real_server(project: Path,
                                                                 config: Path) -> None:
    code = re.search(r"```python\n(.*?)```", PAGE, re.S)
    assert code is not None
    program = code.group(1)
    assert '["harness-sandbox", "serve", "--no-hooks"]' in program
    program = program.replace('["harness-sandbox", "serve", "--no-hooks"]',
                              json.dumps([*CLI, "serve", "--no-hooks"]))
    program = program.replace("/path/to/project", str(project))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env_for(config), cwd=project, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "hi\n\n"), done.stderr


def exchange() -> list[tuple[str, dict[str, Any]]]:
    """The page's exchange: each line's direction and message, ``, ...`` (the fields
    not shown) dropped."""
    block = re.search(r"## An exchange\n.*?```text\n(.*?)```", PAGE, re.S)
    assert block is not None
    return [(line[0], json.loads(line[2:].replace(", ...}", "}")))
            for line in block.group(1).splitlines() if line.strip()]


def shown_in(shown: Any, actual: Any, at: str = "$") -> None:
    """Every field shown has the value the server gave."""
    if isinstance(shown, dict):
        assert isinstance(actual, dict), at
        for name, value in shown.items():
            assert name in actual, f"{at}.{name} is not in {actual}"
            shown_in(value, actual[name], f"{at}.{name}")
    else:
        assert shown == actual, f"{at}: the page shows {shown!r}, the server gave {actual!r}"


@pytest.mark.isolation
def test_the_pages_exchange_is_what_the_server_answers(served: Serve) -> None:
    lines = exchange()
    assert len(lines) >= 10
    for way, message in lines:
        if way == "→":
            check(message, "request")
            served.send_line(json.dumps(message).encode())
            continue
        key = json.dumps(message["id"])
        if "event" in message:
            while not served.events.get(key):
                served.next_message()
            shown_in(message, served.events[key].pop(0))
        else:
            shown_in(message, served.reply(message["id"]))


def test_every_whole_message_the_page_shows_is_one_the_schema_allows() -> None:
    shown = [json.loads(text) for text in re.findall(r"`(\{.*?\})`", PAGE, re.S)
             if _json(text)]
    assert len(shown) >= 3
    for message in shown:
        kind = ("request" if "method" in message else "server_message" if "id" in message
                else "cancel_result")  # the one result the page shows alone
        check(message, kind)


def _json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
