"""Retention curves after Shifts: normalised Dice (nDSC), its voxel-level retention curve and R-AUC,
and the image-level Dice retention curve with random and oracle baselines.

The sources, data without a background class, and ties (where it departs from Shifts' code):
docs/design-rationale.md, "Retention curves".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from values_seg.metrics._validation import as_binary, as_float, as_labels, same_length, same_shape

__all__ = [
    "ndsc",
    "retention_fractions",
    "ndsc_retention_curve",
    "ndsc_rauc",
    "ndsc_rauc_many",
    "class_ndsc",
    "class_ndsc_rauc_many",
    "retention_rauc",
    "RetentionCurve",
    "dice_retention_curve",
]


def _check_r(r) -> float:
    r = float(r)
    if not 0.0 < r < 1.0:
        raise ValueError(f"ndsc: the reference lesion load r must lie in (0, 1), got {r!r}")
    return r


def _ndsc_from_counts(tp, fp, fn, n_reference: float, n_voxels: float, r: float):
    """nDSC from (possibly fractional) counts; arrays broadcast. See :func:`ndsc`."""
    tp, fp, fn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn))
    if n_reference == 0:
        k = 1.0  # Shifts' convention for an empty reference: the plain Dice
    elif n_reference == n_voxels:
        k = 0.0  # no negative voxel, so FP = 0: the plain Dice
    else:
        k = (1.0 - r) * n_reference / (r * (n_voxels - n_reference))
    denom = k * fp + 2.0 * tp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2.0 * tp / np.where(denom > 0, denom, 1.0), 1.0)


def ndsc(prediction, reference, r: float = 0.001) -> float:
    """Normalised Dice (Shifts 2.0, appendix C.2.1) of one case's binary masks.

    The false positives are rescaled by ``k = (1 - r) |Y| / (r (N - |Y|))`` (step 6: the factor
    that would make the precision at 100 % recall equal the reference lesion load ``r``), and
    ``nDSC = 2 TP / (2 TP + k FP + FN)``: the DSC's mean ``2 P R / (P + R)`` (C.2.1's DSC formula;
    step 10 calls it "geometric") of the rescaled precision and the recall, as the Shifts code.
    It equals the Dice when ``k = 1``, i.e. when the lesion load ``|Y| / N`` equals ``r``, and
    whenever there is no false positive. Conventions of the Shifts code: both masks empty gives
    1; an empty reference uses ``k = 1`` (the plain Dice, 0 when anything is predicted).
    ``prediction`` and ``reference``: binary masks ({0, 1} or bool) of the same shape.
    """
    r = _check_r(r)
    p = as_binary(prediction, "ndsc: prediction")
    g = as_binary(reference, "ndsc: reference")
    same_shape(p, g, "ndsc: prediction", "ndsc: reference")
    tp = np.count_nonzero(p & g)
    n_pred, n_ref = np.count_nonzero(p), np.count_nonzero(g)
    return float(_ndsc_from_counts(tp, n_pred - tp, n_ref - tp, n_ref, g.size, r))


def retention_fractions(n_points: int = 200) -> np.ndarray:
    """Shifts' log-spaced retained fractions ``ln(1..n) / ln(n)``: 0, ..., 1, denser near 1."""
    if int(n_points) != n_points or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}")
    return np.log(np.arange(1, int(n_points) + 1)) / np.log(int(n_points))


def _tie_boundaries(sorted_values: np.ndarray) -> np.ndarray:
    """Positions where a tie group starts, plus the end ``n`` (for interpolation inside groups)."""
    n = sorted_values.shape[0]
    return np.r_[0, np.flatnonzero(np.diff(sorted_values)) + 1, n]


def _prefix(x: np.ndarray) -> np.ndarray:
    return np.r_[0.0, np.cumsum(x, dtype=np.float64)]


