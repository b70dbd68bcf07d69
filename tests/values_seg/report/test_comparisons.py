"""Paired comparisons (values-seg compare): winners, paired differences and significance by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from values_seg.cli import main
from values_seg.report import comparisons, load_run

from .conftest import write_stats_run
from .test_intervals import rows

B = 500


def p_value(d: np.ndarray) -> float:
    """Two-sided p of the interval inversion: 2 (1 + smaller count on one side of 0) / (B + 1), at most 1."""
    return min(1.0, 2 * (1 + min((d <= 0).sum(), (d >= 0).sum())) / (len(d) + 1))


@pytest.fixture()
def two_aggregations(tmp_path):
    """AURC (lower is better) of patch and threshold for two measures, one seed: patch clearly better with
    PE (0.20 vs 0.25, shared case noise), a toss-up with MI (0.30 vs 0.301)."""
    rng = np.random.default_rng(1)
    case = rng.normal(0, 0.05, B)  # the resamples' effect shared by every method on these cases
    res = pd.DataFrame(rows([0.20], aggregation="patch") + rows([0.25], aggregation="threshold")
                       + rows([0.30], measure="mutual_information", aggregation="patch")
                       + rows([0.301], measure="mutual_information", aggregation="threshold"))
    samples = np.stack([0.20 + case + rng.normal(0, 0.005, B), 0.25 + case + rng.normal(0, 0.005, B),
                        0.30 + case + rng.normal(0, 0.02, B), 0.301 + case + rng.normal(0, 0.02, B)])
    return write_stats_run(tmp_path / "run", res, samples), samples.astype(np.float32).astype(np.float64)


def test_winner_difference_interval_and_p_value(two_aggregations):
    run_dir, samples = two_aggregations
    run = load_run(run_dir)
    out = comparisons.compare(run, "aggregation")
    assert len(out) == 2
    pe = out[out["measure"] == "predictive_entropy"].iloc[0]
    assert (pe["winner"], pe["other"], pe["direction"]) == ("patch", "threshold", "lower")
    d = samples[0] - samples[1]
    assert pe["difference"] == pytest.approx(0.20 - 0.25)
    assert (pe["ci_low"], pe["ci_high"]) == pytest.approx(tuple(np.percentile(d, [2.5, 97.5])))
    assert pe["p_value"] == pytest.approx(p_value(d)) and pe["p_value"] < 0.01 and pe["significant"]
    mi = out[out["measure"] == "mutual_information"].iloc[0]
    d = samples[2] - samples[3]
    assert mi["winner"] == "patch" and mi["p_value"] == pytest.approx(p_value(d)) and not mi["significant"]
    wins = comparisons.wins(out, run, "aggregation")
    assert wins[["choice", "wins", "significant_wins", "sets"]].values.tolist() == [["patch", 2, 1, 2],
                                                                                   ["threshold", 0, 0, 2]]


def test_only_sets_that_differ_in_the_varied_component(two_aggregations):
    run = load_run(two_aggregations[0])
    out = comparisons.compare(run, "measure")  # PE vs MI per aggregation: lower AURC wins (PE)
    assert set(out["aggregation"]) == {"patch", "threshold"} and set(out["winner"]) == {"predictive_entropy"}
    assert comparisons.compare(run, "prediction_model").empty  # one model: nothing to compare
    with pytest.raises(ValueError, match="--vary must be one of"):
        comparisons.compare(run, "backbone")
    with pytest.raises(ValueError, match="no task 'nope'.*failure_detection"):
        comparisons.compare(run, "aggregation", task="nope")


def test_reference_metrics_are_left_out(tmp_path):
    res = pd.DataFrame(rows([0.1], metric="ace_reference", task="calibration", aggregation="", ci=[(0.0, 0.2)])
                       + rows([0.2], metric="ace_reference", task="calibration", aggregation="",
                              measure="mutual_information", ci=[(0.1, 0.3)]))
    run = load_run(write_stats_run(tmp_path / "run", res, np.full((2, B), np.nan), tasks=("calibration",)))
    assert comparisons.compare(run, "measure").empty


def test_without_distributions_values_only(two_aggregations):
    run_dir, _ = two_aggregations
    (run_dir / "bootstrap.parquet").unlink()
    out = comparisons.compare(load_run(run_dir), "aggregation")
    assert len(out) == 2 and out["p_value"].isna().all() and not out["significant"].any()


def test_cli_prints_and_writes(two_aggregations, capsys):
    run_dir, _ = two_aggregations
    assert main(["compare", str(run_dir), "--vary", "aggregation", "--details"]) == 0
    text = capsys.readouterr().out
    assert "Failure Detection: AURC i.i.d. ↓: wins Patch 2/2 (1 significant)" in text
    assert "n.s." in text and "p = " in text
    detail = pd.read_csv(run_dir / "comparisons" / "aggregation.csv")
    assert len(detail) == 2 and set(detail.columns) >= {"winner", "other", "difference", "p_value", "significant"}
    assert (run_dir / "comparisons" / "aggregation_wins.csv").exists()
    assert main(["compare", str(run_dir), "--vary", "measure", "--task", "failure_detection"]) == 0
    assert (run_dir / "comparisons" / "measure_failure_detection.csv").exists()
    assert main(["compare", str(run_dir / "missing"), "--vary", "measure"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_seeds_are_pooled_pairwise(stats_run):
    # two seeds: the difference is that of the means over the common seeds, its distribution the
    # difference of the two-level pooled distributions (same seed draws for both)
    run = load_run(stats_run)
    out = comparisons.compare(run, "aggregation", task="failure_detection")
    r = out[(out["scenario"] == "toy_3b") & (out["prediction_model"] == "ssn") & (out["measure"] == "expected_entropy")
            & (out["metric"] == "aurc") & (out["split"] == "ood")].iloc[0]
    res = run.results
    sel = res[(res["scenario"] == "toy_3b") & (res["prediction_model"] == "ssn") & (res["measure"] == "expected_entropy")
              & (res["metric"] == "aurc") & (res["split"] == "ood")]
    a = sel[sel["aggregation"] == r["winner"]].sort_values("seed")
    b = sel[sel["aggregation"] == r["other"]].sort_values("seed")
    assert r["n_seeds"] == 2 and r["difference"] == pytest.approx(a["value"].mean() - b["value"].mean())
    d = run.distributions.pooled(a["bootstrap_row"]) - run.distributions.pooled(b["bootstrap_row"])
    assert r["p_value"] == pytest.approx(p_value(d))
