"""What ``bench_evaluation.py``'s workload costs with no plugin boundary, against the same floor.

``bench_evaluation.py`` sets the fused evaluation (issue 34: "within 2x of its floor") against its
floor (read + convert + one log pass). This script measures the other side: the same per-case
numbers computed with no plugin boundary at all, as one hand-fused program for exactly the built-ins
of that workload (two classes, three raters who ignore no voxel; PE, EE, MI, MSR; image, patch and
threshold aggregation; Dice, GED, NCC and calibration bins of Platt-scaled confidences). It opens
the case as the evaluation does, runs the evaluation's own compiled pass over the stored float16
samples (mean, EE, PE, each sample's labels: the floor's read and log with the statistics in the
same loop), then one compiled traversal of the maps' voxels (:func:`map_pass`) that derives MI and
MSR, writes the stack of maps the patch aggregation needs, and accumulates everything else in that
loop: the image and threshold sums, the raters' agreement and variance, the NCC's sums, the Dice
counts, the GED's pattern histogram and the calibration bins (the Platt sigmoid by a polynomial exp
that vectorises). Then the patch's running window sums (the evaluation's own kernel). Its numbers
are checked against ``evaluate_case``'s before timing. Nothing of it is a component: it is what the
same per-voxel work costs done in one place (not a proof of a minimum: the first thing a design
without components would have to beat). It prints its parts' CPU ms per case inside a pass over the
cases, then, timed as ``bench_evaluation.py`` times its last line (CPU seconds per case, best of
alternated passes, one thread, the workers' allocator), the line ``hand-fused: X.X ms per case,
fused evaluation Y.Y ms, floor Z.Z ms (A.A× and B.B× the floor)``.

    python benchmarks/bench_hand_fused_evaluation.py
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from pathlib import Path

import numpy as np
import torch

import bench_evaluation as bench
from values_seg.numerics import kernels
from values_seg_plugins.quantities.calibration import bins_from_agreement
from values_seg.components.measure import SampleStatistics

CHUNK = 1024  # voxels whose codes and confidences one vectorised loop computes before they are counted


@functools.cache
def _map_pass():
    from llvmlite import ir
    from numba import njit, types
    from numba.extending import intrinsic

    @intrinsic
    def bits_float(typingctx, i):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())
        return types.float32(types.int32), codegen

    @njit(inline="always", error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
    def expf(x):  # pragma: no cover - runs compiled; Cephes' expf, vectorises (1.2 ulp on [-20, 10] against float64)
        x = min(max(x, np.float32(-87.0)), np.float32(88.0))
        n = np.floor(x * np.float32(1.44269504088896341) + np.float32(0.5))
        r = x - n * np.float32(0.693359375) + n * np.float32(2.12194440e-4)
        p = np.float32(1.9875691500e-4)
        p = p * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        p = p * r * r + r + np.float32(1.0)
        return p * bits_float((np.int32(n) + np.int32(127)) << np.int32(23))

    @njit(nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
    def map_pass(mean, pe, ee, labels, raters, platt, thresholds, n_bins, maps):  # pragma: no cover
        """One traversal of the voxels, a chunk at a time (see the module docstring); fills ``maps [4, N]``."""
        N, S, R = pe.shape[0], labels.shape[0], raters.shape[0]
        M, K = 4, R + 1
        image, above, n_above = np.zeros(M), np.zeros(M), np.zeros(M, np.int64)
        sum_uu, sum_uv = np.zeros(M), np.zeros(M)  # (the sum of the map is the image's)
        sum_v, sum_vv = 0.0, 0.0
        both, in_pred, in_rater = np.zeros(R, np.int64), 0, np.zeros(R, np.int64)
        L, P = kernels.BIN_LANES, kernels.LANES  # lanes: pixels in a row that add to one place take turns
        patterns = np.zeros((1 << (S + R)) * P, np.int64)
        pairs = np.zeros((M, n_bins * K * L * 2))  # per map, (bin, agreeing raters, lane): count, confidence sum
        conf = np.empty(CHUNK, np.float32)
        agree = np.empty(CHUNK, np.int32)
        codes = np.empty(CHUNK, np.int32)
        pred = np.empty(CHUNK, np.int32)
        variance = np.empty(CHUNK, np.float32)
        scale, top, one, zero = np.float32(n_bins), np.int32(n_bins - 1), np.float32(1.0), np.float32(0.0)
        for start in range(0, N, CHUNK):
            n = min(CHUNK, N - start)
            m0, m1, p, e = mean[0, start:start + n], mean[1, start:start + n], pe[start:start + n], ee[start:start + n]
            u0, u1 = maps[0, start:start + n], maps[1, start:start + n]
            u2, u3 = maps[2, start:start + n], maps[3, start:start + n]
            n_pred = 0
            for j in range(n):  # the maps and the prediction
                u0[j], u1[j] = p[j], e[j]
                u2[j] = max(p[j] - e[j], zero)
                u3[j] = one - max(m0[j], m1[j])
                pred[j] = np.int32(m1[j] > m0[j])
                n_pred += pred[j]
                codes[j], agree[j], variance[j] = 0, 0, zero
            in_pred += n_pred
            for s in range(S):
                row = labels[s, start:start + n]
                for j in range(n):
                    codes[j] |= np.int32(row[j]) << s
            for r in range(R):
                row = raters[r, start:start + n]
                t, g_sum = 0, 0
                for j in range(n):
                    g = np.int32(row[j])
                    codes[j] |= g << (S + r)
                    agree[j] += g == pred[j]
                    variance[j] += g
                    t += g & pred[j]
                    g_sum += g
                both[r] += t
                in_rater[r] += g_sum
            sv, svv = 0.0, 0.0
            for j in range(n):
                q = variance[j] / np.float32(R)
                v = q - q * q  # the raters' (population) variance of a binary label
                variance[j] = v
                sv += v
                svv += np.float64(v) * v
            sum_v += sv
            sum_vv += svv
            for j in range(n):
                patterns[codes[j] * P + (j & (P - 1))] += 1
            for m in range(M):
                u = maps[m, start:start + n]
                a, b, t = platt[m, 0], platt[m, 1], thresholds[m]
                su, suu, suv, sa, na = 0.0, 0.0, 0.0, 0.0, 0
                for j in range(n):  # vectorised: sums and confidences
                    x = np.float64(u[j])
                    su += x
                    suu += x * x
                    suv += x * variance[j]
                    sel = u[j] >= t
                    sa += x if sel else 0.0
                    na += sel
                    conf[j] = one / (one + expf(b - a * u[j]))
                image[m] += su
                sum_uu[m] += suu
                sum_uv[m] += suv
                above[m] += sa
                n_above[m] += na
                for j in range(n):  # (the chunk's patterns are counted: ``codes`` now holds bins)
                    codes[j] = ((min(np.int32(conf[j] * scale), top) * K + agree[j]) * L + (j & (L - 1))) * 2
                acc = pairs[m]
                for j in range(n):  # the bins: scattered
                    q = codes[j]
                    acc[q] += 1.0
                    acc[q + 1] += conf[j]
        per_lane = pairs.reshape(M, n_bins, K, L, 2).sum(axis=3)
        return (image, above, n_above, sum_uu, sum_uv, sum_v, sum_vv, both, in_pred, in_rater,
                patterns.reshape(-1, P).sum(axis=1), per_lane[..., 0].astype(np.int64), per_lane[..., 1].sum(axis=2))

    return map_pass


def map_pass(*args):
    return _map_pass()(*args)  # compiled on the first call


def ged_from_patterns(patterns: np.ndarray, n_masks: int, n_pred: int) -> float:
    """GED (eq. 14, d = 1 - Dice, ordered pairs with i = j) from the histogram of membership codes."""
    used = np.flatnonzero(patterns)
    member = ((used[:, None] >> np.arange(n_masks)) & 1).astype(np.float64)  # [codes, masks]
    inter = (member * patterns[used, None]).T @ member  # |A_i n A_j| (exact below 2^53)
    size = np.diag(inter)
    total = size[:, None] + size[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(total == 0, 0.0, 1.0 - 2.0 * inter / total)
    return float(2 * d[:n_pred, n_pred:].mean() - d[n_pred:, n_pred:].mean() - d[:n_pred, :n_pred].mean())


#: CPU seconds of the hand-fused program's parts (``part`` adds to it)
spent: collections.Counter = collections.Counter()


def part(name: str, fn, *args):
    start = time.process_time()
    try:
        return fn(*args)
    finally:
        spent[name] += time.process_time() - start


def hand_fused_case(samples, raters: torch.Tensor, setup) -> dict:
    """The workload's numbers for one case, in one place (module docstring)."""
    _, aggs, platt = setup
    stats = SampleStatistics(samples)  # the evaluation's own pass over the stored samples gives all four
    mean, ee, labels, pe = part("the samples' pass (the evaluation's)",
                                lambda: (stats.mean, stats.mean_entropy, stats.labels, stats.entropy_of_mean))
    S, N, R = labels.shape[0], mean[0].numel(), raters.shape[0]
    names = bench.MEASURES
    maps = np.empty((4, N), np.float32)
    rater_bits = np.ascontiguousarray(raters.reshape(R, -1).numpy(), dtype=np.uint8)
    (image, above, n_above, sum_uu, sum_uv, sum_v, sum_vv, both, in_pred, in_rater, patterns, counts,
     conf_sums) = part("one traversal of the maps' voxels", map_pass,
                       mean.reshape(2, -1).numpy(), pe.reshape(-1).numpy(), ee.reshape(-1).numpy(),
                       labels.reshape(S, -1).numpy().view(np.bool_), rater_bits,
                       np.asarray([platt[n] for n in names], np.float32),
                       np.asarray([aggs[(n, "threshold")].threshold_ for n in names], np.float32), bench.N_BINS, maps)
    patch = part("patch window sums (the evaluation's)", kernels.window_max, maps.reshape(4, *bench.SHAPE),
                 *([bench.PATCH] * 3))
    cov = sum_uv - image * sum_v / N
    var_u, var_v = sum_uu - image * image / N, sum_vv - sum_v * sum_v / N
    marked = in_pred + in_rater
    out = {"dice": float(np.mean(np.where(marked == 0, 1.0, 2 * both / np.maximum(marked, 1)))),  # both empty: 1
           "ged": ged_from_patterns(patterns, S + R, S)}
    for m, name in enumerate(names):
        out[(name, "image")], out[(name, "patch")] = image[m], patch[m]
        out[(name, "threshold")] = above[m] / n_above[m] if n_above[m] else 0.0
        out[("ncc", name)] = cov[m] / np.sqrt(var_u[m] * var_v)
        out[("bins", name)] = bins_from_agreement(counts[m], conf_sums[m], R)
    return out


