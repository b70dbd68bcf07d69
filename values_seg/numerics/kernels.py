"""Compiled single passes (numba, compiled on first use) for the fused evaluation's per-case work.

Why, and how the pass over float16 samples widens them and takes its logs: docs/design-rationale.md,
"Compiled kernels".
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

LANES = 4  # interleaved accumulators: additions to the same bin or sum do not wait on each other


def _scalar_helpers() -> None:
    """Define the kernels' scalar helpers ``widen``, ``logf``, ``ylogy`` and ``binary_plogp``
    (module docstring) in this module,
    once, with numba's import (the kernels are compiled after it; the helpers live here, so that
    numba's disk cache of the kernels, keyed by this file, is never older than they are)."""
    if "widen" in globals():
        return
    from llvmlite import ir
    from numba import njit, types
    from numba.extending import intrinsic

    @intrinsic
    def widen(typingctx, x):
        """``x`` as the kernels compute with it: float16 bit patterns (``uint16``) as float32 (by
        the CPU's conversion where the target has one, else by :func:`_widened_by_integers`)."""
        if x == types.uint16:
            def codegen(context, builder, signature, args):
                if _converts_half(context.codegen().magic_tuple()):
                    return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
                return _widened_by_integers(builder, args[0])
            return types.float32(x), codegen
        return x(x), lambda context, builder, signature, args: args[0]

    @intrinsic
    def float_bits(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))
        return types.int32(types.float32), codegen

    @intrinsic
    def bits_float(typingctx, i):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())
        return types.float32(types.int32), codegen

    f32, i32 = np.float32, np.int32

    # Cephes logf (S. Moshier): log(x) = k log 2 + log(z), z = x / 2^k in [sqrt(1/2), sqrt(2)),
    # log(z) by a degree-9 polynomial in z - 1, log 2 split in two for exactness; within 1 ulp
    # for normal x (tests: against float64). Branch-free; for normal x and 0 only (log 0 is finite,
    # -88.03, and 0 log 0 counted as 0 by the kernels): what float16 values widened to float32 and
    # divided by their sum over C are (they are never subnormal in float32).
    @njit(inline="always", error_model="numpy")
    def logf(x):  # pragma: no cover - runs compiled
        bits = float_bits(x)
        k = (bits - i32(0x3F3504F3)) >> i32(23)
        f = bits_float(bits - (k << i32(23))) - f32(1)
        e = f32(k)
        y = f32(7.0376836292e-2) * f + f32(-1.1514610310e-1)
        y = y * f + f32(1.1676998740e-1)
        y = y * f + f32(-1.2420140846e-1)
        y = y * f + f32(1.4249322787e-1)
        y = y * f + f32(-1.6668057665e-1)
        y = y * f + f32(2.0000714765e-1)
        y = y * f + f32(-2.4999993993e-1)
        y = y * f + f32(3.3333331174e-1)
        ff = f * f
        y = f * ff * y + f32(-2.12194440e-4) * e - f32(0.5) * ff
        return (f + y) + f32(0.693359375) * e

    # y log y for y in [0.48, 1] (the larger of two probabilities that sum to 1) without a log:
    # x g(x) at x = 1 - y (exact in float32), g(x) = (1 - x) log(1 - x) / x by its Chebyshev
    # interpolant of degree 8 on [0, 0.52] (relative error below 7e-9; within 2 ulp in float32:
    # tests, against float64). With :func:`logf` for the smaller one, a binary entropy costs one log.
    g8, g7, g6, g5, g4, g3, g2, g1, g0 = (f32(c) for c in (
        0.1456294022883414, -0.16480453266590567, 0.13792791014935193, -0.005406096885617526,
        0.057446236044514265, 0.0825474881993617, 0.16670754783797603, 0.49999919156576716,
        -0.9999999973978861))

    @njit(inline="always", error_model="numpy")
    def ylogy(y):  # pragma: no cover - runs compiled
        x = f32(1) - y
        g = g8 * x + g7
        g = g * x + g6
        g = g * x + g5
        g = g * x + g4
        g = g * x + g3
        g = g * x + g2
        g = g * x + g1
        g = g * x + g0
        return x * g

    @njit(inline="always", error_model="numpy")
    def binary_plogp(a, b):  # pragma: no cover - runs compiled
        """``a log a + b log b`` (``0 log 0 = 0``) of float32 ``a + b = 1`` (to rounding): one log."""
        low, high = min(a, b), max(a, b)
        return (low * logf(low) if low > 0 else low - low) + ylogy(high)

    globals().update(widen=widen, logf=logf, ylogy=ylogy, binary_plogp=binary_plogp)


