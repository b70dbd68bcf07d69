"""Credentials kept out of what values-seg writes and prints: a URL's user information
(``https://user:password@host`` -> ``https://***@host``) and the values of query parameters that
name a secret (``?token=...``, ``&password=...``, ``api_key=...``). The real value goes only where it
is used (e.g. the tracker's client); the place for a secret is the tool's own environment variables
(docs/guides/tracking.md)."""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@'\"<>]+@")
_NAME = r"[^\s=&#?;'\"<>]*"
_SECRET_PARAMETER = re.compile(
    rf"([?&;]{_NAME}(?:token|passw|pwd|secret|key|auth|credential|signature|sig){_NAME}=)[^\s&#;'\"<>]+", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by :data:`MASK` (see the module docstring)."""
    return _SECRET_PARAMETER.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>{MASK}@", text))


def redacted(value: Any) -> Any:
    """``value`` (a config or record: mappings, lists, strings, numbers) with every string :func:`redact`-ed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redacted(v) for v in value)
    return value