#: calibration counts may differ by a few voxels whose confidence lies within the exp's rounding of a bin's edge
EDGE_VOXELS = 8


def check(folder: Path, n_cases: int, setup) -> None:
    """On every case, the numbers are the fused evaluation's (up to the order of additions and the exp's rounding)."""
    for i in range(n_cases):
        with bench.opened_case(folder, i) as case:
            check_case(bench.fused_case(*case, setup), hand_fused_case(*case, setup))


def check_case(ev, got: dict) -> None:
    assert got["dice"] == ev.dice and abs(got["ged"] - ev.ged) < 1e-12, (got["dice"], ev.dice, got["ged"], ev.ged)
    for name in bench.MEASURES:
        for agg in ("image", "patch", "threshold"):
            assert np.isclose(got[(name, agg)], ev.scores[(name, agg)], rtol=1e-9, atol=1e-12), (name, agg)
        assert np.isclose(got[("ncc", name)], ev.ncc[name], rtol=0, atol=1e-7), name
        mine, theirs = got[("bins", name)], ev.calibration_bins[name]
        assert np.abs(mine.count - theirs.count).sum() <= EDGE_VOXELS * bench.R, name
        assert np.abs(mine.correct_sum - theirs.correct_sum).sum() <= EDGE_VOXELS * bench.R, name
        moved = np.abs(mine.count - theirs.count)  # (pixel, rater) pairs in another bin, each a confidence <= 1
        assert (np.abs(mine.confidence_sum - theirs.confidence_sum) <= 1e-7 * theirs.confidence_sum + moved).all(), name


