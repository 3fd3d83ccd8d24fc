"""What an OpenAI-compatible server answered, checked: the JSON body, the choice count, Retry-After.

The ``openai`` client parses whatever a server sends: a truncated JSON body raises a bare
``JSONDecodeError``, and an HTML page sent with status 200 (a proxy's login or error page) comes back
as a ``str``. The served-model client (``bonbench.core.served``) therefore takes the raw answer
(``with_raw_response``) and hands its body to ``answer_json``, which returns the decoded object or
raises ``BadAnswer`` with one line saying what came back (``HTTP 200 with an HTML page (text/html):
'<title>Bad gateway</title>...'``). The client retries a ``BadAnswer`` like a 5xx: a proxy or a server
under load may answer properly next time.

``retry_after`` reads a 429/503's ``Retry-After`` (seconds or an HTTP date, RFC 9110 10.2.3) and
OpenAI's ``retry-after-ms``.

This module does no I/O: it reads answers the client already received.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

RETRY_AFTER_CAP_S = 60.0  # a server asking for longer is waited on this long (and the user is told)
_SHOWN = 80  # characters of a bad body quoted in a message


class BadAnswer(Exception):
    """A 2xx answer that is not a usable OpenAI answer (not JSON, HTML, wrong shape or choice count)."""


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:_SHOWN] + ("..." if len(flat) > _SHOWN else ""))


def answer_json(status: int, content_type: str, body: str) -> dict[str, Any]:
    """The decoded JSON object of an answer, or ``BadAnswer`` naming what came back instead."""
    kind = (content_type or "no content type").split(";")[0].strip() or "no content type"
    looks_html = "html" in kind or body.lstrip()[:1] == "<"
    if looks_html:
        raise BadAnswer(f"HTTP {status} with an HTML page ({kind}), not JSON: {_quote(body)}")
    if not body.strip():
        raise BadAnswer(f"HTTP {status} with an empty body ({kind})")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        raise BadAnswer(f"HTTP {status} with malformed JSON ({msg}): {_quote(body)}") from None
    if not isinstance(doc, dict):
        raise BadAnswer(f"HTTP {status} with JSON that is not an object: {_quote(body)}")
    return doc


def choices_of(doc: Mapping[str, Any], n: int, chat: bool) -> list[Mapping[str, Any]]:
    """The ``n`` choices of a completion answer, checked (count, and text or message in each)."""
    choices = doc.get("choices")
    if not isinstance(choices, list):
        raise BadAnswer(f"an answer without a 'choices' list (keys: {', '.join(sorted(doc)) or 'none'})")
    if len(choices) != n:
        raise BadAnswer(f"{len(choices)} choices for a request of n = {n}")
    for c in choices:
        if not isinstance(c, Mapping):
            raise BadAnswer("a choice that is not a JSON object")
        if chat and not isinstance(c.get("message"), Mapping):
            raise BadAnswer("a chat choice without a 'message'")
        if not chat and not isinstance(c.get("text"), (str, type(None))):
            raise BadAnswer("a completion choice whose 'text' is not a string")
    return choices


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms``, ``Retry-After`` in seconds or as an
    HTTP date), at least 0; None when it did not ask or the value is unreadable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
