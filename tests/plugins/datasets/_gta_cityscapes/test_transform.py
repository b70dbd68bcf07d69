"""Centre crop to 1024 x 1912 and 1/4 rescaling, against torch's interpolation (float64)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from values_seg_plugins.datasets._gta_cityscapes import transform


def coordinates(h, w):
    """A map whose value encodes its own (row, column)."""
    return np.arange(h, dtype=np.int64)[:, None] * 10_000 + np.arange(w)[None, :]


@pytest.mark.parametrize("shape,top,left", [((1052, 1914), 14, 1), ((1024, 2048), 0, 68), ((1024, 1912), 0, 0)])
def test_centre_crop_offsets(shape, top, left):
    crop = transform.center_crop(coordinates(*shape))
    assert crop.shape == (1024, 1912)
    assert crop[0, 0] == top * 10_000 + left and crop[-1, -1] == (top + 1023) * 10_000 + left + 1911


def test_a_frame_smaller_than_the_crop_is_an_error_naming_it():
    with pytest.raises(transform.CropError, match=r"images/00001.png: 1000 x 1914 pixels is smaller than the 1024 x 1912"):
        transform.center_crop(np.zeros((1000, 1914, 3), np.uint8), "images/00001.png")


def test_image_rescaling_is_bilinear_at_a_quarter():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(1024, 1912, 3), dtype=np.uint8)
    out = transform.downscale_image(image)
    assert out.shape == (256, 478, 3) and out.dtype == np.uint8
    ref = F.interpolate(torch.from_numpy(image).permute(2, 0, 1)[None].double(), size=(256, 478), mode="bilinear",
                        align_corners=False, antialias=False)[0].permute(1, 2, 0).numpy()
    assert np.array_equal(out, np.floor(ref + 0.5).astype(np.uint8))  # rounded half up


def test_label_rescaling_is_nearest_at_the_pixel_centre():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 34, size=(1024, 1912), dtype=np.uint8)
    out = transform.downscale_labels(labels)
    assert out.shape == (256, 478)
    ref = F.interpolate(torch.from_numpy(labels)[None, None].float(), size=(256, 478), mode="nearest-exact")[0, 0]
    assert np.array_equal(out, ref.numpy().astype(np.uint8))
    assert np.array_equal(transform.downscale_labels(coordinates(1024, 1912))[3, 5], 14 * 10_000 + 22)  # (4i+2, 4j+2)
