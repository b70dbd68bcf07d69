"""Rank histograms and Kendall's τ between a task's metrics, by hand and against scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from values_seg.report import load_run, ranking

from .conftest import write_stats_run
from .test_intervals import rows

B = 200


def test_rank_histogram_by_hand(tmp_path):
    # AUROC (higher is better) of patch and threshold: patch wins on resamples 0..139, threshold on 140..199
    patch = np.r_[np.full(140, 0.8), np.full(60, 0.6)]
    threshold = np.full(B, 0.7)
    res = pd.DataFrame(rows([0.8], metric="auroc", task="ood_detection", split="all", aggregation="patch")
                       + rows([0.7], metric="auroc", task="ood_detection", split="all", aggregation="threshold"))
    run = load_run(write_stats_run(tmp_path / "run", res, np.stack([patch, threshold]), tasks=("ood_detection",)))
    hist = ranking.rank_histograms(run)
    agg = hist[hist["component"] == "aggregation"].set_index(["choice", "rank"])
    assert agg.loc[("patch", 1), "share"] == pytest.approx(0.7) and agg.loc[("patch", 2), "share"] == pytest.approx(0.3)
    assert agg.loc[("threshold", 2), "share"] == pytest.approx(0.7)
    assert agg.loc[("patch", 1), "observed_rank"] == 1 and agg.loc[("patch", 1), "keep_rate"] == pytest.approx(0.7)
    assert set(hist["component"]) == {"aggregation"}  # one model, one measure: nothing else to rank


def test_choice_value_is_the_mean_over_its_methods(tmp_path):
    # measure ranking over two aggregations: PE (0.2, 0.6) mean 0.4 vs MI (0.5, 0.5): MI wins on AURC? no:
    # lower is better, PE's mean 0.4 < 0.5 -> PE rank 1 on every resample (constant distributions)
    values = {("predictive_entropy", "patch"): 0.2, ("predictive_entropy", "threshold"): 0.6,
              ("mutual_information", "patch"): 0.5, ("mutual_information", "threshold"): 0.5}
    res = pd.DataFrame([r for (m, a), v in values.items() for r in rows([v], measure=m, aggregation=a)])
    samples = np.stack([np.full(B, v) for v in values.values()])
    run = load_run(write_stats_run(tmp_path / "run", res, samples, tasks=("failure_detection",)))
    hist = ranking.rank_histograms(run)
    m = hist[(hist["component"] == "measure") & (hist["rank"] == 1)].set_index("choice")["share"]
    assert m["predictive_entropy"] == 1.0 and m["mutual_information"] == 0.0


def test_kendall_tau_between_metrics_against_scipy(tmp_path):
    rng = np.random.default_rng(4)
    methods = [(m, a) for m in ("predictive_entropy", "expected_entropy", "mutual_information")
               for a in ("patch", "threshold")]
    aurc = rng.uniform(0.1, 0.4, len(methods))
    augrc = aurc / 2 + rng.normal(0, 0.03, len(methods))
    res = pd.DataFrame([r for metric, vals in (("aurc", aurc), ("augrc", augrc)) for (m, a), v in zip(methods, vals)
                        for r in rows([v], metric=metric, measure=m, aggregation=a)])
    samples = np.stack([np.r_[v, v + rng.normal(0, 0.05, B - 1)] for v in np.r_[aurc, augrc]])
    run = load_run(write_stats_run(tmp_path / "run", res, samples, tasks=("failure_detection",)))
    tau = ranking.metric_agreement(run)
    row = tau[(tau["metric_a"] == "aurc") & (tau["metric_b"] == "augrc")].iloc[0]
    assert row["tau"] == pytest.approx(kendalltau(aurc, augrc).statistic) and row["n_methods"] == 6
    stored = samples.astype(np.float32).astype(np.float64)
    per_resample = [kendalltau(stored[:6, b], stored[6:, b]).statistic for b in range(B)]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.percentile(per_resample, [2.5, 97.5])))
    assert stored[0, 0] == pytest.approx(aurc[0])  # resample 0 is the data itself: τ of the values


def test_choices_are_ranked_over_matched_combinations_only(tmp_path):
    """AURC (lower is better), patch aggregation. Per model MSR is slightly worse than PE (0.21 vs 0.20 with the
    deterministic model), but PE's mean over every model that has it (0.30, TTD's 0.40 included) is worse than
    MSR's (0.21, deterministic only): the unmatched mean would make MSR the winner."""
    values = {("deterministic", "predictive_entropy"): 0.20, ("deterministic", "max_softmax"): 0.21,
              ("test_time_dropout", "predictive_entropy"): 0.40, ("test_time_dropout", "expected_entropy"): 0.45,
              ("test_time_dropout", "mutual_information"): 0.42}
    unmatched = {m: np.mean([v for (_, m2), v in values.items() if m2 == m]) for _, m in values}
    assert unmatched["max_softmax"] < unmatched["predictive_entropy"]  # the confound: MSR would rank first
    res = pd.DataFrame([r for (model, m), v in values.items() for r in rows([v], model=model, measure=m)])
    run = load_run(write_stats_run(tmp_path / "run", res, np.stack([np.full(B, v) for v in values.values()]),
                   tasks=("failure_detection",)))
    hist = ranking.rank_histograms(run)
    msr = hist[(hist["component"] == "measure") & (hist["choice"] == "max_softmax")]
    assert set(msr["observed_rank"]) == {2}  # behind PE, with the model both share
    first = hist[(hist["component"] == "measure") & (hist["rank"] == 1)]
    blocks = {frozenset(g["choice"]): g.set_index("choice") for _, g in first.groupby("block")}
    assert set(blocks) == {frozenset({"predictive_entropy", "max_softmax"}),
                           frozenset({"predictive_entropy", "expected_entropy", "mutual_information"})}
    det = blocks[frozenset({"predictive_entropy", "max_softmax"})]
    assert det.loc["predictive_entropy", "share"] == 1.0 and det.loc["max_softmax", "observed_rank"] == 2
    assert det["over"].iloc[0] == "Determ. × Patch" and det["n_matched"].iloc[0] == 1
    ttd = blocks[frozenset({"predictive_entropy", "expected_entropy", "mutual_information"})]
    assert ttd["observed_rank"].to_dict() == {"predictive_entropy": 1, "expected_entropy": 3, "mutual_information": 2}
    assert first[first["block"] == 0]["choice"].nunique() == 3  # the larger block first
    # prediction models: only PE occurs with both; MSR, EE and MI (one model each) are left out
    models = hist[(hist["component"] == "prediction_model") & (hist["rank"] == 1)].set_index("choice")
    assert models.loc["deterministic", "share"] == 1.0 and set(models["over"]) == {"PE × Patch"}
    assert set(models["left_out"]) == {3} and set(models["n_methods"]) == {2}


