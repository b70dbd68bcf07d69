"""Small data sets in nnU-Net's raw layout, written by the tests (values_seg_plugins.datasets._nnunet_raw.testing)."""

import pytest

from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset


@pytest.fixture
def raw2d(tmp_path):
    """2D, two channels, three raters, 4 training and 2 test cases: (folder, written cases)."""
    folder = tmp_path / "Dataset001_Two"
    return folder, write_raw_dataset(folder, dims=2, shape=(16, 20), channels=2, raters=3, train=4, test=2)


def write_array(path, array, spacing=None, origin=None, direction=None, like=None):
    """Write ``array`` with SimpleITK, copying the geometry of the file ``like`` unless given."""
    import numpy as np
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(np.asarray(array))
    if like is not None:
        image.CopyInformation(sitk.ReadImage(str(like))) if sitk.ReadImage(str(like)).GetSize() == image.GetSize() \
            else None
    if spacing is not None:
        image.SetSpacing(spacing)
    if origin is not None:
        image.SetOrigin(origin)
    if direction is not None:
        image.SetDirection(direction)
    sitk.WriteImage(image, str(path))
