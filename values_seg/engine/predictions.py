"""The prediction cache: each case's probability samples ``[S, C, *spatial]`` on disk, per stored
dtype.

The layout, integrity and what reading returns: docs/design-rationale.md, "The prediction cache".
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from values_seg.storage import cache_store
from values_seg.storage import atomic
from values_seg.storage.run_files import PREDICTIONS
from values_seg.storage.cache_store import CacheStore
from values_seg.numerics.stored_samples import StoredSamples

WHAT = "prediction"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")


def _case_file(case_id: str) -> str:
    if _SAFE.match(case_id):
        return f"{case_id}.npy"
    digest = hashlib.sha256(case_id.encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._+-]", "_", case_id)[:60]
    return f"{stem}~{digest}.npy"


#: the header ``np.save`` writes (format 1.0) for a plain dtype: read without NumPy's parser (which
#: compiles the header as Python syntax, a tenth of a millisecond per file)
_NPY_HEADER = re.compile(rb"\x93NUMPY\x01\x00(..)\{'descr': '([<>|=][a-z]\d{1,2})', "
                         rb"'fortran_order': (False|True), 'shape': \(((?:\d+, )*(?:\d+,?)?)\), \} *\n", re.DOTALL)


def stored_array(data) -> np.ndarray:
    """The array of a ``.npy`` file's bytes (``bytes``, a memory map) without a copy (a read-only
    view of ``data``; as ``np.load(..., allow_pickle=False)``, which copies it)."""
    match = _NPY_HEADER.match(data)
    if match and int.from_bytes(match[1], "little") + 10 == match.end():
        dtype, fortran_order = np.dtype(match[2].decode()), match[3] == b"True"
        shape, offset = tuple(int(n) for n in match[4].split(b",") if n.strip()), match.end()
    else:  # another version or layout of the header: NumPy's reader
        stream = io.BytesIO(data)
        try:
            version = np.lib.format.read_magic(stream)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = header(stream)
        except ValueError as e:
            raise ValueError(f"not a .npy file: {e}") from e
        offset = stream.tell()
    if dtype.hasobject:
        raise ValueError("a .npy file of Python objects is never loaded (it would run code)")
    count = int(np.prod(shape))
    if len(data) - offset < count * dtype.itemsize:
        raise ValueError(f"a .npy file of shape {shape} is cut short")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran_order else "C")


@dataclass(frozen=True)
class CaseSamples:
    """A lazy handle on one cached case; :meth:`load` reads (and verifies) it when asked."""

    case_id: str
    split: str
    path: Path

    def load(self) -> torch.Tensor:
        """Samples ``[S, C, *spatial]`` as float32, renormalised over C (the compact dtype's
        rounding leaves sums a little off 1)."""
        with self.opened() as stored:
            return stored.tensor()

    @contextlib.contextmanager
    def opened(self) -> Iterator[StoredSamples]:
        """The samples as stored (:class:`~values_seg.numerics.stored_samples.StoredSamples`), hashed and
        viewed where they lie in the file (no copy) for as long as the ``with`` block lasts."""
        with cache_store.mapped_verified(self.path, WHAT) as data:
            yield StoredSamples(stored_array(data))

    def load_numpy(self) -> np.ndarray:
        return self.load().numpy()

    @property
    def meta(self) -> dict:
        return cache_store.read_sidecar(self.path) or {}

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.meta.get("shape", ()))


class PredictionCache:
    """Probability samples per (prediction key, dataset key, split, case id)."""

    def __init__(self, root: str | Path, dtype: str = "float16"):
        if dtype not in ("float16", "float32"):
            raise ValueError(f"PredictionCache dtype must be float16 or float32, got {dtype!r}")
        self.root = Path(root)
        self.dtype = dtype

    @classmethod
    def of(cls, store: CacheStore, dtype: str = "float16") -> "PredictionCache":
        """The samples of a run's cache (:class:`values_seg.storage.cache_store.CacheStore`) stored in ``dtype``."""
        return cls(store.folder(PREDICTIONS), dtype=dtype)

    def __repr__(self) -> str:
        return f"PredictionCache({str(self.root)!r}, dtype={self.dtype!r})"

    def path(self, prediction_key: str, dataset_key: str, split: str, case_id: str) -> Path:
        if not _SAFE.match(split):
            raise ValueError(f"unusable split name {split!r}")
        return self.root / prediction_key / self.dtype / dataset_key / split / _case_file(case_id)

    def handle(self, prediction_key: str, dataset_key: str, split: str, case_id: str) -> CaseSamples:
        return CaseSamples(case_id, split, self.path(prediction_key, dataset_key, split, case_id))

    def has(self, prediction_key: str, dataset_key: str, split: str, case_id: str) -> bool:
        """True if the case is cached intact (a damaged file is reported and set aside)."""
        return cache_store.check(self.path(prediction_key, dataset_key, split, case_id), WHAT) is not None

    def save(self, prediction_key: str, dataset_key: str, split: str, case_id: str, samples, meta: dict | None = None) -> CaseSamples:
        """Atomically store ``samples`` ``[S, C, *spatial]`` (tensor or array) in the cache's dtype."""
        arr = samples.detach().cpu().numpy() if isinstance(samples, torch.Tensor) else np.asarray(samples)
        arr = np.ascontiguousarray(arr.astype(self.dtype))
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        path = self.path(prediction_key, dataset_key, split, case_id)
        side = {"case_id": case_id, "split": split, "shape": list(arr.shape), "dtype": self.dtype, **(meta or {})}
        cache_store.write_verified(path, buf.getvalue(), side)
        return CaseSamples(case_id, split, path)

    def record(self, prediction_key: str, dataset_key: str, name: str) -> Path:
        """Where a JSON record of a prediction key's samples in this dtype and data set is kept (a
        derived model's fit, :mod:`values_seg.engine.derived`): beside their split folders."""
        if not _SAFE.match(name):
            raise ValueError(f"unusable record name {name!r}")
        return self.root / prediction_key / self.dtype / dataset_key / f"{name}.json"

    def describe(self, prediction_key: str, info: dict) -> None:
        """Write a human-readable ``info.json`` next to a prediction key's files (what made them)."""
        target = self.root / prediction_key / "info.json"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic.write(target, json.dumps(info, indent=1, sort_keys=True))
