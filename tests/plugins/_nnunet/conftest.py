"""Fixtures for the nnU-Net integration: a tiny in-test dataset and tiny model folders."""

from __future__ import annotations

import numpy as np
import pytest

from values_seg.components.dataset import Case, Dataset


class TinyDataset(Dataset):
    """Noise plus a bright disc (2D) or ball (3D); rater i marks the object at a growing radius."""

    def __init__(self, dims: int = 2, size: int = 24, in_channels: int = 1, num_classes: int = 2,
                 n_raters: int = 3, per_split: int = 2, ignore_index: int | None = None, seed: int = 0):
        self.dims, self.size, self.in_channels, self.num_classes = dims, size, in_channels, num_classes
        self.n_raters, self.per_split, self.ignore_index, self.seed = n_raters, per_split, ignore_index, seed
        self.class_names = ("background",) + tuple(f"object{i}" for i in range(1, num_classes))

    def splits(self):
        return ["train", "val", "test"]

    def case_ids(self, split):
        self.check_split(split)
        return [f"{split}_{i:02d}" for i in range(self.per_split)]

    def load(self, case_id):
        split, index = case_id.rsplit("_", 1)
        rng = np.random.default_rng([self.seed, self.splits().index(split), int(index)])
        shape = (self.size,) * self.dims
        grid = np.indices(shape).astype(np.float32)
        centre = rng.uniform(self.size * 0.35, self.size * 0.65, size=self.dims)
        distance = np.sqrt(sum((g - c) ** 2 for g, c in zip(grid, centre)))
        radius = self.size * 0.25
        image = rng.normal(0, 0.3, size=(self.in_channels, *shape)).astype(np.float32)
        image += (distance < radius).astype(np.float32)
        raters = []
        for r in range(self.n_raters):
            mask = (distance < radius * (0.6 + 0.3 * r)).astype(np.int64)
            if self.num_classes > 2:
                mask = mask * (1 + (grid[0] > centre[0]).astype(np.int64) * (self.num_classes - 2))
            if self.ignore_index is not None:
                mask[(0,) * self.dims] = self.ignore_index
            raters.append(mask)
        return Case(case_id, image, np.stack(raters), {"ood": split == "test", "shift": "none", "index": int(index)})


@pytest.fixture(scope="session")
def model_2d(built_once):
    """Two folds with different random weights, mirroring allowed along both axes (read-only)."""
    from values_seg_plugins._nnunet.testing import make_model_folder

    return built_once("nnunet-model-2d", lambda folder: make_model_folder(folder, dims=2, folds=(0, 1), weight_scale=4.0))


@pytest.fixture(scope="session")
def model_2d_same(built_once):
    """Two folds with identical weights (read-only)."""
    from values_seg_plugins._nnunet.testing import make_model_folder

    return built_once("nnunet-model-2d-same", lambda folder: make_model_folder(
        folder, dims=2, folds=(0, 1), same_weights=True, weight_scale=4.0))
