"""The conformal task's per-class guarantees (``per_class``) and several risks at once (``multi_risk``)
on records the real evaluation computes, against a brute force over every threshold on the maps
themselves (independent numpy code), against MAPIE, and at the edges (a class absent from every
calibration case, one with too few, a single class, all-empty masks)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from values_seg import metrics, registry

from . import test_conformal as base
from .test_conformal import f16, make_result


def _classes(curves, sets="probability", split="iid"):
    part = curves[(curves["curve"] == "crc_class") & (curves["sets"] == sets) & (curves["split"] == split)]
    return part.set_index("class_index")


def _present(raw, case, c, rater=None):
    masks = raw[case][1] if rater is None else raw[case][1][[rater]]
    return bool((masks == c).any())


def _case_fnr(score, masks, c, t):
    rates = [((m == c) & (score < t)).sum() / (m == c).sum() if (m == c).any() else 0.0 for m in masks]
    return float(np.mean(rates))


def _brute_threshold(raw, cases, c, alpha, rater=None):
    """The largest t over every distinct reference score (and +inf) whose CRC bound holds."""
    def masks(k):
        return raw[k][1] if rater is None else raw[k][1][[rater]]
    scores = {k: f16(raw[k][0][c]) for k in cases}
    candidates = np.unique(np.concatenate([scores[k][(masks(k) == c).any(axis=0)] for k in cases] + [[np.inf]]))
    n = len(cases)
    feasible = [t for t in candidates
                if n / (n + 1) * np.mean([_case_fnr(scores[k], masks(k), c, t) for k in cases]) + 1 / (n + 1)
                <= alpha + 1e-12]
    return max(feasible)


@pytest.fixture(scope="module")
def three():
    return make_result(n_val=14, n_iid=12, n_ood=8, classes=3, seed=2)


@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_per_class_thresholds_and_fnr_equal_brute_force(three, alpha):
    result, raw = three
    task = registry.create("task", "conformal", alpha=alpha, resplits=0, per_class=True)
    curves = task.curves(result)
    val = [k for k in raw if k.startswith("val")]
    iid = [k for k in raw if k.startswith("test") and not k.startswith("testo")]
    rows = _classes(curves)
    assert sorted(rows.index) == [1, 2]
    for c in (1, 2):
        cal = [k for k in val if _present(raw, k, c)]
        assert rows.loc[c, "n_calibration"] == len(cal) and bool(rows.loc[c, "supported"])
        t = _brute_threshold(raw, cal, c, alpha)
        assert rows.loc[c, "threshold"] == t
        assert rows.loc[c, "effective_level"] == pytest.approx(metrics.crc_effective_level(alpha, len(cal)))
        test = [k for k in iid if _present(raw, k, c)]
        fnr = np.mean([_case_fnr(f16(raw[k][0][c]), raw[k][1], c, t) for k in test])
        assert rows.loc[c, "risk"] == pytest.approx(fnr, abs=1e-12) and rows.loc[c, "n"] == len(test)
        assert rows.loc[c, "ci_low"] <= fnr <= rows.loc[c, "ci_high"]
        assert bool(rows.loc[c, "exchangeable"])
    assert not _classes(curves, split="ood")["exchangeable"].astype(bool).any()


def test_per_class_agrees_with_mapie_within_one_grid_step(three):
    from mapie.risk_control import SemanticSegmentationController

    result, raw = three
    alpha, step = 0.1, 1e-3
    curves = registry.create("task", "conformal", alpha=alpha, resplits=0, per_class=True, raters="0").curves(result)
    rows = _classes(curves)
    val = [k for k in raw if k.startswith("val")]
    for c in (1, 2):
        cal = [k for k in val if _present(raw, k, c, rater=0)]
        proba = np.stack([f16(raw[k][0][c]) for k in cal])
        truth = np.stack([raw[k][1][0] == c for k in cal])
        controller = SemanticSegmentationController(predict_function=lambda x: x[:, None], risk="recall", method="crc",
                                                    target_level=1 - alpha, predict_params=np.arange(0, 1, step))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            controller.calibrate(proba, truth.reshape(len(cal), -1).astype(int))
        grid = float(np.asarray(controller.best_predict_param).reshape(-1)[0])  # sets {p > grid}
        assert abs(rows.loc[c, "threshold"] - grid) <= step + 1e-9, (c, rows.loc[c, "threshold"], grid)


def _make_with(monkeypatch, keep_class2_in_val: int, **kwargs):
    """make_result where class 2 is relabelled 1 in all but ``keep_class2_in_val`` validation cases."""
    calls = {"n": 0}
    original = base._case

    def case(rng, ood, **kw):
        probs, masks = original(rng, ood, **kw)
        calls["n"] += 1
        if calls["n"] <= kwargs.get("n_val", 12) and calls["n"] > keep_class2_in_val:
            masks = masks.masked_fill(masks == 2, 1)
        return probs, masks

    monkeypatch.setattr(base, "_case", case)
    return make_result(classes=3, **kwargs)


def test_class_absent_from_calibration_or_too_rare_claims_no_guarantee(monkeypatch):
    result, raw = _make_with(monkeypatch, 0, n_val=12, n_iid=6, n_ood=4, seed=3)
    task = registry.create("task", "conformal", alpha=0.1, resplits=0, per_class=True)
    rows = _classes(task.curves(result))
    assert rows.loc[2, "n_calibration"] == 0 and not bool(rows.loc[2, "supported"])
    assert np.isnan(rows.loc[2, "threshold"]) and np.isnan(rows.loc[2, "risk"])
    assert bool(rows.loc[1, "supported"])
    monkeypatch.undo()
    result, raw = _make_with(monkeypatch, 5, n_val=12, n_iid=6, n_ood=4, seed=3)  # 5 < 9 = min cases at 0.1
    rows = _classes(registry.create("task", "conformal", alpha=0.1, resplits=0, per_class=True).curves(result))
    assert rows.loc[2, "n_calibration"] == 5 and not bool(rows.loc[2, "supported"])
    assert rows.loc[2, "n"] > 0 and np.isnan(rows.loc[2, "risk"])  # test cases there, but no set is claimed


def test_single_class_is_the_crc_threshold_of_its_present_cases():
    result, raw = make_result(n_val=12, n_iid=6, n_ood=4, seed=4)
    rows = _classes(registry.create("task", "conformal", alpha=0.1, resplits=0, per_class=True).curves(result))
    val = [k for k in raw if k.startswith("val")]
    cal = [k for k in val if _present(raw, k, 1)]
    t = metrics.crc_threshold([f16(raw[k][0][1]) for k in cal], [raw[k][1] == 1 for k in cal], 0.1)
    assert list(rows.index) == [1] and rows.loc[1, "threshold"] == t


def test_all_empty_masks_calibrate_nothing():
    result, _ = make_result(n_val=10, n_iid=4, n_ood=2, empty=True)
    task = registry.create("task", "conformal", per_class=True, multi_risk=True, resplits=0)
    with pytest.raises(ValueError, match="nothing to calibrate"):
        task.curves(result)


def _brute_multi(raw, cases, classes, grid):
    """Per case and grid threshold the FNR and FDR of {p_c >= t}, mean over raters, then over classes."""
    fnr = np.zeros((len(cases), len(grid)))
    fdr = np.zeros_like(fnr)
    for i, k in enumerate(cases):
        masks = raw[k][1]
        for g, t in enumerate(grid):
            per_class = []
            for c in classes:
                s = f16(raw[k][0][c]) >= t
                per_class.append((
                    np.mean([((m == c) & ~s).sum() / (m == c).sum() if (m == c).any() else 0.0 for m in masks]),
                    np.mean([(s & (m != c)).sum() / s.sum() if s.any() else 0.0 for m in masks])))
            fnr[i, g], fdr[i, g] = np.mean(per_class, axis=0)
    return fnr, fdr


@pytest.mark.parametrize("classes, levels", [(2, (0.3, 0.5)), (3, (0.5, 0.85))])
def test_multi_risk_valid_set_and_rows_equal_brute_force(classes, levels):
    result, raw = make_result(n_val=60, n_iid=12, n_ood=6, classes=classes, seed=5)
    delta = 0.1
    task = registry.create("task", "conformal", resplits=0, multi_risk=True, multi_fnr=levels[0], multi_fdr=levels[1],
                           delta=delta, multi_grid=19)
    grid = np.arange(1, 20) / 20
    val = [k for k in raw if k.startswith("val")]
    iid = [k for k in raw if k.startswith("test") and not k.startswith("testo")]
    fnr, fdr = _brute_multi(raw, val, range(1, classes), grid)
    p = np.maximum(metrics.hoeffding_bentkus_p_value(fnr.mean(axis=0), len(val), levels[0]),
                   metrics.hoeffding_bentkus_p_value(fdr.mean(axis=0), len(val), levels[1]))
    valid = p <= delta / grid.size
    curve = task.curves(result)
    curve = curve[curve["curve"] == "ltt_grid"].reset_index(drop=True)
    np.testing.assert_allclose(curve["threshold"], grid)
    np.testing.assert_allclose(curve["fnr"], fnr.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(curve["fdr"], fdr.mean(axis=0), atol=1e-12)
    assert curve["valid"].astype(bool).tolist() == valid.tolist() and valid.any()
    candidates = np.flatnonzero(valid)
    chosen = candidates[np.argmin(fnr.mean(axis=0)[candidates])]
    assert curve["chosen"].astype(bool).tolist() == [g == chosen for g in range(grid.size)]
    rows = {(r["metric"], r["split"]): r["value"] for r in task.score(result)}
    test_fnr, test_fdr = _brute_multi(raw, iid, range(1, classes), grid[[chosen]])
    assert rows[("multi_fnr", "iid")] == pytest.approx(test_fnr.mean(), abs=1e-12)
    assert rows[("multi_fdr", "iid")] == pytest.approx(test_fdr.mean(), abs=1e-12)


def test_multi_risk_none_valid_gives_no_rows():
    result, _ = make_result(n_val=12, n_iid=4, n_ood=2, seed=6)
    task = registry.create("task", "conformal", resplits=0, multi_risk=True, multi_fnr=0.05, multi_fdr=0.05)
    curve = task.curves(result)
    assert not curve.loc[curve["curve"] == "ltt_grid", "valid"].astype(bool).any()
    assert not any(r["metric"].startswith("multi") for r in task.score(result))


def test_off_by_default(three):
    result, _ = three
    task = registry.create("task", "conformal", resplits=0)
    assert set(task.curves(result)["curve"]) == {"crc_risk"}
    assert not any(r["metric"].startswith("multi") for r in task.score(result))


@pytest.mark.parametrize("bins, alpha", [(2, 0.1), (3, 0.2)])
def test_score_bins_equal_brute_force(binary_wide, bins, alpha):
    """Per bin of an image score: edges the pooled validation and test quantiles, the threshold the CRC
    threshold of the bin's validation cases, the FNR the realised one of the bin's test cases."""
    result, raw = binary_wide
    curves = registry.create("task", "conformal", alpha=alpha, resplits=0, score_bins=bins).curves(result)
    rows = curves[(curves["curve"] == "crc_bins") & (curves["sets"] == "probability")]
    scores = result.scores
    for (m, a), part in scores.groupby(["measure", "aggregation"]):
        got = rows[(rows["measure"] == m) & (rows["aggregation"] == a)]
        score = part.set_index("case_id")["score"]
        edges = np.quantile(score.to_numpy(), np.arange(1, bins) / bins)
        which = {k: int(np.searchsorted(edges, v, side="right")) for k, v in score.items()}
        for b in range(bins):
            cal = [k for k in raw if k.startswith("val") and which[k] == b]
            test = [k for k in raw if k.startswith("test") and not k.startswith("testo") and which[k] == b]
            row = got[(got["bin"] == b) & (got["split"] == "iid")].iloc[0]
            assert row["n_calibration"] == len(cal) and row["n"] == len(test)
            if len(cal) < metrics.min_calibration_cases(alpha):
                assert not bool(row["supported"]) and np.isnan(row["risk"])
                continue
            t = metrics.crc_threshold([f16(raw[k][0][1]) for k in cal], [raw[k][1] == 1 for k in cal], alpha)
            if test:
                fnr = metrics.fnr([f16(raw[k][0][1]) for k in test], [raw[k][1] == 1 for k in test], t)
                assert row["risk"] == pytest.approx(fnr.mean(), abs=1e-12)
                assert row["ci_low"] <= row["risk"] <= row["ci_high"]
            assert row["effective_level"] == pytest.approx(metrics.crc_effective_level(alpha, len(cal)))


def test_score_bins_of_each_measures_uncertainty_sets_equal_brute_force(binary_wide):
    """A measure's own sets (predicted foreground + its uncertainty ≥ t) per bin of its own image score: the
    exact CRC threshold of the bin's validation cases over the maps themselves, the bin's realised test FNR."""
    result, raw = binary_wide
    alpha, bins = 0.2, 2
    curves = registry.create("task", "conformal", alpha=alpha, resplits=0, score_bins=bins).curves(result)
    rows = curves[(curves["curve"] == "crc_bins") & (curves["sets"] == "uncertainty")]
    assert set(rows["measure"]) == set(base.MEASURES)
    for (m, a), part in result.scores.groupby(["measure", "aggregation"]):
        score = part.set_index("case_id")["score"]
        edges = np.quantile(score.to_numpy(), np.arange(1, bins) / bins)
        which = {k: int(np.searchsorted(edges, v, side="right")) for k, v in score.items()}

        def sets(k):  # predicted foreground always in: above every uncertainty
            return np.where(raw[k][3] == 1, np.inf, f16(raw[k][2][m]))
        for b in range(bins):
            cal = [k for k in raw if k.startswith("val") and which[k] == b]
            test = [k for k in raw if k.startswith("test") and not k.startswith("testo") and which[k] == b]
            row = rows[(rows["measure"] == m) & (rows["aggregation"] == a) & (rows["bin"] == b)
                       & (rows["split"] == "iid")].iloc[0]
            assert row["n_calibration"] == len(cal) and row["n"] == len(test)
            if len(cal) < metrics.min_calibration_cases(alpha):
                assert not bool(row["supported"])
                continue
            values, weights, _ = metrics.conformal.fnr_jumps(
                [np.where(np.isinf(sets(k)), 1e9, sets(k)) for k in cal], [raw[k][1] == 1 for k in cal])
            keep = values < 1e9
            t = metrics.conformal.crc_exact(values[keep], weights[keep], len(cal), alpha)
            if test:
                fnr = metrics.fnr([sets(k) for k in test], [raw[k][1] == 1 for k in test], t)
                assert row["risk"] == pytest.approx(fnr.mean(), abs=1e-12)


@pytest.fixture(scope="module")
def binary_wide():
    return make_result(n_val=40, n_iid=20, n_ood=10, seed=7)


def test_score_bins_too_few_cases_per_bin_claim_nothing(binary_wide):
    result, _ = binary_wide
    curves = registry.create("task", "conformal", alpha=0.1, resplits=0, score_bins=20).curves(result)
    rows = curves[curves["curve"] == "crc_bins"]
    assert not rows["supported"].astype(bool).any() and rows["risk"].isna().all()
