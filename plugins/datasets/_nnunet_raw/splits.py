"""Training/validation splits: nnU-Net's ``splits_final.json`` (one fold) or a seeded split.

``splits_final.json`` is what nnU-Net's trainer writes into ``nnUNet_preprocessed/DatasetXXX_Name/``
on first training: a list of folds, each ``{"train": [case ids], "val": [case ids]}``. Using it
keeps values-seg's validation cases the ones nnU-Net held out from that fold.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError

SPLITS_FILE = "splits_final.json"


def splits_file(preprocessed: str | Path) -> Path:
    """The ``splits_final.json`` in ``preprocessed`` (a folder), or ``preprocessed`` itself (the file)."""
    path = Path(preprocessed).expanduser()
    if path.is_dir():
        path = path / SPLITS_FILE
    if not path.is_file():
        raise LayoutError(f"{path} does not exist: give the nnU-Net preprocessed data set folder that holds "
                          f"{SPLITS_FILE} (nnUNet_preprocessed/DatasetXXX_Name), or omit it for a seeded split")
    return path


def read_fold(preprocessed: str | Path, fold: int) -> tuple[list[str], list[str]]:
    """``(train ids, val ids)`` of ``fold`` in ``splits_final.json``."""
    path = splits_file(preprocessed)
    try:
        folds = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise LayoutError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(folds, list) or not all(isinstance(f, dict) and {"train", "val"} <= set(f) for f in folds):
        raise LayoutError(f"{path}: expected a list of {{\"train\": [...], \"val\": [...]}} folds")
    if not 0 <= fold < len(folds):
        raise LayoutError(f"{path}: fold {fold} does not exist (folds 0..{len(folds) - 1})")
    return [str(c) for c in folds[fold]["train"]], [str(c) for c in folds[fold]["val"]]


def seeded_split(ids, fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """``(train, val)``: ``ceil(fraction · n)`` cases (at least 1, at most n - 1) drawn with ``seed``."""
    ids = sorted(ids)
    n = len(ids)
    if n < 2:
        return ids, []
    n_val = min(n - 1, max(1, math.ceil(fraction * n - 1e-9)))
    order = np.random.default_rng(seed).permutation(n)
    val = sorted(ids[i] for i in order[:n_val])
    return [c for c in ids if c not in set(val)], val
