"""Batched bootstrap metrics vs a loop of the scalar metrics over the resamples, in one run.

Workload: B = 1000 resamples (stratified by i.i.d./OoD) of N = 100 test cases, the size of a
quick-study subset, for every metric the tasks report: mean Dice, NaN-ignoring mean NCC, AUROC,
AUPRC and FPR@95%TPR (tied scores), AURC / E-AURC / AUGRC / E-AUGRC (tied confidences and risks;
each alone, and all four from one sort as the failure-detection task uses them), the image-level
Dice retention R-AUC, ACE from per-case calibration bins (20 bins) and the active-learning
improvement. The baseline is what a
straightforward bootstrap does: a Python loop over the resamples calling the scalar metric of
``values_seg.metrics`` on the gathered cases. Both are checked to agree before timing. Prints
the median time of each (over repeats) and the loop/batched ratio.

    python benchmarks/bench_bootstrap.py [--cases 100] [--resamples 1000]
"""

from __future__ import annotations

import argparse

import numpy as np

from values_seg import metrics
from values_seg.statistics import batched, bootstrap_indices
from _timing import median_time


def make_data(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    ood = np.arange(n) < n // 3
    score = np.round(rng.gamma(2.0, 1.0, n) + ood, 1)  # tied scores
    dice = np.round(np.clip(rng.beta(6, 2, n) - 0.3 * ood, 0, 1), 2)
    dice[:3] = 0.0  # missed objects: tied risk 1
    ncc = rng.uniform(-0.2, 0.9, n)
    ncc[::10] = np.nan
    bins = []
    for i in range(n):
        conf = rng.beta(5, 1.5, 2000)
        bins.append(metrics.calibration_bins(rng.random(conf.size) < conf**1.2, conf))
    first = rng.uniform(0.4, 0.7, n)
    return {
        "ood": ood, "score": score, "dice": dice, "ncc": ncc, "bins": bins,
        "first": first, "method": np.clip(first + rng.normal(0.06, 0.05, n), 0, 1),
        "random": np.clip(first + rng.normal(0.03, 0.05, n), 0, 1),
    }


def finite_mean(values) -> float:
    v = values[np.isfinite(values)]
    return float(v.mean()) if v.size else float("nan")


def workloads(d: dict):
    """(name, batched(indices), scalar(row)) per metric."""
    risks, conf = 1.0 - d["dice"], -d["score"]
    yield "mean Dice", lambda i: batched.mean(i, d["dice"]), lambda r: float(np.mean(d["dice"][r]))
    yield "mean NCC (NaN-ignoring)", lambda i: batched.mean(i, d["ncc"], ignore_nan=True), lambda r: finite_mean(d["ncc"][r])
    yield "AUROC", lambda i: batched.auroc(i, d["ood"], d["score"]), lambda r: metrics.auroc(d["ood"][r], d["score"][r])
    yield "AUPRC", lambda i: batched.auprc(i, d["ood"], d["score"]), lambda r: metrics.auprc(d["ood"][r], d["score"][r])
    yield "FPR@95%TPR", lambda i: batched.fpr_at_95_tpr(i, d["ood"], d["score"]), \
        lambda r: metrics.fpr_at_95_tpr(d["ood"][r], d["score"][r])
    yield "Dice R-AUC", lambda i: batched.dice_rauc(i, d["dice"], d["score"]), \
        lambda r: metrics.dice_retention_curve(d["dice"][r], d["score"][r]).rauc
    for name in ("aurc", "eaurc", "augrc", "eaugrc"):
        fb, fs = getattr(batched, name), getattr(metrics, name)
        yield name.upper().replace("E", "E-", 1) if name.startswith("e") else name.upper(), \
            (lambda i, fb=fb: fb(i, risks, conf)), (lambda r, fs=fs: fs(risks[r], conf[r]))
    yield "4 areas, one sort", lambda i: np.stack(list(batched.selective(i, risks, conf).values())), \
        lambda r: [metrics.aurc(risks[r], conf[r]), metrics.eaurc(risks[r], conf[r]),
                   metrics.augrc(risks[r], conf[r]), metrics.eaugrc(risks[r], conf[r])]
    yield "ACE (per-case bins)", lambda i: batched.ace(i, d["bins"]), \
        lambda r: metrics.ace_from_bins(sum(d["bins"][j] for j in r))
    yield "AL improvement", lambda i: batched.al_improvement(i, d["first"], d["method"], d["random"]), \
        lambda r: metrics.al_improvement(d["first"][r].mean(), d["method"][r].mean(), d["random"][r].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    d = make_data(args.cases)
    idx = bootstrap_indices(args.cases, args.resamples, seed=0, strata=d["ood"])
    print(f"B = {args.resamples} resamples of N = {args.cases} cases (median of {args.repeats} runs)")
    print(f"{'metric':26s} {'batched ms':>11s} {'loop ms':>10s} {'loop/batched':>13s}")
    total_b = total_l = 0.0
    for name, fb, fs in workloads(d):
        got = fb(idx)
        expected = np.array([fs(row) for row in idx])
        expected = expected.T if expected.ndim == 2 else expected
        np.testing.assert_allclose(got, expected, atol=1e-10, err_msg=name)
        tb = median_time(lambda: fb(idx), args.repeats)
        tl = median_time(lambda: [fs(row) for row in idx], max(1, args.repeats // 2))
        total_b, total_l = total_b + tb, total_l + tl
        print(f"{name:26s} {tb * 1e3:11.2f} {tl * 1e3:10.1f} {tl / tb:12.0f}x")
    print(f"{'all metrics':26s} {total_b * 1e3:11.2f} {total_l * 1e3:10.1f} {total_l / total_b:12.0f}x")


if __name__ == "__main__":
    main()
