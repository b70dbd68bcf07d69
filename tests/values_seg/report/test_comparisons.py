"""Paired comparisons (values-seg compare): winners, paired differences and significance by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import false_discovery_control

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
    assert "Failure Detection: AURC i.i.d. ↓ [Holm, 2 tests]: wins Patch 2/2 (1 significant)" in text
    assert "n.s." in text and "p = " in text and "adjusted" in text
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


MODELS = ("ensemble", "test_time_dropout", "ssn", "test_time_augmentation")
MEASURES = ("predictive_entropy", "expected_entropy", "mutual_information")


@pytest.fixture()
def many_sets(tmp_path):
    """AURC and E-AURC (i.i.d., 12 sets: 4 models x 3 measures) and AURC OoD (3 sets) of patch vs threshold,
    one seed; the threshold's effect grows over the sets, so the raw p-values run from clear to none, several
    of them between 0.01 and 0.05."""
    rng = np.random.default_rng(5)
    res, samples = [], []
    sets = [(metric, split, model, measure) for metric, split in (("aurc", "iid"), ("eaurc", "iid"), ("aurc", "ood"))
            for model in MODELS for measure in MEASURES if split == "iid" or model == "ensemble"]
    for k, (metric, split, model, measure) in enumerate(sets):
        effect = 0.008 * (k % 12) / 11  # 0 .. 0.008 against a paired noise of 0.002
        case = rng.normal(0, 0.05, B)
        for aggregation, shift in (("patch", 0.0), ("threshold", effect)):
            res += rows([0.2 + shift], metric=metric, measure=measure, aggregation=aggregation, model=model,
                        split=split)
            samples.append(0.2 + shift + case + rng.normal(0, 0.0014, B))
    return write_stats_run(tmp_path / "run", pd.DataFrame(res), np.stack(samples))


def _holm(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p))))
    out = np.empty(len(p))
    out[order] = np.minimum(adjusted, 1)
    return out


def test_p_values_are_adjusted_per_metric_and_split(many_sets):
    out = comparisons.compare(load_run(many_sets), "aggregation")
    families = dict(iter(out.groupby(["metric", "split"])))
    assert {k: len(f) for k, f in families.items()} == {("aurc", "iid"): 12, ("eaurc", "iid"): 12, ("aurc", "ood"): 3}
    for (metric, split), f in families.items():
        p = f["p_value"].to_numpy()
        if len(f) > 10:  # a large family: Benjamini-Hochberg, as scipy computes it
            assert set(f["correction"]) == {"bh"}
            assert f["p_adjusted"].to_numpy() == pytest.approx(false_discovery_control(p, method="bh"))
        else:  # a small one: Holm
            assert set(f["correction"]) == {"holm"} and f["p_adjusted"].to_numpy() == pytest.approx(_holm(p))
        assert (f["family_size"] == len(f)).all()
        assert (f["significant"] == (f["p_adjusted"] < 0.05)).all()
    # the correction matters here: some differences pass p < 0.05 alone but not after it
    assert ((out["p_value"] < 0.05) & ~out["significant"]).any() and out["significant"].any()


def test_near_duplicate_metrics_count_once(many_sets, capsys):
    run = load_run(many_sets)
    out = comparisons.compare(run, "aggregation")
    assert set(out.loc[out["metric"] == "eaurc", "same_as"]) == {"Failure Detection: AURC"}
    assert set(out.loc[out["metric"] == "aurc", "same_as"]) == {""}
    assert main(["compare", str(many_sets), "--vary", "aggregation"]) == 0
    text = capsys.readouterr().out
    assert "Benjamini–Hochberg (false discovery rate) for families of more than 10 tests, Holm" in text
    assert "E-AURC i.i.d. ↓ [BH, 12 tests; same evidence as Failure Detection: AURC]" in text
    assert "AURC OoD ↓ [Holm, 3 tests]" in text
    evidence = out[out["metric"] == "aurc"]
    assert (f"{len(out)} paired differences in 3 families: {out['significant'].sum()} significant after the correction "
            f"({(out['p_value'] < 0.05).sum()} at p < 0.05 uncorrected)") in text
    assert (f"Near-duplicate metrics counted once: {len(evidence)} differences, {evidence['significant'].sum()} "
            f"significant ({(evidence['p_value'] < 0.05).sum()} uncorrected)") in text
    summary = pd.read_csv(many_sets / "comparisons" / "aggregation_wins.csv", keep_default_na=False)
    assert set(summary.loc[summary["metric"] == "eaurc", "same_as"]) == {"Failure Detection: AURC"}
    assert set(zip(summary["metric"], summary["correction"], summary["family_size"])) == {
        ("aurc", "bh", 12), ("eaurc", "bh", 12), ("aurc", "holm", 3)}


def test_an_unwritable_run_still_prints_its_result(two_aggregations, capsys):
    run_dir, _ = two_aggregations
    (run_dir / "comparisons").write_text("a file where the folder should be")  # the CSV files cannot be written
    assert main(["compare", str(run_dir), "--vary", "aggregation"]) == 1
    captured = capsys.readouterr()
    assert "Failure Detection: AURC i.i.d. ↓ [Holm, 2 tests]: wins Patch 2/2 (1 significant)" in captured.out
    assert captured.err.count("\n") == 1 and "could not save comparisons/aggregation.csv" in captured.err
    assert "the result above is complete" in captured.err and "Traceback" not in captured.err


def test_an_unwritable_run_still_prints_the_aggregation_verdict(two_aggregations, capsys):
    """Everything compare computed is printed before it writes: the verdict too (issue 31, item 13)."""
    run_dir, _ = two_aggregations
    (run_dir / "comparisons").write_text("a file where the folder should be")
    assert main(["compare", str(run_dir), "--vary", "aggregation"]) == 1
    captured = capsys.readouterr()
    verdict_text = captured.out[captured.out.index("Which aggregation?"):]
    assert "Failure Detection: AURC — toy_1 (iid), 2 combinations" in verdict_text
    assert "winner: Patch" in verdict_text and "Flips" in verdict_text
    assert "the result above is complete" in captured.err and "mean ranks:" not in captured.out


def segmentation_only(run_dir, models=("ensemble",)):
    """A run whose only task is segmentation (Dice: no measure, no aggregation)."""
    res = pd.DataFrame([r for m in models for r in rows([0.8], metric="dice", task="segmentation", measure="",
                                                        aggregation="", model=m)])
    samples = np.random.default_rng(0).normal(0.8, 0.02, (len(res), B))
    return write_stats_run(run_dir, res, samples, tasks=("segmentation",))


def test_nothing_to_compare(tmp_path, capsys):
    run_dir = segmentation_only(tmp_path / "run")
    for vary in comparisons.VARY:
        assert comparisons.compare(load_run(run_dir), vary).empty
    assert main(["compare", str(run_dir), "--vary", "aggregation"]) == 0
    assert "No sets of methods that differ in the aggregation only" in capsys.readouterr().out


def test_report_section_with_nothing_to_compare_says_so_in_one_line(tmp_path):
    from values_seg.report import build_report

    text = build_report(segmentation_only(tmp_path / "one")).read_text()
    section = text.split("## Paired comparisons: which choice wins where\n\n", 1)[1].split("\n\n## ", 1)[0]
    assert " ".join(section.split()) == ("Nothing to compare: no two methods of this run differ in one component only (on a table metric "
                       "with a declared direction).")
    assert "could not build" not in text
    text = build_report(segmentation_only(tmp_path / "two", models=("ensemble", "ssn"))).read_text()
    assert "### Varying the prediction model (C1)" in text and "Nothing to compare" not in text


def test_excess_metrics_are_their_own_evidence_when_the_model_varies(tmp_path):
    # the oracle of E-AURC / E-AUGRC depends on the prediction model: varying it, they are not AURC's evidence
    rng = np.random.default_rng(6)
    metrics = ("aurc", "eaurc", "augrc", "eaugrc")
    res = pd.DataFrame([r for metric in metrics for model in ("ensemble", "ssn")
                        for r in rows([rng.uniform(0.1, 0.3)], metric=metric, model=model)])
    run = load_run(write_stats_run(tmp_path / "run", res, rng.uniform(0.1, 0.3, (len(res), B))))
    out = comparisons.compare(run, "prediction_model").set_index("metric")["same_as"]
    assert out.to_dict() == {"aurc": "", "eaurc": "", "augrc": "Failure Detection: AURC",
                             "eaugrc": "Failure Detection: E-AURC"}
    note = comparisons.significance_note(0.95, run.spec)  # the report's note: both ways
    assert ("(AURC, E-AURC, AUGRC, E-AUGRC; ACE (paper eq. 11), ACE (merged bins); varying the prediction model: "
            "AURC, AUGRC; E-AURC, E-AUGRC; ACE (paper eq. 11), ACE (merged bins))") in note
    assert "(AURC, AUGRC; E-AURC, E-AUGRC; ACE (paper eq. 11), ACE (merged bins))" in comparisons.significance_note(
        0.95, run.spec, "prediction_model")


def test_near_duplicate_groups_come_from_the_declarations():
    """Any task's metric joins a group by declaring its ``evidence``; ``oracle_excess`` metrics form
    their own group only when the prediction model varies (their oracle depends on it alone)."""
    from values_seg.report.spec import ReportSpec
    from values_seg.components.task import Metric, Reading

    def task(label, *metrics):
        return {"label": label, "name": label, "metrics": [m.to_dict() for m in metrics]}

    spec = ReportSpec(components={"task": [
        task("fd", Metric("aurc", "lower", reading=Reading(evidence="risk")),
             Metric("eaurc", "lower", reading=Reading(evidence="risk", oracle_excess=True)), Metric("other", "lower")),
        task("mine", Metric("area", "lower", reading=Reading(evidence="risk")),
             Metric("lonely", "higher", reading=Reading(evidence="alone")))]})
    assert comparisons.near_duplicates("measure", spec) == [[("fd", "aurc"), ("fd", "eaurc"), ("mine", "area")],
                                                            [("mine", "lonely")]]
    assert comparisons.near_duplicates("prediction_model", spec) == [[("fd", "aurc"), ("mine", "area")],
                                                                     [("fd", "eaurc")], [("mine", "lonely")]]


def test_a_method_the_data_cannot_support_is_not_compared_and_the_count_is_said(two_aggregations, capsys):
    """Issue 31.11: an unsupported row (here PE × threshold, all scores tied) is in no paired test."""
    run_dir, samples = two_aggregations
    res = pd.read_csv(run_dir / "results.csv")
    tied = (res["measure"] == "predictive_entropy") & (res["aggregation"] == "threshold")
    res["supported"], res["support_note"] = ~tied, np.where(tied, "all scores tied: the uncertainty ranks no case "
                                                                  "above another", "")
    res.to_csv(run_dir / "results.csv", index=False)
    run = load_run(run_dir)
    out = comparisons.compare(run, "aggregation")
    assert out["measure"].tolist() == ["mutual_information"]  # PE's set has one supported choice left: no pair
    assert out["family_size"].tolist() == [1] and out["p_value"].iloc[0] == pytest.approx(p_value(samples[2] - samples[3]))
    assert comparisons.left_out(run, "aggregation") == (
        "⚠ 1 result (a method on one metric and split) left out (not compared): the data cannot support its value "
        "(all scores tied: the uncertainty ranks no case above another × 1; `supported` = False in results.csv).")
    assert comparisons.left_out(run, "aggregation", task="failure_detection").startswith("⚠ 1 result (a method")
    main(["compare", str(run_dir), "--vary", "aggregation"])
    assert "⚠ 1 result (a method on one metric and split) left out (not compared)" in capsys.readouterr().out
