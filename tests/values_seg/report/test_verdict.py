"""The "Which aggregation?" verdict by hand: mean ranks, the sample-based aggregation joining every
measure, the paired test against the runner-up, the flips; the heat map is drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from values_seg.report import load_run
from values_seg.report.plots.verdict import plot_verdict_heatmap
from values_seg.report.verdict import describe, verdict

from .conftest import write_stats_run
from .test_intervals import rows

B = 200
# OoD AUROC (higher is better), one model. Ranks per measure:
#   PE: patch 0.9 (1), pairwise_dice 0.75 (2), threshold 0.7 (3), image 0.4 (4)
#   MI: threshold 0.85 (1), patch 0.8 (2), pairwise_dice 0.75 (3), image 0.6 (4)
# mean ranks: patch 1.5, threshold 2.0, pairwise_dice 2.5, image 4.0
VALUES = {("predictive_entropy", "patch"): 0.9, ("predictive_entropy", "threshold"): 0.7,
          ("predictive_entropy", "image"): 0.4, ("mutual_information", "patch"): 0.8,
          ("mutual_information", "threshold"): 0.85, ("mutual_information", "image"): 0.6,
          ("samples", "pairwise_dice"): 0.75}


def _run(tmp_path, scenario="toy_1", noise=0.0):
    res, samples = [], []
    rng = np.random.default_rng(0)
    for (m, a), v in VALUES.items():
        ci = [(0.3, 0.45)] if (m, a) == ("predictive_entropy", "image") else [(v - 0.05, v + 0.05)]
        res += rows([v], metric="auroc", task="ood_detection", split="all", measure=m, aggregation=a, ci=ci)
        samples.append(v + noise * rng.standard_normal(B))
    res = pd.DataFrame(res).assign(scenario=scenario)
    return load_run(write_stats_run(tmp_path / "run", res, np.stack(samples), tasks=("ood_detection",)))


def test_mean_ranks_winner_and_flips_by_hand(tmp_path):
    run = _run(tmp_path)
    v = verdict(run)
    ranks = v.ranks.set_index("aggregation")["mean_rank"]
    assert ranks.to_dict() == pytest.approx({"patch": 1.5, "threshold": 2.0, "pairwise_dice": 2.5, "image": 4.0})
    assert (v.ranks["n_combinations"] == 2).all()
    # constant resamples: the intervals are the observed mean ranks, patch beats threshold on every one
    assert v.ranks.set_index("aggregation").loc["patch", ["ci_low", "ci_high"]].tolist() == [1.5, 1.5]
    w = v.winners.iloc[0]
    assert (w["winner"], w["runner_up"], w["gap"], w["p_value"], w["significant"]) == \
        ("patch", "threshold", 0.5, 2 / (B + 1), True)  # the smallest bootstrap p-value, never 0
    below = v.flips[v.flips["kind"] == "below chance"]
    assert len(below) == 1 and "predictive_entropy × image" in below["detail"].iloc[0]
    assert "with patch: 0.900" in below["detail"].iloc[0]
    text = describe(v, run)
    assert "winner: " in text and "significantly better than" in text and "below chance" in text


def test_noisy_resamples_are_not_significant_and_the_figure_is_drawn(tmp_path):
    run = _run(tmp_path, noise=0.3)
    v = verdict(run)
    w = v.winners.iloc[0]
    assert w["winner"] == "patch" and not w["significant"] and 0.05 <= w["p_value"] <= 1
    low, high = v.ranks.set_index("aggregation").loc["patch", ["ci_low", "ci_high"]]
    assert 1 <= low < 1.5 < high <= 4
    shares = v.ranks.set_index("aggregation").loc["patch", "rank_shares"].split()
    assert len(shares) == 4 and sum(map(float, shares)) == pytest.approx(1, abs=0.02)
    out = plot_verdict_heatmap(v.ranks, v.winners, tmp_path / "verdict.png", run.spec)
    assert out.stat().st_size > 1000


# ---------------------------------------------------------------- issue 31: claim no more than the data show


def _panel_rows(values: dict, scenario="toy_1", metric="auroc", task="ood_detection", split="all"):
    """Results rows of one seed from ``{(model, measure, aggregation): value}``, families declared."""
    out = []
    for (model, measure, aggregation), v in values.items():
        for r in rows([v], metric=metric, task=task, split=split, measure=measure, aggregation=aggregation,
                      model=model, ci=[(v - 0.05, v + 0.05)]):
            out.append({**r, "scenario": scenario,
                        "family": "deterministic" if model == "deterministic" else "bayesian"})
    return out


def _holm(p):
    """Holm's adjusted p-values by loop (float64), an independent reference."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    out, running = np.empty_like(p), 0.0
    for k, i in enumerate(order):
        running = max(running, (len(p) - k) * p[i])
        out[i] = min(1.0, running)
    return out


