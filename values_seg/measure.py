"""Helpers for C2 uncertainty measures: ``samples[S, C, *spatial] -> map[*spatial]``.

:func:`measure` turns an unchecked kernel into a registry component that validates its input
at the boundary (:func:`values_seg.validation.check_probabilities`) and keeps the kernel as
``.unchecked`` so the fused evaluation validates each case once and skips re-checking.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch

from values_seg.registry import component
from values_seg.validation import check_probabilities

FAMILIES = ("deterministic", "bayesian", "augmentation", "variability")
UNCERTAINTY_TYPES = ("PU", "AU", "EU")


def measure(uncertainty_types: dict[str, str], name: str | None = None) -> Callable:
    """Declare a measure and which uncertainty type it stands for under each C1 family.

    Families missing from ``uncertainty_types`` are not served by the measure (DESIGN.md's
    table, paper eq. 1, 15, 18).
    """
    for family, utype in uncertainty_types.items():
        if family not in FAMILIES or utype not in UNCERTAINTY_TYPES:
            raise ValueError(f"measure: invalid uncertainty type mapping {family!r} -> {utype!r}")

    def wrap(kernel: Callable[[torch.Tensor], torch.Tensor]) -> Callable:
        @functools.wraps(kernel)
        def checked(samples: torch.Tensor) -> torch.Tensor:
            return kernel(check_probabilities(samples, where=f"measure {checked.__name__!r}"))

        checked.unchecked = kernel
        return component(name=name, uncertainty_types=dict(uncertainty_types))(checked)

    return wrap


def entropy(p: torch.Tensor, dim: int) -> torch.Tensor:
    """Shannon entropy (natural log) along ``dim`` with ``0 log 0 = 0``."""
    return -torch.special.xlogy(p, p).sum(dim=dim)


def as_compute_dtype(samples: torch.Tensor) -> torch.Tensor:
    """Measures compute in float32 or better (float64 stays float64)."""
    return samples if samples.dtype == torch.float64 else samples.float()
