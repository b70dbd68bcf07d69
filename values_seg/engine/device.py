"""Device selection: ``resolve("auto")`` is CUDA when available, else the CPU."""

from __future__ import annotations

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