# Item 4. OoD AUROC; the pairwise Dice needs samples: none under the deterministic model.
#   deterministic × PE:  patch 0.60, threshold 0.90       -> threshold 1, patch 2
#   deterministic × MSR: patch 0.55, threshold 0.85       -> threshold 1, patch 2
#   dropout × PE:        patch 0.80, threshold 0.70, pairwise Dice 0.75 -> patch 1, threshold 2 (Dice 2 of 3)
# over all three combinations: threshold (1+1+2)/3 = 4/3 beats patch 5/3; over the dropout one only
# (the largest complete block, what main ranked) patch would win.
WITHOUT_SAMPLES = {("deterministic", "predictive_entropy", "patch"): 0.60,
                   ("deterministic", "predictive_entropy", "threshold"): 0.90,
                   ("deterministic", "max_softmax", "patch"): 0.55,
                   ("deterministic", "max_softmax", "threshold"): 0.85,
                   ("test_time_dropout", "predictive_entropy", "patch"): 0.80,
                   ("test_time_dropout", "predictive_entropy", "threshold"): 0.70,
                   ("test_time_dropout", "samples", "pairwise_dice"): 0.75}


def _without_samples_run(tmp_path):
    res = pd.DataFrame(_panel_rows(WITHOUT_SAMPLES))
    samples = np.stack([np.full(B, v) for v in WITHOUT_SAMPLES.values()])
    return load_run(write_stats_run(tmp_path / "run", res, samples, tasks=("ood_detection",)))


def test_the_main_ranking_keeps_the_model_a_sample_based_aggregation_lacks(tmp_path):
    run = _without_samples_run(tmp_path)
    v = verdict(run)
    main = v.ranks[v.ranks["block"] == 0].set_index("aggregation")
    assert main["mean_rank"].to_dict() == pytest.approx({"threshold": 4 / 3, "patch": 5 / 3})
    assert (main["n_combinations"] == 3).all()
    w = v.winners.set_index("block").loc[0]
    assert (w["winner"], w["runner_up"]) == ("threshold", "patch")
    # the pairwise Dice is ranked where it exists, with the others, and named as left out of the main ranking
    further = v.ranks[v.ranks["block"] == 1].set_index("aggregation")["mean_rank"]
    assert further.to_dict() == pytest.approx({"patch": 1, "pairwise_dice": 2, "threshold": 3})
    assert v.left_out["aggregation"].tolist() == ["pairwise_dice"]
    reason = v.left_out["reason"].iloc[0]
    assert f"no values with {run.spec.label('prediction_model', 'deterministic')}" in reason and "samples" in reason
    assert "left out of the main ranking: Pairwise Dice" in describe(v, run)


def test_the_section_says_what_was_left_out_and_why(tmp_path):
    from values_seg.report import build_report

    run = _without_samples_run(tmp_path)
    text = build_report(run.run_dir).read_text()
    section = " ".join(text[text.index("## Which aggregation?"):].split())  # report.md wraps at 100 columns
    assert "### Left out of the main ranking" in section
    assert "**Pairwise Dice**, OoD-D: AUROC: no values with" in section
    assert ("Its mean rank with the others where it exists, over TTD × PE (1 combination): toy_1 all 2.0 of 3."
            in section)


def _cases(scores: dict, n=6) -> pd.DataFrame:
    """cases.csv rows: ``{(model, measure, aggregation): per-case scores}``."""
    out = []
    for (model, measure, aggregation), s in scores.items():
        for i, score in enumerate(s):
            out.append(dict(dataset="toy", scenario="toy_1", seed=0, backbone="unet", prediction_model=model,
                            family="bayesian", case_id=f"c{i}", split="test", dice=0.5, ood=bool(i % 2),
                            measure=measure, aggregation=aggregation, score=float(score), uncertainty_type="PU"))
    return pd.DataFrame(out)


