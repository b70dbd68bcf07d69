"""Stage outputs keyed by what they are computed from.

A stage declares its inputs as one frozen :class:`Inputs`; the key digests its fields, what it derives
and its code, so an input the stage reads is in the key by construction (docs/design-rationale.md,
"Declared inputs").
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from values_seg.storage.canonical import sha256_json


def plain(value: Any) -> Any:
    """``value`` as canonical JSON data: a component reference as kind, name, parameters, the
    contents of the files they name and label (the label names it in the outputs); an object with a ``key()`` method (a training spec)
    by that key; a dataclass field by field (but a field declared ``metadata={"key": False}``: the
    code a stage digests, see :meth:`Inputs.code`); mappings, sequences and paths as JSON."""
    if callable(getattr(value, "identity", None)):  # a component reference (values_seg.registry.ComponentRef)
        return {**value.identity(), "label": value.label}
    if callable(getattr(value, "key", None)) and not isinstance(value, Inputs):
        return {"key": value.key()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.metadata.get("key", True)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a stage input must be JSON data, a component reference, a spec with key() or a dataclass; "
                    f"got {type(value).__name__}: {value!r}")


class Inputs:
    """Base of a stage's declared inputs (a frozen dataclass); see the module docstring.

    ``stage``: the stage's name (also its code digest's stage); ``version``: bumped when the stored
    outputs change; ``folder``: the cache folder that holds one sub-folder per key."""

    stage: ClassVar[str] = "stage"
    version: ClassVar[int] = 1
    folder: ClassVar[str] = "outputs"

    def derived(self) -> dict[str, Any]:
        """Keys of what the stage reads that are derived from its inputs (default: none)."""
        return {}

    def code(self) -> tuple:
        """The components (classes or objects) whose code computes the outputs (default: none)."""
        return ()

    def key(self) -> str:
        from values_seg.storage.provenance import code_digest

        return sha256_json({
            "stage": self.stage,
            "version": self.version,
            "inputs": plain(self),
            "derived": plain(self.derived()),
            "code": code_digest(*self.code(), stage=self.stage),
        })

    def path(self, cache_dir: str | Path) -> Path:
        """The folder of these inputs' outputs in the cache (:meth:`values_seg.storage.cache_store.CacheStore.outputs`)."""
        from values_seg.storage.cache_store import CacheStore

        return CacheStore(cache_dir).outputs(self)
