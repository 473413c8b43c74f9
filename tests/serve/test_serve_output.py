"""A run's output through ``serve`` without silent loss: the cap is in ``ready.limits``
and set at ``open``; a streamed run sends every byte; a cut says where it happened."""

from __future__ import annotations

import json

from helpers.serve_client import Serve

MIB = 1 << 20


def test_ready_names_the_output_cap_and_its_largest_value(served: Serve) -> None:
    limits = served.hello["limits"]
    assert limits["output_cap"] == MIB
    assert limits["max_output_cap"] == 256 * MIB


def test_a_result_holds_the_cap_and_says_where_it_cut(served: Serve) -> None:
    served.result("open")
    result = served.result("run", {"argv": ["sh", "-c", "head -c 3000000 /dev/zero"]})
    assert len(result["stdout"]) == MIB
    assert (result["stdout_capped"], result["stdout_capped_at"]) == (True, MIB)
    assert (result["stderr_capped"], result["stderr_capped_at"]) == (False, None)


def test_open_sets_the_sessions_cap(served: Serve) -> None:
    assert served.result("open", {"output_cap": 3 * MIB})["output_cap"] == 3 * MIB
    result = served.result("run", {"argv": ["sh", "-c", "head -c 3000000 /dev/zero"]})
    assert len(result["stdout"]) == 3000000
    assert result["stdout_capped"] is False


def test_a_run_sets_its_own_cap(served: Serve) -> None:
    served.result("open")
    result = served.result("run", {"argv": ["sh", "-c", "head -c 5000 /dev/zero"],
                                   "output_cap": 1000})
    assert (len(result["stdout"]), result["stdout_capped_at"]) == (1000, 1000)


def test_a_streamed_run_sends_its_whole_output_past_the_cap(served: Serve) -> None:
    served.result("open")
    rid = served.request("run", {"argv": ["sh", "-c", "head -c 5000000 /dev/zero; "
                                          "echo the summary line"], "stream": True})
    result = served.reply(rid)["result"]
    out = "".join(e["data"] for e in served.events.pop(json.dumps(rid)))
    assert len(out) == 5000000 + len("the summary line\n")
    assert out.endswith("\0the summary line\n")
    assert (result["stdout"], result["stdout_capped"], result["stdout_capped_at"]) == \
        ("", False, None)


def test_a_streamed_run_with_a_cap_stops_there_and_says_where(served: Serve) -> None:
    served.result("open")
    rid = served.request("run", {"argv": ["sh", "-c", "printf 'ab\\303\\251cd'; "
                                          "head -c 100000 /dev/zero >&2"],
                                 "stream": True, "output_cap": 4})
    result = served.reply(rid)["result"]
    events = served.events.pop(json.dumps(rid))
    out = "".join(e["data"] for e in events if e["stream"] == "stdout")
    err = "".join(e["data"] for e in events if e["stream"] == "stderr")
    assert out == "ab\u00e9"
    assert len(err) == 4
    assert (result["stdout_capped"], result["stdout_capped_at"]) == (True, 4)
    assert (result["stderr_capped"], result["stderr_capped_at"]) == (True, 4)


def test_a_cap_out_of_range_is_refused_by_name(served: Serve) -> None:
    served.send_line(b'{"id": "x", "method": "open", "params": {"output_cap": 0}}')
    error = served.reply("x")["error"]
    assert error["code"] == "invalid_params"
    assert "output_cap" in error["message"]
