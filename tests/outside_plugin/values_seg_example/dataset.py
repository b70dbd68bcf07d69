import zlib

import numpy as np

from values_seg import hookimpl, Case, Dataset


class Squares(Dataset):
    """Bright squares on noise, two raters who disagree on the border; OoD test cases have inverted contrast."""

    name = "squares"
    dims, in_channels, num_classes = 2, 1, 2

    def __init__(self, size: int = 24, cases: int = 16, seed: int = 0):
        if size < 12 or cases < 2:
            raise ValueError("squares: size >= 12 and cases >= 2 required")
        self.size, self.seed = size, seed
        self._ids = {split: [f"{split}_{i}" for i in range(n)]
                     for split, n in (("train", cases), ("val", cases // 2), ("test", cases))}

    def case_ids(self, split):
        self.check_split(split)
        return self._ids[split]

    def load(self, case_id):
        rng = np.random.default_rng([self.seed, zlib.crc32(case_id.encode())])  # the same case every time
        ood = case_id.startswith("test") and int(case_id.rsplit("_", 1)[1]) % 2 == 1
        half = int(rng.integers(self.size // 6, self.size // 3))
        cy, cx = rng.integers(half + 1, self.size - half - 1, size=2)
        yy, xx = np.mgrid[: self.size, : self.size]
        distance = np.maximum(abs(yy - cy), abs(xx - cx))
        raters = np.stack([distance < half, distance <= half]).astype(np.int64)
        image = (raters[1] + rng.normal(0, 0.3, raters[1].shape)).astype(np.float32)
        image = 1 - image if ood else image
        return Case(case_id, image[None], raters, {"ood": ood, "shift": "inverted" if ood else "none"})


@hookimpl
def values_seg_datasets():
    return [Squares]
