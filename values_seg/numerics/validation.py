"""Boundary checks for probability samples ``[S, C, *spatial]`` (docs/architecture.md, "Numerical conventions")."""

from __future__ import annotations

import math
import weakref

import numpy as np
import torch

SUM_TOLERANCE = 1e-3
_verified: dict[int, tuple[weakref.ref, int]] = {}  # id -> (the tensor, its in-place version when verified)


def mark_verified(samples: torch.Tensor) -> torch.Tensor:
    """Note that the values of ``samples`` are known valid probabilities (cached samples: checked
    when predicted, hash-checked when read), so :func:`check_probabilities` skips its pass over
    them, but only while the tensor is unchanged (torch counts its in-place changes)."""
    key = id(samples)
    _verified[key] = (weakref.ref(samples, lambda _, k=key: _verified.pop(k, None)), samples._version)
    return samples


def _values_verified(samples: torch.Tensor) -> bool:
    entry = _verified.get(id(samples))
    return entry is not None and entry[0]() is samples and entry[1] == samples._version


def check_probabilities(samples, where: str = "samples", spatial_dims: tuple[int, ...] = (2, 3)) -> torch.Tensor:
    """Return ``samples`` as a floating tensor, or raise ``ValueError`` saying what is wrong.

    Valid: rank ``2 + d`` with ``d`` in ``spatial_dims``, at least one sample and one class,
    finite, non-negative, and summing to 1 over the class axis within 1e-3.
    """
    if not isinstance(samples, torch.Tensor):
        try:
            samples = torch.as_tensor(samples)
        except Exception as e:  # noqa: BLE001 - report any conversion failure the same way
            raise ValueError(f"{where}: cannot convert {type(samples).__name__} to a tensor ({e})") from e
    if samples.ndim - 2 not in spatial_dims:
        raise ValueError(
            f"{where}: expected probability samples [S, C, *spatial] with {'/'.join(map(str, spatial_dims))} "
            f"spatial dims, got a tensor of rank {samples.ndim} with shape {tuple(samples.shape)}"
        )
    if samples.shape[0] == 0 or samples.shape[1] == 0 or samples.numel() == 0:
        raise ValueError(f"{where}: empty probability samples, shape {tuple(samples.shape)}")
    if samples.shape[1] < 2:
        raise ValueError(f"{where}: probabilities need at least 2 classes (axis 1), got shape {tuple(samples.shape)}; "
                         f"a single class carries no uncertainty")
    if not samples.is_floating_point():
        raise ValueError(f"{where}: probabilities must be floating point, got {samples.dtype}")
    if _values_verified(samples):
        return samples
    if samples.dtype in (torch.float16, torch.bfloat16):
        samples = samples.float()
    class_sums = _class_sums(samples)  # NaN and inf propagate: one pass covers the finite check
    low, high = (float(v) for v in torch.aminmax(class_sums))
    if not (math.isfinite(low) and math.isfinite(high)):
        bad = int((~torch.isfinite(samples)).sum())
        if bad:  # else the sum merely overflowed: the checks below report it
            raise ValueError(f"{where}: {bad} probability value(s) are NaN or infinite")
    array = numpy_view(samples)
    minimum = float(array.min() if array is not None else samples.min())
    if minimum < 0:
        raise ValueError(f"{where}: probabilities must be non-negative, found {minimum:.3g}")
    deviation = max(high - 1, 1 - low)  # = max |class sum - 1|
    if not deviation <= SUM_TOLERANCE:
        raise ValueError(
            f"{where}: probabilities must sum to 1 over the class axis (dim 1) within {SUM_TOLERANCE}, "
            f"largest deviation {deviation:.3g} (are these logits, or is the class axis elsewhere?)"
        )
    return samples


def numpy_view(t: torch.Tensor):
    """A NumPy view of a float32/float64 CPU tensor outside autograd, else ``None``: NumPy's SIMD
    comparisons, sums, minima and logs are 1.5-3x torch's on one core."""
    if t.device.type == "cpu" and not t.requires_grad and t.dtype in (torch.float32, torch.float64):
        return t.numpy()
    return None


def _class_sums(samples: torch.Tensor) -> torch.Tensor:
    """``samples.sum(dim=1)``; for a few classes as a chain of adds (~2x faster than the reduction
    over a short, strided axis)."""
    if samples.shape[1] > 8:
        return samples.sum(dim=1)
    a = numpy_view(samples)
    if a is not None:
        total = np.add(a[:, 0], a[:, 1])
        for c in range(2, a.shape[1]):
            np.add(total, a[:, c], out=total)
        return torch.from_numpy(total)
    total = samples[:, 0] + samples[:, 1]
    for c in range(2, samples.shape[1]):
        total += samples[:, c]
    return total
