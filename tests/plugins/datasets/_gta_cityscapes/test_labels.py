"""Label ids -> training ids from the official Cityscapes table (cityscapesscripts)."""

import numpy as np
import pytest

from values_seg_plugins.datasets._gta_cityscapes import labels

# The published Cityscapes training classes (Cordts et al. 2016, Table "classes"), by hand
TRAIN_CLASSES = ["road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign",
                 "vegetation", "terrain", "sky", "person", "rider", "car", "truck", "bus", "train", "motorcycle",
                 "bicycle"]
# label id -> training id, by hand from the published table (255: not evaluated)
EXPECTED = {0: 255, 1: 255, 2: 255, 3: 255, 4: 255, 5: 255, 6: 255, 7: 0, 8: 1, 9: 255, 10: 255, 11: 2, 12: 3,
            13: 4, 14: 255, 15: 255, 16: 255, 17: 5, 18: 255, 19: 6, 20: 7, 21: 8, 22: 9, 23: 10, 24: 11, 25: 12,
            26: 13, 27: 14, 28: 15, 29: 255, 30: 255, 31: 16, 32: 17, 33: 18}


def test_the_table_comes_from_cityscapesscripts():
    from cityscapesscripts.helpers.labels import labels as official

    assert len(labels.official_labels()) == len(official) == 35
    assert labels.train_class_names() == tuple(TRAIN_CLASSES)


@pytest.mark.parametrize("label_id,train_id", sorted(EXPECTED.items()))
def test_each_label_id_maps_as_published(label_id, train_id):
    assert labels.table().train_id(label_id) == train_id


def test_license_plate_id_is_ignored():
    assert labels.table().train_id(-1) == 255
    signed = np.array([[-1, 26], [7, -1]], dtype=np.int16)  # plates drawn on a car, as a signed array
    assert labels.to_train_ids(signed).tolist() == [[255, 13], [0, 255]]


def test_a_whole_map_is_mapped_in_one_lookup():
    ids = np.array(sorted(EXPECTED), dtype=np.uint8).reshape(2, 17)
    expected = np.array([EXPECTED[i] for i in sorted(EXPECTED)], dtype=np.uint8).reshape(2, 17)
    out = labels.to_train_ids(ids)
    assert out.dtype == np.uint8 and np.array_equal(out, expected)


@pytest.mark.parametrize("bad", [34, 200, 255])
def test_unknown_ids_are_an_error_naming_the_file_and_ids(bad):
    ids = np.array([[7, 8], [bad, 26]], dtype=np.uint8)
    with pytest.raises(labels.UnknownLabelIds, match=rf"labels/00042.png: label id\(s\) \[{bad}\] are not Cityscapes"):
        labels.to_train_ids(ids, "labels/00042.png")
    with pytest.raises(labels.UnknownLabelIds):
        labels.table().train_id(bad)
