"""Device selection: ``resolve("auto")`` is CUDA when available, else the CPU."""

from __future__ import annotations

import contextlib
import threading

import torch


def resolve(device: str | torch.device | None = None) -> torch.device:
    """``None``/``"auto"`` -> ``cuda`` if available else ``cpu``; anything else as given
    (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``), checked to be usable."""
    if isinstance(device, torch.device):
        dev = device
    elif device is None or str(device).lower() == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            dev = torch.device(str(device))
        except RuntimeError as e:
            raise ValueError(f"unknown device {device!r}: {e}") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available (use 'cpu' or 'auto')")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} requested but only {torch.cuda.device_count()} CUDA device(s) exist")
    return dev


_fixed = threading.local()  # the count an enclosing fixed_threads block set in this thread


@contextlib.contextmanager
def fixed_threads(n: int):
    """Run a block with ``n`` torch (intra-op) and BLAS/OpenMP threads, then restore the previous
    counts. CPU results depend on the thread count (reductions are split across threads), so
    every job runs with the count its key records, whatever executor runs it. Inside a block that
    already fixed ``n`` (an evaluation around each case's prediction) it changes nothing: a new
    ``threadpool_limits`` inspects every loaded library, 2.7 ms a call."""
    n = int(n)
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    if getattr(_fixed, "n", None) == n and torch.get_num_threads() == n:
        yield
        return
    from threadpoolctl import threadpool_limits

    before, outer = torch.get_num_threads(), getattr(_fixed, "n", None)
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            _fixed.n = n
            yield
    finally:
        _fixed.n = outer
        torch.set_num_threads(before)
