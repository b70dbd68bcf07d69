"""Export a values-seg dataset to nnU-Net v2's raw format, so that nnU-Net can be trained on it.

The layout written and its conventions (geometry, label, ignore label, names):
docs/design-rationale.md, "nnU-Net", export.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from values_seg.storage import atomic
from values_seg.components.dataset import Case, Dataset

FILE_ENDING = ".nii.gz"
MAPPING_FILE = "values_seg_export.json"
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")


class ExportError(ValueError):
    """A problem with export options or with a case; the message says which and why."""


# -- label choice ------------------------------------------------------------------------
def parse_label_from(label_from: Any) -> int | str:
    """``"majority"`` or a rater index (from ``"rater<i>"``, ``i`` or ``"<i>"``)."""
    if isinstance(label_from, bool):
        raise ExportError(f"label_from must be 'majority', 'rater<i>' or a rater index, got {label_from!r}")
    if isinstance(label_from, (int, np.integer)):
        index = int(label_from)
    elif isinstance(label_from, str):
        text = label_from.strip().lower()
        if text in ("majority", "majority_vote", "vote"):
            return "majority"
        match = re.fullmatch(r"(?:rater)?_?(\d+)", text)
        if not match:
            raise ExportError(f"label_from must be 'majority', 'rater<i>' or a rater index, got {label_from!r}")
        index = int(match.group(1))
    else:
        raise ExportError(f"label_from must be 'majority', 'rater<i>' or a rater index, got {label_from!r}")
    if index < 0:
        raise ExportError(f"label_from: rater index must be >= 0, got {index}")
    return index


def majority_vote(raters: np.ndarray, num_classes: int, ignore_index: int | None = None) -> np.ndarray:
    """Per-pixel majority over raters ``[R, *spatial]``; ties -> smallest label; ``ignore_index``
    votes are not counted, and a pixel every rater ignores stays ``ignore_index``."""
    raters = np.asarray(raters)
    counts = np.stack([(raters == c).sum(axis=0) for c in range(num_classes)])
    vote = counts.argmax(axis=0).astype(raters.dtype)  # argmax returns the first (smallest) maximum
    if ignore_index is not None:
        vote[counts.sum(axis=0) == 0] = ignore_index
    return vote


def choose_label(case: Case, label_from: int | str, num_classes: int, ignore_index: int | None = None) -> np.ndarray:
    """The label map of ``case`` chosen by ``label_from`` (already parsed)."""
    raters = np.asarray(case.raters)
    if raters.ndim < 2 or raters.shape[0] == 0:
        raise ExportError(f"case {case.case_id!r}: has no rater masks to export as a label")
    if label_from == "majority":
        return majority_vote(raters, num_classes, ignore_index)
    assert isinstance(label_from, int)
    if label_from >= raters.shape[0]:
        raise ExportError(
            f"case {case.case_id!r}: label_from=rater{label_from} but the case has {raters.shape[0]} rater(s) "
            f"(indices 0..{raters.shape[0] - 1}); use 'majority' or a smaller index"
        )
    return raters[label_from]


# -- writing -----------------------------------------------------------------------------
def nnunet_identifier(case_id: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_\-]", "_", str(case_id))
    return ident or "case"


def write_nifti(array: np.ndarray, path: Path, spacing: float = 1.0) -> None:
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(np.ascontiguousarray(array))
    image.SetSpacing([float(spacing)] * image.GetDimension())
    sitk.WriteImage(image, str(path), useCompression=True)


def _label_dtype(max_label: int) -> type:
    return np.uint8 if max_label < 256 else np.uint16


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"<array {value.shape} {value.dtype}>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def labels_for(dataset: Dataset) -> dict[str, int]:
    """nnU-Net's ``labels`` entry: ``{"background": 0, <class name>: i, ..., ["ignore": num_classes]}``."""
    num_classes = int(dataset.num_classes)
    names = list(getattr(dataset, "class_names", ()) or ())
    labels: dict[str, int] = {"background": 0}
    for i in range(1, num_classes):
        name = str(names[i]) if i < len(names) and names[i] else f"class{i}"
        if name in labels or name == "ignore":
            name = f"{name}_{i}"
        labels[name] = i
    if dataset.ignore_index is not None:
        labels["ignore"] = num_classes
    return labels


