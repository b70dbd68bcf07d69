"""The checkpoint store: one file per training spec, keyed by ``spec.key()``, with a sha256 sidecar.

The layout, and what happens to a damaged file: docs/design-rationale.md, "Checkpoints".
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import torch

from values_seg.storage import cache_store
from values_seg.engine.specs import TrainingSpec
from values_seg.storage.run_files import CHECKPOINTS
from values_seg.storage.cache_store import CacheStore

WHAT = "checkpoint"


class Checkpoints:
    """Trained weights on disk, keyed by training spec."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    @classmethod
    def of(cls, store: CacheStore) -> "Checkpoints":
        """The checkpoints of a run's cache (:class:`values_seg.storage.cache_store.CacheStore`)."""
        return cls(store.folder(CHECKPOINTS))

    def __repr__(self) -> str:
        return f"Checkpoints({str(self.root)!r})"

    def path(self, spec: TrainingSpec | str) -> Path:
        key = spec if isinstance(spec, str) else spec.key()
        return self.root / f"{key}.pt"

    def has(self, spec: TrainingSpec | str) -> bool:
        """True if an intact checkpoint exists (a corrupt one is reported and set aside)."""
        return cache_store.check(self.path(spec), WHAT) is not None

    def meta(self, spec: TrainingSpec | str) -> dict | None:
        """The sidecar of an intact checkpoint, or ``None``."""
        return cache_store.check(self.path(spec), WHAT)

    def save(self, spec: TrainingSpec, state_dict: dict[str, torch.Tensor], arch: dict, **info: Any) -> Path:
        """Atomically write the weights of ``spec`` (tensors moved to the CPU)."""
        payload = {
            "state_dict": {k: v.detach().cpu().contiguous() for k, v in state_dict.items()},
            "arch": dict(arch),
            "spec_key": spec.key(),
        }
        buf = io.BytesIO()
        torch.save(payload, buf)
        meta = {"spec_key": spec.key(), "spec": spec.to_dict(), "arch": dict(arch), "saved": time.time(), **info}
        path = self.path(spec)
        cache_store.write_verified(path, buf.getvalue(), meta)
        return path

    def load(self, spec: TrainingSpec | str, map_location: str | torch.device = "cpu") -> dict:
        """``{"state_dict", "arch", "spec_key"}``, verified and loaded with ``weights_only=True``.

        Raises ``FileNotFoundError`` if absent and :class:`~values_seg.engine.CorruptFileError`
        if damaged (the file is set aside first, so the next ``ensure_trained`` retrains it)."""
        path = self.path(spec)
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint for spec {spec if isinstance(spec, str) else spec.describe()} at {path}")
        data = cache_store.read_verified(path, WHAT)
        try:
            payload = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
        except Exception as e:
            raise self.reject(spec, f"unreadable by torch.load: {e}") from e
        key = spec if isinstance(spec, str) else spec.key()
        if not isinstance(payload, dict) or payload.get("spec_key") != key:
            raise self.reject(spec, "its content belongs to another spec")
        return payload

    def reject(self, spec: TrainingSpec | str, problem: str) -> cache_store.CorruptFileError:
        """Set the checkpoint of ``spec`` aside as ``*.corrupt`` (one warning naming the file and
        ``problem``); the error to raise (the next ``ensure_trained`` retrains it)."""
        path = self.path(spec)
        cache_store.report_corrupt(path, WHAT, problem)
        return cache_store.CorruptFileError(f"checkpoint {path} was set aside ({problem}); rerun to retrain")

    def remove(self, spec: TrainingSpec | str) -> None:
        cache_store.discard(self.path(spec))

    def keys(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.pt")) if self.root.exists() else []
