"""Aggregations: Moran's I / Geary's C on a 64^3 map in ms, and the fused evaluation's time with
every aggregation (~25) against the six of before, in one run.

Workload of the ratio: the quick toy study's cases (S = 10 samples, C = 2, 32 x 32, 3 raters),
its four measures, the per-case quantities of OoD and failure detection, through
:func:`values_seg.evaluation.evaluate_case`, once with the six aggregations values-seg shipped
(image sum, patch 10, threshold, quantile, foreground mean, boundary mean) and once with every
aggregation of ``experiments/aggregations_quick.yaml`` (25, pairwise Dice included). Each side's
time is the best of ``--repeats`` passes over ``--cases`` cases; the pass is repeated ``--runs``
times and the median ratio printed. Also: the 64^3 map's Moran's I and Geary's C (best of 5), and
for reference the aggrigator package's 2D Moran's I on 256 x 256 (it has no 3D form).

    python benchmarks/bench_aggregations.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from values_seg import registry
from values_seg.aggregation import SAMPLES, reads_samples
from values_seg.evaluation import evaluate_case
from values_seg.quantity import resolve
from _timing import best_time

MEASURES = ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"]
SIX = [("image", {}), ("patch", {"size": 10}), ("threshold", {}), ("quantile", {}), ("foreground_mean", {}),
       ("boundary_mean", {})]
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


def aggregations(entries, val_maps, val_predictions) -> dict:
    out = {}
    for label, name, params in entries:
        for m in ([SAMPLES] if reads_samples(registry.get("aggregation", name).obj) else MEASURES):
            agg = registry.create("aggregation", name, **params)
            if m != SAMPLES:
                agg.fit(val_maps[m], val_predictions)
            out[(m, label)] = agg
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
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
    val = [evaluate_case(s, r, measures, keep_maps=True) for s, r in cases[:8]]
    val_maps = {m: [ev.maps[m] for ev in val] for m in MEASURES}
    val_predictions = [ev.prediction for ev in val]
    six = aggregations([(n, n, p) for n, p in SIX], val_maps, val_predictions)
    every = aggregations(quick_aggregations(), val_maps, val_predictions)

    def passes(aggs):
        return lambda: [evaluate_case(s, r, measures, aggs, quantities=quantities) for s, r in cases]

    ratios = []
    for _ in range(args.runs):
        t6, tall = best_time(passes(six), args.repeats), best_time(passes(every), args.repeats)
        ratios.append(tall / t6)
        print(f"evaluation of {args.cases} cases: six aggregations {t6:.3f} s, "
              f"all {len({a for _, a in every})} aggregations {tall:.3f} s, ratio {tall / t6:.2f}")
    print(f"median ratio (every aggregation / six): {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
