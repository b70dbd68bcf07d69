"""C1 ``test_time_augmentation``: every flip combination, with and without Gaussian noise."""

from __future__ import annotations

import itertools

import torch

from values_seg import hookimpl
from values_seg.components.prediction_model import PredictionModel, batched_forward, softmax_probs


class TestTimeAugmentation(PredictionModel):
    """Test-time augmentation: every flip combination, with and without Gaussian noise, flipped back.

    ``flip_axes``: spatial axes (0 = first spatial axis, negative from the end), ``None`` = all:
    8 passes in 2D, 16 in 3D; ``[-1]`` (horizontal only, as for HRNet): 4 passes. ``noise``:
    also pass each flip with additive Gaussian noise of std ``noise_std`` (else half as many).
    """

    name = "test_time_augmentation"
    label = "TTA"
    family = "augmentation"
    __test__ = False

    def __init__(self, flip_axes: list[int] | None = None, noise: bool = True, noise_std: float = 0.1):
        if noise and noise_std <= 0:
            raise ValueError(f"test_time_augmentation: noise_std must be > 0 with noise, got {noise_std}")
        self.flip_axes = None if flip_axes is None else [int(a) for a in flip_axes]
        self.noise = noise
        self.noise_std = noise_std

    def augmentations(self, dims: int) -> list[tuple[tuple[int, ...], bool]]:
        """``(flipped spatial axes, with noise)`` per pass, in order."""
        if self.flip_axes is None:
            axes = list(range(dims))
        else:
            bad = [a for a in self.flip_axes if not -dims <= a < dims]
            if bad:
                raise ValueError(f"test_time_augmentation: flip axes {bad} out of range for {dims}D images")
            axes = sorted({a % dims for a in self.flip_axes})
        flips = [tuple(a for a, on in zip(axes, mask) if on) for mask in itertools.product((False, True), repeat=len(axes))]
        return [(f, n) for f in flips for n in ((False, True) if self.noise else (False,))]

    def predict(self, networks, image):
        net = networks[0]
        dims = image.ndim - 1
        augs = self.augmentations(dims)
        inputs = []
        for flips, noisy in augs:
            x = torch.flip(image, [a + 1 for a in flips]) if flips else image
            if noisy:
                x = x + self.noise_std * torch.randn_like(x)
            inputs.append(x)
        probs = softmax_probs(batched_forward(net, torch.stack(inputs), self.max_batch))
        out = [torch.flip(p, [a + 1 for a in flips]) if flips else p for p, (flips, _) in zip(probs, augs)]
        return torch.stack(out)


@hookimpl
def values_seg_prediction_models():
    return [TestTimeAugmentation]
