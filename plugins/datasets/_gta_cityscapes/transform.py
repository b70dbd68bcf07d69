"""Centre crop to 1024 x 1912 and rescale to 25 % (256 x 478), paper appendix B.3.

The crop is centred (top ``(H - 1024) // 2``, left ``(W - 1912) // 2``: GTA5's 1052 x 1914 frames
lose 14/14 rows and 1/1 columns, Cityscapes' 1024 x 2048 frames 68/68 columns).

Rescaling by exactly 1/4:

* images bilinear (half-pixel centres, no antialiasing, as OpenCV's ``INTER_LINEAR`` that the
  paper's preprocessing used): output pixel ``(i, j)`` sits at source coordinate
  ``(4i + 1.5, 4j + 1.5)``, so it is the mean of the 2 x 2 source pixels rows ``4i+1..4i+2``,
  columns ``4j+1..4j+2``, rounded half up;
* labels nearest: the source pixel ``(4i + 2, 4j + 2)``, the one nearest the output pixel's
  centre (ties rounded up, as PIL's and torch's ``nearest-exact``), so labels stay aligned with
  the image.
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
