"""C1 ``temperature_scaled``: post-hoc temperature scaling of another model's samples (Guo et al. 2017),
softmax(log p / T) per sample, T fitted on the validation NLL of the raters' labels; ``per_class``:
a temperature per class. A derived model (values_seg.components.derived_model): it shares the
wrapped model's trainings, and its fit is cached beside its samples."""

from __future__ import annotations

import math
import zlib
from typing import Annotated, Any

import numpy as np
import torch

from values_seg import hookimpl, registry
from values_seg.components.derived_model import DerivedModel
from values_seg.params import Range

from values_seg_plugins.quantities.likelihood import FLOOR

#: the range searched for T (and each T_c): beyond it the fit is refused (no interior optimum)
BOUNDS = (1e-2, 1e2)
#: pixels per chunk of the float64 NLL
CHUNK = 1 << 16


class TemperatureScaled(DerivedModel):
    """Temperature scaling of another model: softmax(log p / T) per sample, T (or T_c) fitted on the validation NLL.

    ``model``, ``model_params``: the wrapped prediction model and its parameters. The fit minimises
    the NLL of the raters' labels under the mean of the scaled samples, pooled over every
    (pixel, rater) pair of the validation split (ignored labels left out), in float64, with the
    log-probabilities floored at log(1e-8) (:data:`FLOOR`, as the transform); one T by a bounded
    Brent search over log T in [0.01, 100], or with ``per_class`` one T_c per class by L-BFGS-B
    from T = 1. At most ``max_pixels`` pixels are kept (a seeded subsample, the same share of each
    case), so its memory stays bounded. Where no T changes the samples (one class, or probabilities
    uniform over the classes on every pixel) T = 1. A ``ValueError`` (the combination fails, saying
    why) where every label is ignored, where a class is never labelled (``per_class``), or where the
    optimum lies on the searched range's edge (e.g. every validation pixel predicted right: the NLL
    falls as T goes to 0).
    """

    name = "temperature_scaled"
    label = "TS"
    wrapping_params = ("model", "model_params")

    def __init__(self, model: str, model_params: dict[str, Any] | None = None, per_class: bool = False,
                 max_pixels: Annotated[int, Range(1000, 10**9)] = 1_000_000):
        given = dict(model_params or {})  # a mapping, or its (key, value) pairs as a component reference holds it
        self.model, self.model_params = model, given
        self.per_class, self.max_pixels = bool(per_class), int(max_pixels)
        self.wrap(registry.create("prediction_model", model, **given))

    # -- the transform ---------------------------------------------------------------------
    def transform(self, samples: torch.Tensor, fitted: Any) -> torch.Tensor:
        return scale(samples, fitted["temperature"])

    # -- the fit ---------------------------------------------------------------------------
    def fit(self, cases) -> dict:
        z, counts = _validation_pixels(cases, self.max_pixels)
        temperature = fit_temperature(z, counts, per_class=self.per_class)
        return {"temperature": temperature, "pixels": int(z.shape[2]), "pairs": int(counts.sum())}


def scale(samples: torch.Tensor, temperature: float | list[float]) -> torch.Tensor:
    """softmax(max(log p, log FLOOR) / T) over the class axis (1) of ``samples`` ``[S, C, *spatial]``,
    ``temperature`` one T or one per class, in float32."""
    z = samples.float().clamp_min(FLOOR).log()
    t = torch.as_tensor(temperature, dtype=z.dtype).reshape(-1, *([1] * (z.ndim - 2)))
    return (z / t).softmax(dim=1)