_HALF_LIBCALLS = ("__extendhfsf2", "__gnu_h2f_ieee")  # LLVM's runtime helpers for float16 -> float32


@functools.cache
def _converts_half(target: tuple[str, str, str]) -> bool:
    """Whether machine code for numba's ``target`` (its codegen's ``magic_tuple()``: triple, CPU
    and features, what numba's disk cache is keyed by) widens float16 by an instruction: not where
    LLVM lowers the conversion to a runtime helper, which numba's JIT does not link (e.g. x86-64
    without F16C, such as ``NUMBA_CPU_NAME=generic``). Probed from a one-instruction function's
    assembly."""
    import llvmlite.binding as ll
    from llvmlite import ir

    triple, cpu, features = target
    module = ir.Module("widen_probe")
    module.triple = triple
    fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.IntType(16)]), "widen_probe")
    builder = ir.IRBuilder(fn.append_basic_block())
    builder.ret(builder.fpext(builder.bitcast(fn.args[0], ir.HalfType()), ir.FloatType()))
    machine = ll.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features)
    assembly = machine.emit_assembly(ll.parse_assembly(str(module)))
    return not any(name in assembly for name in _HALF_LIBCALLS)


def _widened_by_integers(builder, bits):
    """The float32 value of float16 bit patterns ``bits`` (LLVM ``i16``) by integer arithmetic, as
    the IEEE conversion gives it (exact; a signalling NaN quieted): exponent and mantissa shifted
    into place and the exponent rebased (normal values); infinities and NaNs moved to the top
    exponent; zeros and subnormals built as 2^-14 (1 + m / 2^10) and 2^-14 subtracted (exact:
    the same exponent). Branch-free (selects), so that the pass's loop still vectorises."""
    from llvmlite import ir

    i32, f32 = ir.IntType(32), ir.FloatType()
    h = builder.zext(bits, i32)
    magnitude = builder.shl(builder.and_(h, i32(0x7FFF)), i32(13))  # float32's exponent and mantissa fields
    exponent = builder.and_(magnitude, i32(0x0F800000))
    normal = builder.add(magnitude, i32(112 << 23))  # exponent - 15 + 127
    special = builder.icmp_unsigned("==", exponent, i32(0x0F800000))  # infinity or NaN
    quiet = builder.select(builder.icmp_unsigned("!=", magnitude, i32(0x0F800000)), i32(0x00400000), i32(0))
    infinite_or_nan = builder.or_(builder.add(normal, i32(112 << 23)), quiet)
    small = builder.fsub(builder.bitcast(builder.add(normal, i32(1 << 23)), f32), f32(2.0**-14))
    value = builder.select(builder.icmp_unsigned("==", exponent, i32(0)), builder.bitcast(small, i32),
                           builder.select(special, infinite_or_nan, normal))
    return builder.bitcast(builder.or_(value, builder.shl(builder.and_(h, i32(0x8000)), i32(16))), f32)