def ndsc_retention_curve(prediction, reference, uncertainty, r: float = 0.001, n_points: int = 200):
    """Voxel-level nDSC retention curve (Shifts 2.0): ``(retained_fractions, ndsc)``, each ``[n_points]``.

    At fraction ``f`` the ``floor(N f)`` voxels of lowest uncertainty keep the prediction and all
    others take the reference; fractions log-spaced as in Shifts (:func:`retention_fractions`).
    Computed from prefix sums of TP/FP/FN over the voxels sorted by uncertainty (one sort).
    """
    r = _check_r(r)
    fractions = retention_fractions(n_points)
    p = as_binary(prediction, "ndsc_retention_curve: prediction").reshape(-1)
    g = as_binary(reference, "ndsc_retention_curve: reference").reshape(-1)
    u = as_float(uncertainty, "ndsc_retention_curve: uncertainty").reshape(-1)
    same_length(p, g, "ndsc_retention_curve: prediction voxels", "ndsc_retention_curve: reference voxels")
    same_length(p, u, "ndsc_retention_curve: prediction voxels", "ndsc_retention_curve: uncertainty voxels")
    n = p.shape[0]
    order = np.argsort(u, kind="stable")
    ps, gs = p[order], g[order]
    bounds = _tie_boundaries(u[order])
    kept = np.floor(n * fractions)

    def retained(x):  # summed x over the retained voxels, interpolated inside tie groups
        return np.interp(kept, bounds, _prefix(x)[bounds])

    n_ref = float(np.count_nonzero(g))
    tp = retained(ps & gs) + (n_ref - retained(gs))  # replaced voxels: every reference voxel is a TP
    fp = retained(ps & ~gs)
    fn = retained(~ps & gs)
    return fractions, _ndsc_from_counts(tp, fp, fn, n_ref, n, r)


def _trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


def retention_rauc(fractions, values) -> float:
    """R-AUC of a retention curve of a score in [0, 1]: ``1 - trapezoidal area under it`` (lower is better)."""
    f = as_float(fractions, "retention_rauc: fractions")
    v = as_float(values, "retention_rauc: values")
    f, v = same_length(f, v, "retention_rauc: fractions", "retention_rauc: values")
    return 1.0 - _trapezoid(v, f)


def ndsc_rauc(prediction, reference, uncertainty, r: float = 0.001, n_points: int = 200) -> float:
    """R-AUC of the voxel-level nDSC retention curve (Shifts 2.0, Table 11): ``1 - area``, lower is better."""
    fractions, values = ndsc_retention_curve(prediction, reference, uncertainty, r, n_points)
    return 1.0 - _trapezoid(values, fractions)


def ndsc_rauc_many(prediction, references, maps, r: float = 0.001, n_points: int = 200) -> np.ndarray:
    """:func:`ndsc_rauc` of every map against every reference, ``[M, R]``: ``prediction`` (binary,
    ``[*spatial]``), ``references`` (binary, ``[R, *spatial]``, e.g. the raters), ``maps``
    (``[M, *spatial]``, e.g. the measures' uncertainty maps). One sort per map serves every
    reference (the retained voxels depend on the map only), so it costs M sorts instead of M x R."""
    r = _check_r(r)
    p = as_binary(prediction, "ndsc_rauc_many: prediction").reshape(1, -1)
    g = as_binary(references, "ndsc_rauc_many: references")
    u = as_float(maps, "ndsc_rauc_many: maps")
    g, u = g.reshape(g.shape[0], -1), u.reshape(u.shape[0], -1)
    if g.shape[1] != p.shape[1] or u.shape[1] != p.shape[1]:
        raise ValueError(f"ndsc_rauc_many: references {g.shape} and maps {u.shape} must have the prediction's "
                         f"{p.shape[1]} voxels per entry")
    return _rauc_rows(p, g, u, r, n_points)


def _rauc_rows(p: np.ndarray, g: np.ndarray, u: np.ndarray, r: float, n_points: int) -> np.ndarray:
    """R-AUC of the nDSC retention curve of each row pair (``p[k]`` or the one row ``p[0]``,
    ``g[k]``; boolean ``[K, n]``) under each map ``u[m]`` (``[M, n]``), ``[M, K]``."""
    fractions = retention_fractions(n_points)
    n = u.shape[1]
    kept = np.floor(n * fractions)
    n_ref = np.count_nonzero(g, axis=1).astype(np.float64)
    out = np.empty((u.shape[0], g.shape[0]))
    for m, umap in enumerate(u):
        order = np.argsort(umap, kind="stable")
        ps, gs = p[:, order], g[:, order]
        bounds = _tie_boundaries(umap[order])
        # the counts of the retained voxels, interpolated inside tie groups: one set of weights for all rows
        segment = np.clip(np.searchsorted(bounds, kept, side="right") - 1, 0, bounds.shape[0] - 2)
        lo, hi = bounds[segment], bounds[segment + 1]
        w = (kept - lo) / (hi - lo)

        def retained(x):  # [K, n] booleans -> [K, n_points]: prefix sums at lo and hi only
            cs = np.cumsum(x, axis=1, dtype=np.int64)
            at_lo = np.where(lo > 0, cs[:, np.maximum(lo - 1, 0)], 0)
            at_hi = cs[:, hi - 1]  # hi >= 1
            return at_lo + w * (at_hi - at_lo)

        both = ps & gs
        tp = retained(both) + (n_ref[:, None] - retained(gs))
        fp = retained(ps & ~both)
        fn = retained(gs & ~both)
        for k in range(g.shape[0]):
            out[m, k] = 1.0 - _trapezoid(_ndsc_from_counts(tp[k], fp[k], fn[k], n_ref[k], n, r), fractions)
    return out


