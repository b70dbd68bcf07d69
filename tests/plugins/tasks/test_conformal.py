"""The conformal task on records the real fused evaluation computes (quantity ``conformal_sets``)
from synthetic probability samples, against the public metrics applied to the maps themselves."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from values_seg import metrics, registry
from values_seg.components.case_context import CaseContext
from values_seg.components.settings import EvaluationSettings
from values_seg.evaluation.per_case import evaluate_case
from values_seg.components.task import EvaluationResult

MEASURES = ("predictive_entropy", "mutual_information")


def _case(rng, ood: bool, size: int = 12, samples: int = 4, raters: int = 3, classes: int = 2):
    """Probability samples [S, C, H, W] around a disc, and rater masks of slightly different discs."""
    yy, xx = np.mgrid[:size, :size]
    radius = rng.uniform(2.5, 4.0)
    centre = rng.uniform(4, size - 4, 2)
    distance = np.hypot(yy - centre[0], xx - centre[1])
    logits = np.stack([np.zeros((samples, size, size))] + [
        (radius - distance)[None] * rng.uniform(0.5, 2.0, (samples, 1, 1)) + rng.normal(0, 0.7, (samples, size, size))
        - (1.5 if ood else 0.0) for _ in range(classes - 1)], axis=1)
    probs = torch.softmax(torch.tensor(logits, dtype=torch.float32), dim=1)
    masks = np.stack([(distance <= radius + rng.uniform(-1, 1)) for _ in range(raters)]).astype(np.int64)
    if classes > 2:  # the other foreground class on the right half
        masks = np.where((masks > 0) & (xx[None] > centre[1]), 2, masks)
    return probs, torch.tensor(masks)


def make_result(n_val=12, n_iid=15, n_ood=10, seed=0, classes=2, ignore_index=None, empty=False):
    rng = np.random.default_rng(seed)
    quantity = registry.create("quantity", "conformal_sets")
    measures = {m: registry.create("measure", m) for m in MEASURES}
    aggregations = {(m, "image"): registry.create("aggregation", "image") for m in MEASURES}
    entries, case_rows, score_rows, raw = [], [], [], {}
    for split, n, ood in (("val", n_val, False), ("test", n_iid, False), ("test", n_ood, True)):
        for k in range(n):
            case_id = f"{split}{'o' if ood else ''}{k}"
            probs, masks = _case(rng, ood, classes=classes)
            if empty:
                masks = torch.zeros_like(masks)
            if ignore_index is not None:  # the first row is ignored by every rater
                masks[:, 0, :] = ignore_index
            ev = evaluate_case(probs, masks, measures, aggregations, quantities={quantity.name: quantity},
                               context=CaseContext(case_id=case_id, meta={"ood": ood}, num_classes=classes,
                                                   ignore_index=ignore_index, background=0), keep_maps=True)
            entries.append((case_id, {"ood": ood}, ev.values[quantity.name]))
            case_rows.append({"case_id": case_id, "split": split, "ood": ood, "shift": "none"})
            score_rows += [(case_id, split, m, a, s) for (m, a), s in ev.scores.items()]
            raw[case_id] = (probs.mean(0).numpy(), masks.numpy(), {m: ev.maps[m].numpy() for m in MEASURES},
                            ev.prediction.numpy())
    files = quantity.save(entries, list(MEASURES), EvaluationSettings())
    result = EvaluationResult(
        context={"dataset": "synthetic"}, cases=pd.DataFrame(case_rows),
        scores=pd.DataFrame(score_rows, columns=["case_id", "split", "measure", "aggregation", "score"]),
        outputs={quantity.name: quantity.load(files)}, measure_types={m: "PU" for m in MEASURES})
    return result, raw


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)


@pytest.fixture(scope="module")
def binary():
    return make_result()


def _rows(rows, metric, split, measure=None, aggregation=None):
    found = [r for r in rows if r["metric"] == metric and r["split"] == split and r["measure"] == measure
             and r["aggregation"] == aggregation]
    assert len(found) == 1, (metric, split, measure, found)
    return found[0]


def test_probability_sets_match_the_public_metric(binary):
    result, raw = binary
    task = registry.create("task", "conformal", alpha=0.1, resplits=50)
    rows = task.score(result)
    val = [c for c in raw if c.startswith("val")]
    scores = [f16(raw[c][0][1]) for c in val]
    targets = [raw[c][1] == 1 for c in val]
    t = metrics.crc_threshold(scores, targets, 0.1)
    for subset, prefix in (("iid", "test"), ("ood", "testo")):
        cases = [c for c in raw if c.startswith(prefix) and (subset == "ood") == c.startswith("testo")]
        fnr = metrics.fnr([f16(raw[c][0][1]) for c in cases], [raw[c][1] == 1 for c in cases], t)
        assert _rows(rows, "fnr_probability", subset)["value"] == pytest.approx(fnr.mean(), abs=1e-12)
        size = sum(int((f16(raw[c][0][1]) >= t).sum()) for c in cases)
        predicted = sum(int((raw[c][3] == 1).sum()) for c in cases)
        assert _rows(rows, "set_size_probability", subset)["value"] == pytest.approx(size / predicted)


def test_uncertainty_sets_match_the_public_metric(binary):
    result, raw = binary
    rows = registry.create("task", "conformal", alpha=0.15, resplits=0).score(result)
    val = [c for c in raw if c.startswith("val")]
    for m in MEASURES:
        # predicted foreground always in: score +inf there (above every uncertainty)
        def score(c):
            return np.where(raw[c][3] == 1, np.inf, f16(raw[c][2][m]))
        values, weights, index = metrics.conformal.fnr_jumps(
            [np.where(np.isinf(score(c)), 1e9, score(c)) for c in val], [raw[c][1] == 1 for c in val])
        keep = values < 1e9
        t = metrics.conformal.crc_exact(values[keep], weights[keep], len(val), 0.15)
        cases = [c for c in raw if c.startswith("test") and not c.startswith("testo")]
        fnr = metrics.fnr([score(c) for c in cases], [raw[c][1] == 1 for c in cases], t)
        assert _rows(rows, "fnr", "iid", m)["value"] == pytest.approx(fnr.mean(), abs=1e-12)
        size = sum(int((score(c) >= t).sum()) for c in cases)
        predicted = sum(int((raw[c][3] == 1).sum()) for c in cases)
        assert _rows(rows, "set_size", "iid", m)["value"] == pytest.approx(size / predicted)
        assert _rows(rows, "set_size", "iid", m)["value"] >= 1.0


def test_selection_matches_the_public_metric(binary):
    result, raw = binary
    task = registry.create("task", "conformal", max_risk=0.3, delta=0.2, resplits=0)
    rows = task.score(result)
    records = result.output("conformal_sets")
    risk = dict(zip(records.case_ids, records.risk))
    scores = result.scores
    for m in MEASURES:
        part = scores[(scores["measure"] == m)]
        val = part[part["split"] == "val"]
        threshold = metrics.ltt_selection_threshold([risk[c] for c in val["case_id"]], -val["score"], 0.3, 0.2)
        test = part[part["case_id"].str.startswith("test") & ~part["case_id"].str.startswith("testo")]
        accepted = -test["score"].to_numpy() >= threshold
        assert _rows(rows, "coverage", "iid", m, "image")["value"] == pytest.approx(accepted.mean())


def test_dice_risk_is_the_dice_quantity(binary):
    result, raw = binary
    records = result.output("conformal_sets")
    for case_id, risk in zip(records.case_ids, records.risk):
        probs, masks, _, prediction = raw[case_id]
        assert risk == pytest.approx(1 - np.mean(metrics.dice_over_raters(prediction, masks, num_classes=2)))


def test_resplit_check_and_bootstrap(binary):
    from values_seg.statistics import CaseResamples

    result, _ = binary
    task = registry.create("task", "conformal", alpha=0.2, resplits=100)
    rows = task.score(result)
    check = _rows(rows, "resplit_fnr_probability", "iid")
    assert check["ci_low"] < check["value"] < check["ci_high"]
    assert check["ci_low"] <= 0.2  # exchangeable synthetic cases: the guarantee holds
    test = result.test_cases("all")
    resamples = CaseResamples.draw(tuple(test["case_id"]), tuple(test["ood"]), 50, 0)
    boot = {(r["metric"], r["split"], r["measure"], r["aggregation"]): r["samples"]
            for r in task.bootstrap(result, resamples)}
    assert boot[("fnr_probability", "iid", None, None)].shape == (50,)


def test_curves_over_alpha(binary):
    result, _ = binary
    curves = registry.create("task", "conformal", resplits=0).curves(result)
    prob = curves[(curves["sets"] == "probability") & (curves["split"] == "iid")].sort_values("alpha")
    assert (np.diff(prob["set_size"].to_numpy()) <= 1e-12).all()  # a looser level, smaller sets
    assert set(curves["measure"]) == {"", *MEASURES}


def test_multiclass_mondrian_and_ignore_label():
    result, raw = make_result(classes=3, seed=1, ignore_index=255)
    rows = registry.create("task", "conformal", alpha=0.1, resplits=0).score(result)
    val = [c for c in raw if c.startswith("val")]
    cases = [c for c in raw if c.startswith("test") and not c.startswith("testo")]
    expected = np.zeros(len(cases))
    for c in (1, 2):
        t = metrics.crc_threshold([f16(raw[v][0][c]) for v in val], [raw[v][1] == c for v in val], 0.1)
        expected += metrics.fnr([f16(raw[k][0][c]) for k in cases], [raw[k][1] == c for k in cases], t) / 2
    assert _rows(rows, "fnr_probability", "iid")["value"] == pytest.approx(expected.mean(), abs=1e-12)


@pytest.mark.parametrize("params, match", [({"alpha": 0.0}, "alpha"), ({"alpha": 1.0}, "alpha"),
                                           ({"delta": 1.5}, "delta"), ({"max_risk": -0.1}, "max_risk"),
                                           ({"raters": "worst"}, "raters")])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        registry.create("task", "conformal", **params)


def test_too_few_calibration_cases_and_empty_masks():
    few, _ = make_result(n_val=5, n_iid=3, n_ood=0)
    with pytest.raises(ValueError, match="5 validation cases .* alpha=0.1: .* needs at least 9"):
        registry.create("task", "conformal", resplits=0).score(few)
    empty, _ = make_result(n_val=10, n_iid=3, n_ood=0, empty=True)
    with pytest.raises(ValueError, match="every rater mask of every validation case"):
        registry.create("task", "conformal", resplits=0, alphas=[0.1]).score(empty)



def _with_cases(result, cases):
    return EvaluationResult(context=result.context, cases=cases, scores=result.scores, outputs=result.outputs,
                            measure_types=result.measure_types)


def _declared(result, exchangeable):
    """``result`` with its i.i.d. test cases declared (not) exchangeable with validation (case meta)."""
    cases = result.cases.copy()
    iid = (cases["split"] == "test") & ~cases["ood"]
    cases["exchangeable"] = [exchangeable(c) if i else not o for c, i, o in zip(cases["case_id"], iid, cases["ood"])]
    return _with_cases(result, cases)


def _odd_iid(case_id: str) -> bool:
    return case_id.startswith("test") and not case_id.startswith("testo") and int(case_id[4:]) % 2 == 1


def test_resplit_pools_only_cases_exchangeable_with_validation(binary):
    """Toy 3a: i.i.d. test cases that the dataset declares not exchangeable with the validation split
    are not re-split (the guarantee does not cover them): the check equals the one of a run without
    them, and where none is exchangeable there is no check and the curves say the subset is not covered."""
    result, _ = binary

    def task():
        return registry.create("task", "conformal", alpha=0.2, resplits=60)

    half = _declared(result, lambda c: not _odd_iid(c))
    without = _with_cases(result, result.cases[~result.cases["case_id"].map(_odd_iid)])
    for metric, measure in (("resplit_fnr_probability", None), ("resplit_fnr", MEASURES[0])):
        got = _rows(task().score(half), metric, "iid", measure)
        reference = _rows(task().score(without), metric, "iid", measure)
        assert (got["value"], got["ci_low"]) == pytest.approx((reference["value"], reference["ci_low"]), abs=1e-12)
        full = _rows(task().score(result), metric, "iid", measure)
        assert full["value"] != pytest.approx(got["value"], abs=1e-9)  # the declaration matters
    none = _declared(result, lambda c: False)
    rows = task().score(none)
    assert not [r for r in rows if r["metric"].startswith("resplit")]
    # the realised FNR is still reported (a finding, no guarantee)
    assert _rows(rows, "fnr_probability", "iid")["value"] == _rows(task().score(result), "fnr_probability",
                                                                   "iid")["value"]
    assert not task().curves(none)["exchangeable"].any()
    curves = task().curves(result)
    assert curves.query("split == 'iid'")["exchangeable"].all()
    assert not curves.query("split == 'ood'")["exchangeable"].any()