def _compiled(fn=None, *, reorder: bool = False):
    """``fn`` compiled with numba on its first call (nopython, cached on disk; division as NumPy's:
    ``x / 0`` is inf or NaN, not an exception); ``reorder``: sums may be reassociated (into SIMD
    lanes: a different order of the same float64 additions)."""
    if fn is None:
        return functools.partial(_compiled, reorder=reorder)
    jitted = None

    @functools.wraps(fn)
    def call(*args):
        nonlocal jitted
        if jitted is None:
            import numba

            _scalar_helpers()
            jitted = numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "nsz"} if reorder else False)(fn)
        return jitted(*args)

    return call


@_compiled
def window_max(maps, wz, wy, wx):  # pragma: no cover - runs compiled
    """Per map of ``maps [M, Z, Y, X]``, the largest sum over the windows of ``(wz, wy, wx)`` (fully
    inside), in float64; a NaN or infinity in a map gives NaN. Running window sums, each axis in
    the order that keeps the additions contiguous: along z over whole planes, along y over rows;
    each plane's row sums are then stored transposed, so that the sums along x run over columns
    too (the window's cost does not depend on its size; the same sums as
    :func:`values_seg_plugins.aggregations.patch.window_sums` up to the order of additions)."""
    M, Z, Y, X = maps.shape
    nz, ny, nx = Z - wz + 1, Y - wy + 1, X - wx + 1
    out = np.empty(M)
    plane = np.empty((Y, X))  # the sums over the current z-window, per (y, x)
    row = np.empty(X)  # their sums over the current y-window j, per x
    rows = np.empty((X, ny))  # those of every j, transposed
    window = np.empty(ny)  # and their sums over the current x-window, per j
    top = np.empty(ny)  # the largest window sum so far, per j
    for m in range(M):
        plane[:, :] = 0.0
        for z in range(wz):
            for y in range(Y):
                for x in range(X):
                    plane[y, x] += maps[m, z, y, x]
        top[:] = -np.inf
        for z in range(nz):
            if z > 0:
                for y in range(Y):
                    for x in range(X):
                        plane[y, x] += np.float64(maps[m, z + wz - 1, y, x]) - np.float64(maps[m, z - 1, y, x])
            row[:] = 0.0
            for y in range(wy):
                for x in range(X):
                    row[x] += plane[y, x]
            for j in range(ny):
                if j > 0:
                    for x in range(X):
                        row[x] += plane[j + wy - 1, x] - plane[j - 1, x]
                for x in range(X):
                    rows[x, j] = row[x]
            window[:] = 0.0
            for x in range(wx):
                for j in range(ny):
                    window[j] += rows[x, j]
            for i in range(nx):
                if i > 0:
                    for j in range(ny):
                        window[j] += rows[i + wx - 1, j] - rows[i - 1, j]
                for j in range(ny):
                    v = window[j]
                    top[j] = v if v > top[j] else top[j]
        finite = True  # every voxel passed through the plane's sums: a NaN or infinity stays there
        for y in range(Y):
            for x in range(X):
                finite &= np.isfinite(plane[y, x])
        out[m] = top.max() if finite else np.nan
    return out


#: the lanes of :func:`calibration_counts`' histogram: a run of pixels in one bin (a smooth map's
#: background) adds into 16 places in turn, so no addition waits on the one before it (one lane
#: where the histogram has more than :data:`LANED_CODES` codes: it would no longer stay in cache)
BIN_LANES, LANED_CODES = 16, 2048
#: the pixels whose bins :func:`calibration_counts` computes in one vectorised loop before it counts them
CHUNK = 2048


