"""Where one fused 64^3 case's time goes (S = 10, C = 2, 3 raters; the workload of
``bench_evaluation.py``): each piece's CPU milliseconds per case, measured inside the real pass.

The pieces are the evaluation's own functions, timed in place while ``bench_evaluation.fused``
streams over 8 cases ``--repeats`` times (so each piece sees the caches as the whole pass leaves
them, unlike a piece timed alone); each is timed exclusively (a piece called inside another counts
only once, in the inner one); "the rest" is the pass's total less the pieces. The last line is the
floor of ``bench_evaluation.py`` (read + convert + one log pass) measured in the same process. Runs
as the evaluation's workers do (huge pages; ``--small-pages``: without).

    python benchmarks/profile_evaluation.py
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import tempfile
import time
from pathlib import Path

import torch

import bench_evaluation as bench
from _timing import as_the_workers_allocate
from values_seg import evaluation
from values_seg.allocator import keep_freed_memory
from values_seg.measure import SampleStatistics
from values_seg.quantity import CaseInputs, resolve

spent: collections.Counter = collections.Counter()
_inner = [0.0]  # CPU seconds of the timed calls inside the current one


def timed(fn, label):
    """``fn`` counting its exclusive CPU time under ``label`` (a callable: of the call's arguments)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        outer, _inner[0] = _inner[0], 0.0
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.process_time() - start
            spent[label(*args) if callable(label) else label] += took - _inner[0]
            _inner[0] = outer + took
    return call


def opening(opened_case):
    """``bench.opened_case`` with the CPU time of its opening counted as "open"."""
    @contextlib.contextmanager
    def opened(*args):
        with contextlib.ExitStack() as stack:
            case = timed(stack.enter_context, "open: map the case, view it as stored")(opened_case(*args))
            yield case
    return opened


def instrument() -> None:
    bench.opened_case = opening(bench.opened_case)
    for name, label in (("_one_pass", "one pass: widen, renormalise, logs, mean, EE, PE, labels"),
                        ("entropy_of_mean", "entropy of the mean (PE)")):
        prop = SampleStatistics.__dict__[name]
        prop.func = timed(prop.func, label)
    evaluation._checked_map = timed(evaluation._checked_map, "maps: EE, MI, MSR, checks")
    evaluation._statistics_and_maps = timed(evaluation._statistics_and_maps, "stack of the maps")
    evaluation.class_argmax = timed(evaluation.class_argmax, "prediction (argmax of the mean)")
    evaluation.score_stack = timed(evaluation.score_stack, lambda *a: f"aggregation {a[4]} (4 maps)")
    CaseInputs.agreement = timed(CaseInputs.agreement, "agreement of the raters with the prediction")
    for quantity in resolve(bench.QUANTITIES).values():
        cls = type(quantity)
        cls.compute = timed(cls.compute, f"quantity {quantity.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="passes over the 8 cases")
    parser.add_argument("--small-pages", action="store_true", help="without glibc's huge-page tunable")
    args = parser.parse_args()
    as_the_workers_allocate(args.small_pages)
    keep_freed_memory()
    torch.set_num_threads(1)
    setup = bench.fused_setup()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bench.write_cases(folder, 8)
        bench.fused(folder, 8, setup)  # compiled, warm
        floor = bench.cpu_ms_per_case({"floor": lambda: bench.floor(folder, 8)}, 8, 5)["floor"]
        instrument()
        start = time.process_time()
        for _ in range(args.repeats):
            bench.fused(folder, 8, setup)
        total = (time.process_time() - start) * 1e3 / (8 * args.repeats)
    per_case = {k: v * 1e3 / (8 * args.repeats) for k, v in spent.items()}
    for label, ms in per_case.items():
        print(f"{label:50s} {ms:6.2f} ms")
    print(f"{'the rest (the pass itself: dicts, checks, calls)':50s} {total - sum(per_case.values()):6.2f} ms")
    print(f"{'= fused evaluation, per case':50s} {total:6.2f} ms  (timers included)")
    print(f"{'floor: read + convert + one log pass':50s} {floor:6.2f} ms")


if __name__ == "__main__":
    main()
