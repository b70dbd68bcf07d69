"""The ``nnunet_raw`` dataset: a user's data set in nnU-Net v2's raw layout, read where it lies,
each case keeping its geometry (nothing is resampled).

Files, raters, splits and the cases CSV: :mod:`values_seg_plugins.datasets._nnunet_raw` and
docs/design-rationale.md, "A data set in nnU-Net's raw layout".
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Literal

from values_seg import hookimpl
from values_seg.components.dataset import Case, Dataset, check_fingerprint
from values_seg.params import InputPath
from values_seg_plugins.datasets._nnunet_raw import declarations, layout, plan, reading, splits

log = logging.getLogger("values_seg.nnunet_raw")
_WARNED: set[str] = set()


class NnUNetRawDataset(Dataset):
    """A data set in nnU-Net v2's raw layout (dataset.json, imagesTr/labelsTr, raters, OoD folder, cases CSV)."""

    name = "nnunet_raw"

    def __init__(
        self,
        folder: Annotated[str, InputPath("fingerprint")],
        ood_folder: Annotated[str | None, InputPath("fingerprint")] = None,
        cases_csv: Annotated[str | None, InputPath("fingerprint")] = None,
        preprocessed_folder: Annotated[str | None, InputPath("fingerprint")] = None,
        fold: int = 0,
        val_source: Literal["train", "test"] = "train",
        val_fraction: float = 0.2,
        seed: int = 0,
        fingerprint: str | None = None,
        fingerprint_mode: Literal["stat", "content"] = "stat",
    ):
        """
        Args:
            folder: the data set folder (``nnUNet_raw/DatasetXXX_Name``).
            ood_folder: a second raw data set whose labelled cases are the OoD test cases.
            cases_csv: CSV of ``case_id, split[, ood, shift]`` declaring test (i.i.d./OoD) and pool cases.
            preprocessed_folder: ``nnUNet_preprocessed/DatasetXXX_Name`` (or its ``splits_final.json``):
                train/val from fold ``fold`` of nnU-Net's splits; omitted: a seeded split.
            fold: the fold of ``splits_final.json``.
            val_source: ``"train"`` (validation cases from the training cases) or ``"test"`` (from the
                i.i.d. test cases; for an nnU-Net fold ensemble that has seen every training case).
            val_fraction: share of validation cases in a seeded split.
            seed: seed of the seeded splits.
            fingerprint: the state of the data's files that cached results are keyed by. ``None``
                (default): the run takes the current one, so changed files are recomputed; given
                (e.g. by ``validate-nnunet``): files that changed since are refused.
            fingerprint_mode: ``stat`` (default: relative names, sizes and modification times of
                every file; cheap) or ``content`` (sha256 of every byte: reads the whole data set,
                and a copy or a touched but unchanged file keeps the fingerprint).
        """
        where = f"dataset 'nnunet_raw' ({folder})"
        if not 0 < float(val_fraction) < 1:
            raise ValueError(f"{where}: val_fraction must lie in (0, 1), got {val_fraction}")
        if int(fold) < 0:
            raise ValueError(f"{where}: fold must be >= 0, got {fold}")
        if fingerprint_mode not in layout.FINGERPRINT_MODES:
            raise ValueError(f"{where}: fingerprint_mode must be one of {', '.join(layout.FINGERPRINT_MODES)}, got "
                             f"{fingerprint_mode!r}")
        self.folder = str(Path(folder).expanduser().resolve())
        self.ood_folder = None if ood_folder is None else str(Path(ood_folder).expanduser().resolve())
        self.cases_csv = None if cases_csv is None else str(Path(cases_csv).expanduser().resolve())
        self.preprocessed_folder = preprocessed_folder
        self.fold, self.val_source, self.val_fraction, self.seed = int(fold), val_source, float(val_fraction), int(seed)

        self.raw = layout.scan_folder(self.folder)
        self.ood_raw = None if self.ood_folder is None else layout.scan_folder(self.ood_folder, training=False)
        info = self.raw.info
        self.dims = self.raw.dims
        self.in_channels = info.in_channels
        self.num_classes = info.num_classes
        self.ignore_index = info.ignore_label
        self.class_names = info.class_names
        self.channel_names = info.channel_names

        extra_files = []
        known = set(self.raw.cases) | ({plan.OOD_PREFIX + c for c in self.ood_raw.cases} if self.ood_raw else set())
        declared = None
        if self.cases_csv is not None:
            skipped = {k.split("/", 1)[1] for k in self.raw.skipped} | \
                {plan.OOD_PREFIX + k.split("/", 1)[1] for k in (self.ood_raw.skipped if self.ood_raw else {})}
            declared = declarations.read_cases_csv(self.cases_csv, known, skipped)
            extra_files.append(Path(self.cases_csv))
        fold_lists = None
        if preprocessed_folder is not None:
            path = splits.splits_file(preprocessed_folder)
            fold_lists = (*splits.read_fold(path, self.fold), str(path))
            extra_files.append(path)
        self.plan = plan.plan_cases(self.raw, self.ood_raw, declared, fold_lists, val_source, self.val_fraction,
                                    self.seed)
        self.skipped = dict(self.raw.skipped)
        if self.ood_raw is not None:
            self.skipped.update({f"ood/{k}": v for k, v in self.ood_raw.skipped.items()})
        self.fingerprint_mode = fingerprint_mode
        self.current_fingerprint = layout.data_fingerprint(self.folder, self.ood_folder, extra_files, fingerprint_mode)
        check_fingerprint(where, fingerprint, self.current_fingerprint,
                          f" (fingerprint_mode: {fingerprint_mode}; or rerun values-seg validate-nnunet)")
        self._warn_once()

    def _warn_once(self) -> None:
        key = f"{self.folder}|{self.current_fingerprint}"
        if key in _WARNED:
            return
        _WARNED.add(key)
        for case, why in self.skipped.items():
            log.warning("nnunet_raw %s: case %s skipped: %s", self.folder, case, why)
        for note in self.plan.notes:
            log.warning("nnunet_raw %s: %s", self.folder, note)
        log.info("nnunet_raw %s: data fingerprint %s (%s); cached results are keyed by it", self.folder,
                 self.current_fingerprint, self.fingerprint_mode)

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self.plan.splits.items())
        return f"NnUNetRawDataset({self.folder!r}, {self.dims}D, {self.in_channels} channel(s); {counts})"

    # -- the dataset contract ------------------------------------------------------------
    def fingerprint(self) -> str:
        return self.current_fingerprint

    def check_files(self, splits=None, progress: bool = True) -> int:
        """Read every image and label of the cases of ``splits`` (``None``: all): one error listing
        each file with NaN or infinite image values or labels ``dataset.json`` does not declare."""
        chosen = self.splits() if splits is None else [s for s in splits if s in self.plan.splits]
        return reading.check_files([self.entry(c) for s in chosen for c in self.case_ids(s)], progress)

    def splits(self) -> list[str]:
        return list(self.plan.splits)

    def case_ids(self, split: str) -> list[str]:
        self.check_split(split)
        return list(self.plan.splits[split])

    def entry(self, case_id: str) -> plan.CaseEntry:
        try:
            return self.plan.entries[case_id]
        except KeyError:
            raise KeyError(f"{self!r} has no case {case_id!r}") from None

    def meta(self, case_id: str) -> dict:
        """The case's metadata (geometry included) without reading its pixels."""
        e = self.entry(case_id)
        return {"split": e.split, "ood": e.ood, "shift": e.shift, "source": e.source, "nnunet_id": e.raw.ident,
                "n_raters": len(e.raw.raters), **e.raw.geometry.to_meta(), **dict(e.extra)}

    def files(self, case_id: str) -> dict[str, list[str]]:
        """The case's image (one per channel) and rater label files."""
        e = self.entry(case_id)
        return {"images": [str(p) for p in e.raw.images], "raters": [str(p) for p in e.raw.raters]}

    def load(self, case_id: str) -> Case:
        e = self.entry(case_id)
        image = reading.read_image(e.raw.images)
        raters = reading.read_raters(e.raw.raters, e.folder.info)
        return Case(case_id, image, raters, self.meta(case_id))


@hookimpl
def values_seg_datasets():
    return [NnUNetRawDataset]


@hookimpl
def values_seg_cli(commands):
    """``values-seg validate-nnunet``: a trained nnU-Net's uncertainty on a data set in the raw layout."""
    from values_seg_plugins.datasets._nnunet_raw.validate import add_parser

    add_parser(commands)