@_compiled
def calibration_counts(confidence, n_correct, n_bins, scale, K):  # pragma: no cover - runs compiled
    """Per map of ``confidence [M, N]`` (values in [0, 1]) and equal-width bin ``min(floor(c *
    n_bins), n_bins - 1)`` (``c * scale`` in the maps' precision, ``scale = n_bins``): the pixel
    count per number of agreeing raters ``[M, n_bins, K]`` (``n_correct [N]`` in ``0 .. K - 1``)
    and the float64 sum of the confidences ``[M, n_bins]``. Per chunk of pixels, one vectorised
    loop gives each its code ``bin * K + agreeing``, and one loop adds 1 and its confidence to that
    code's float64 pair in lane ``i % BIN_LANES`` (one lane above :data:`LANED_CODES` codes; counts
    exact below 2^53)."""
    M, N = confidence.shape
    L = BIN_LANES if n_bins * K <= LANED_CODES else 1
    pairs = np.zeros((M, n_bins * K * L * 2))  # per map, code and lane: (count, confidence sum)
    codes = np.empty(CHUNK, np.int64)
    for m in range(M):
        acc = pairs[m]
        for start in range(0, N, CHUNK):
            n = min(CHUNK, N - start)
            values, agreeing = confidence[m, start:start + n], n_correct[start:start + n]
            for j in range(n):
                b = min(np.int32(values[j] * scale), np.int32(n_bins - 1))
                codes[j] = ((b * K + agreeing[j]) * L + (j & (L - 1))) * 2
            for j in range(n):
                q = codes[j]
                acc[q] += 1.0
                acc[q + 1] += values[j]
    per_lane = pairs.reshape(M, n_bins, K, L, 2).sum(axis=3)
    return per_lane[..., 0].astype(np.int64), per_lane[..., 1].sum(axis=2)


@_compiled(reorder=True)
def centred_products(a, b):  # pragma: no cover - runs compiled
    """For ``a [N]`` and each row of ``b [M, N]``: ``sum (a - mean a)^2``, ``sum (b - mean b)^2``
    and ``sum (a - mean a)(b - mean b)`` in float64 (two passes: the means, then the centred
    products), whether ``a`` is constant, and whether each row is constant ``[M]``."""
    M, N = b.shape
    sum_a, different_a = 0.0, 0
    for i in range(N):
        sum_a += a[i]
        different_a += a[i] != a[0]
    mean_a = sum_a / N
    aa = 0.0
    for i in range(N):
        aa += (a[i] - mean_a) * (a[i] - mean_a)
    bb, ab = np.zeros(M), np.zeros(M)
    constant = np.zeros(M, np.bool_)
    for k in range(M):
        first, total, different = b[k, 0], 0.0, 0
        for i in range(N):
            total += b[k, i]
            different += b[k, i] != first
        mean_b = total / N
        sq, cross = 0.0, 0.0
        for i in range(N):
            db = b[k, i] - mean_b
            sq += db * db
            cross += (a[i] - mean_a) * db
        bb[k], ab[k], constant[k] = sq, cross, different == 0
    return aa, bb, ab, different_a == 0, constant


@_compiled(reorder=True)
def sums_at_or_above(u, thresholds):  # pragma: no cover - runs compiled
    """Per row ``m`` of ``u [M, N]``: the float64 sum and the number of the values ``>=
    thresholds[m]`` (in ``u``'s precision)."""
    M, N = u.shape
    total = np.zeros(M)
    count = np.zeros(M, np.int64)
    for m in range(M):
        t, s, n = thresholds[m], 0.0, 0
        for i in range(N):
            v = u[m, i]
            selected = v >= t
            s += v if selected else 0.0
            n += selected
        total[m], count[m] = s, n
    return total, count


@_compiled
def binary_overlaps(a, b):  # pragma: no cover - runs compiled
    """Per row of two label arrays with values in {0, 1}, ``a [1 or B, N]`` (one row: shared by
    every row of ``b``) and ``b [B, N]``: how many pixels are 1 in both, in ``a`` and in ``b``
    (int64 ``[B]`` each; one pass, no boolean temporaries)."""
    B, N = b.shape
    both, in_a, in_b = np.zeros(B, np.int64), np.zeros(B, np.int64), np.zeros(B, np.int64)
    for r in range(B):
        x, y = a[r if a.shape[0] > 1 else 0], b[r]
        t, p, q = 0, 0, 0
        for i in range(N):
            t += x[i] & y[i]
            p += x[i]
            q += y[i]
        both[r], in_a[r], in_b[r] = t, p, q
    return both, in_a, in_b


