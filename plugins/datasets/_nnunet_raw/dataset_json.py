"""``dataset.json`` of an nnU-Net v2 raw data set: channels, labels, file ending, validated (the
conventions followed: docs/design-rationale.md, "A data set in nnU-Net's raw layout").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: File endings read through SimpleITK (nnU-Net's ``SimpleITKIO`` list, plus plain ``.nii``).
SUPPORTED_ENDINGS = (".nii.gz", ".nii", ".nrrd", ".mha", ".gipl")
REQUIRED_KEYS = ("labels", "channel_names", "numTraining", "file_ending")


class LayoutError(ValueError):
    """A data set folder that does not follow nnU-Net's raw layout; the message names the file."""


@dataclass(frozen=True)
class DatasetInfo:
    """What values-seg needs from a ``dataset.json``."""

    path: Path
    name: str
    channel_names: tuple[str, ...]
    class_names: tuple[str, ...]  # index = label value, 0 = background
    ignore_label: int | None
    file_ending: str
    num_training: int
    has_regions: bool

    @property
    def in_channels(self) -> int:
        return len(self.channel_names)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def max_label(self) -> int:
        """The largest value a label file may hold (the ignore label where there is one)."""
        return self.num_classes if self.ignore_label is not None else self.num_classes - 1


def _int_value(path: Path, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise LayoutError(f"{path}: label {name!r} must be an integer or a list of integers, got {value!r}")
    return int(value)


def parse_labels(path: Path, labels: dict, regions_class_order) -> tuple[tuple[str, ...], int | None, bool]:
    """``(class names by value, ignore label, region-based?)`` from ``labels`` as nnU-Net reads them."""
    if not isinstance(labels, dict) or not labels:
        raise LayoutError(f"{path}: 'labels' must be a non-empty mapping of name -> value")
    if "background" not in labels:
        raise LayoutError(f"{path}: 'labels' must declare 'background': 0 (found {', '.join(map(repr, labels))})")
    if isinstance(labels["background"], (list, tuple)) or _int_value(path, "background", labels["background"]) != 0:
        raise LayoutError(f"{path}: the 'background' label must be 0, got {labels['background']!r}")
    ignore = None
    if "ignore" in labels:
        if isinstance(labels["ignore"], (list, tuple)):
            raise LayoutError(f"{path}: the 'ignore' label must be one integer, not a region: {labels['ignore']!r}")
        ignore = _int_value(path, "ignore", labels["ignore"])
    regions = {k: v for k, v in labels.items() if k != "ignore" and isinstance(v, (list, tuple)) and len(v) > 1}
    names: dict[int, str] = {}
    values: set[int] = set()
    for name, value in labels.items():
        if name == "ignore":
            continue
        members = [_int_value(path, name, v) for v in value] if isinstance(value, (list, tuple)) else \
            [_int_value(path, name, value)]
        values.update(members)
        if len(members) == 1:
            names.setdefault(members[0], str(name))
    if regions:
        order = regions_class_order
        region_names = [k for k, v in labels.items() if k != "ignore" and not _only_background(v)]
        if not isinstance(order, (list, tuple)) or len(order) != len(region_names):
            raise LayoutError(f"{path}: region-based labels need 'regions_class_order' with one value per region "
                              f"({len(region_names)}: {', '.join(region_names)}), got {order!r}")
        for name, value in zip(region_names, order):  # value v is painted for region `name` (nnU-Net's export)
            names[_int_value(path, "regions_class_order", value)] = str(name)
    expected = list(range(len(values)))
    if sorted(values) != expected:
        raise LayoutError(f"{path}: label values must be consecutive from 0 (nnU-Net requires it), got {sorted(values)}")
    if ignore is not None and ignore != len(values):
        raise LayoutError(f"{path}: the 'ignore' label must be the highest value, {len(values)}, got {ignore}")
    class_names = tuple(names.get(v, f"label_{v}") for v in expected)
    if len(class_names) < 2:
        raise LayoutError(f"{path}: 'labels' declares only background; at least one foreground label is needed")
    return class_names, ignore, bool(regions)


def _only_background(value) -> bool:
    members = value if isinstance(value, (list, tuple)) else [value]
    return all(int(v) == 0 for v in members)


def read_dataset_json(folder: str | Path) -> DatasetInfo:
    """Parse and check ``folder/dataset.json``; raise :class:`LayoutError` naming the file."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise LayoutError(f"data set folder {str(folder)!r} does not exist")
    path = folder / "dataset.json"
    if not path.is_file():
        found = ", ".join(sorted(p.name for p in folder.iterdir())) or "empty"
        raise LayoutError(f"{path} is missing: an nnU-Net raw data set folder holds dataset.json, imagesTr/ and "
                          f"labelsTr/ (found: {found})")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LayoutError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(data, dict):
        raise LayoutError(f"{path}: the top level must be a JSON object")
    if "channel_names" not in data and "modality" in data:
        data = {**data, "channel_names": data["modality"]}
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise LayoutError(f"{path}: missing required key(s) {', '.join(missing)} (nnU-Net v2 needs "
                          f"{', '.join(REQUIRED_KEYS)})")
    if "dataset" in data:
        raise LayoutError(f"{path}: explicit file lists ('dataset' key) are not supported; use imagesTr/ and labelsTr/")
    channels = data["channel_names"]
    if not isinstance(channels, dict) or not channels:
        raise LayoutError(f"{path}: 'channel_names' must be a non-empty mapping like {{\"0\": \"CT\"}}")
    try:
        keys = sorted(int(k) for k in channels)
    except (TypeError, ValueError):
        raise LayoutError(f"{path}: 'channel_names' keys must be channel numbers \"0\", \"1\", ...") from None
    if keys != list(range(len(keys))):
        raise LayoutError(f"{path}: 'channel_names' keys must be consecutive from 0, got {keys}")
    ending = data["file_ending"]
    if not isinstance(ending, str) or ending.lower() not in SUPPORTED_ENDINGS:
        raise LayoutError(f"{path}: file_ending {ending!r} is not supported; values-seg reads "
                          f"{', '.join(SUPPORTED_ENDINGS)} (through SimpleITK)")
    num_training = data["numTraining"]
    if isinstance(num_training, bool) or not isinstance(num_training, int) or num_training < 0:
        raise LayoutError(f"{path}: numTraining must be a non-negative integer, got {num_training!r}")
    class_names, ignore, regions = parse_labels(path, data["labels"], data.get("regions_class_order"))
    return DatasetInfo(
        path=path,
        name=str(data.get("name") or folder.name),
        channel_names=tuple(str(channels[str(k)] if str(k) in channels else channels[k]) for k in keys),
        class_names=class_names,
        ignore_label=ignore,
        file_ending=ending,
        num_training=num_training,
        has_regions=regions,
    )