def test_a_subset_of_a_larger_block_is_not_repeated(tmp_path):
    # models over PE (both) and EE (TTD and SSN only): {TTD, SSN} lies inside {Det., TTD, SSN} -> one block over PE
    values = {("deterministic", "predictive_entropy"): 0.3, ("test_time_dropout", "predictive_entropy"): 0.2,
              ("ssn", "predictive_entropy"): 0.1, ("test_time_dropout", "expected_entropy"): 0.1,
              ("ssn", "expected_entropy"): 0.2}
    res = pd.DataFrame([r for (model, m), v in values.items() for r in rows([v], model=model, measure=m)])
    run = load_run(write_stats_run(tmp_path / "run", res, np.stack([np.full(B, v) for v in values.values()]),
                   tasks=("failure_detection",)))
    hist = ranking.rank_histograms(run)
    models = hist[(hist["component"] == "prediction_model") & (hist["rank"] == 1)]
    assert set(models["block"]) == {0} and set(models["over"]) == {"PE × Patch"} and set(models["left_out"]) == {2}
    assert models.set_index("choice")["observed_rank"].to_dict() == {"deterministic": 3, "test_time_dropout": 2,
                                                                     "ssn": 1}


def test_the_figure_names_what_each_block_ranks_over(tmp_path):
    from values_seg.report.plots.ranks import _blocks, plot_rank_histograms

    values = {("deterministic", "predictive_entropy"): 0.20, ("deterministic", "max_softmax"): 0.21,
              ("test_time_dropout", "predictive_entropy"): 0.40, ("test_time_dropout", "expected_entropy"): 0.45}
    res = pd.DataFrame([r for (model, m), v in values.items() for r in rows([v], model=model, measure=m)])
    run = load_run(write_stats_run(tmp_path / "run", res, np.stack([np.full(B, v) for v in values.values()]),
                   tasks=("failure_detection",)))
    hist = ranking.rank_histograms(run)
    titles = [lines for lines, _ in _blocks(hist, "measure", run.spec)]
    assert sorted(titles) == [["Failure Detection: AURC i.i.d. ↓", "over Determ. × Patch"],
                              ["Failure Detection: AURC i.i.d. ↓", "over TTD × Patch"]]
    assert plot_rank_histograms(hist, "toy_1", tmp_path / "ranks.png", run.spec).stat().st_size > 0