def _duplicate_run(tmp_path, swap: bool):
    """Patch and threshold score the cases proportionally (threshold = 3 × patch) under both measures,
    image differently; AUROC: patch = threshold = 0.8 (identical resamples), image 0.6. With ``swap``
    two cases trade threshold scores under MI: the ranks differ there, so they are not one entry."""
    rng = np.random.default_rng(3)
    values = {}
    for measure in ("predictive_entropy", "mutual_information"):
        values |= {("ensemble", measure, "patch"): 0.8, ("ensemble", measure, "threshold"): 0.8,
                   ("ensemble", measure, "image"): 0.6}
    res = pd.DataFrame(_panel_rows(values))
    noise = rng.normal(0, 0.01, (2, B))
    samples = np.stack([v + noise[int(k % 3 == 2)] for k, v in enumerate(values.values())])
    run_dir = write_stats_run(tmp_path / "run", res, samples, tasks=("ood_detection",))
    base = rng.permutation(6).astype(float) + 1
    scores = {}
    for measure in ("predictive_entropy", "mutual_information"):
        threshold = 3 * base
        if swap and measure == "mutual_information":
            threshold = threshold[[1, 0, 2, 3, 4, 5]]
        scores |= {("ensemble", measure, "patch"): base, ("ensemble", measure, "threshold"): threshold,
                   ("ensemble", measure, "image"): base[::-1]}
    _cases(scores).to_csv(run_dir / "cases.csv", index=False)
    return load_run(run_dir)


def test_aggregations_that_rank_the_cases_identically_are_one_entry(tmp_path):
    run = _duplicate_run(tmp_path, swap=False)
    v = verdict(run)
    assert v.merged == [["patch", "threshold"]]
    assert dict(zip(v.ranks["members"], v.ranks["mean_rank"])) == {"patch;threshold": 1.0, "image": 2.0}
    w = v.winners.iloc[0]
    assert (w["winner_entry"], w["runner_up_entry"]) == ("patch;threshold", "image")
    assert "Patch = Thresh" in describe(v, run)


def test_identical_values_are_a_tie_not_a_win(tmp_path):
    run = _duplicate_run(tmp_path, swap=True)  # the scores rank the cases differently once: two entries
    v = verdict(run)
    assert v.merged == []
    assert v.ranks.set_index("aggregation")["mean_rank"].to_dict() == {"patch": 1.5, "threshold": 1.5, "image": 3.0}
    w = v.winners.iloc[0]
    assert w["winner"] == "" and w["tied"] == "patch | threshold" and np.isnan(w["p_value"]) and not w["significant"]
    assert "tie: Patch and Thresh (no winner)" in describe(v, run)
    from values_seg.report import build_report

    text = build_report(run.run_dir).read_text()
    assert "OoD-D: AUROC, toy_1 all: tie: **Patch** and **Thresh** (no winner)" in text
    assert "| Patch | **1.5 [1.5, 1.5]** |" in text and "| Thresh | **1.5 [1.5, 1.5]** |" in text


def _two_scenarios(tmp_path, flips_in: int):
    """Two scenarios, one combination each: patch wins toy_1, threshold wins toy_3b (constant
    values 0.9 vs 0.7), image last. The winner loses to the runner-up in ``flips_in`` of the B
    resamples: the raw p-value is 2 (1 + flips_in) / (B + 1)."""
    res, samples = [], []
    for scenario, best in (("toy_1", "patch"), ("toy_3b", "threshold")):
        for aggregation in ("patch", "threshold", "image"):
            v = 0.9 if aggregation == best else 0.7 if aggregation != "image" else 0.5
            res += _panel_rows({("ensemble", "predictive_entropy", aggregation): v}, scenario=scenario)
            s = np.full(B, v)
            if aggregation == best:
                s[:flips_in] = 0.6
            samples.append(s)
    return load_run(write_stats_run(tmp_path / "run", pd.DataFrame(res), np.stack(samples), tasks=("ood_detection",)))


def test_p_values_are_never_zero_and_the_section_is_one_family(tmp_path):
    run = _two_scenarios(tmp_path, flips_in=0)
    v = verdict(run)
    p = 2 / (B + 1)
    assert v.winners["p_value"].tolist() == pytest.approx([p, p])
    assert v.winners["p_adjusted"].tolist() == pytest.approx(_holm([p, p]).tolist())
    assert set(v.winners["correction"]) == {"holm"} and (v.winners["family_size"] == 2).all()
    text = describe(v, run)
    assert "p = 0.000" not in text and f"p = {p:.3f}, adjusted {2 * p:.3f}" in text
    assert "conditional on the 1 training seed(s) run" in text
    # both winners significant after the adjustment and different: a flip
    assert v.winners["significant"].all() and (v.flips["kind"] == "best differs").sum() == 1


def test_a_flip_needs_two_winners_significant_after_the_adjustment(tmp_path):
    run = _two_scenarios(tmp_path, flips_in=3)  # raw p = 8 / 201 ≈ 0.040 each, Holm over the two: 0.080
    v = verdict(run)
    raw = 2 * (1 + 3) / (B + 1)
    assert v.winners["p_value"].tolist() == pytest.approx([raw, raw]) and raw < 0.05
    assert v.winners["p_adjusted"].tolist() == pytest.approx(_holm([raw, raw]).tolist())
    assert not v.winners["significant"].any()
    assert v.flips.empty  # the winners differ, but neither is significantly better than its runner-up


