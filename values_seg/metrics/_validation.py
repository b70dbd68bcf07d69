"""Shared input conversion and validation for the metrics (numpy arrays or torch tensors in)."""

from __future__ import annotations

import sys

import numpy as np


def to_numpy(x, name: str) -> np.ndarray:
    """``x`` (numpy array, torch tensor, sequence or scalar) as a numpy array (no copy when possible)."""
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported: the metrics do not import it
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.to(torch.float32)
        return t.cpu().numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: cannot be converted to an array ({exc})") from None


def as_float(x, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """A finite float64 array; raises ``ValueError`` on empty, non-numeric or NaN/inf input."""
    a = to_numpy(x, name)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise ValueError(f"{name}: expected numbers, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if a.size == 0 and not allow_empty:
        raise ValueError(f"{name}: input is empty")
    if not np.isfinite(a).all():
        n_nan = int(np.isnan(a).sum())
        n_inf = int(np.isinf(a).sum())
        raise ValueError(f"{name}: contains {n_nan} NaN and {n_inf} infinite value(s)")
    return a


def as_real(x, name: str, *, finite: bool = True) -> np.ndarray:
    """Like :func:`as_float`, but float32 and float64 input keep their dtype (no copy of a large
    map); the finite check reads the smallest and largest value (NaN propagates into both; half
    the time of a sum, no float64 conversion) and counts only when one is not finite. ``finite=False``:
    no pass for it (the caller's own sums see a NaN or infinity and call again to raise)."""
    a = to_numpy(x, name)
    if a.dtype not in (np.float32, np.float64):
        return as_float(a, name)
    if a.size == 0:
        raise ValueError(f"{name}: input is empty")
    if finite and not (np.isfinite(a.min()) and np.isfinite(a.max())):
        return as_float(a, name)  # raises, counting NaN and inf
    return a


def as_binary(x, name: str) -> np.ndarray:
    """A boolean array from labels in {0, 1} (bool or numeric); raises ``ValueError`` otherwise."""
    a = to_numpy(x, name)
    if a.dtype == np.bool_:
        if a.size == 0:
            raise ValueError(f"{name}: input is empty")
        return a
    f = as_float(a, name)
    bad = (f != 0) & (f != 1)
    if bad.any():
        raise ValueError(
            f"{name}: expected binary labels in {{0, 1}}, found {int(bad.sum())} other value(s), "
            f"e.g. {f[bad].ravel()[0]!r}"
        )
    return f == 1


def as_labels(x, name: str) -> np.ndarray:
    """A non-empty integer label array (integral values); raises ``ValueError`` otherwise.

    Integer inputs keep their dtype (no copy: label maps are large); bool becomes uint8 and
    integral floats int64.
    """
    a = to_numpy(x, name)
    if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
        if a.size == 0:
            raise ValueError(f"{name}: input is empty")
        return a.view(np.uint8) if a.dtype == np.bool_ else a
    f = as_float(a, name)
    if (f != np.round(f)).any():
        raise ValueError(f"{name}: expected integer class labels, found non-integral values")
    return f.astype(np.int64)


def same_shape(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must have the same shape, got {a.shape} and {b.shape}")


def same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    """Two per-case vectors: both 1-D (one value per case) and of the same length."""
    for x, name in ((a, name_a), (b, name_b)):
        if x.ndim != 1:
            raise ValueError(f"{name} must hold one value per case (1-D), got shape {x.shape}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{name_a} and {name_b} must have the same length, got {a.shape[0]} and {b.shape[0]}")
    return a, b


def stacked(x: np.ndarray, name: str, dims: tuple[int, ...] = (2, 3)) -> np.ndarray:
    """Masks or maps stacked on the first axis, ``[N, *spatial]`` with ``len(spatial)`` in ``dims``."""
    if x.ndim - 1 not in dims:
        raise ValueError(f"{name} must be stacked on the first axis ([N, *spatial] with {'/'.join(map(str, dims))} "
                         f"spatial dims; a single mask needs a leading axis of 1), got shape {x.shape}")
    return x


def stack(x, name: str) -> np.ndarray:
    """Masks/maps stacked on the first axis: an array/tensor as is, a list or tuple of them stacked."""
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            raise ValueError(f"{name}: empty sequence")
        items = [to_numpy(e, f"{name}[{i}]") for i, e in enumerate(x)]
        shapes = {e.shape for e in items}
        if len(shapes) != 1:
            raise ValueError(f"{name}: all items must have the same shape, got {sorted(shapes)}")
        return np.stack(items)
    return to_numpy(x, name)
