"""Centre crop to 1024 x 1912 and rescale to 25 % (256 x 478), paper appendix B.3, as the paper's
preprocessing did (docs/design-rationale.md, "GTA5 → Cityscapes", crop and rescale).
"""

from __future__ import annotations

import numpy as np

CROP = (1024, 1912)
FACTOR = 4
SIZE = (CROP[0] // FACTOR, CROP[1] // FACTOR)  # (256, 478)


class CropError(ValueError):
    """A frame smaller than the crop."""


def center_crop(array: np.ndarray, where: str = "image", size: tuple[int, int] = CROP) -> np.ndarray:
    """The centred ``size`` window of ``array`` ``[H, W, ...]`` (a view)."""
    h, w = array.shape[:2]
    ch, cw = size
    if h < ch or w < cw:
        raise CropError(f"{where}: {h} x {w} pixels is smaller than the {ch} x {cw} crop")
    top, left = (h - ch) // 2, (w - cw) // 2
    return array[top: top + ch, left: left + cw]


def downscale_image(image: np.ndarray) -> np.ndarray:
    """Bilinear 1/4 downscaling of a uint8 ``[H, W, C]`` image (H, W multiples of 4)."""
    _check_multiple(image)
    a = image.astype(np.uint16)
    total = a[1::4, 1::4] + a[1::4, 2::4] + a[2::4, 1::4] + a[2::4, 2::4]
    return ((total + 2) // 4).astype(np.uint8)


def downscale_labels(labels: np.ndarray) -> np.ndarray:
    """Nearest 1/4 downscaling of a label map ``[H, W]`` (H, W multiples of 4)."""
    _check_multiple(labels)
    return np.ascontiguousarray(labels[2::4, 2::4])


def _check_multiple(array: np.ndarray) -> None:
    if array.shape[0] % FACTOR or array.shape[1] % FACTOR:
        raise ValueError(f"downscaling by {FACTOR} needs sides divisible by {FACTOR}, got {array.shape[:2]}")