def export_dataset(
    dataset: Dataset,
    out_dir: str | Path,
    dataset_id: int,
    name: str,
    label_from: int | str = "rater0",
    splits: Sequence[str] = ("train",),
    test_splits: Sequence[str] = ("test",),
    test_labels: bool = True,
    channel_names: Sequence[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``dataset`` as ``out_dir/Dataset{dataset_id:03d}_{name}`` in nnU-Net v2's raw format.

    ``splits`` go to ``imagesTr``/``labelsTr`` (nnU-Net makes its own cross-validation folds from
    them), ``test_splits`` to ``imagesTs`` (and ``labelsTs`` if ``test_labels``). ``label_from``
    picks the label: ``"rater0"`` (default), ``"rater<i>"``/``i``, or ``"majority"`` (see the module
    docstring). Returns the dataset folder. Point ``nnUNet_raw`` at ``out_dir`` and run
    ``nnUNetv2_plan_and_preprocess -d <dataset_id>`` then ``nnUNetv2_train <dataset_id> 2d <fold>``.
    """
    try:
        dataset_id = int(dataset_id)
    except (TypeError, ValueError):
        raise ExportError(f"dataset_id must be an integer in 1..999, got {dataset_id!r}") from None
    if not 1 <= dataset_id <= 999:
        raise ExportError(f"dataset_id must lie in 1..999 (nnU-Net uses three digits), got {dataset_id}")
    if not isinstance(name, str) or not _NAME_OK.match(name):
        raise ExportError(f"name must be letters, digits, '_' or '-' (no spaces), got {name!r}")
    label_choice = parse_label_from(label_from)
    splits, test_splits = list(_as_list(splits)), list(_as_list(test_splits))
    if not splits:
        raise ExportError("splits: at least one split must go to imagesTr")
    known = list(dataset.splits())
    for split in splits + test_splits:
        if split not in known:
            raise ExportError(f"unknown split {split!r} of {type(dataset).__name__}; available: {', '.join(known)}")
    overlap = set(splits) & set(test_splits)
    if overlap:
        raise ExportError(f"split(s) {sorted(overlap)} are listed both as training and as test splits")

    in_channels, num_classes = int(dataset.in_channels), int(dataset.num_classes)
    ignore = dataset.ignore_index
    if channel_names is None:
        channel_names = getattr(dataset, "channel_names", None) or ["zscore"] * in_channels
    channel_names = [str(c) for c in channel_names]
    if len(channel_names) != in_channels:
        raise ExportError(f"channel_names has {len(channel_names)} entries but the dataset has {in_channels} channel(s)")
    labels = labels_for(dataset)
    max_label = num_classes if ignore is not None else num_classes - 1
    dtype = _label_dtype(max_label)

    out = Path(out_dir).expanduser()
    folder = out / f"Dataset{dataset_id:03d}_{name}"
    if out.is_dir():
        clash = [p.name for p in out.glob(f"Dataset{dataset_id:03d}_*") if p.name != folder.name]
        if clash:
            raise ExportError(f"{str(out)!r} already holds {clash[0]!r} with dataset id {dataset_id}; nnU-Net ids must be unique")
    if folder.exists() and any(folder.iterdir()):
        if not overwrite:
            raise ExportError(f"{str(folder)!r} exists and is not empty; to replace it (its files are deleted), give "
                              f"--overwrite (values-seg data nnunet-export) or overwrite=True (export_dataset)")
        shutil.rmtree(folder)
    subdirs = ["imagesTr", "labelsTr"] + (["imagesTs"] + (["labelsTs"] if test_labels else []) if test_splits else [])
    for sub in subdirs:
        (folder / sub).mkdir(parents=True, exist_ok=True)

    cases: dict[str, dict] = {}
    counts = Counter()
    for split in splits + test_splits:
        training = split in splits
        images_dir = folder / ("imagesTr" if training else "imagesTs")
        labels_dir = folder / ("labelsTr" if training else "labelsTs")
        for case in dataset.cases(split):
            ident = nnunet_identifier(case.case_id)
            if ident in cases:
                other = cases[ident]
                raise ExportError(
                    f"case {case.case_id!r} ({split}) and case {other['case_id']!r} ({other['split']}) both map "
                    f"to the nnU-Net identifier {ident!r}"
                )
            case.validate(dataset.dims, in_channels, num_classes, ignore)
            image = np.asarray(case.image, dtype=np.float32)
            for c in range(in_channels):
                write_nifti(image[c], images_dir / f"{ident}_{c:04d}{FILE_ENDING}")
            if training or test_labels:
                label = choose_label(case, label_choice, num_classes, ignore)
                if ignore is not None:
                    label = np.where(label == ignore, num_classes, label)
                write_nifti(label.astype(dtype), labels_dir / f"{ident}{FILE_ENDING}")
            cases[ident] = {"case_id": case.case_id, "split": split, "meta": _json_safe(case.meta)}
            counts["train" if training else "test"] += 1
    if counts["train"] == 0:
        raise ExportError(f"no cases in the training split(s) {splits}; nnU-Net needs at least one")

    dataset_json = {
        "channel_names": {str(c): n for c, n in enumerate(channel_names)},
        "labels": labels,
        "numTraining": counts["train"],
        "file_ending": FILE_ENDING,
        "name": name,
        "description": f"exported by values-seg from {type(dataset).__name__}; label: "
        + ("majority vote over raters" if label_choice == "majority" else f"rater {label_choice}"),
        "overwrite_image_reader_writer": "SimpleITKIO",
    }
    original_names = list(getattr(dataset, "class_names", ()) or ())
    if original_names and original_names[0] != "background":
        dataset_json["values_seg_class_names"] = [str(n) for n in original_names]
    _write_json(folder / "dataset.json", dataset_json)
    _write_json(
        folder / MAPPING_FILE,
        {
            "dataset": type(dataset).__name__,
            "label_from": label_choice if label_choice == "majority" else f"rater{label_choice}",
            "splits": splits,
            "test_splits": test_splits,
            "spacing": 1.0,
            "ignore_index": ignore,
            "cases": cases,
        },
    )
    return folder


def _as_list(value: Iterable[str] | str | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.strip("[]()").split(",") if v.strip()]
    return [str(v) for v in value]


def _write_json(path: Path, data: dict) -> None:
    atomic.write(path, json.dumps(data, indent=2))


def export_command(
    dataset_name: str,
    dataset_params: dict | None,
    out: str | Path,
    dataset_id: int,
    name: str,
    label_from: int | str = "rater0",
    splits: Sequence[str] | str = ("train",),
    test_splits: Sequence[str] | str = ("test",),
    overwrite: bool = False,
) -> str:
    """CLI entry (``values-seg data nnunet-export``): create the registered dataset, export it, and
    return a one-paragraph summary."""
    from values_seg import registry

    dataset = registry.create("dataset", dataset_name, **dict(dataset_params or {}))
    folder = export_dataset(
        dataset, out, dataset_id, name, label_from=label_from, splits=_as_list(splits),
        test_splits=_as_list(test_splits), overwrite=overwrite,
    )
    info = json.loads((folder / "dataset.json").read_text())
    n_test = len(list((folder / "imagesTs").glob(f"*_0000{FILE_ENDING}"))) if (folder / "imagesTs").is_dir() else 0
    return (
        f"exported dataset {dataset_name!r} to {folder}: {info['numTraining']} training case(s) in imagesTr/labelsTr, "
        f"{n_test} test case(s) in imagesTs; {len(info['channel_names'])} channel(s), labels {info['labels']}; "
        f"label: {info['description'].split('label: ')[-1]}.\n"
        f"Next: export nnUNet_raw={folder.parent} and run "
        f"nnUNetv2_plan_and_preprocess -d {dataset_id} --verify_dataset_integrity, then nnUNetv2_train {dataset_id} "
        f"{'2d' if dataset.dims == 2 else '3d_fullres'} <fold>."
    )
