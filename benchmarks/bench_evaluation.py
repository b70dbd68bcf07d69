"""Fused per-case evaluation vs a straightforward research-script baseline, in one run.

Workload per case (S = 10 samples, C = 2 classes, 64^3 voxels, 3 raters): the paper's measures
(predictive entropy, expected entropy, mutual information, 1 - max softmax) x aggregations
(image sum, patch 10^3, threshold), Dice per rater, NCC against the raters' variance, GED and
calibration bins with Platt-scaled confidences.

Cases are written once, before timing, as float16 ``.npy`` files (as the prediction cache
stores them). The baseline computes the same numbers the way separate research scripts do: one
pass over the cases per measure and task (scores for OoD/failure detection, calibration,
ambiguity; 13 passes), each re-reading every case (and recomputing the prediction where it needs
one), one numpy function per measure (mutual information recomputes both entropies) with a Python
loop over samples, patch sums with ``scipy.signal.convolve``, GED with a double loop over mask
pairs, calibration with a loop over bins. The fused evaluation reads each case once. The public-API
path is what a user composes from the documented API (docs/architecture.md, "Public Python API") without the fused
evaluation: per case, each registry measure's map, each aggregation object, and the plain
functions of ``values_seg.metrics`` (Dice, GED, NCC, Platt scaling, ACE), one call per number.
All three are checked to agree before timing.

Timing: each side's cases/second is the best of ``--repeats`` timed passes; the whole comparison
runs ``--runs`` times (default 3) and the median of the per-run ratios is the result. Also prints
the peak resident memory of the fused evaluation streaming over 50 and 100 cases (each in a fresh
process, so the peaks are comparable). Torch runs on ``--threads`` threads (default 1, as the
baseline's NumPy/SciPy code runs on one core: the same resources on both sides, and no stalls of
torch's parallel ops behind another process on a shared machine).

The last line sets the fused evaluation against its floor, both measured here on the same cases:
the floor is what any evaluation of the case must do (read the float16 samples, convert them to
float32, one vectorised log over all of them); the fused side opens the case as the evaluation
stage does (less the cache's hash check) and evaluates it. Both are CPU seconds of this process
per case (best of ``--repeats`` passes, alternated), so other load on a shared machine does not
count; with one thread that is the time on one core. The C allocator keeps freed memory for the
next case and asks for huge pages, as in the run's worker processes (:mod:`values_seg.runtime.allocator`;
the script starts itself again with glibc's tunable; ``--small-pages``: without it).

    python benchmarks/bench_evaluation.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import numpy as np
import scipy.signal
import scipy.special
import torch

from values_seg import metrics, registry
from values_seg.runtime.allocator import keep_freed_memory
from values_seg.components.case_context import CaseContext
from values_seg.components.settings import EvaluationSettings
from values_seg.evaluation.per_case import aggregations_for, evaluate_case
from values_seg.components.quantity import resolve
from values_seg.engine.predictions import stored_array
from values_seg.numerics.stored_samples import StoredSamples, as_float32
from values_seg.storage.cache_store import mapped
from values_seg_plugins.quantities.calibration import FINE_BINS
from _timing import as_the_workers_allocate, best_time

MEASURES = ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"]
SHAPE, S, C, R, PATCH, N_BINS = (64, 64, 64), 10, 2, 3, 10, 20
PLATT = (-4.0, -2.0)
THRESHOLD = 0.3


def make_case(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    grid = torch.stack(torch.meshgrid(*[torch.arange(n, dtype=torch.float32) for n in SHAPE], indexing="ij"))
    radius = (grid - 32).pow(2).sum(0).sqrt()
    logits = torch.zeros(S, C, *SHAPE)
    logits[:, 1] = (14 - radius) / 2 + torch.randn(S, *SHAPE, generator=g)
    raters = torch.stack([(radius < r).long() for r in (11, 13, 15)])
    return torch.softmax(logits, dim=1), raters


# ---------------------------------------------------------------- the research-script baseline
def pe(p):
    mean = p.mean(0)
    return -np.sum(scipy.special.xlogy(mean, mean), axis=0)


def ee(p):
    total = np.zeros(p.shape[2:])
    for s in range(p.shape[0]):
        total += -np.sum(scipy.special.xlogy(p[s], p[s]), axis=0)
    return total / p.shape[0]


def mi(p):
    return np.maximum(pe(p) - ee(p), 0)


def msr(p):
    return 1 - p.mean(0).max(0)


def dice_np(a, b):
    a, b = a > 0, b > 0
    denominator = a.sum() + b.sum()
    return 1.0 if denominator == 0 else 2.0 * np.logical_and(a, b).sum() / denominator


@contextlib.contextmanager
def opened_case(folder: Path, i: int) -> Iterator[tuple[StoredSamples, torch.Tensor]]:
    """A case as the evaluation stage opens it (``CaseSamples.opened``, less its hash check): the
    samples as stored, float16 viewed where they lie in the mapped file, and the raters."""
    with mapped(folder / f"{i}_samples.npy") as samples, mapped(folder / f"{i}_raters.npy") as raters:
        yield StoredSamples(stored_array(samples)), torch.from_numpy(stored_array(raters).copy())


def load_samples(folder: Path, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    """As ``CaseSamples.load`` reads a case (less its hash check): float32 in torch, renormalised
    over C, known valid (checked when predicted)."""
    with opened_case(folder, i) as (samples, raters):
        return samples.tensor(), raters


def floor(folder: Path, n_cases: int) -> None:
    """What any evaluation of the cases must do: read the float16 samples (mapped, as the fused
    side reads them), convert them to float32, and one vectorised log over all of them."""
    for i in range(n_cases):
        with mapped(folder / f"{i}_samples.npy") as data:
            samples = as_float32(stored_array(data)).numpy()
        with np.errstate(divide="ignore"):
            np.log(samples, out=samples)


def cpu_ms_per_case(sides: dict, n_cases: int, repeats: int) -> dict[str, float]:
    """Per side (name -> ``fn()`` over ``n_cases`` cases), the least CPU milliseconds of this
    process per case over ``repeats`` passes, the sides alternated."""
    best = {name: float("inf") for name in sides}
    for _ in range(repeats):
        for name, fn in sides.items():
            start = time.process_time()
            fn()
            best[name] = min(best[name], (time.process_time() - start) / n_cases * 1e3)
    return best


def load_case(folder: Path, i: int, dtype=np.float64):
    samples, raters = load_samples(folder, i)  # the same values as the other sides
    return samples.numpy().astype(dtype), raters.numpy()


def baseline_scores_pass(folder: Path, n_cases: int, name: str, fn) -> dict:
    """OoD / failure-detection script: the aggregated scores of one measure."""
    out = {}
    for i in range(n_cases):
        samples, _ = load_case(folder, i)
        u = fn(samples)
        out[(i, name, "image")] = float(u.sum())
        out[(i, name, "patch")] = float(scipy.signal.convolve(u, np.ones((PATCH,) * u.ndim), mode="valid").max())
        selected = u[u >= THRESHOLD]
        out[(i, name, "threshold")] = float(selected.mean()) if selected.size else 0.0
    return out


def baseline_calibration_pass(folder: Path, n_cases: int, name: str, fn) -> dict:
    """Calibration script: Platt-scaled confidences of one measure, binned per rater."""
    out = {}
    for i in range(n_cases):
        samples, raters = load_case(folder, i)
        pred = samples.mean(0).argmax(0)
        u = fn(samples)
        conf = 1 / (1 + np.exp(PLATT[0] * (-u) + PLATT[1]))
        count, conf_sum, acc_sum = np.zeros(N_BINS), np.zeros(N_BINS), np.zeros(N_BINS)
        for r in raters:
            correct = pred == r
            for k in range(N_BINS):
                upper = conf <= (k + 1) / N_BINS if k == N_BINS - 1 else conf < (k + 1) / N_BINS
                in_bin = (conf >= k / N_BINS) & upper
                count[k] += in_bin.sum()
                conf_sum[k] += conf[in_bin].sum()
                acc_sum[k] += correct[in_bin].sum()
        used = count > 0
        out[(i, "ace", name)] = float(np.mean(np.abs(conf_sum[used] / count[used] - acc_sum[used] / count[used])))
    return out


def baseline_ambiguity_pass(folder: Path, n_cases: int, name: str, fn) -> dict:
    """Ambiguity script: NCC of one measure's map with the raters' variance."""
    out = {}
    for i in range(n_cases):
        samples, raters = load_case(folder, i)
        variance = raters.var(axis=0)
        u = fn(samples)
        a, b = (u - u.mean()), (variance - variance.mean())
        out[(i, "ncc", name)] = float((a * b).mean() / (u.std() * variance.std()))
    return out


def baseline_segmentation_pass(folder: Path, n_cases: int) -> dict:
    out = {}
    for i in range(n_cases):
        samples, raters = load_case(folder, i)
        pred = samples.mean(0).argmax(0)
        out[(i, "dice")] = float(np.mean([dice_np(pred, r) for r in raters]))
        masks = list(samples.argmax(1)) + list(raters)
        n_pred = samples.shape[0]
        cross = np.mean([1 - dice_np(a, b) for a in masks[:n_pred] for b in masks[n_pred:]])
        within_p = np.mean([1 - dice_np(a, b) for a in masks[:n_pred] for b in masks[:n_pred]])
        within_r = np.mean([1 - dice_np(a, b) for a in masks[n_pred:] for b in masks[n_pred:]])
        out[(i, "ged")] = float(2 * cross - within_p - within_r)
    return out


def baseline(folder: Path, n_cases: int) -> dict:
    """One script per task and measure, each a pass over the cases (3 x 4 + 1 = 13 passes)."""
    out = baseline_segmentation_pass(folder, n_cases)
    for name, fn in zip(MEASURES, (pe, ee, mi, msr)):
        for task_pass in (baseline_scores_pass, baseline_calibration_pass, baseline_ambiguity_pass):
            out.update(task_pass(folder, n_cases, name, fn))
    return out


# ---------------------------------------------------------------- values-seg's fused evaluation
def fused_setup():
    measures = {n: registry.create("measure", n) for n in MEASURES}
    factories = {
        "image": lambda: registry.create("aggregation", "image"),
        "patch": lambda: registry.create("aggregation", "patch", size=PATCH),
        "threshold": lambda: registry.create("aggregation", "threshold"),
    }
    aggs = aggregations_for(MEASURES, factories)
    for (_, name), agg in aggs.items():
        if name == "threshold":
            agg.threshold_ = THRESHOLD  # as if fitted on a validation split
    return measures, aggs, {n: PLATT for n in MEASURES}


#: the per-case quantities of the paper's tasks (the pass computes what the tasks consume)
QUANTITIES = ["dice", "ged", "ncc", "calibration_bins"]


def fused_case(samples, raters, setup, case_id="case"):
    """The fused pass with the quantities' values by name (calibration bins at the ACE's N_BINS)."""
    measures, aggs, platt = setup
    ev = evaluate_case(samples, raters, measures, aggs, quantities=resolve(QUANTITIES),
                       fitted={"calibration_bins": platt},
                       context=CaseContext(case_id=case_id, settings=EvaluationSettings(n_bins=N_BINS // FINE_BINS)))
    return SimpleNamespace(scores=ev.scores, **ev.values)


def fused(folder: Path, n_cases: int, setup) -> list:
    """Each case read once; the whole evaluation in one pass; nothing kept but the results."""
    results = []
    for i in range(n_cases):
        with opened_case(folder, i) as (samples, raters):
            ev = fused_case(samples, raters, setup, case_id=str(i))
        results.append((ev.dice, ev.ged, ev.scores, ev.ncc, ev.calibration_bins))
    return results


# ---------------------------------------------------------------- the public API, one call per number
def public_api_case(samples, raters, setup) -> dict:
    measures, aggs, platt = setup
    samples, raters = samples.float(), raters.numpy()
    prediction = samples.mean(dim=0).max(dim=0).indices.numpy()
    variance = raters.astype(np.float32).var(axis=0)
    correct = np.stack([prediction == r for r in raters])
    out = {"dice": float(np.mean([metrics.dice(prediction, r) for r in raters])),
           "ged": metrics.ged(samples.max(dim=1).indices.numpy(), raters)}
    for name, measure in measures.items():
        umap = measure(samples)
        for agg in ("image", "patch", "threshold"):
            out[(name, agg)] = float(aggs[(name, agg)](umap))
        out[("ncc", name)] = metrics.ncc(variance, umap.numpy())
        confidence = metrics.platt_apply(umap.numpy(), *platt[name])
        out[("ace", name)] = metrics.ace(correct, np.broadcast_to(confidence, correct.shape), n_bins=N_BINS)
    return out


def public_api(folder: Path, n_cases: int, setup) -> list:
    return [public_api_case(*load_samples(folder, i), setup) for i in range(n_cases)]


def write_cases(folder: Path, n_cases: int) -> None:
    for i in range(n_cases):
        samples, raters = make_case(i)
        np.save(folder / f"{i}_samples.npy", samples.numpy().astype(np.float16))
        np.save(folder / f"{i}_raters.npy", raters.numpy().astype(np.uint8))


@contextlib.contextmanager
def one_core_cases(n_cases: int, small_pages: bool) -> Iterator[tuple[Path, tuple]]:
    """This process set up as the evaluation's workers run (freed memory kept, huge pages unless
    ``small_pages``; :mod:`values_seg.runtime.allocator`), on one torch thread: the fused setup and a
    temporary folder of ``n_cases`` written cases (for the scripts that time pieces of the pass)."""
    as_the_workers_allocate(small_pages)
    keep_freed_memory()
    torch.set_num_threads(1)
    setup = fused_setup()
    with tempfile.TemporaryDirectory() as tmp:
        write_cases(Path(tmp), n_cases)
        yield Path(tmp), setup


def stream(n_cases: int) -> int:
    """Evaluate ``n_cases`` cases from disk, one at a time, and return the peak RSS in MiB."""
    setup = fused_setup()
    with tempfile.TemporaryDirectory() as tmp:
        write_cases(Path(tmp), 4)
        for i in range(n_cases):  # cycling through 4 stored cases, each read from disk anew
            with opened_case(Path(tmp), i % 4) as case:
                fused_case(*case, setup, case_id=str(i))
    return peak_mib()


def peak_mib() -> int:
    """This process's peak resident memory in MiB: Linux's ``VmHWM`` (``ru_maxrss`` also counts
    the parent's peak at the time it started this process, whose memory it shared until exec),
    elsewhere ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def check_agreement(folder: Path, setup) -> None:
    from values_seg import metrics

    base = baseline(folder, 1)
    with opened_case(folder, 0) as case:
        ev = fused_case(*case, setup)
    assert abs(base[(0, "dice")] - ev.dice) < 1e-9 and abs(base[(0, "ged")] - ev.ged) < 1e-6
    for name in MEASURES:
        for agg in ("image", "patch", "threshold"):
            assert np.isclose(base[(0, name, agg)], ev.scores[(name, agg)], rtol=1e-4, atol=1e-3), (name, agg)
        assert np.isclose(base[(0, "ncc", name)], ev.ncc[name], atol=1e-4), name
        # the baseline's ACE is the plain equal-width one (no merging of sparse bins)
        plain = metrics.ace_from_bins(metrics.coarsen_bins(ev.calibration_bins[name], N_BINS), min_bin_mass=0)
        assert np.isclose(base[(0, "ace", name)], plain, atol=1e-4), name
    api = public_api_case(*load_samples(folder, 0), setup)
    assert abs(api["dice"] - ev.dice) < 1e-9 and abs(api["ged"] - ev.ged) < 1e-6
    for name in MEASURES:
        for agg in ("image", "patch", "threshold"):
            assert np.isclose(api[(name, agg)], ev.scores[(name, agg)], rtol=1e-4, atol=1e-3), (name, agg)
        assert np.isclose(api[("ncc", name)], ev.ncc[name], atol=1e-4), name
        assert np.isclose(api[("ace", name)], metrics.ace_from_bins(ev.calibration_bins[name]), atol=1e-4), name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=8, help="cases timed for the fused evaluation")
    parser.add_argument("--baseline-cases", type=int, default=2, help="cases timed for the baseline")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes of each side per run; the best counts")
    parser.add_argument("--runs", type=int, default=3, help="whole comparisons; the median ratio is reported")
    parser.add_argument("--memory", type=int, nargs="*", default=[50, 100], help="case counts for peak memory")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for the fused and public-API sides (the baseline's NumPy/SciPy code runs "
                             "on one core; on a shared machine, torch's parallel ops stall on a busy core)")
    parser.add_argument("--small-pages", action="store_true",
                        help="allocate without glibc's huge-page tunable (the run's workers set it)")
    parser.add_argument("--stream", type=int, help=argparse.SUPPRESS)  # child process mode
    args = parser.parse_args()
    as_the_workers_allocate(args.small_pages)
    keep_freed_memory()  # as the evaluation stage sets it (values_seg.runtime.allocator)
    if args.stream is not None:
        torch.set_num_threads(1)  # the probes run side by side: one core each
        print(json.dumps({"peak_mib": stream(args.stream)}))
        return

    torch.set_num_threads(args.threads)
    setup = fused_setup()
    print(f"workload: S={S}, C={C}, {'x'.join(map(str, SHAPE))}, {R} raters, {len(MEASURES)} measures x 3 aggregations; "
          f"{torch.get_num_threads()} torch thread(s); GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')!r}")
    ratios = {"fused": [], "public API": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_cases(folder, max(args.cases, args.baseline_cases))
        check_agreement(folder, setup)
        fused(folder, 1, setup)  # warm-up
        public_api(folder, 1, setup)
        for run in range(args.runs):
            baseline_rate = args.baseline_cases / best_time(lambda: baseline(folder, args.baseline_cases), args.repeats)
            fused_rate = args.cases / best_time(lambda: fused(folder, args.cases, setup), args.repeats)
            api_rate = args.cases / best_time(lambda: public_api(folder, args.cases, setup), args.repeats)
            ratios["fused"].append(fused_rate / baseline_rate)
            ratios["public API"].append(api_rate / baseline_rate)
            print(f"run {run + 1}: baseline {baseline_rate:6.2f} cases/s, fused {fused_rate:6.2f} cases/s "
                  f"({ratios['fused'][-1]:5.1f}x), public API {api_rate:6.2f} cases/s ({ratios['public API'][-1]:5.1f}x)")
    for side, values in ratios.items():
        print(f"speed-up, {side + ':':12s} {np.median(values):6.1f}x (median of {len(values)} runs)")
    # each probe in a fresh process (peak RSS is per process), both at once
    probes = {n: subprocess.Popen([sys.executable, __file__, "--stream", str(n)], stdout=subprocess.PIPE, text=True)
              for n in args.memory}
    for n, proc in probes.items():
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"memory probe for {n} cases failed")
        peak = json.loads(out.strip().splitlines()[-1])["peak_mib"]
        print(f"peak memory, fused evaluation streaming {n:4d} cases: {peak} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_cases(folder, args.cases)
        fused(folder, 1, setup)  # warm-up
        ms = cpu_ms_per_case({"fused": lambda: fused(folder, args.cases, setup),
                              "floor": lambda: floor(folder, args.cases)}, args.cases, max(args.repeats, 5))
    print(f"fused evaluation: {ms['fused']:.1f} ms per case, floor {ms['floor']:.1f} ms ({ms['fused'] / ms['floor']:.1f}×)")

if __name__ == "__main__":
    main()