def hand_fused(folder: Path, n_cases: int, setup) -> None:
    for i in range(n_cases):
        with bench.opened_case(folder, i) as case:
            hand_fused_case(*case, setup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=8, help="cases written, checked and timed")
    parser.add_argument("--repeats", type=int, default=7, help="alternated timed passes; the best of each counts")
    parser.add_argument("--small-pages", action="store_true", help="allocate without glibc's huge-page tunable")
    args = parser.parse_args()
    with bench.one_core_cases(args.cases, args.small_pages) as (folder, setup):
        check(folder, args.cases, setup)  # (both sides compiled and warm after it)
        ms = bench.cpu_ms_per_case({"hand-fused": lambda: hand_fused(folder, args.cases, setup),
                                    "fused": lambda: bench.fused(folder, args.cases, setup),
                                    "floor": lambda: bench.floor(folder, args.cases)}, args.cases, args.repeats)
        spent.clear()
        start = time.process_time()
        hand_fused(folder, args.cases, setup)
        total = time.process_time() - start
    for name, seconds in [*spent.items(), ("the rest: open, arguments, results", total - sum(spent.values()))]:
        print(f"{name:40s} {seconds / args.cases * 1e3:5.2f} ms per case")
    print(f"hand-fused: {ms['hand-fused']:.1f} ms per case, fused evaluation {ms['fused']:.1f} ms, "
          f"floor {ms['floor']:.1f} ms "
          f"({ms['hand-fused'] / ms['floor']:.1f}× and {ms['fused'] / ms['floor']:.1f}× the floor)")


if __name__ == "__main__":
    main()
