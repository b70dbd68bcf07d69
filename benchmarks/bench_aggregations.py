"""Aggregations: Moran's I / Geary's C on a 64^3 map in ms, and the fused evaluation's time with
every aggregation (~25) against the six of before, in one run.

Workload of the ratio: the quick toy study's cases (S = 10 samples, C = 2, 32 x 32, 3 raters),
its four measures, the per-case quantities of OoD and failure detection, through
:func:`values_seg.evaluation.per_case.evaluate_case`, once with the six aggregations values-seg shipped
(image sum, patch 10, threshold, quantile, foreground mean, boundary mean) and once with every
aggregation of ``experiments/aggregations_quick.yaml`` (27: pairwise Dice and the two learned
ones included; fitted on 12 validation cases as the runner fits them). Each side's time is the
best of ``--repeats`` passes over ``--cases`` cases; the pass is repeated ``--runs`` times and
the median ratio printed. Also: the 64^3 map's Moran's I and Geary's C (best of 5), and
for reference the aggrigator package's 2D Moran's I on 256 x 256 (it has no 3D form).

With ``--study``: the quick study's evaluation stage itself (``values_seg.evaluation.combination``: every
combination's validation fit and test pass, reading the cached predictions and the toy cases),
with the six aggregations against the 25 of items 1-2 (all but the two learned ones, whose
random forests and mixtures are fitted per measure and combination) and against all 27, each computed afresh in a copy of the cache, twice
per side, best kept; the tasks' quantities those of ``toy_quick.yaml`` (every task but active
learning) and of ``aggregations_quick.yaml`` (OoD and failure detection). It needs the trained
models: ``--cache`` a run's cache of ``aggregations_quick.yaml``, else the study is run first
into a temporary directory (about 2 minutes on 2 cores).

    python benchmarks/bench_aggregations.py [--study [--cache RUN_DIR/cache]]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from values_seg import registry
from values_seg.components.aggregation import SAMPLES, aggregate, reads_samples, reads_scores
from values_seg.evaluation.per_case import evaluate_case
from values_seg.components.quantity import resolve
from _timing import best_time

MEASURES = ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"]
SIX = [("image", {}), ("patch", {"size": 10}), ("threshold", {}), ("quantile", {}), ("foreground_mean", {}),
       ("boundary_mean", {})]
LEARNED = ("learned_risk", "gmm_meta")
QUICK = Path(__file__).resolve().parent.parent / "experiments" / "aggregations_quick.yaml"


def quick_aggregations() -> list[tuple[str, str, dict]]:
    entries = OmegaConf.to_container(OmegaConf.load(QUICK).aggregations)
    out = []
    for e in entries:
        e = {"name": e} if isinstance(e, str) else e
        out.append((e.get("label") or e["name"], e["name"], e.get("params") or {}))
    return out


def make_case(seed: int, size: int = 32):
    g = torch.Generator().manual_seed(seed)
    grid = torch.stack(torch.meshgrid(*[torch.arange(size, dtype=torch.float32)] * 2, indexing="ij"))
    radius = (grid - size / 2).pow(2).sum(0).sqrt()
    logits = torch.zeros(10, 2, size, size)
    logits[:, 1] = (size / 4 - radius) / 2 + torch.randn(10, size, size, generator=g)
    raters = torch.stack([(radius < r).long() for r in (6, 8, 10)])
    return torch.softmax(logits, dim=1), raters


def aggregations(entries, val_maps, val_predictions, val_risks) -> dict:
    """Fitted as the runner fits them: the map aggregations, then the meta-aggregations on their scores."""
    out = {}
    for label, name, params in entries:
        for m in ([SAMPLES] if reads_samples(registry.get("aggregation", name).obj) else MEASURES):
            out[(m, label)] = registry.create("aggregation", name, **params)
    for (m, label), agg in sorted(out.items(), key=lambda kv: reads_scores(kv[1])):
        if m == SAMPLES:
            continue
        needs = getattr(agg, "fit_needs", ())
        kwargs = {"risks": val_risks} if "risks" in needs else {}
        if reads_scores(agg):
            names = [a for (mm, a), g in out.items() if mm == m and not getattr(g, "fit_needs", ())]
            scores = np.array([[aggregate(out[(m, a)], u, p) for a in names]
                               for u, p in zip(val_maps[m], val_predictions)])
            kwargs.update(scores=(names, scores), ood=[False] * len(val_predictions))
        agg.fit(val_maps[m], val_predictions, **kwargs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--study", action="store_true", help="also time the quick study's evaluation stage")
    parser.add_argument("--cache", help="the cache of a run of aggregations_quick.yaml (default: run it first)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    u = torch.rand(64, 64, 64, generator=torch.Generator().manual_seed(0))
    for name in ("morans_i", "gearys_c"):
        agg = registry.create("aggregation", name)
        print(f"{name} on a 64^3 map: {1000 * best_time(lambda: agg(u), 5):.1f} ms")
    try:
        from aggrigator.methods import AggregationMethods
        from aggrigator.uncertainty_maps import UncertaintyMap

        m2 = UncertaintyMap(np.random.default_rng(0).random((256, 256)))
        start = time.perf_counter()
        AggregationMethods.morans_I(m2)  # builds and caches its weights, compiles with numba
        first = time.perf_counter() - start
        again = best_time(lambda: AggregationMethods.morans_I(m2), 3)
        ours = best_time(lambda: registry.create("aggregation", "morans_i")(torch.from_numpy(m2.array)), 3)
        print(f"256^2 Moran's I: aggrigator {1000 * first:.0f} ms first call, {1000 * again:.1f} ms cached; "
              f"values-seg {1000 * ours:.1f} ms")
    except ImportError:
        print("aggrigator not installed (the test extra): its timing is skipped")

    measures = {m: registry.create("measure", m) for m in MEASURES}
    quantities = resolve(["dice"])  # what OoD and failure detection consume
    cases = [make_case(i) for i in range(args.cases)]
    val = [evaluate_case(s, r, measures, quantities=quantities, keep_maps=True)
           for s, r in (make_case(1000 + i) for i in range(12))]
    val_maps = {m: [ev.maps[m] for ev in val] for m in MEASURES}
    val_predictions, val_risks = [ev.prediction for ev in val], [1 - ev.values["dice"] for ev in val]
    six = aggregations([(n, n, p) for n, p in SIX], val_maps, val_predictions, val_risks)
    every = aggregations(quick_aggregations(), val_maps, val_predictions, val_risks)

    def passes(aggs):
        return lambda: [evaluate_case(s, r, measures, aggs, quantities=quantities) for s, r in cases]

    unlearned = {k: a for k, a in every.items() if k[1] not in LEARNED}
    ratios, ratios_unlearned = [], []
    for _ in range(args.runs):
        t6, tall = best_time(passes(six), args.repeats), best_time(passes(every), args.repeats)
        t25 = best_time(passes(unlearned), args.repeats)
        ratios.append(tall / t6)
        ratios_unlearned.append(t25 / t6)
        print(f"fused pass over {args.cases} cases: six aggregations {t6:.3f} s, "
              f"{len({a for _, a in unlearned})} (all but the learned) {t25:.3f} s, "
              f"all {len({a for _, a in every})} {tall:.3f} s")
    print(f"fused pass, median ratio: all but the learned / six {np.median(ratios_unlearned):.2f}; "
          f"every aggregation / six {np.median(ratios):.2f}")
    if args.study:
        study(args.cache)


def study(cache: str | None, repeats: int = 2) -> None:
    """The quick study's evaluation stage, six aggregations against every one (module docstring)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from values_seg.config.loading import load_config
    from values_seg.evaluation.combination import evaluation_folder, run_evaluation
    from values_seg.config.sweep import expand

    start = time.perf_counter()
    import sklearn.ensemble  # noqa: F401 - the learned aggregations' one-time import (per process), not timed
    import sklearn.mixture  # noqa: F401
    print(f"scikit-learn import (once per worker process, where a learned aggregation is configured): "
          f"{time.perf_counter() - start:.1f} s")
    work = Path(tempfile.mkdtemp(prefix="bench_aggregations_"))
    try:
        if cache is None:
            print("running experiments/aggregations_quick.yaml once for its trained models ...")
            subprocess.run([sys.executable, "-m", "values_seg.cli", "run", str(QUICK), "--out", str(work / "run"),
                            "--no-progress"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cache = str(work / "run" / "cache")
        copy = work / "cache"
        shutil.copytree(cache, copy, ignore=shutil.ignore_patterns("evaluations"))  # never touch the given cache
        every = OmegaConf.load(QUICK)
        six = OmegaConf.merge(every, {"aggregations": [{"name": n, "params": p} for n, p in SIX]})
        unlearned = OmegaConf.merge(every, {"aggregations": [a for a in OmegaConf.to_container(every.aggregations)
                                                             if a not in LEARNED]})
        for tasks in (["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "separation",
                       "ndsc_retention", "dice_retention"], ["ood_detection", "failure_detection"]):
            seconds = {}
            for label, base in (("six", six), ("unlearned", unlearned), ("all", every)):
                cfg = load_config(base=OmegaConf.to_container(OmegaConf.merge(base, {"tasks": tasks})))
                eval_cfg = {**cfg.evaluation, "threads": 1}
                consumed = [q for t in cfg.tasks for q in registry.create(
                    "task", t if isinstance(t, str) else t.name).consumes]
                combos = expand(cfg)
                best = float("inf")
                for _ in range(repeats):
                    for c in combos:
                        shutil.rmtree(evaluation_folder(c, copy, eval_cfg, consumed), ignore_errors=True)
                    start = time.perf_counter()
                    for c in combos:
                        run_evaluation(c, copy, eval_cfg, consumed, progress=False)
                    best = min(best, time.perf_counter() - start)
                seconds[label] = best
                n = len({a for c in combos for a in c.aggregations})
                print(f"  {label}: {n} aggregations, {len(combos)} combinations: {best:.1f} s")
            print(f"quick study's evaluation stage, tasks {', '.join(tasks)}: every aggregation but the learned "
                  f"/ six = {seconds['unlearned'] / seconds['six']:.2f}; every one / six = "
                  f"{seconds['all'] / seconds['six']:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
