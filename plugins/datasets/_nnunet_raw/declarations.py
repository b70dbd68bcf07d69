"""The optional cases CSV: which cases are test (i.i.d. or OoD) or pool cases, declared by the user
(its columns: docs/design-rationale.md, "A data set in nnU-Net's raw layout").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError

SPLITS = ("train", "val", "test", "pool")
#: per-case metadata the dataset sets itself; an extra CSV column must not replace it
RESERVED = ("source", "nnunet_id", "n_raters", "spacing", "origin", "direction")
_TRUE, _FALSE = ("true", "yes", "1", "y", "t"), ("false", "no", "0", "n", "f", "")


@dataclass(frozen=True)
class Declaration:
    split: str
    ood: bool
    shift: str
    extra: dict = field(default_factory=dict)


def read_cases_csv(path: str | Path, known: set[str], skipped: set[str] = frozenset()) -> dict[str, Declaration]:
    """case id -> :class:`Declaration`; a :class:`LayoutError` names the file, line and problem.
    Rows of ``skipped`` cases (reported by the layout check already) are left out."""
    import pandas as pd

    path = Path(path).expanduser()
    if not path.is_file():
        raise LayoutError(f"cases CSV {str(path)!r} does not exist")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise LayoutError(f"{path}: not a readable CSV ({e})") from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in ("case_id", "split") if c not in table.columns]
    if missing:
        raise LayoutError(f"{path}: missing column(s) {', '.join(missing)}; columns are case_id, split[, ood, shift]")
    out: dict[str, Declaration] = {}
    extra_columns = [c for c in table.columns if c not in ("case_id", "split", "ood", "shift")]
    clash = [c for c in extra_columns if c in RESERVED]
    if clash:
        raise LayoutError(f"{path}: column(s) {', '.join(clash)} would replace metadata the data set sets itself "
                          f"({', '.join(RESERVED)}); rename them")
    for index, row in table.iterrows():
        where = f"{path}, line {index + 2}"
        case_id = row["case_id"].strip()
        if case_id in skipped:
            continue
        if case_id not in known:
            raise LayoutError(f"{where}: unknown case {case_id!r} (the data set has {len(known)} cases, e.g. "
                              f"{', '.join(sorted(known)[:3])})")
        if case_id in out:
            raise LayoutError(f"{where}: case {case_id!r} is listed twice")
        split = row["split"].strip().lower()
        if split not in SPLITS:
            raise LayoutError(f"{where}: split {row['split']!r} is not one of {', '.join(SPLITS)}")
        flag = row.get("ood", "").strip().lower()
        if flag not in _TRUE + _FALSE:
            raise LayoutError(f"{where}: ood {row['ood']!r} is not true/false")
        ood = flag in _TRUE
        if ood and split in ("train", "val"):
            raise LayoutError(f"{where}: an OoD case cannot be a {split} case (declare it test or pool)")
        shift = row.get("shift", "").strip() or ("ood" if ood else "none")
        if not ood and shift != "none":
            raise LayoutError(f"{where}: shift {shift!r} given for an i.i.d. case; set ood to true")
        extra = {c: _scalar(row[c]) for c in extra_columns}
        out[case_id] = Declaration(split, ood, shift, extra)
    return out


def _scalar(text: str):
    """A CSV cell as int, float or str (for per-case metadata)."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
