"""The ``lidc`` dataset: prepared LIDC-IDRI nodule crops with four raters and a metadata shift
(paper appendix B.2; prepare with ``values-seg data lidc prepare``).

Its splits and raters: docs/design-rationale.md, "LIDC-IDRI".
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np

from values_seg import hookimpl
from values_seg.components.dataset import Case, Dataset, check_fingerprint, files_fingerprint
from values_seg.params import InputPath


class LidcDataset(Dataset):
    """LIDC-IDRI nodule crops (64^3 at 1 mm, four raters) with a texture or malignancy shift (appendix B.2)."""

    name = "lidc"
    dims = 3
    in_channels = 1
    num_classes = 2
    ignore_index = None
    class_names = ("background", "nodule")

    def __init__(
        self,
        root: Annotated[str | None, InputPath("fingerprint")] = None,
        shift: str = "texture",
        seed: int = 123,
        fold: int = 0,
        iid_ratings: list[int] | None = None,
        size: int = 64,
        max_cases: int | None = None,
        allow_missing: bool = False,
        fingerprint: str | None = None,
    ):
        """
        Args:
            root: the prepared folder (``values-seg data lidc prepare --out ROOT``).
            shift: the characteristic whose majority vote splits i.i.d. from OoD: ``texture``
                (i.i.d. ratings 3-5), ``malignancy`` (1-3) or any other (see ``iid_ratings``).
            seed: the split seed (the paper: 123); its split file must exist under ROOT/splits/.
            fold: which of the five train/val folds (the paper: 0).
            iid_ratings: the ratings counted as i.i.d., for characteristics other than the paper's.
            size: centre crop of this side (<= 64) for quick runs; 64 is the paper's crop.
            max_cases: keep at most this many cases of each set (train, val, i.i.d./OoD test,
                i.i.d./OoD pool), for quick runs; None keeps all.
            allow_missing: skip split cases that were not prepared (with a warning) instead of failing.
            fingerprint: the state of ``manifest.csv`` and the split file (which record every crop's
                sha256) that cached results are keyed by; ``None``: the current one; given: a
                folder prepared again since is refused.
        """
        from values_seg_plugins.datasets._lidc.prepare import MANIFEST, read_manifest
        from values_seg_plugins.datasets._lidc.splits import SETS, Shift, read_splits, splits_path

        where = "dataset 'lidc'"
        if not root:
            raise ValueError(f"{where}: set the prepared folder, e.g. values-seg run experiments/lidc_texture.yaml "
                             "datasets.0.params.root=/path/to/prepared")
        if not 8 <= int(size) <= 64:
            raise ValueError(f"{where}: size must lie in [8, 64], got {size}")
        try:
            self.shift = Shift.named(shift, iid_ratings)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        self.root, self.seed, self.fold, self.size = Path(root), int(seed), int(fold), int(size)
        rows = {r["case_id"]: r for r in read_manifest(self.root)}
        splits = read_splits(splits_path(self.root, self.shift, self.seed))
        self._fingerprint = files_fingerprint(self.root / MANIFEST, splits_path(self.root, self.shift, self.seed))
        check_fingerprint(f"{where} ({self.root})", fingerprint, self._fingerprint)
        if not 0 <= self.fold < len(splits.folds):
            raise ValueError(f"{where}: fold {fold} out of range 0..{len(splits.folds) - 1}")
        self._rows = rows
        self._set_of: dict[str, str] = {}
        plan: dict[str, list[str]] = {"train": [], "val": [], "test": [], "pool": []}
        missing = []
        for set_name in SETS:
            ids = splits.set_of(set_name, self.fold)
            present = [c for c in ids if c in rows]
            missing += [c for c in ids if c not in rows]
            if max_cases is not None:
                present = present[:int(max_cases)]
            split = set_name if set_name in ("train", "val") else set_name.split("_")[1]
            plan[split] += present
            self._set_of.update({c: set_name for c in present})
        if missing:
            listed = ", ".join(f"{c} ({splits.patients.get(c, '?')})" for c in missing[:5])
            message = (f"{where}: {len(missing)} case(s) of the split file are not in {self.root / 'manifest.csv'}: "
                       f"{listed}{' ...' if len(missing) > 5 else ''}; rerun 'values-seg data lidc prepare'")
            if not allow_missing:
                raise ValueError(message + " or set allow_missing=true")
            import warnings

            warnings.warn(message + "; skipped (allow_missing)")
        self._plan = plan

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self._plan.items())
        return f"LidcDataset(root={str(self.root)!r}, shift={self.shift.label!r}, seed={self.seed}, fold={self.fold}; {counts})"

    def fingerprint(self) -> str:
        return self._fingerprint

    def splits(self) -> list[str]:
        return list(self._plan)

    def case_ids(self, split: str) -> list[str]:
        self.check_split(split)
        return list(self._plan[split])

    def _read(self, row: dict, name: str) -> np.ndarray:
        import SimpleITK as sitk

        from values_seg_plugins.datasets._lidc.prepare import verify_entry

        entry = {"path": row[f"{name}_path"], "bytes": int(row[f"{name}_bytes"]), "sha256": row[f"{name}_sha256"]}
        problem = verify_entry(entry, self.root)
        if problem:
            raise ValueError(f"dataset 'lidc' case {row['case_id']} (patient {row['patient_id']}): {problem}; "
                             "rerun 'values-seg data lidc prepare' to redo it")
        array = sitk.GetArrayFromImage(sitk.ReadImage(str(self.root / entry["path"])))
        lo = (array.shape[0] - self.size) // 2
        return array[lo:lo + self.size, lo:lo + self.size, lo:lo + self.size]

    def load(self, case_id: str) -> Case:
        from values_seg_plugins.datasets._lidc.selection import RATERS

        try:
            row = self._rows[case_id]
        except KeyError:
            raise KeyError(f"{self!r} has no case {case_id!r}") from None
        set_name = self._set_of.get(case_id, "")
        image = self._read(row, "image").astype(np.float32)[None]
        raters = np.stack([self._read(row, f"rater{r}") for r in range(RATERS)]).astype(np.uint8)
        ood = set_name.startswith("ood")
        c = self.shift.characteristic
        meta = {"ood": ood, "shift": self.shift.label if ood else "none", "set": set_name,
                "patient_id": row["patient_id"], "scan_id": int(row["scan_id"]),
                "nodule_index": int(row["nodule_index"]), c: [int(row[f"{c}_r{r}"]) for r in range(RATERS)]}
        return Case(case_id, image, raters, meta)


@hookimpl
def values_seg_datasets():
    return [LidcDataset]


@hookimpl
def values_seg_cli(data_commands):
    """``values-seg data lidc prepare|splits``."""
    from values_seg_plugins.datasets._lidc.cli import add_parser

    add_parser(data_commands)
