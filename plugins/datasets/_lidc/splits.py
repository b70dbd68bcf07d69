"""Metadata shifts and the paper's patient-level splits (appendix B.2.2-B.2.3, Figure 6, Table 3),
re-implemented from the paper's code (docs/design-rationale.md, "LIDC-IDRI", metadata shifts and
splits).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from values_seg.storage import atomic
from values_seg_plugins.datasets._lidc.selection import CHARACTERISTICS, Nodule

#: the paper's split seed (ValUES ``splits_first_cycle.py``)
PAPER_SEED = 123
N_FOLDS = 5
#: nodules the paper kept (appendix B.2.1)
PAPER_NODULES = 901
#: the i.i.d. ratings of each characteristic, as in the paper's ``id_ood.py`` (Table 2); subtlety
#: and margin have none (the paper left them out) and need ``iid_ratings`` given explicitly
DEFAULT_IID_RATINGS = {
    "internalStructure": (1,),
    "calcification": (6,),
    "sphericity": (3, 4, 5),
    "lobulation": (1, 2),
    "spiculation": (1, 2),
    "texture": (3, 4, 5),
    "malignancy": (1, 2, 3),
}
#: split sizes of the paper's Table 3 (fold 0): train, val, test i.i.d., test OoD, pool i.i.d., pool OoD
TABLE3 = {"texture": (513, 129, 167, 20, 42, 20), "malignancy": (200, 51, 105, 93, 184, 92)}
SETS = ("train", "val", "iid_test", "ood_test", "iid_pool", "ood_pool")


@dataclass(frozen=True)
class Shift:
    """A metadata shift: which characteristic, which of its ratings count as i.i.d."""

    characteristic: str
    iid_ratings: tuple[int, ...]

    @classmethod
    def named(cls, characteristic: str, iid_ratings: Sequence[int] | None = None) -> "Shift":
        """``texture``, ``malignancy`` or any other characteristic (its i.i.d. ratings from the
        paper's table, or ``iid_ratings``)."""
        lower = {c.lower(): c for c in CHARACTERISTICS}
        name = lower.get(str(characteristic).replace("_", "").lower())
        if name is None:
            raise ValueError(f"unknown LIDC characteristic {characteristic!r}; valid: {', '.join(CHARACTERISTICS)}")
        ratings = iid_ratings if iid_ratings is not None else DEFAULT_IID_RATINGS.get(name)
        if not ratings:
            raise ValueError(f"shift {name!r}: give its i.i.d. ratings (e.g. 1,2); the paper defines none")
        return cls(name, tuple(sorted({int(r) for r in ratings})))

    @property
    def label(self) -> str:
        default = DEFAULT_IID_RATINGS.get(self.characteristic)
        if default is not None and tuple(default) == self.iid_ratings:
            return self.characteristic
        return f"{self.characteristic}-iid{''.join(str(r) for r in self.iid_ratings)}"

    def vote(self, ratings: Sequence[int]) -> bool | None:
        """True: i.i.d. by majority, False: OoD by majority, None: a tie."""
        iid = sum(int(r) in self.iid_ratings for r in ratings)
        ood = len(ratings) - iid
        return None if iid == ood else iid > ood


@dataclass
class Splits:
    """The split of one shift and seed: every set's case ids, and the k-fold train/val."""

    shift: Shift
    seed: int
    sets: dict[str, list[str]]  # iid_test, ood_test, iid_pool, ood_pool
    folds: list[dict[str, list[str]]]  # [{"train": [...], "val": [...]}, ...]
    ties: list[str]
    patients: dict[str, str]  # case id -> patient id of every split case
    inputs_digest: str = ""
    extra: dict = field(default_factory=dict)

    def set_of(self, name: str, fold: int = 0) -> list[str]:
        if name in ("train", "val"):
            return self.folds[fold][name]
        return self.sets[name]

    def sizes(self, fold: int = 0) -> tuple[int, ...]:
        return tuple(len(self.set_of(s, fold)) for s in SETS)

    def to_dict(self) -> dict:
        return {"shift": self.shift.characteristic, "label": self.shift.label,
                "iid_ratings": list(self.shift.iid_ratings), "seed": self.seed, "n_folds": len(self.folds),
                "inputs_digest": self.inputs_digest, "sizes_fold0": dict(zip(SETS, self.sizes(0))),
                "sets": self.sets, "folds": self.folds, "ties": self.ties, "patients": self.patients, **self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "Splits":
        return cls(Shift(d["shift"], tuple(d["iid_ratings"])), int(d["seed"]), d["sets"], d["folds"], d["ties"],
                   d["patients"], d.get("inputs_digest", ""))


def inputs_digest(nodules: Sequence[Nodule], shift: Shift, seed: int, n_folds: int) -> str:
    """sha256 of exactly what determines a split: the ordered nodules, their votes, shift, seed."""
    rows = [[n.case_id, n.patient_id, list(n.ratings[shift.characteristic])] for n in nodules]
    payload = {"rows": rows, "shift": shift.characteristic, "iid": list(shift.iid_ratings), "seed": seed,
               "n_folds": n_folds, "protocol": "values-paper-b2"}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _draw_patients(rng: random.Random, candidates: set[str], nodules_of, target: int, what: str) -> list[str]:
    """Move whole patients out of ``candidates``, drawn one at a time from the sorted ids, until
    their nodules number at least ``target``; returns the drawn patients in draw order."""
    patients: list[str] = []
    count = 0
    while count < target:
        if not candidates:
            raise ValueError(f"LIDC splits: not enough patients to fill the {what} ({count} of {target} nodules)")
        patient = rng.choice(sorted(candidates))
        candidates.remove(patient)
        patients.append(patient)
        count += len(nodules_of(patient))
    return patients


def make_splits(nodules: Sequence[Nodule], shift: Shift, seed: int = PAPER_SEED, n_folds: int = N_FOLDS) -> Splits:
    """The paper's patient-level split of ``nodules`` (in nodule-table order) for ``shift``."""
    from sklearn.model_selection import KFold

    votes = {n.case_id: shift.vote(n.ratings[shift.characteristic]) for n in nodules}
    iid = [n for n in nodules if votes[n.case_id] is True]
    ood = [n for n in nodules if votes[n.case_id] is False]
    ties = [n.case_id for n in nodules if votes[n.case_id] is None]

    def of(patient: str, group: list[Nodule]) -> list[str]:
        return [n.case_id for n in group if n.patient_id == patient]

    ood_patients = {n.patient_id for n in ood}
    iid_only_patients = {n.patient_id for n in iid} - ood_patients
    rng = random.Random(seed)

    ood_pool, iid_pool = [], []
    for patient in _draw_patients(rng, ood_patients, lambda p: of(p, ood), len(ood) // 2, "OoD pool"):
        ood_pool += of(patient, ood)
        iid_pool += of(patient, iid)
    ood_test = [n.case_id for n in ood if n.patient_id in ood_patients]
    iid_test = [n.case_id for n in iid if n.patient_id in ood_patients]
    candidates = [n.case_id for n in iid if n.patient_id in iid_only_patients]

    n_iid = len(candidates) + len(iid_test)
    added_test = [c for p in _draw_patients(rng, iid_only_patients, lambda p: of(p, iid),
                                            n_iid - int(0.8 * n_iid) - len(iid_test), "i.i.d. test set")
                  for c in of(p, iid)]
    added_pool = [c for p in _draw_patients(rng, iid_only_patients, lambda p: of(p, iid),
                                            2 * len(ood_pool) - len(iid_pool), "i.i.d. pool")
                  for c in of(p, iid)]
    moved = set(added_test) | set(added_pool)
    train_all = [c for c in candidates if c not in moved]
    if len(train_all) < n_folds:
        raise ValueError(f"LIDC splits: {len(train_all)} i.i.d. training nodules cannot form {n_folds} folds")
    folds = [{"train": [train_all[i] for i in tr], "val": [train_all[i] for i in va]}
             for tr, va in KFold(n_splits=n_folds, shuffle=True, random_state=seed).split(train_all)]
    sets = {"iid_test": iid_test + added_test, "ood_test": ood_test, "iid_pool": iid_pool + added_pool,
            "ood_pool": ood_pool}
    patients = {n.case_id: n.patient_id for n in nodules if votes[n.case_id] is not None}
    return Splits(shift, seed, sets, folds, ties, patients, inputs_digest(nodules, shift, seed, n_folds))


def splits_path(root: str | Path, shift: Shift, seed: int) -> Path:
    return Path(root) / "splits" / f"{shift.label}_seed{seed}.json"


def write_splits(path: str | Path, splits: Splits, force: bool = False) -> str:
    """Write ``splits`` once: an existing file made from the same inputs is kept ("unchanged");
    one made from other inputs is an error unless ``force`` (never regenerated silently)."""
    path = Path(path)
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: unreadable split file ({e}); remove it or pass --force") from None
        if old.get("inputs_digest") == splits.inputs_digest and old.get("sets") == splits.sets \
                and old.get("folds") == splits.folds:
            return "unchanged"
        if not force:
            raise ValueError(f"{path} exists and was made from other nodules or settings; it is not regenerated "
                             "silently: pass --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write(path, json.dumps(splits.to_dict(), indent=1))
    return "written"


def read_splits(path: str | Path) -> Splits:
    path = Path(path)
    try:
        return Splits.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise FileNotFoundError(f"no LIDC split file {path}; write it with 'values-seg data lidc splits "
                                f"--root {path.parent.parent}'") from None
    except (ValueError, KeyError) as e:
        raise ValueError(f"{path}: not a valid LIDC split file ({e})") from None


def table3_comparison(splits: Splits, fold: int = 0, with_paper: bool = True) -> str:
    """The split sizes, beside the paper's Table 3 where the shift is one of the paper's."""
    sizes = splits.sizes(fold)
    paper = TABLE3.get(splits.shift.label) if with_paper else None
    head = f"{'':<12}" + "".join(f"{s:>10}" for s in SETS)
    lines = [head, f"{splits.shift.label:<12}" + "".join(f"{v:>10}" for v in sizes)]
    if paper is not None:
        lines.append(f"{'  Table 3':<12}" + "".join(f"{v:>10}" for v in paper))
        lines.append("  matches Table 3" if tuple(sizes) == paper else "  DIFFERS from Table 3")
    return "\n".join(lines)