@_compiled
def pattern_intersections(masks):  # pragma: no cover - runs compiled
    """For boolean masks ``[M, N]`` (M <= 16), ``|A_i ∩ A_j|`` for every pair, float64 ``[M, M]``:
    the bit-packed membership code ``sum_k masks[k, i] << k`` of every pixel, their histogram
    (pixel ``i`` counts into lane ``i % LANES``), then per code that occurs its count added to
    every pair of its bits (exact below 2^53 pixels)."""
    M, N = masks.shape
    codes = np.zeros(N, np.uint16)
    for k in range(M):
        bits = masks[k].view(np.uint8)
        for i in range(N):
            codes[i] |= bits[i] << k
    counts = np.zeros((1 << M, LANES), np.int64)
    for i in range(N):
        counts[codes[i], i % LANES] += 1
    inter = np.zeros((M, M))
    for code in range(1 << M):
        n = counts[code].sum()
        if n:
            for a in range(M):
                if (code >> a) & 1:
                    for b in range(M):
                        if (code >> b) & 1:
                            inter[a, b] += n
    return inter


def _sample_pass(first: bool, last: bool, stored: bool):
    """:func:`sample_pass` for the first and/or last sample or neither, of float or of stored
    samples (the flags are constants of the compiled code: each variant's loops stay free of
    branches on them)."""

    def sample_pass(p, log_p, mean, plogp, labels, entropy_of_mean, S):  # pragma: no cover - runs compiled
        C, N = p.shape
        zero, size = mean.dtype.type(0), mean.dtype.type(S)
        if C == 2:
            p0, p1, mean0, mean1 = p[0], p[1], mean[0], mean[1]
            for i in range(N):
                total = zero if first else plogp[i]
                if stored:  # widened, divided by their sum (as :func:`renormalise`), p log p here
                    a, b = widen(p0[i]), widen(p1[i])
                    pair = a + b
                    a, b = a / pair, b / pair
                    total += binary_plogp(a, b)
                else:
                    a, b = p0[i], p1[i]
                    total += a * log_p[0, i] if a > 0 else a - a  # (0 where p = 0, in the samples' precision)
                    total += b * log_p[1, i] if b > 0 else b - b
                m0 = (zero if first else mean0[i]) + a
                m1 = (zero if first else mean1[i]) + b
                if last:
                    total, m0, m1 = total / -size, m0 / size, m1 / size
                    if stored:
                        entropy_of_mean[i] = -binary_plogp(m0, m1)
                plogp[i], mean0[i], mean1[i] = total, m0, m1
                labels[i] = b > a
            return
        for c in range(C):
            row, logs, total = p[c], log_p[c], mean[c]
            if first:
                for i in range(N):
                    v = row[i]
                    plogp[i] = (zero if c == 0 else plogp[i]) + (v * logs[i] if v > 0 else v - v)
                    total[i] = zero + v
            else:
                for i in range(N):
                    v = row[i]
                    plogp[i] += v * logs[i] if v > 0 else v - v
                    total[i] += v
        if last:
            for i in range(N):
                plogp[i] /= -size
            for c in range(C):
                total = mean[c]
                for i in range(N):
                    total[i] /= size

    return _compiled(sample_pass)


_SAMPLE_PASSES = {flags: _sample_pass(*flags) for flags in itertools.product((False, True), repeat=3)}


