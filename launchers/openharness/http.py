"""An HTTP hook's exchange: one POST, bounded in time and size, no proxy, no redirect."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from typing import Any

# OH_PROMPT is cut to this many bytes of UTF-8 (never inside a character).
PROMPT_ENV_CAP = 8192
# Linux refuses to start a program with any one environment string over 128 KiB
# (MAX_ARG_STRLEN), so the other variables are cut well below it.
ENV_VALUE_CAP = 65536
# A reason is trimmed and cut to its first 2,000 characters, as [[hooks]] reasons are.
REASON_CAP = 2000
# An HTTP hook's reply is read up to this many bytes; past it the reply is malformed.
HTTP_BODY_CAP = 1 << 20


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer that is not 2xx: refuse it rather than re-send (urllib
    would turn the POST into a GET)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxy from the environment: a policy server on 127.0.0.1 must be reached directly.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


_Reply = tuple[bytes | None, str | None]


def post_json(
    url: str,
    body: bytes,
    timeout: float,
    cancel: threading.Event | None = None,
) -> _Reply:
    """POST ``body``; the reply's bytes, or None and why it failed.

    The whole exchange ends by ``timeout`` seconds: urllib's timeout bounds each socket
    wait, the thread join bounds the sum (a server can trickle bytes forever).
    """
    out: list[_Reply] = []
    worker = threading.Thread(target=lambda: out.append(_exchange(url, body, timeout)),
                              name="oh-http-hook", daemon=True)
    deadline = time.monotonic() + timeout
    worker.start()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        worker.join(min(left, 0.05))
        if not worker.is_alive():
            break
        if cancel is not None and cancel.is_set():
            return None, "cancelled"
    if worker.is_alive() or not out:
        # The thread is abandoned; urllib's own timeout ends it soon after.
        return None, "timed out"
    return out[0]


def _exchange(url: str, body: bytes, timeout: float) -> _Reply:
    """One POST and its reply, every failure told in words."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "harness-sandbox"},
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status = response.status
            data = response.read(HTTP_BODY_CAP + 1)
    except urllib.error.HTTPError as err:
        return None, f"answered HTTP {err.code}"
    except urllib.error.URLError as err:
        reason = err.reason
        text = getattr(reason, "strerror", None) or str(reason)
        return None, f"could not be reached: {text}"
    except TimeoutError:
        return None, "timed out"
    except OSError as err:
        return None, f"could not be reached: {err.strerror or err}"
    except Exception as err:  # a malformed status line and the like
        return None, f"answered something that is not HTTP: {err}"
    if not 200 <= status < 300:
        return None, f"answered HTTP {status}"
    if len(data) > HTTP_BODY_CAP:
        return None, "answered with more than 1 MiB"
    return data, None
