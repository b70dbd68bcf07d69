"""Mixed precision: the arithmetic a recipe trains and predicts in (``Recipe.precision``: ``fp32``,
``bf16`` or ``fp16``). What each does, and why it is part of every key: docs/design-rationale.md,
"Mixed precision".
"""

from __future__ import annotations

import contextlib

import torch

from values_seg.engine.specs import PRECISIONS

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve(precision: str | None, device: str | torch.device | None) -> str:
    """A config's precision for jobs on ``device``: ``auto`` (or ``None``) is ``bf16`` on CUDA and
    ``fp32`` elsewhere; any other value is returned as given, after a check."""
    if precision is None or precision == "auto":
        return "bf16" if _device_type(device) == "cuda" else "fp32"
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid: auto, {', '.join(PRECISIONS)}")
    return precision


def _device_type(device) -> str:
    """The kind of ``device`` (``auto``: CUDA where available), without checking that it exists:
    the config's device is validated on its own, with its own message."""
    if device is None or str(device).lower() == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return torch.device(device).type
    except (RuntimeError, TypeError):
        return "cpu"


def autocast(precision: str, device: torch.device):
    """The autocast context of ``precision`` on ``device`` (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=_DTYPES[precision])


class LossScaler:
    """``backward`` + ``step`` of one optimiser step, with dynamic loss scaling for fp16 (a plain
    backward and step otherwise). A step whose scaled gradients overflow is skipped, as
    :class:`torch.amp.GradScaler` does, and the scale lowered."""

    def __init__(self, precision: str, device: torch.device):
        self.scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            loss.backward()
            optimizer.step()
            return
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()