def sample_pass(p, log_p, mean, plogp, labels, k, S, entropy_of_mean=None):
    """Sample ``k`` of ``S``'s share of the statistics: for ``p [C, N]`` and its ``log_p``, adds ``p``
    to ``mean [C, N]`` and ``p log p`` (0 where ``p = 0``) class by class to ``plogp [N]``; with two
    classes, ``labels [N]`` = class 1 is more likely (ties: class 0), in the same loop (each value
    read once). The first sample sets ``mean`` and ``plogp`` (they need no zeroing); the last
    divides them by ``S`` and ``-S`` (the mean, the expected entropy) in its loop.

    ``p`` may also be two classes as the prediction cache stores them (float16 bit patterns, read
    as ``uint16``; ``log_p`` ``None``): each pair is widened to float32 and divided by its sum (the
    values :func:`renormalise` gives), and its ``p log p`` taken with one log (``binary_plogp``:
    ``logf`` of the smaller, ``ylogy`` of the larger) in the same loop; ``mean`` and ``plogp`` are
    then float32, and the last sample also sets ``entropy_of_mean [N]`` (float32, required then),
    the entropy of the mean (PE) in the same way."""
    stored = p.dtype == np.uint16
    if stored != (log_p is None) or (stored and p.shape[0] != 2):
        raise ValueError("sample_pass: float samples with their logs, or two classes of float16 bits without")
    last = k == S - 1
    if entropy_of_mean is None:
        if stored and last:
            raise ValueError("sample_pass: the last stored sample sets the entropy of the mean: pass entropy_of_mean")
        entropy_of_mean = plogp  # a float array of the right type that the compiled loop never writes
    # (stored: ``mean`` stands in for the logs, an array of their type the compiled loop never reads)
    _SAMPLE_PASSES[k == 0, last, stored](p, mean if stored else log_p, mean, plogp, labels, entropy_of_mean, S)


@_compiled(reorder=True)
def row_sums(u):  # pragma: no cover - runs compiled
    """The float64 sum of each row of ``u [M, N]`` (NaN and infinities propagate)."""
    M, N = u.shape
    total = np.zeros(M)
    for m in range(M):
        s = 0.0
        for i in range(N):
            s += u[m, i]
        total[m] = s
    return total


@_compiled
def grown_lesions(labels, n, ball):  # pragma: no cover - runs compiled
    """Per lesion ``1..n`` of ``labels [Z, Y, X]`` (int64, 0 outside), the flat indices (ascending)
    of the voxels reached from it by an offset of ``ball [O, 3]`` inside the image: ``(ends [n + 1],
    indices)``, lesion ``i``'s at ``indices[ends[i - 1]:ends[i]]``. One pass groups the lesion voxels
    by lesion; a stamp per voxel keeps each grown voxel once per lesion (the sparse dilation of
    :func:`values_seg_plugins.aggregations.lesion.grown_voxels`: work in the lesions, not the image)."""
    Z, Y, X = labels.shape
    flat = labels.reshape(-1)
    first = np.zeros(n + 2, np.int64)
    for f in range(flat.size):
        first[flat[f] + 1] += 1
    first[1] = 0
    for i in range(1, n + 1):
        first[i + 1] += first[i]
    voxels = np.empty(first[n + 1], np.int64)
    fill = first.copy()
    for f in range(flat.size):
        label = flat[f]
        if label > 0:
            voxels[fill[label]] = f
            fill[label] += 1
    O = ball.shape[0]
    stamp = np.zeros(flat.size, np.int64)
    indices = np.empty(first[n + 1] * O, np.int64)
    ends = np.zeros(n + 1, np.int64)
    g = 0
    for i in range(1, n + 1):
        start = g
        for j in range(first[i], first[i + 1]):
            f = voxels[j]
            z, y, x = f // (Y * X), (f // X) % Y, f % X
            for o in range(O):
                zz, yy, xx = z + ball[o, 0], y + ball[o, 1], x + ball[o, 2]
                if 0 <= zz < Z and 0 <= yy < Y and 0 <= xx < X:
                    q = (zz * Y + yy) * X + xx
                    if stamp[q] != i:
                        stamp[q] = i
                        indices[g] = q
                        g += 1
        indices[start:g].sort()
        ends[i] = g
    return ends, indices[:g]


