"""Metadata shifts and the paper's patient-level split protocol (appendix B.2.2-B.2.3) on small,
hand-made nodule tables; the exact Table 3 sizes on the real database are in test_selection."""

import json
import random

import pytest

from values_seg_plugins.datasets._lidc.selection import CHARACTERISTICS, Nodule
from values_seg_plugins.datasets._lidc.splits import (
    SETS,
    Shift,
    make_splits,
    read_splits,
    splits_path,
    table3_comparison,
    write_splits,
)


def nodule(patient: int, index: int, texture: tuple[int, ...], malignancy=(1, 1, 1, 1)) -> Nodule:
    ratings = {c: (3, 3, 3, 3) for c in CHARACTERISTICS}
    ratings["texture"], ratings["malignancy"] = tuple(texture), tuple(malignancy)
    return Nodule(f"LIDC-IDRI-{patient:04d}", patient, index, (4 * patient, 4 * patient + 1, 4 * patient + 2,
                                                                 4 * patient + 3), 4, ratings)


IID, OOD, TIE = (5, 5, 4, 1), (1, 2, 1, 3), (1, 2, 4, 5)


def table(n_iid_patients=40, n_ood_patients=10, seed=0) -> list[Nodule]:
    rng = random.Random(seed)
    rows = []
    for p in range(1, n_ood_patients + 1):  # OoD patients: 1-2 OoD nodules, maybe an i.i.d. one and a tie
        kinds = [OOD] * rng.randint(1, 2) + [IID] * rng.randint(0, 1) + [TIE] * (p % 4 == 0)
        rows += [nodule(p, i, k) for i, k in enumerate(kinds)]
    for p in range(n_ood_patients + 1, n_ood_patients + n_iid_patients + 1):
        rows += [nodule(p, i, IID) for i in range(rng.randint(1, 3))]
    return sorted(rows, key=lambda n: (n.scan_id, n.nodule_index))


def test_majority_vote_and_ties():
    tex = Shift.named("texture")
    assert tex.iid_ratings == (3, 4, 5)
    assert tex.vote((5, 5, 4, 1)) is True and tex.vote((1, 2, 1, 3)) is False and tex.vote((1, 2, 4, 5)) is None
    assert tex.vote((3, 3, 3, 3)) is True and tex.vote((2, 2, 2, 3)) is False
    mal = Shift.named("malignancy")
    assert mal.iid_ratings == (1, 2, 3) and mal.vote((4, 5, 3, 4)) is False and mal.vote((3, 3, 4, 4)) is None


def test_shift_names_and_configured_characteristics():
    assert Shift.named("internal_structure").characteristic == "internalStructure"
    assert Shift.named("spiculation").iid_ratings == (1, 2)
    custom = Shift.named("subtlety", [4, 5])
    assert custom.label == "subtlety-iid45" and custom.vote((5, 4, 4, 1)) is True
    assert Shift.named("texture", [3, 4, 5]).label == "texture"
    with pytest.raises(ValueError, match="give its i.i.d. ratings"):
        Shift.named("margin")
    with pytest.raises(ValueError, match="valid: subtlety, internalStructure"):
        Shift.named("colour")


def test_protocol_invariants():
    nodules = table()
    by_id = {n.case_id: n for n in nodules}
    shift = Shift.named("texture")
    s = make_splits(nodules, shift, seed=123)
    votes = {n.case_id: shift.vote(n.ratings["texture"]) for n in nodules}
    n_ood = sum(v is False for v in votes.values())
    # every voted nodule is in exactly one set (per fold), ties in none
    for fold in range(5):
        members = [c for name in SETS for c in s.set_of(name, fold)]
        assert sorted(members) == sorted(c for c, v in votes.items() if v is not None)
    assert sorted(s.ties) == sorted(c for c, v in votes.items() if v is None)
    # OoD sets hold OoD nodules only, the others i.i.d. only
    for name in SETS:
        assert all(votes[c] is (not name.startswith("ood")) for c in s.set_of(name))
    # whole patients: no patient in two of {train+val, test, pool}
    groups = {"trainval": s.set_of("train") + s.set_of("val"), "test": s.sets["iid_test"] + s.sets["ood_test"],
              "pool": s.sets["iid_pool"] + s.sets["ood_pool"]}
    patients = {g: {by_id[c].patient_id for c in ids} for g, ids in groups.items()}
    assert not patients["trainval"] & patients["test"] and not patients["trainval"] & patients["pool"]
    assert not patients["test"] & patients["pool"]
    # sizes: OoD pool >= half the OoD nodules, by whole patients (the last one drawn crossed the line)
    assert len(s.sets["ood_pool"]) >= n_ood // 2
    n_iid_test_basis = len(s.sets["iid_test"]) + len(s.set_of("train")) + len(s.set_of("val"))
    assert len(s.sets["iid_test"]) >= n_iid_test_basis - int(0.8 * n_iid_test_basis)
    assert len(s.sets["iid_pool"]) >= 2 * len(s.sets["ood_pool"])
    # 5-fold: the val sets partition train+val; sklearn's fold sizes (n // 5, the first n % 5 one more)
    all_train = s.set_of("train") + s.set_of("val")
    vals = [c for f in range(5) for c in s.set_of("val", f)]
    assert sorted(vals) == sorted(all_train)
    n = len(all_train)
    assert [len(s.set_of("val", f)) for f in range(5)] == [n // 5 + (f < n % 5) for f in range(5)]


def test_seeded_and_reproducible():
    nodules = table()
    a, b = make_splits(nodules, Shift.named("texture"), 123), make_splits(nodules, Shift.named("texture"), 123)
    assert a.to_dict() == b.to_dict()
    c = make_splits(nodules, Shift.named("texture"), 7)
    assert c.sets != a.sets or c.folds != a.folds


def test_ood_patients_iid_nodules_go_to_test_or_pool():
    """Figure 6: an OoD patient's i.i.d. nodules are never trained on."""
    nodules = table()
    s = make_splits(nodules, Shift.named("texture"))
    ood_patients = {n.patient_id for n in nodules if Shift.named("texture").vote(n.ratings["texture"]) is False}
    train = {c for f in s.folds for c in f["train"] + f["val"]}
    assert not any(n.case_id in train for n in nodules if n.patient_id in ood_patients)


def test_too_few_patients_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot form 5 folds"):
        make_splits(table(n_iid_patients=2, n_ood_patients=2), Shift.named("texture"))


def test_split_files_are_written_once(tmp_path):
    nodules = table()
    shift = Shift.named("texture")
    path = splits_path(tmp_path, shift, 123)
    assert path == tmp_path / "splits" / "texture_seed123.json"
    s = make_splits(nodules, shift)
    assert write_splits(path, s) == "written"
    before = path.read_bytes()
    assert write_splits(path, make_splits(nodules, shift)) == "unchanged"
    changed = make_splits(nodules[:-1], shift)
    with pytest.raises(ValueError, match="not regenerated silently"):
        write_splits(path, changed)
    assert path.read_bytes() == before
    assert write_splits(path, changed, force=True) == "written"
    assert read_splits(path).sets == changed.sets
    assert json.loads(path.read_text())["sizes_fold0"]["train"] == len(changed.folds[0]["train"])
    with pytest.raises(FileNotFoundError, match="values-seg data lidc splits"):
        read_splits(tmp_path / "splits" / "malignancy_seed123.json")


def test_table3_comparison_text():
    s = make_splits(table(), Shift.named("texture"))
    text = table3_comparison(s)
    assert "Table 3" in text and "513" in text and "DIFFERS" in text
    assert "Table 3" not in table3_comparison(s, with_paper=False)
