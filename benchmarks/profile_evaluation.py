"""Where one fused 64^3 case's time goes (S = 10, C = 2, 3 raters; the workload of
``bench_evaluation.py``): each piece's CPU milliseconds per case, measured inside the real pass.

The pieces are the evaluation's own functions, timed in place while ``bench_evaluation.fused``
streams over 8 cases ``--repeats`` times (so each piece sees the caches as the whole pass leaves
them, unlike a piece timed alone); each is timed exclusively (a piece called inside another counts
only once, in the inner one); "the rest" is the pass's total less the pieces. The second column
times each piece alone: its calls of one case replayed by themselves (best of ``--alone`` runs, the
case's inputs warm in cache, no other work in between; the pass from a fresh ``SampleStatistics``,
the opening with its closing), and sums them: what the evaluation would cost if every piece ran as
fast as it does alone, with nothing around it. The last lines are the floor of
``bench_evaluation.py`` (read + convert + one log pass), measured in the same process, and both
totals as multiples of it. Runs as the evaluation's workers do (huge pages; ``--small-pages``: without).

    python benchmarks/profile_evaluation.py
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import time

import bench_evaluation as bench
from values_seg.evaluation import per_case
from values_seg.components.measure import SampleStatistics
from values_seg.components.quantity import CaseInputs, resolve

spent: collections.Counter = collections.Counter()
_inner = [0.0]  # CPU seconds of the timed calls inside the current one
#: while a list: every timed call is recorded in it as (label, replay: a call that does it again alone)
recorded: list | None = None


def timed(fn, label, replay=None):
    """``fn`` counting its exclusive CPU time under ``label`` (a callable: of the call's arguments);
    ``replay(fn, *args)``: a call that does the same work again (default: ``fn`` with the same arguments)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        outer, _inner[0] = _inner[0], 0.0
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.process_time() - start
            name = label(*args) if callable(label) else label
            spent[name] += took - _inner[0]
            _inner[0] = outer + took
            if recorded is not None:
                recorded.append((name, replay(fn, *args) if replay else lambda: fn(*args, **kwargs)))
    return call


def fresh_statistics(fn, stats):
    """The pass again, on a new :class:`SampleStatistics` of the same samples (its results are cached)."""
    return lambda: fn(SampleStatistics(stats._stored))


def afresh(fn, inputs):
    """The raters' agreement again (the case's inputs keep it once derived)."""
    def again():
        inputs._agreement = None
        return fn(inputs)
    return again


def reopened(enter, context):
    """The case's opening again, with its closing (``bench.opened_case`` of the same case)."""
    folder, i = context.case

    def again():
        with bench_opened(folder, i):
            pass
    return again


def alone(calls: list, repeats: int) -> dict[str, float]:
    """CPU ms per label of one case's recorded ``calls``, each replayed by itself ``repeats`` times (the
    best), exclusively: less the timed calls inside it (each replayed on its own too)."""
    out: collections.Counter = collections.Counter()
    for name, again in calls:
        again()  # warm
        best = float("inf")
        for _ in range(repeats):
            _inner[0] = 0.0
            start = time.process_time()
            again()
            best = min(best, time.process_time() - start - _inner[0])
        out[name] += best * 1e3
    return out


bench_opened = bench.opened_case  # the benchmark's own, before instrument() wraps it


def opening(opened_case):
    """``bench.opened_case`` with the CPU time of its opening counted as "open"."""
    @contextlib.contextmanager
    def opened(*args):
        context = opened_case(*args)
        context.case = args
        with contextlib.ExitStack() as stack:
            case = timed(stack.enter_context, "open: map the case, view it as stored", replay=reopened)(context)
            yield case
    return opened


def instrument() -> None:
    bench.opened_case = opening(bench.opened_case)
    for name, label in (("_one_pass", "one pass: widen, renormalise, logs, mean, EE, PE, labels"),
                        ("entropy_of_mean", "entropy of the mean (PE)")):
        prop = SampleStatistics.__dict__[name]
        prop.func = timed(prop.func, label, replay=fresh_statistics)
    per_case._checked_map = timed(per_case._checked_map, "maps: EE, MI, MSR, checks")
    per_case._statistics_and_maps = timed(per_case._statistics_and_maps, "stack of the maps")
    per_case.class_argmax = timed(per_case.class_argmax, "prediction (argmax of the mean)")
    per_case.score_stack = timed(per_case.score_stack, lambda *a: f"aggregation {a[4]} (4 maps)")
    CaseInputs.agreement = timed(CaseInputs.agreement, "agreement of the raters with the prediction", replay=afresh)
    for quantity in resolve(bench.QUANTITIES).values():
        cls = type(quantity)
        cls.compute = timed(cls.compute, f"quantity {quantity.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="passes over the 8 cases")
    parser.add_argument("--alone", type=int, default=50, help="runs of each piece alone (the best counts)")
    parser.add_argument("--small-pages", action="store_true", help="without glibc's huge-page tunable")
    args = parser.parse_args()
    with bench.one_core_cases(8, args.small_pages) as (folder, setup):
        bench.fused(folder, 8, setup)  # compiled, warm
        floor = bench.cpu_ms_per_case({"floor": lambda: bench.floor(folder, 8)}, 8, 5)["floor"]
        instrument()
        start = time.process_time()
        for _ in range(args.repeats):
            bench.fused(folder, 8, setup)
        total = (time.process_time() - start) * 1e3 / (8 * args.repeats)
        ms_per_case = {k: v * 1e3 / (8 * args.repeats) for k, v in spent.items()}
        global recorded
        recorded = []
        with bench.opened_case(folder, 0) as case:  # one case's calls recorded, then replayed while it is open
            bench.fused_case(*case, setup)
            calls, recorded = recorded, None
            by_itself = alone(calls, args.alone)
    print(f"{'CPU ms per case':58s} {'in the pass':>11s} {'alone':>8s}")
    for label, ms in ms_per_case.items():
        print(f"{label:58s} {ms:8.2f} ms {by_itself[label]:5.2f} ms")
    print(f"{'the rest (the pass itself: dicts, checks, calls)':58s} {total - sum(ms_per_case.values()):8.2f} ms {'—':>8s}")  # nothing to replay
    pieces = sum(by_itself.values())
    print(f"{'= fused evaluation, per case':58s} {total:8.2f} ms {pieces:5.2f} ms  (in the pass: timers included)")
    print(f"{'floor: read + convert + one log pass':58s} {floor:8.2f} ms")
    print(f"{'= multiples of the floor':58s} {total / floor:8.2f} x  {pieces / floor:5.2f} x")


if __name__ == "__main__":
    main()