def test_unsupported_methods_are_not_ranked_and_the_count_is_said(tmp_path):
    """Issue 31.11: a method whose value the data cannot support takes no rank, in no τ."""
    values = {"patch": 0.8, "threshold": 0.7, "image": 0.5}
    res = pd.DataFrame([r for a, v in values.items()
                        for r in rows([v], metric="auroc", task="ood_detection", split="all", aggregation=a)])
    res["supported"] = res["aggregation"] != "image"
    res["support_note"] = np.where(res["supported"], "", "all scores tied: the uncertainty ranks no case above another")
    samples = np.stack([np.full(B, v) for v in values.values()])
    run = load_run(write_stats_run(tmp_path / "run", res, samples, tasks=("ood_detection",)))
    methods = ranking.Methods(run)
    hist = ranking.rank_histograms(run, methods)
    assert set(hist["choice"]) == {"patch", "threshold"}
    assert hist[(hist["choice"] == "threshold") & (hist["rank"] == 2)]["share"].tolist() == [1.0]
    assert methods.left_out_text() == (
        "⚠ 1 result (a method on one metric and split) left out (not ranked or tested): the data cannot support its "
        "value (all scores tied: the uncertainty ranks no case above another × 1; `supported` = False in results.csv).")
    assert methods.left_out_text([("ood_detection", "auprc")]) == ""


def _retention_run(tmp_path):
    """Six methods of two models: AURC, AUGRC and the Dice R-AUC (= AUGRC up to 1e-15), and per model
    the R-AUC of the random and the ideal ranking (baselines: the model's Dice alone)."""
    rng = np.random.default_rng(5)
    methods = [(model, m, a) for model in ("ensemble", "test_time_dropout")
               for m in ("predictive_entropy", "mutual_information") for a in ("patch", "threshold")][:6]
    aurc = rng.uniform(0.1, 0.4, len(methods))
    augrc = aurc / 2 + rng.normal(0, 0.03, len(methods))
    res = [r for metric, task, vals in (("aurc", "failure_detection", aurc), ("augrc", "failure_detection", augrc),
                                        ("rauc", "dice_retention", augrc + 1e-16))
           for (model, m, a), v in zip(methods, vals)
           for r in rows([v], metric=metric, task=task, model=model, measure=m, aggregation=a)]
    for model, random, oracle in (("ensemble", 0.2, 0.05), ("test_time_dropout", 0.25, 0.04), ("ssn", 0.3, 0.1)):
        for metric, v in (("rauc_random", random), ("rauc_oracle", oracle)):
            res += rows([v], metric=metric, task="dice_retention", model=model, measure="", aggregation="")
    res = pd.DataFrame(res)
    samples = np.stack([np.r_[v, v + rng.normal(0, 0.05, B - 1)] for v in res["value"]])
    return load_run(write_stats_run(tmp_path / "run", res, samples, tasks=("failure_detection", "dice_retention")))


def test_agreement_leaves_out_baselines_and_names_identical_metrics_together(tmp_path):
    run = _retention_run(tmp_path)
    tau = ranking.metric_agreement(run)
    pairs = set(zip(tau["task"], tau["metric_a"], tau["metric_b"]))
    assert ("dice_retention", "rauc_random", "rauc_oracle") not in pairs  # both the model's Dice alone
    assert pairs == {("failure_detection", "aurc", "augrc")}
    row = tau.iloc[0]
    assert (row["label_a"], row["label_b"]) == ("AURC", "AUGRC = Dice R-AUC")
    assert ranking.left_out_of_agreement(run.spec) == [("dice_retention", "rauc_random"),
                                                       ("dice_retention", "rauc_oracle")]
