"""The Figure 7 splits: sizes, disjointness, determinism."""

import math

import pytest

from values_seg_plugins.datasets._gta_cityscapes.splits import figure7_splits

GTA = [f"gta5_{i:05d}" for i in range(1, 1001)]
CS_TRAIN = [f"cityscapes_train_{i}" for i in range(200)]
CS_VAL = [f"cityscapes_val_{i}" for i in range(50)]


def test_sizes_follow_figure_7():
    s = figure7_splits(GTA, CS_TRAIN, CS_VAL, seed=123)
    rest = 1000 - 200
    test = rest // 4  # 200
    val = math.ceil((rest - test) / 5)  # 120
    assert {k: len(v) for k, v in s.items()} == {"train": rest - test - val, "val": val, "test_iid": test,
                                                   "test_ood": 50, "pool_iid": 200, "pool_ood": 200}
    assert s["test_ood"] == sorted(CS_VAL) and s["pool_ood"] == sorted(CS_TRAIN)


def test_parts_are_disjoint_and_cover_every_frame():
    s = figure7_splits(GTA, CS_TRAIN, CS_VAL, seed=123)
    parts = [set(v) for v in s.values()]
    assert sum(map(len, parts)) == len(set().union(*parts)) == 1000 + 250
    assert set(s["train"]) | set(s["val"]) | set(s["test_iid"]) | set(s["pool_iid"]) == set(GTA)


def test_seeded():
    assert figure7_splits(GTA, CS_TRAIN, CS_VAL, 123) == figure7_splits(list(reversed(GTA)), CS_TRAIN, CS_VAL, 123)
    assert figure7_splits(GTA, CS_TRAIN, CS_VAL, 123)["train"] != figure7_splits(GTA, CS_TRAIN, CS_VAL, 124)["train"]


def test_too_few_gta5_frames_is_an_error_with_the_numbers():
    with pytest.raises(ValueError, match=r"203 GTA5 frames are too few: .* 200 Cityscapes train frames.*\(204 in all\)"):
        figure7_splits(GTA[:203], CS_TRAIN, CS_VAL)


def test_missing_cityscapes_part_is_named():
    with pytest.raises(ValueError, match="no Cityscapes val"):
        figure7_splits(GTA, CS_TRAIN, [])
