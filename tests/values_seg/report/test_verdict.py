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
        ("patch", "threshold", 0.5, 0.0, True)
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
