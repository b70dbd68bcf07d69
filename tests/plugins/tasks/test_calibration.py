"""Calibration task: the ACE with sparse bins merged and the paper's eq. 11 ACE from the accumulated
bins per (measure, subset)."""

import numpy as np
import pytest

from values_seg import metrics, registry
from values_seg.metrics import CalibrationBins, calibration_bins

from ._records import EE, MI, PE, bins, by_key, full, make_result, standard

task = registry.create("task", "calibration")


def ace_rows(rows):
    """The ``ace`` rows indexed like :func:`by_key` (the reference rows are tested below)."""
    return by_key([r for r in rows if r["metric"] == "ace"])


def test_by_hand():
    rows = ace_rows(task.score(full()))
    # pe iid: bin 2: 2 pixels, mean confidence 0.11, accuracy 1 -> gap 0.89;
    #         bin 18: 2 pixels, mean confidence 0.925, accuracy 0.5 -> gap 0.425; ACE = (0.89 + 0.425) / 2
    # pe ood: bin 10: 4 pixels, mean confidence 0.525, accuracy 0.25 -> ACE 0.275
    assert rows == {
        ("ace", "iid", PE, None): pytest.approx((0.89 + 0.425) / 2),
        ("ace", "ood", PE, None): pytest.approx(0.275),
    }


def test_from_pixels_equal_weight_per_bin():
    # 10 pixels at confidence 0.97 all correct (gap 0.03) and 1 pixel at 0.51 wrong (gap 0.51):
    # every non-empty bin weighs the same, so ACE = (0.03 + 0.51) / 2, not the pixel-weighted mean
    correct = np.array([1] * 10 + [0])
    confidence = np.array([0.97] * 10 + [0.51])
    result = standard(calibration={(MI, "iid"): calibration_bins(correct, confidence)})
    rows = ace_rows(task.score(result))
    assert rows == {("ace", "iid", MI, None): pytest.approx((0.03 + 0.51) / 2)}


def test_merged_bins_of_several_cases():
    a = calibration_bins(np.array([1, 1, 0]), np.array([0.9, 0.8, 0.3]))
    b = calibration_bins(np.array([0, 1]), np.array([0.9, 0.31]))
    result = standard(calibration={(EE, "ood"): sum([a, b])})
    rows = ace_rows(task.score(result))
    # bins: 0.3/0.31 -> bin 6 (mean 0.305, acc 0.5, gap 0.195); 0.8 -> bin 16 (gap 0.2);
    # 0.9, 0.9 -> bin 18 (mean 0.9, acc 0.5, gap 0.4); ACE = (0.195 + 0.2 + 0.4) / 3
    assert rows[("ace", "ood", EE, None)] == pytest.approx((0.195 + 0.2 + 0.4) / 3)


def test_missing_keys_skipped():
    # only the OoD bins of one measure: no iid row, no row for the others
    result = standard(calibration={(PE, "ood"): bins(b10=(4, 2.1, 1))})
    assert ace_rows(task.score(result)) == {("ace", "ood", PE, None): pytest.approx(0.275)}


def test_no_calibration_no_rows():
    assert task.score(standard()) == []


def test_empty_bins_skipped():
    result = standard(calibration={(PE, "iid"): CalibrationBins.empty(20), (PE, "ood"): bins(b0=(1, 0.02, 0))})
    assert ace_rows(task.score(result)) == {("ace", "ood", PE, None): pytest.approx(0.02)}


def test_other_subsets_ignored():
    result = standard(calibration={(PE, "all"): bins(b0=(1, 0.02, 0)), (PE, "val"): bins(b0=(1, 0.02, 0))})
    assert task.score(result) == []


def eq11_numpy(correct: np.ndarray, confidence: np.ndarray, n_bins: int = 20) -> float:
    """The paper's eq. 11, written out: the mean over the non-empty equal-width bins of |accuracy - confidence|."""
    b = np.minimum(np.floor(confidence * n_bins).astype(int), n_bins - 1)
    return float(np.mean([abs(correct[b == k].mean() - confidence[b == k].mean()) for k in np.unique(b)]))


def sparse_bin_case():
    """100 000 correct pixels at 0.97 and 5 wrong ones at 0.51: the 5 hold under 0.1 % of the pixels."""
    correct = np.array([1] * 100_000 + [0] * 5)
    confidence = np.array([0.97] * 100_000 + [0.51] * 5)
    return correct, confidence


