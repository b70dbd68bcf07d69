"""Geometry kept from headers and written back with SimpleITK, atomically."""

import os

import numpy as np
import pytest
import SimpleITK as sitk

from values_seg_plugins.datasets._nnunet_raw.geometry import Geometry, array_spacing, read_geometry, write_image
from values_seg_plugins.datasets._nnunet_raw.testing import rotation


@pytest.mark.parametrize("shape, spacing", [((5, 7), (0.4, 2.5)), ((3, 5, 7), (0.4, 2.5, 3.0))])
def test_write_image_keeps_the_geometry_of_the_meta(tmp_path, shape, spacing):
    dims = len(shape)
    meta = {"spacing": list(spacing), "origin": [float(10 * i - 3) for i in range(dims)],
            "direction": list(rotation(dims, 30.0))}
    array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    path = write_image(array, tmp_path / "map.nii.gz", meta)
    assert sorted(os.listdir(tmp_path)) == ["map.nii.gz"]  # no temp file left
    image = sitk.ReadImage(str(path))
    np.testing.assert_array_equal(sitk.GetArrayFromImage(image), array)
    np.testing.assert_allclose(image.GetSpacing(), spacing)
    np.testing.assert_allclose(image.GetOrigin(), meta["origin"])
    np.testing.assert_allclose(image.GetDirection(), meta["direction"], atol=1e-7)
    geometry, components = read_geometry(path)
    assert components == 1 and geometry.shape == shape and geometry.size == tuple(reversed(shape))
    # NumPy axis order for nnU-Net: (z, y, x) spacing of a (x, y, z) header
    assert array_spacing(meta) == list(reversed(spacing))


def test_write_image_refuses_a_geometry_of_other_dimension(tmp_path):
    with pytest.raises(ValueError, match="a 2D array cannot take the 3D geometry"):
        write_image(np.zeros((4, 4)), tmp_path / "m.nii.gz", {"spacing": [1, 1, 1], "origin": [0, 0, 0],
                                                              "direction": list(np.eye(3).ravel())})
    assert array_spacing({}) is None


def test_mismatch_names_what_differs():
    a = Geometry((4, 5), (1.0, 1.0), (0.0, 0.0), (1.0, 0.0, 0.0, 1.0))
    assert a.mismatch(a) is None
    assert a.mismatch(Geometry((4, 6), a.spacing, a.origin, a.direction)).startswith("size [4, 5] vs [4, 6]")
    assert a.mismatch(Geometry(a.size, (1.0, 1.5), a.origin, a.direction)).startswith("spacing")
    assert a.mismatch(Geometry(a.size, a.spacing, (0.0, 0.01), a.direction)).startswith("origin")
    assert a.mismatch(Geometry(a.size, a.spacing, (0.0, 0.00001), a.direction)) is None  # header round-off


def test_unreadable_file(tmp_path):
    (tmp_path / "x.nii.gz").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="x.nii.gz: SimpleITK cannot read it"):
        read_geometry(tmp_path / "x.nii.gz")


@pytest.mark.parametrize("shape, spacing", [((5, 7), (0.4, 2.5)), ((3, 5, 7), (0.4, 2.5, 3.0))])
def test_array_spacing_is_what_nnunet_reads_from_the_file(tmp_path, shape, spacing):
    """The spacing the nnunet model is given per case equals nnU-Net's own SimpleITKIO reading."""
    from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

    meta = {"spacing": list(spacing), "origin": [0.0] * len(shape), "direction": list(np.eye(len(shape)).ravel())}
    path = write_image(np.zeros(shape, np.float32), tmp_path / "x.nii.gz", meta)
    _, properties = SimpleITKIO().read_images([str(path)])
    nnunet_spacing = list(properties["spacing"])[-len(shape):]  # a 2D image gets a dummy first axis
    assert array_spacing(meta) == pytest.approx(nnunet_spacing)
