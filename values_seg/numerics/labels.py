"""Label maps from class probabilities: one rule (ties go to the lower class) for the evaluation,
the per-case quantities and the plugins."""

from __future__ import annotations

import numpy as np
import torch

from values_seg.numerics.validation import numpy_view


def class_argmax(probabilities: torch.Tensor, dim: int) -> torch.Tensor:
    """``argmax`` over the class axis (ties go to the lower class), as ``uint8`` when C <= 256.

    Two classes need one comparison (on CPU NumPy's, ~3x torch's); otherwise ``max(dim).indices``
    (the first maximum, as ``argmax``) is ~20x faster on CPU than ``argmax`` over a non-last axis.
    """
    C = probabilities.shape[dim]
    if C == 2:
        first, second = probabilities.unbind(dim)
        a, b = numpy_view(first), numpy_view(second)
        if a is not None:
            return torch.from_numpy(np.greater(b, a).view(np.uint8))
        return (second > first).to(torch.uint8)
    labels = probabilities.max(dim=dim).indices
    return labels.to(torch.uint8) if C <= 256 else labels