@_compiled
def best_overlaps(a, n_a, b, n_b, valid):  # pragma: no cover - runs compiled
    """Per component of ``a`` (flat int64 labels, ``1..n_a``) and of ``b`` (``1..n_b``) the largest
    IoU with a component of the other, and each ``a`` component's size, all counted over the
    ``valid`` voxels (bool; empty: all): one pass for the sizes and the joint histogram."""
    size_a, size_b = np.zeros(n_a + 1, np.int64), np.zeros(n_b + 1, np.int64)
    inter = np.zeros((n_a + 1, n_b + 1), np.int64)
    every = valid.size == 0
    for f in range(a.size):
        if every or valid[f]:
            size_a[a[f]] += 1
            size_b[b[f]] += 1
            inter[a[f], b[f]] += 1
    best_a, best_b = np.zeros(n_a), np.zeros(n_b)
    for i in range(1, n_a + 1):
        for j in range(1, n_b + 1):
            union = size_a[i] + size_b[j] - inter[i, j]
            iou = inter[i, j] / union if union > 0 else 0.0
            best_a[i - 1] = max(best_a[i - 1], iou)
            best_b[j - 1] = max(best_b[j - 1], iou)
    return best_a, best_b, size_a[1:]


@_compiled
def lesion_sums(labels, n, maps):  # pragma: no cover - runs compiled
    """Per map of ``maps [M, V]`` (float64) and lesion ``1..n`` of the flat ``labels [V]`` (int64,
    0 outside): the summed map (``[M, n]``, the voxels added in order from 0, as ``np.bincount``
    with weights), the largest value (``[M, n]``, NaN when the lesion holds one) and the size (``[n]``)."""
    M, V = maps.shape
    total, top, size = np.zeros((M, n + 1)), np.zeros((M, n + 1)), np.zeros(n + 1, np.int64)
    for f in range(V):
        size[labels[f]] += 1
    for m in range(M):
        started = np.zeros(n + 1, np.bool_)
        for f in range(V):
            label, v = labels[f], maps[m, f]
            total[m, label] += v
            if label > 0:
                t = top[m, label]
                if not started[label]:
                    top[m, label], started[label] = v, True
                elif t == t and (v > t or v != v):
                    top[m, label] = v
    return total[:, 1:], top[:, 1:], size[1:]


@_compiled
def renormalise(p):  # pragma: no cover - runs compiled
    """``p [S, C, N]`` divided in place by its sum over C (added class by class, in the samples'
    precision): what ``p.div_(p.sum(dim=1, keepdim=True))`` computes, in one pass over the samples
    and one ``[N]`` temporary (a sum of 0 gives NaN, as there); two classes in one loop."""
    S, C, N = p.shape
    if C == 2:
        for s in range(S):
            p0, p1 = p[s, 0], p[s, 1]
            for i in range(N):
                a, b = p0[i], p1[i]
                total = a + b
                p0[i] = a / total
                p1[i] = b / total
        return
    total = np.empty(N, p.dtype)
    for s in range(S):
        total[:] = p[s, 0]
        for c in range(1, C):
            row = p[s, c]
            for i in range(N):
                total[i] += row[i]
        for c in range(C):
            row = p[s, c]
            for i in range(N):
                row[i] /= total[i]


@_compiled
def entropy_from_logs(p, log_p, out):  # pragma: no cover - runs compiled
    """``out [N] = -sum_c p log p`` of ``p [C, N]`` and its ``log_p`` (0 where ``p = 0``), the classes
    added in order in ``p``'s precision, as :func:`values_seg.components.measure.plogp_sum` adds them."""
    C, N = p.shape
    out[:] = 0
    for c in range(C):
        row, logs = p[c], log_p[c]
        for i in range(N):
            v = row[i]
            out[i] += v * logs[i] if v > 0 else v - v
    for i in range(N):
        out[i] = -out[i]