def test_below_chance_is_adjusted_over_every_method_tested(tmp_path):
    """AUROC below 0.5 with image under PE and MI (0.40, above 0.5 in 3 resamples: raw p = 8/201),
    patch above chance (0.9): two tests, Holm: 0.080, neither flagged. Strongly below (no
    resample above): flagged, with p = 2 / (B + 1), never 0."""
    values, samples = {}, []
    for measure, above in (("predictive_entropy", 3), ("mutual_information", 3), ("expected_entropy", 0)):
        for aggregation, v in (("patch", 0.9), ("image", 0.4)):
            values[("ensemble", measure, aggregation)] = v
            s = np.full(B, v)
            if aggregation == "image":
                s[:above] = 0.6
            samples.append(s)
    res = pd.DataFrame(_panel_rows(values))
    run = load_run(write_stats_run(tmp_path / "run", res, np.stack(samples), tasks=("ood_detection",)))
    v = verdict(run)
    raw = [8 / (B + 1), 8 / (B + 1), 2 / (B + 1)]
    assert v.chance["p_value"].tolist() == pytest.approx(raw)
    assert v.chance["p_adjusted"].tolist() == pytest.approx(_holm(raw).tolist())
    below = v.flips[v.flips["kind"] == "below chance"]
    assert len(below) == 1 and "expected_entropy × image" in below["detail"].iloc[0]


def test_an_unsupported_method_is_not_ranked_nor_tested_and_the_count_is_said(tmp_path):
    """Issue 31.11: PE × image (its AUROC below chance) rests on tied scores: it neither ranks nor flips."""
    run = _run(tmp_path)
    res = pd.read_csv(run.run_dir / "results.csv")
    bad = (res["measure"] == "predictive_entropy") & (res["aggregation"] == "image")
    res["supported"], res["support_note"] = ~bad, np.where(bad, "all scores tied: the uncertainty ranks no case "
                                                                "above another", "")
    res.to_csv(run.run_dir / "results.csv", index=False)
    run = load_run(run.run_dir)
    v = verdict(run)
    main = v.ranks[v.ranks["block"] == 0]
    assert "image" not in set(main["aggregation"])  # left in one combination only: out of the main ranking
    why = v.left_out.set_index("aggregation").loc["image", "reason"]
    assert why == "⚠ the data cannot support its values with Ensemble × PE: all scores tied: the uncertainty ranks " \
        "no case above another"  # not "exists only with ...": it exists, the data do not support it
    assert v.flips[v.flips["kind"] == "below chance"].empty and v.chance.empty
    assert v.unsupported.startswith("⚠ 1 result (a method on one metric and split) left out (not ranked or tested)")
    assert v.unsupported in describe(v, run)


def test_an_aggregation_declared_inverted_is_reported_as_inverted_not_as_a_collapse(tmp_path):
    """Geary's C (0 clustered, 1 random: the reverse of Moran's I) at AUROC 0.06 under PE, 0.10 under
    MI, with patch above chance: a strong detector with its sign reversed. Image at 0.40 under PE
    (usual orientation) stays a below-chance flip; all three are one test family."""
    values, samples = {}, []
    for measure, gearys in (("predictive_entropy", 0.06), ("mutual_information", 0.10)):
        for aggregation, v in (("patch", 0.9), ("gearys_c", gearys), ("image", 0.4 if measure == "predictive_entropy"
                                                                       else 0.7)):
            values[("ensemble", measure, aggregation)] = v
            samples.append(np.full(B, v))
    res = pd.DataFrame(_panel_rows(values))
    run = load_run(write_stats_run(tmp_path / "run", res, np.stack(samples), tasks=("ood_detection",)))
    assert run.spec.inverted("gearys_c") and not run.spec.inverted("image")  # components.json records it
    v = verdict(run)
    assert len(v.chance) == 3 and v.chance["significant"].all()  # one family, the same tests as before
    assert v.flips["kind"].tolist() == ["below chance"] and "predictive_entropy × image" in v.flips["detail"].iloc[0]
    assert v.inverted["kind"].tolist() == ["inverted", "inverted"]
    first = v.inverted["detail"].iloc[0]
    assert "predictive_entropy × gearys_c: 0.060" in first and "declared inverted (lower = more uncertain)" in first
    assert "0.940 read the other way round" in first and "with patch" not in first
    text = describe(v, run)
    assert "Inverted (aggregations declared lower = more uncertain, significantly below chance: not flips)" in text
    flips_part = text.split("\nFlips:")[1].split("\nInverted")[0]
    assert "gearys_c" not in flips_part and "image" in flips_part
