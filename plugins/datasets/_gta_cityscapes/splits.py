"""The GTA5/Cityscapes splits of the paper's Figure 7 (appendix B.3), seeded
(docs/design-rationale.md, "GTA5 → Cityscapes", splits).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

DEFAULT_SEED = 123
#: split name -> its parts (Figure 7)
DATASET_SPLITS = {"train": ("train",), "val": ("val",), "test": ("test_iid", "test_ood"),
                  "pool": ("pool_iid", "pool_ood")}


def figure7_splits(gta5: Sequence[str], cityscapes_train: Sequence[str], cityscapes_val: Sequence[str],
                   seed: int = DEFAULT_SEED) -> dict[str, list[str]]:
    """``{"train", "val", "test_iid", "test_ood", "pool_iid", "pool_ood"}`` -> sorted case ids."""
    gta5 = sorted(set(gta5))
    pool_ood, test_ood = sorted(set(cityscapes_train)), sorted(set(cityscapes_val))
    if not pool_ood or not test_ood:
        missing = "train (the OoD pool)" if not pool_ood else "val (the OoD test set)"
        raise ValueError(f"splits: no Cityscapes {missing} frames")
    n_pool = len(pool_ood)
    needed = n_pool + 4  # at least one frame each for test, train and val
    if len(gta5) < needed:
        raise ValueError(
            f"splits: {len(gta5)} GTA5 frames are too few: the i.i.d. pool takes as many as the {n_pool} "
            f"Cityscapes train frames, and test/train/val need at least 4 more ({needed} in all)"
        )
    rng = np.random.default_rng(seed)
    in_pool = np.zeros(len(gta5), dtype=bool)
    in_pool[rng.choice(len(gta5), size=n_pool, replace=False)] = True
    rest = [c for c, p in zip(gta5, in_pool) if not p]
    in_test = np.zeros(len(rest), dtype=bool)
    in_test[rng.choice(len(rest), size=len(rest) // 4, replace=False)] = True
    train_val = [c for c, t in zip(rest, in_test) if not t]
    in_val = np.zeros(len(train_val), dtype=bool)
    in_val[rng.choice(len(train_val), size=math.ceil(len(train_val) / 5), replace=False)] = True
    return {
        "train": [c for c, v in zip(train_val, in_val) if not v],
        "val": [c for c, v in zip(train_val, in_val) if v],
        "test_iid": [c for c, t in zip(rest, in_test) if t],
        "test_ood": test_ood,
        "pool_iid": [c for c, p in zip(gta5, in_pool) if p],
        "pool_ood": pool_ood,
    }
