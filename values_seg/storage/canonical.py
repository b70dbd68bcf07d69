"""Canonical JSON of configured values: what component references, cache keys and digests hash."""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Mapping


def _freeze(value: Any) -> Any:
    """JSON-like value -> hashable: lists become tuples, mappings sorted tuples of pairs."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def jsonable(value: Any) -> Any:
    """A frozen parameter value as JSON (tuples become lists); only JSON scalars and lists."""
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number {value!r} in a component reference")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"component parameters must be JSON scalars and lists, got {type(value).__name__}: {value!r}")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()