def _one_vs_rest(prediction, reference, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Boolean ``[K, n]`` masks of each class present in either label map (prediction, reference)."""
    p = as_labels(prediction, f"{where}: prediction").reshape(-1)
    g = as_labels(reference, f"{where}: reference").reshape(-1)
    same_length(p, g, f"{where}: prediction voxels", f"{where}: reference voxels")
    classes = np.union1d(np.unique(p), np.unique(g))
    return p[None, :] == classes[:, None], g[None, :] == classes[:, None]


def class_ndsc(prediction, reference, r: float = 0.001) -> float:
    """nDSC of label maps without a background class: the mean over the classes present in either
    map of :func:`ndsc` of the class against the rest (see the module docstring). For binary maps
    ({0, 1}, both classes present) it is the mean of the foreground's and the background's nDSC."""
    r = _check_r(r)
    p, g = _one_vs_rest(prediction, reference, "class_ndsc")
    tp = np.count_nonzero(p & g, axis=1)
    n_pred, n_ref = np.count_nonzero(p, axis=1), np.count_nonzero(g, axis=1)
    n = p.shape[1]
    return float(np.mean([_ndsc_from_counts(t, a - t, b - t, b, n, r) for t, a, b in zip(tp, n_pred, n_ref)]))


def class_ndsc_rauc_many(prediction, reference, maps, r: float = 0.001, n_points: int = 200) -> np.ndarray:
    """R-AUC of the retention curve of :func:`class_ndsc` for each map ``[M, *spatial]``, ``[M]``:
    the mean over the classes present in either label map of their one-vs-rest R-AUCs (the retained
    voxels keep the predicted label, the others take the reference's)."""
    r = _check_r(r)
    p, g = _one_vs_rest(prediction, reference, "class_ndsc_rauc_many")
    u = as_float(maps, "class_ndsc_rauc_many: maps")
    u = u.reshape(u.shape[0], -1)
    if u.shape[1] != p.shape[1]:
        raise ValueError(f"class_ndsc_rauc_many: maps {u.shape} must have the prediction's {p.shape[1]} voxels each")
    return _rauc_rows(p, g, u, r, n_points).mean(axis=1)


@dataclass(frozen=True, eq=False)
class RetentionCurve:
    """An image-level retention curve: retained fractions ``k / N`` (k = 0..N) and the mean Dice of
    the model (``values``), of a random ranking (its expectation) and of the oracle ranking."""

    fractions: np.ndarray
    values: np.ndarray
    random: np.ndarray
    oracle: np.ndarray

    @property
    def rauc(self) -> float:
        """Area under the error (1 - Dice) retention curve; lower is better."""
        return 1.0 - _trapezoid(self.values, self.fractions)

    @property
    def random_rauc(self) -> float:
        return 1.0 - _trapezoid(self.random, self.fractions)

    @property
    def oracle_rauc(self) -> float:
        return 1.0 - _trapezoid(self.oracle, self.fractions)


def dice_retention_curve(dice, uncertainty) -> RetentionCurve:
    """Image-level Dice retention curve with random and oracle baselines (Shifts 1.0, Figure 4).

    ``dice`` (per case, in [0, 1]) and ``uncertainty`` (per case, higher = less certain). Retaining
    the ``k`` most certain cases, the other cases are replaced by the reference (Dice 1):
    ``value(k / N) = (sum of the retained Dice + N - k) / N``. Random: the expectation over
    random orders, ``1 - (k / N)(1 - mean Dice)``; oracle: the ``k`` best cases retained.
    """
    d = as_float(dice, "dice_retention_curve: dice")
    u = as_float(uncertainty, "dice_retention_curve: uncertainty")
    d, u = same_length(d, u, "dice_retention_curve: dice", "dice_retention_curve: uncertainty")
    if d.min() < 0 or d.max() > 1:
        raise ValueError(f"dice_retention_curve: dice must lie in [0, 1], got range [{d.min()}, {d.max()}]")
    n = d.shape[0]
    k = np.arange(n + 1, dtype=np.float64)
    order = np.argsort(u, kind="stable")
    bounds = _tie_boundaries(u[order])
    retained = np.interp(k, bounds, _prefix(d[order])[bounds])
    best_first = _prefix(np.sort(d)[::-1])
    return RetentionCurve(
        fractions=k / n,
        values=(retained + n - k) / n,
        random=1.0 - (k / n) * (1.0 - d.mean()),
        oracle=(best_first + n - k) / n,
    )