def _validation_pixels(cases, max_pixels: int) -> tuple[np.ndarray, np.ndarray]:
    """The floored log-probabilities ``[S, C, N]`` (float32) and the raters' label counts ``[C, N]``
    of the N validation pixels labelled by at least one rater; at most ``max_pixels // len(cases)``
    of each case, a subsample seeded by the case id where it has more."""
    quota = max(1, max_pixels // max(len(cases), 1))
    zs, counts = [], []
    num_classes, ignore = cases.num_classes, cases.ignore_index
    for case_id, samples, raters in cases:
        S, C = samples.shape[:2]
        if C != num_classes:
            raise ValueError(f"temperature_scaled: case {case_id!r} has {C} classes, the data set {num_classes}")
        labels = np.asarray(raters).reshape(len(raters), -1)
        valid = labels != ignore if ignore is not None else np.ones(labels.shape, bool)
        bad = np.unique(labels[valid & ((labels < 0) | (labels >= C))])
        if bad.size:
            raise ValueError(f"temperature_scaled: case {case_id!r} has labels {bad.tolist()} outside 0..{C - 1}")
        count = np.stack([((labels == c) & valid).sum(axis=0) for c in range(C)]).astype(np.float32)  # [C, P]
        keep = np.flatnonzero(count.sum(axis=0) > 0)
        if keep.size > quota:
            rng = np.random.default_rng(zlib.crc32(str(case_id).encode()))
            keep = np.sort(rng.choice(keep, quota, replace=False))
        z = samples.float().clamp_min(FLOOR).log().reshape(S, C, -1).numpy()
        zs.append(z[:, :, keep])
        counts.append(count[:, keep])
    if not zs or sum(c.shape[1] for c in counts) == 0:
        raise ValueError("temperature_scaled: no labelled validation pixel to fit on (no validation case, or "
                         "every rater label is the ignore label)")
    S = {z.shape[0] for z in zs}
    if len(S) > 1:
        raise ValueError(f"temperature_scaled: the validation cases have different numbers of samples {sorted(S)}")
    return np.concatenate(zs, axis=2), np.concatenate(counts, axis=1)


def nll(log_t: np.ndarray, z: np.ndarray, counts: np.ndarray, gradient: bool = False):
    """The mean NLL of the label counts ``[C, N]`` under the mean over S of softmax(z / T), z
    ``[S, C, N]``, T = exp(``log_t``) (one or ``[C]``), in float64, chunk by chunk; with
    ``gradient`` also its gradient in ``log_t`` (shape of ``log_t``)."""
    log_t = np.asarray(log_t, dtype=np.float64).reshape(-1)
    w = np.exp(-log_t)[:, None]  # 1 / T: [1 or C, 1]
    S = z.shape[0]
    total, grad = 0.0, np.zeros(z.shape[1])
    for start in range(0, z.shape[2], CHUNK):
        u = z[:, :, start:start + CHUNK].astype(np.float64) * w  # [S, C, n]
        n = counts[:, start:start + CHUNK].astype(np.float64)
        log_q = u - _logsumexp(u, axis=1)  # each sample's log softmax
        log_mean = _logsumexp(log_q, axis=0)[0] - math.log(S)  # [C, n]
        total -= float((n * log_mean).sum())
        if gradient:
            q = np.exp(log_q)
            r = np.exp(log_q - math.log(S) - log_mean[None])  # each sample's share of the mean, [S, C, n]
            m = (n[None] * r).sum(axis=1, keepdims=True)  # [S, 1, n]
            grad += (u * (n[None] * r - q * m)).sum(axis=(0, 2))
    pairs = float(counts.sum())
    value = total / pairs
    if not gradient:
        return value
    grad /= pairs
    return value, (grad if log_t.size > 1 else np.array([grad.sum()]))


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = x.max(axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True))


def _interior(f, a: np.ndarray, low: float, high: float, c: int = 0) -> bool:
    """Whether the minimum found, ``a`` (log T), is one inside the searched range in coordinate ``c``:
    away from its edges, and below the value at either edge (an NLL that only falls towards an edge,
    or underflows to a constant there, has none)."""
    if min(a[c] - low, high - a[c]) < 1e-3:
        return False
    value = f(a)
    for bound in (low, high):
        at = a.copy()
        at[c] = bound
        if f(at) <= value + 1e-12 * abs(value):
            return False
    return True


def fit_temperature(z: np.ndarray, counts: np.ndarray, per_class: bool = False) -> float | list[float]:
    """The T (``per_class``: the list of T_c) minimising :func:`nll` on the validation pixels (the
    class docstring: the search, the fallback T = 1 and the refusals)."""
    from scipy import optimize

    C = z.shape[1]
    low, high = math.log(BOUNDS[0]), math.log(BOUNDS[1])
    if C == 1 or (not per_class and float((z.max(axis=1) - z.min(axis=1)).max()) == 0.0):
        return [1.0] * C if per_class else 1.0  # no T changes these samples
    if not per_class:
        found = optimize.minimize_scalar(lambda a: nll(a, z, counts), bounds=(low, high), method="bounded",
                                         options={"xatol": 1e-9, "maxiter": 500})
        a = float(found.x)
        if not _interior(lambda v: nll(v, z, counts), np.array([a]), low, high):
            raise ValueError(f"temperature_scaled: the validation NLL has no minimum inside T in {list(BOUNDS)} "
                             f"(it keeps falling towards T = {math.exp(a):.3g}): the validation labels do not "
                             "determine a temperature (e.g. every validation pixel is predicted right)")
        return math.exp(a)
    absent = [c for c in range(C) if counts[c].sum() == 0]
    if absent:
        raise ValueError(f"temperature_scaled: class(es) {absent} have no labelled validation pixel: their "
                         "temperatures are not determined (use per_class: false)")
    found = optimize.minimize(lambda a: nll(a, z, counts, gradient=True), np.zeros(C), jac=True, method="L-BFGS-B",
                              bounds=[(low, high)] * C, options={"maxiter": 1000, "ftol": 1e-15, "gtol": 1e-10})
    a = np.asarray(found.x, dtype=np.float64)
    at_edge = [c for c in range(C) if not _interior(lambda v: nll(v, z, counts), a, low, high, c)]
    if at_edge:
        raise ValueError(f"temperature_scaled: the validation NLL has no minimum inside T_c in {list(BOUNDS)} for "
                         f"class(es) {at_edge} (T = {[float(f'{math.exp(v):.3g}') for v in a[at_edge]]})")
    return [math.exp(float(v)) for v in a]


@hookimpl
def values_seg_prediction_models():
    return [TemperatureScaled]
