"""The ``gta_cityscapes`` dataset: GTA5 (i.i.d.) -> Cityscapes (OoD) with label-switch ambiguity.

Paper appendix B.3; its raters, exact reference variance and redrawn training targets:
docs/design-rationale.md, "GTA5 → Cityscapes".
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from PIL import Image

from values_seg import hookimpl
from values_seg.components.dataset import Case, Dataset, check_fingerprint, files_fingerprint
from values_seg.params import InputPath
from values_seg_plugins.datasets._gta_cityscapes import ambiguity
from values_seg_plugins.datasets._gta_cityscapes import manifest as mf
from values_seg_plugins.datasets._gta_cityscapes.labels import IGNORE_INDEX
from values_seg_plugins.datasets._gta_cityscapes.layout import GTA5
from values_seg_plugins.datasets._gta_cityscapes.prepared import PreparedFolder
from values_seg_plugins.datasets._gta_cityscapes.splits import DATASET_SPLITS

#: ImageNet statistics of RGB in [0, 1] (the HRNet is ImageNet-pretrained; as the paper's code)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class GTACityscapesDataset(Dataset):
    """GTA5 -> Cityscapes, 256 x 478, 5 classes switched to a twin with p = 1/3 (appendix B.3)."""

    name = "gta_cityscapes"
    dims = 2
    in_channels = 3
    num_classes = ambiguity.NUM_CLASSES  # 24
    ignore_index = IGNORE_INDEX
    background = None  # class 0 is road: Dice and GED average over every class

    def __init__(
        self,
        root: Annotated[str, InputPath("fingerprint")],
        seed: int = 0,
        references: int = 5,
        max_per_split: int | None = None,
        shrink: int = 1,
        fingerprint: str | None = None,
    ):
        """
        Args:
            root: the folder written by ``values-seg data gta-cityscapes prepare``.
            seed: seeds each case's reference maps (with its id) and the ``max_per_split`` subset.
            references: reference maps per case (the paper: 5).
            max_per_split: at most this many cases per split and source (train, val: GTA5; test
                and pool: GTA5 and Cityscapes each), a seeded random subset; for quick runs.
            shrink: divide height and width by this factor (images bilinear, labels nearest),
                for quick CPU runs; 1 = the paper's 256 x 478.
            fingerprint: the state of the folder's manifest and splits (which record every frame's
                sha256) that cached results are keyed by; ``None``: the current one; given: a
                folder prepared again since is refused.
        """
        if references < 1:
            raise ValueError(f"dataset 'gta_cityscapes': references must be >= 1, got {references}")
        if shrink < 1:
            raise ValueError(f"dataset 'gta_cityscapes': shrink must be >= 1, got {shrink}")
        if max_per_split is not None and max_per_split < 1:
            raise ValueError(f"dataset 'gta_cityscapes': max_per_split must be >= 1, got {max_per_split}")
        self.folder = PreparedFolder(root)
        self._fingerprint = files_fingerprint(self.folder.root / mf.MANIFEST, self.folder.root / mf.SPLITS)
        check_fingerprint(f"dataset 'gta_cityscapes' ({self.folder.root})", fingerprint, self._fingerprint)
        self.seed = int(seed)
        self.references = int(references)
        self.shrink = int(shrink)
        self.class_names = ambiguity.class_names()
        rng = np.random.default_rng([self.seed, 7])
        self._splits: dict[str, list[str]] = {}
        for split, parts in DATASET_SPLITS.items():
            ids = []
            for part in parts:
                part_ids = self.folder.parts[part]
                if max_per_split is not None and len(part_ids) > max_per_split:
                    part_ids = sorted(rng.choice(part_ids, size=max_per_split, replace=False).tolist())
                ids += part_ids
            self._splits[split] = ids
        self._split_of = {c: s for s, ids in self._splits.items() for c in ids}

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self._splits.items())
        return f"GTACityscapesDataset(root={str(self.folder.root)!r}, seed={self.seed}, shrink={self.shrink}; {counts})"

    def fingerprint(self) -> str:
        return self._fingerprint

    def splits(self) -> list[str]:
        return list(self._splits)

    def case_ids(self, split: str) -> list[str]:
        self.check_split(split)
        return list(self._splits[split])

    def _frame(self, case_id: str) -> tuple[np.ndarray, np.ndarray, dict]:
        frame = self.folder.read(case_id)
        image, labels = frame.image, frame.train_ids
        if self.shrink > 1:
            h, w = labels.shape
            size = (max(1, w // self.shrink), max(1, h // self.shrink))
            image = np.asarray(Image.fromarray(image).resize(size, Image.BILINEAR))
            labels = np.asarray(Image.fromarray(labels).resize(size, Image.NEAREST))
        return image, labels, frame.entry

    def load(self, case_id: str) -> Case:
        if case_id not in self._split_of:
            raise KeyError(f"{self!r} has no case {case_id!r}")
        image, labels, entry = self._frame(case_id)
        x = ((image.astype(np.float32) / 255.0 - MEAN) / STD).transpose(2, 0, 1)
        raters = ambiguity.reference_samples(labels, ambiguity.case_rng(self.seed, case_id), self.references)
        is_gta5 = entry["source"] == GTA5
        meta = {
            "ood": not is_gta5,
            "shift": "none" if is_gta5 else "cityscapes",
            "source": entry["source"],
            "split": self._split_of[case_id],
            "source_split": entry["source_split"] or "none",
            "city": entry["city"] or "none",
        }
        variance = ambiguity.reference_variance(labels)
        return Case(case_id, np.ascontiguousarray(x), raters, meta, reference_variance=variance)

    def training_label(self, raters: np.ndarray, u: float) -> np.ndarray:
        """A fresh draw of the five switches (from ``u``, :func:`ambiguity.switches_from_uniform`)
        applied to the unswitched labels (the first reference with its switches undone)."""
        return ambiguity.switch(ambiguity.unswitch(raters[0]), ambiguity.switches_from_uniform(u))


@hookimpl
def values_seg_datasets():
    return [GTACityscapesDataset]


@hookimpl
def values_seg_cli(data_commands):
    """``values-seg data gta-cityscapes prepare``."""
    from values_seg_plugins.datasets._gta_cityscapes.cli import add_parser

    add_parser(data_commands)
