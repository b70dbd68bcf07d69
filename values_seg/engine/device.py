"""Device selection: ``resolve("auto")`` is CUDA when available, else the CPU."""

from __future__ import annotations

import contextlib

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


@contextlib.contextmanager
def fixed_threads(n: int):
    """Run a block with ``n`` torch (intra-op) and BLAS/OpenMP threads, then restore the previous
    counts. CPU results depend on the thread count (reductions are split across threads), so
    every job runs with the count its key records, whatever executor runs it."""
    from threadpoolctl import threadpool_limits

    n = int(n)
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)
