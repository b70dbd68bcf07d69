"""Probability samples as the prediction cache stores them (:mod:`values_seg.engine.predictions`),
handed to the evaluation as they lie in the file (docs/design-rationale.md, "Stored samples").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from values_seg.numerics import kernels
from values_seg.numerics.validation import mark_verified


def as_float32(stored: np.ndarray) -> torch.Tensor:
    """``stored`` as a contiguous float32 tensor of its own where ``stored`` is read-only (a view of
    the file: copied once, by torch's conversion, ~4x faster than NumPy's); a writable float32
    ``stored`` is used as it is."""
    if not stored.flags.writeable and stored.dtype == np.float32:
        stored = stored.copy()
    with warnings.catch_warnings():  # a read-only view: torch only reads it, into a new tensor
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        source = torch.from_numpy(stored)
    return source.float().contiguous()


def renormalised(stored: np.ndarray) -> torch.Tensor:
    """Samples ``[S, C, *spatial]`` as stored, as float32 (:func:`as_float32`; a writable float32
    ``stored`` itself is changed), divided by their sum over C in one compiled pass
    (:func:`values_seg.numerics.kernels.renormalise`), and marked verified (checked when predicted)."""
    samples = as_float32(stored)
    kernels.renormalise(samples.numpy().reshape(*samples.shape[:2], -1))
    return mark_verified(samples)


@dataclass(frozen=True, eq=False)
class StoredSamples:
    """One case's samples as stored (``array``: float16 or float32 ``[S, C, *spatial]``, e.g. a
    read-only view of the mapped file), known valid and not yet renormalised over C."""

    array: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def ndim(self) -> int:
        return self.array.ndim

    @property
    def device(self) -> torch.device:
        """Where they are: in the CPU's memory (the mapped file)."""
        return torch.device("cpu")

    @property
    def bits(self) -> np.ndarray | None:
        """The float16 values' bit patterns ``[S, 2, N]`` (``uint16``, a view) where the compiled
        pass reads them (:func:`values_seg.numerics.kernels.sample_pass`: float16, two classes, C order);
        else ``None``."""
        a = self.array
        if a.dtype != np.float16 or a.ndim < 3 or a.shape[1] != 2 or not a.flags.c_contiguous:
            return None
        return a.view(np.uint16).reshape(a.shape[0], 2, -1)

    def tensor(self) -> torch.Tensor:
        """The samples as the evaluation computes with them: float32, renormalised over C, marked
        verified (:func:`renormalised`; a new tensor each call)."""
        return renormalised(self.array)
