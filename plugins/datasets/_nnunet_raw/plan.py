"""Which split each case of a raw data set (and of its OoD data set) belongs to, and where the
validation cases come from (docs/design-rationale.md, "A data set in nnU-Net's raw layout").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError
from values_seg_plugins.datasets._nnunet_raw.declarations import Declaration
from values_seg_plugins.datasets._nnunet_raw.layout import RawCase, RawFolder
from values_seg_plugins.datasets._nnunet_raw.splits import seeded_split

OOD_PREFIX = "ood_"


@dataclass(frozen=True)
class CaseEntry:
    case_id: str
    raw: RawCase
    folder: RawFolder
    split: str
    ood: bool
    shift: str
    source: str  # e.g. "imagesTr", "imagesTs", "ood/imagesTs"
    extra: tuple = ()  # (column, value) pairs from the cases CSV


@dataclass
class Plan:
    splits: dict[str, list[str]]
    entries: dict[str, CaseEntry]
    notes: list[str] = field(default_factory=list)


def _check_compatible(main: RawFolder, ood: RawFolder) -> None:
    a, b = main.info, ood.info
    if b.in_channels != a.in_channels:
        raise LayoutError(f"{b.path}: the OoD data set has {b.in_channels} channel(s), {a.path} has {a.in_channels}")
    if (b.class_names, b.ignore_label) != (a.class_names, a.ignore_label):
        raise LayoutError(f"{b.path}: the OoD data set's labels {list(b.class_names)} (ignore {b.ignore_label}) differ "
                          f"from {a.path}'s {list(a.class_names)} (ignore {a.ignore_label})")
    if ood.dims != main.dims:
        raise LayoutError(f"{ood.folder}: {ood.dims}D images, but {main.folder} holds {main.dims}D images")


def plan_cases(main: RawFolder, ood: RawFolder | None, declarations: dict[str, Declaration] | None,
               fold_lists: tuple[list[str], list[str], str] | None, val_source: str, val_fraction: float,
               seed: int) -> Plan:
    """Assign every case to a split. ``fold_lists``: (train, val, the splits file) of one fold."""
    entries: dict[str, CaseEntry] = {}
    for case in main.cases.values():
        split = "trainval" if case.part == "Tr" else "test"
        entries[case.ident] = CaseEntry(case.ident, case, main, split, False, "none", f"images{case.part}")
    if ood is not None:
        _check_compatible(main, ood)
        for case in ood.cases.values():
            case_id = OOD_PREFIX + case.ident
            if case_id in entries:
                raise LayoutError(f"{case.images[0]}: OoD case id {case_id!r} collides with a case of {main.folder}")
            entries[case_id] = CaseEntry(case_id, case, ood, "test", True, ood.info.name, f"ood/images{case.part}")
    for case_id, d in (declarations or {}).items():
        e = entries[case_id]
        entries[case_id] = CaseEntry(case_id, e.raw, e.folder, d.split, d.ood, d.shift, e.source,
                                     tuple(sorted(d.extra.items())))
    notes: list[str] = []
    trainval = sorted(c for c, e in entries.items() if e.split == "trainval")
    if val_source == "train":
        if fold_lists is not None:
            train, val = _from_fold(main, entries, trainval, fold_lists, notes)
        else:
            train, val = seeded_split(trainval, val_fraction, seed)
        for c in train:
            entries[c] = _moved(entries[c], "train")
        for c in val:
            entries[c] = _moved(entries[c], "val")
    elif val_source == "test":
        for c in trainval:
            entries[c] = _moved(entries[c], "train")
        iid_test = sorted(c for c, e in entries.items() if e.split == "test" and not e.ood)
        if len(iid_test) < 2:
            raise LayoutError(f"{main.folder}: val_source='test' needs at least 2 labelled i.i.d. test cases "
                              f"(imagesTs/ with labels, or split=test rows of the cases CSV), found {len(iid_test)}")
        _, val = seeded_split(iid_test, val_fraction, seed)
        for c in val:
            entries[c] = _moved(entries[c], "val")
    else:
        raise ValueError(f"val_source must be 'train' or 'test', got {val_source!r}")
    order = ("train", "val", "test", "pool")
    splits = {s: sorted(c for c, e in entries.items() if e.split == s) for s in order}
    if not splits["pool"]:
        del splits["pool"]
    return Plan(splits, entries, notes)


def _moved(entry: CaseEntry, split: str) -> CaseEntry:
    return CaseEntry(entry.case_id, entry.raw, entry.folder, split, entry.ood, entry.shift, entry.source, entry.extra)


def _from_fold(main: RawFolder, entries: dict[str, CaseEntry], trainval: list[str],
               fold_lists: tuple[list[str], list[str], str], notes: list[str]) -> tuple[list[str], list[str]]:
    train, val, source = fold_lists
    known = {c.ident for c in main.part("Tr")} | {k.split("/", 1)[1] for k in main.skipped if k.startswith("Tr/")}
    unknown = sorted(set(train + val) - known)
    if unknown:
        raise LayoutError(f"{source}: case(s) {', '.join(unknown[:5])} are not in {main.folder / 'imagesTr'}; "
                          "the preprocessed folder belongs to another data set or is stale")
    listed = set(train) | set(val)
    unlisted = [c for c in trainval if c not in listed]
    if unlisted:
        raise LayoutError(f"{source}: training case(s) {', '.join(unlisted[:5])} are in neither the train nor the val "
                          "list of this fold; the preprocessed folder is stale (rerun nnUNetv2_plan_and_preprocess)")
    declared = sorted(c for c in listed if c in entries and entries[c].split not in ("trainval",))
    if declared:
        notes.append(f"{len(declared)} case(s) of {source} are declared {', '.join(sorted({entries[c].split for c in declared}))} "
                     f"by the cases CSV and left out of train/val: {', '.join(declared[:5])}")
    return sorted(c for c in train if c in set(trainval)), sorted(c for c in val if c in set(trainval))
