"""``synthetic``: a data set of a real study's shapes with synthetic content, for timing that study's
trainings where its data are not at hand (registered like any plugin: ``registry.load("_synthetic")``
from this folder). Each case: smooth random blobs as labels (``raters`` noisy copies), the image their
class means plus noise; seeded by the case id. Shapes of the paper's studies: LIDC-IDRI 64^3 crops,
1 channel, 2 classes, 4 raters; GTA5/Cityscapes 256 x 478 frames, 3 channels, 24 classes, ignore 255,
5 reference maps (appendix B)."""

from __future__ import annotations

import zlib

import numpy as np
from scipy import ndimage

from values_seg import hookimpl
from values_seg.components.dataset import Case, Dataset


class SyntheticDataset(Dataset):
    """Cases of a given shape, channels, classes and raters with blob labels (timing only)."""

    name = "synthetic"

    def __init__(self, shape: list[int] = (64, 64, 64), in_channels: int = 1, num_classes: int = 2,
                 raters: int = 4, ignore_index: int | None = None, train_cases: int = 32, test_cases: int = 4):
        self.shape = tuple(int(s) for s in shape)
        self.dims = len(self.shape)
        self.in_channels, self.num_classes, self.raters = int(in_channels), int(num_classes), int(raters)
        self.ignore_index = ignore_index
        self.class_names = tuple(f"class{i}" for i in range(self.num_classes))
        self._ids = {"train": [f"tr{i:04d}" for i in range(train_cases)], "val": [f"va{i:04d}" for i in range(test_cases)],
                     "test": [f"ts{i:04d}" for i in range(test_cases)]}

    def splits(self) -> list[str]:
        return list(self._ids)

    def case_ids(self, split: str) -> list[str]:
        self.check_split(split)
        return list(self._ids[split])

    def load(self, case_id: str) -> Case:
        rng = np.random.default_rng(zlib.crc32(case_id.encode()))
        field = ndimage.gaussian_filter(rng.standard_normal((self.num_classes, *self.shape), dtype=np.float32),
                                        sigma=(0,) + (4,) * self.dims)
        label = field.argmax(axis=0).astype(np.uint8)
        raters = np.stack([np.where(rng.random(self.shape) < 0.02, rng.integers(0, self.num_classes, self.shape),
                                    label) for _ in range(self.raters)]).astype(np.uint8)
        means = rng.standard_normal((self.num_classes, self.in_channels)).astype(np.float32)
        image = means[label].transpose(self.dims, *range(self.dims)) + 0.5 * rng.standard_normal(
            (self.in_channels, *self.shape), dtype=np.float32)
        return Case(case_id=case_id, image=np.ascontiguousarray(image), raters=raters,
                    meta={"ood": False, "shift": "none"})


@hookimpl
def values_seg_datasets():
    return [SyntheticDataset]