def test_ace_eq11_is_the_papers_ace_beside_the_merged_one():
    correct, confidence = sparse_bin_case()
    result = standard(calibration={(PE, "iid"): calibration_bins(correct, confidence)})
    rows = by_key(task.score(result))
    eq11 = eq11_numpy(correct, confidence)
    assert eq11 == pytest.approx((0.03 + 0.51) / 2)
    assert rows[("ace_eq11", "iid", PE, None)] == pytest.approx(eq11, abs=1e-12)
    # the merged ACE joins the 5 pixels to the bin of 100 000: one bin, nearly calibrated; not eq. 11
    merged = rows[("ace", "iid", PE, None)]
    assert merged == pytest.approx(abs((0.97 * 100_000 + 0.51 * 5) / 100_005 - 100_000 / 100_005))
    assert merged < eq11 / 5
    labels = {m.name: m.label for m in task.metrics}
    assert labels["ace_eq11"] == "ACE (paper eq. 11)" and "merged" in labels["ace"] and "eq. 11" not in labels["ace"]
    assert {m.name for m in task.metrics if m.primary} == {"ace"}


def test_ace_eq11_agrees_with_netcal():
    netcal = pytest.importorskip("netcal.metrics")
    rng = np.random.default_rng(0)
    confidence = np.concatenate([rng.uniform(0.01, 0.99, 3000), np.full(4, 0.515)])  # off the bin edges
    correct = (rng.uniform(size=confidence.size) < confidence ** 2).astype(int)
    result = standard(calibration={(PE, "iid"): calibration_bins(correct, confidence)})
    ours = by_key(task.score(result))[("ace_eq11", "iid", PE, None)]
    theirs = float(netcal.ACE(bins=20, detection=True).measure(confidence, correct))
    assert ours == pytest.approx(eq11_numpy(correct, confidence), abs=1e-12)
    assert ours == pytest.approx(theirs, abs=1e-9)


def binomial_reference(n: int, p: float) -> float:
    """The expected ACE of one bin under perfect calibration, exactly: E|p - K/n|, K ~ Binomial(n, p)."""
    from scipy.stats import binom

    k = np.arange(n + 1)
    return float(np.sum(binom.pmf(k, n, p) * np.abs(p - k / n)))


def test_reference_rows_beside_every_ace():
    rows = by_key(task.score(full()))
    assert set(rows) == {(m, s, PE, None) for m in ("ace", "ace_eq11", "ace_reference") for s in ("iid", "ood")}
    refs = {r["split"]: r for r in task.score(full()) if r["metric"] == "ace_reference"}
    for r in refs.values():
        assert r["ci_low"] <= r["value"] <= r["ci_high"]  # the Monte-Carlo mean inside its 95 % interval


def test_reference_closed_form_one_bin():
    # OoD: one bin, 4 pixels at mean confidence 0.525. A calibrated model's ACE is |0.525 - K/4| with
    # K ~ Binomial(4, 0.525): its mean is the binomial expectation, its interval two values of |0.525 - k/4|
    exact = binomial_reference(4, 0.525)
    many = registry.create("task", "calibration", reference_samples=200_000)
    ref = next(r for r in many.score(full()) if r["metric"] == "ace_reference" and r["split"] == "ood")
    assert ref["value"] == pytest.approx(exact, abs=2e-3)
    support = {abs(0.525 - k / 4) for k in range(5)}
    assert min(support, key=lambda v: abs(v - ref["ci_low"])) == pytest.approx(ref["ci_low"])
    assert min(support, key=lambda v: abs(v - ref["ci_high"])) == pytest.approx(ref["ci_high"])
    # the observed ACE 0.275 = |0.525 - 1/4| is a possible outcome of a calibrated model: compatible
    assert ref["ci_low"] <= 0.275 <= ref["ci_high"]


def test_reference_uses_the_cases_finer_bins():
    # two cases whose 200-bin histograms have one bin each at 0.905 and 0.995 (both in the ACE's bin 18/19)
    a = CalibrationBins.empty(200)
    b = CalibrationBins.empty(200)
    a.count[181], a.confidence_sum[181], a.correct_sum[181] = 1000, 905.0, 905
    b.count[199], b.confidence_sum[199], b.correct_sum[199] = 1000, 995.0, 995
    coarse = sum(metrics.coarsen_bins(x, 20) for x in (a, b))
    result = make_result(dice=[0.9, 0.8], ood=[False, False], calibration={(PE, "iid"): coarse},
                         case_calibration={PE: {"c0": a, "c1": b}})
    many = registry.create("task", "calibration", reference_samples=20_000)
    ref = next(r for r in many.score(result) if r["metric"] == "ace_reference")
    # bins 18 and 19 each simulate their own fine bin: E|0.905 - K/1000| and E|0.995 - K/1000|, averaged
    exact = (binomial_reference(1000, 0.905) + binomial_reference(1000, 0.995)) / 2
    assert ref["value"] == pytest.approx(exact, rel=0.02)


def test_invalid_parameters():
    with pytest.raises(ValueError, match="reference_samples"):
        registry.create("task", "calibration", reference_samples=1)
    with pytest.raises(ValueError, match="level"):
        registry.create("task", "calibration", level=95)
