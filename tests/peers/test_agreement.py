"""Agreement with other implementations: values-seg's metrics and the peers' installed code on the
same seeded inputs, counted per metric and peer. The counts are the table of ``docs/agreement.md``;
each peer's test recomputes its rows and fails where the page says otherwise. After a deliberate
change, ``VALUES_SEG_REGENERATE=1 python -m pytest tests/peers/test_agreement.py`` (without ``-n``)
rewrites the table. A peer that is not installed is skipped (the ``test`` extra installs them all).
"""

from __future__ import annotations

import json
import math
import os
import warnings
import zlib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch

from values_seg import metrics, registry
from values_seg.metrics import CalibrationBins

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "agreement.md"
BEGIN = "<!-- the table below is written by tests/peers/test_agreement.py: VALUES_SEG_REGENERATE=1 -->"
END = "<!-- end of the generated table -->"
HEADER = ("values-seg", "peer and its code", "inputs", "equal as is", "equal under the identity",
          "identity or convention", "tolerance")
FLOAT32 = 1e-6  # a peer that computes in float32 (or publishes six digits)
FLOAT64 = 1e-9


@dataclass(frozen=True)
class Row:
    """One line of the table: how many inputs agree as they come, and under the stated identity."""

    metric: str
    peer: str
    code: str
    inputs: int
    as_is: int
    holds: int
    identity: str
    tolerance: float

    def line(self) -> str:
        cells = (self.metric, f"{self.peer}<br>{self.code}", str(self.inputs), str(self.as_is), str(self.holds),
                 self.identity, f"{self.tolerance:g}")
        assert not any("|" in c or "\n" in c for c in cells), cells  # a table cell
        return "| " + " | ".join(cells) + " |"


def close(ours: float, theirs: float, tol: float) -> bool:
    """Equal within ``tol`` (absolute and relative), NaN equal to NaN."""
    ours, theirs = float(ours), float(theirs)
    if math.isnan(ours) or math.isnan(theirs):
        return math.isnan(ours) and math.isnan(theirs)
    return math.isclose(ours, theirs, rel_tol=tol, abs_tol=tol)


def row(metric: str, dist: str, code: str, values, identity: str = "equal", tol: float = FLOAT64) -> Row:
    """``values``: per input ``(ours, peer's)`` where the identity is equality, ``(ours, peer's, the
    peer's under the identity)``, or ``(ours, peer's, left, right)``: the identity is ``left = right``."""
    pairs = [(*v, *v) if len(v) == 2 else (*v[:2], v[0], v[2]) if len(v) == 3 else tuple(v) for v in values]
    return Row(metric, f"{dist} {version(dist)}", code, len(pairs), sum(close(o, p, tol) for o, p, _, _ in pairs),
               sum(close(a, b, tol) for _, _, a, b in pairs), identity, tol)


def rng_for(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ----------------------------------------------------------------------------- calibration


def calibration_inputs() -> list[tuple[np.ndarray, np.ndarray, int]]:
    """``(correct, confidence, n_bins)``: random confidences, all correct, all wrong, one constant
    confidence, the end points 0 and 1; no confidence on an inner bin edge."""
    rng = rng_for("calibration")
    out = []
    for n in (10, 200, 5000):
        for n_bins in (10, 20):
            c = rng.random(n)
            out.append((rng.random(n) < c**1.5, c, n_bins))  # overconfident
            c = rng.beta(8, 2, n)
            out.append((rng.random(n) < c, c, n_bins))
    c = rng.random(300)
    out += [(np.ones(300, bool), c, 20), (np.zeros(300, bool), c, 20), (rng.random(300) < 0.6, np.full(300, 0.73), 20)]
    c = np.r_[0.0, 1.0, 0.0, 1.0, rng.random(96)]
    out.append((rng.random(100) < c, c, 10))
    for _, c, n_bins in out:
        k = c * n_bins
        assert not ((k == np.round(k)) & (c > 0) & (c < 1)).any()
    return out


def edge_inputs() -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Confidences on the bin edges ``k / n_bins`` (e.g. the mean of a few binary samples)."""
    rng = rng_for("edges")
    out = []
    for n_bins in (10, 20):
        for _ in range(3):
            c = rng.integers(0, n_bins + 1, 400) / n_bins
            out.append((rng.random(400) < c, c, n_bins))
    return out


def bins_by(index: np.ndarray, correct: np.ndarray, confidence: np.ndarray, n_bins: int) -> CalibrationBins:
    """values-seg's histogram with a peer's bin of each confidence."""
    return CalibrationBins(np.bincount(index, minlength=n_bins).astype(np.int64),
                           np.bincount(index, weights=confidence, minlength=n_bins),
                           np.bincount(index, weights=correct.astype(float), minlength=n_bins))


def ece_from_bins(bins: CalibrationBins) -> float:
    """The count-weighted gap: ``sum_b n_b |conf_b - acc_b| / N`` (values-seg has no ECE function)."""
    return float(np.abs(bins.confidence_sum - bins.correct_sum).sum() / bins.count.sum())


def netcal_bin(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """netcal's bin: ``np.histogramdd`` on ``np.linspace(0, 1, B + 1)`` of the confidence clipped to
    [eps, 1 - eps] (``_Miscalibration._prepare_input``, ``binning``)."""
    eps = np.finfo(np.float64).eps
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.minimum(np.searchsorted(edges, np.clip(confidence, eps, 1 - eps), side="right") - 1, n_bins - 1)


def monai_bin(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """MONAI's bin (``calibration_binning``): float32, ``torch.bucketize`` on the upper edges of
    ``linspace(0, 1 + eps32, B + 1)`` with ``right=False``, i.e. bins ``(lo, hi]``."""
    edges = torch.linspace(0.0, 1.0 + torch.finfo(torch.float32).eps, n_bins + 1)
    return torch.bucketize(torch.from_numpy(confidence).float(), edges[1:], right=False).clamp(max=n_bins - 1).numpy()


def lower_bin_edges(rule: Callable, n_bins: int) -> str:
    """The inner edges ``k/B`` that ``rule`` puts into bin ``k - 1`` (values-seg: bin ``k``)."""
    k = np.arange(1, n_bins)
    low = k[rule(k / n_bins, n_bins) == k - 1]
    assert (np.minimum(np.floor(k / n_bins * n_bins), n_bins - 1) == k).all()  # values-seg: bin k
    return "each" if len(low) == len(k) else ", ".join(f"{i}/{n_bins}" for i in low)


def netcal_rows() -> list[Row]:
    from netcal.metrics import ACE, ECE

    def netcal(cls, y, c, n_bins):
        return quiet(cls(bins=n_bins, detection=True).measure, c, y.astype(np.int64))

    plain = [(metrics.ace(y, c, b, min_bin_mass=0), netcal(ACE, y, c, b)) for y, c, b in calibration_inputs()]
    edges = []
    for y, c, b in edge_inputs():
        theirs = netcal(ACE, y, c, b)
        edges.append((metrics.ace(y, c, b, min_bin_mass=0), theirs,
                      metrics.ace_from_bins(bins_by(netcal_bin(c, b), y, c, b), min_bin_mass=0), theirs))
    ece = [(ece_from_bins(metrics.calibration_bins(y, c, b)), netcal(ECE, y, c, b)) for y, c, b in calibration_inputs()]
    code = "`metrics.{}(bins=B, detection=True)`"
    return [
        row("`ace(min_bin_mass=0)`", "netcal", code.format("ACE"), plain,
            "equal; `min_bin_mass=0` is the plain equal-width ACE, the paper's eq. 11, which the calibration task "
            "reports as `ace_eq11` ('ACE (paper eq. 11)'); its `ace` ('ACE (merged bins)') merges bins holding "
            "under 0.1 % of the items, which no peer does"),
        row("`ace(min_bin_mass=0)`, confidences on bin edges k/B", "netcal", code.format("ACE"), edges,
            "the bin of an inner edge: values-seg's is floor(c·B) in float64, netcal's comes from "
            "`np.histogramdd` on `np.linspace(0, 1, B + 1)`, whose edge k·(1/B) can lie above k/B: "
            f"into bin k − 1 fall {lower_bin_edges(netcal_bin, 10)} (B = 10) and "
            f"{lower_bin_edges(netcal_bin, 20)} (B = 20). Identity: values-seg's `ace_from_bins` of the items "
            "binned by netcal's rule"),
        row("ECE = Σ count·gap / N of `calibration_bins`", "netcal", code.format("ECE"), ece,
            "equal (values-seg has no ECE function: the count-weighted gap of its histogram)"),
    ]


def monai_rows() -> list[Row]:
    from monai.metrics import CalibrationErrorMetric

    def monai(reduction, y, c, n_bins):
        metric = CalibrationErrorMetric(num_bins=n_bins, calibration_reduction=reduction)
        value = metric(y_pred=torch.from_numpy(c)[None, None], y=torch.from_numpy(y.astype(np.float64))[None, None])
        return float(value.reshape(-1)[0])

    plain = [(metrics.ace(y, c, b, min_bin_mass=0), monai("average", y, c, b)) for y, c, b in calibration_inputs()]
    edges = []
    for y, c, b in edge_inputs():
        theirs = monai("average", y, c, b)
        edges.append((metrics.ace(y, c, b, min_bin_mass=0), theirs,
                      metrics.ace_from_bins(bins_by(monai_bin(c, b), y, c, b), min_bin_mass=0), theirs))
    ece = [(ece_from_bins(metrics.calibration_bins(y, c, b)), monai("expected", y, c, b))
           for y, c, b in calibration_inputs()]
    code = "`CalibrationErrorMetric(num_bins=B, calibration_reduction=\"{}\")`, one case, one channel"
    return [
        row("`ace(min_bin_mass=0)`", "monai", code.format("average"), plain,
            "equal; `min_bin_mass=0` as for netcal", FLOAT32),
        row("`ace(min_bin_mass=0)`, confidences on bin edges k/B", "monai", code.format("average"), edges,
            "the bin of an inner edge: MONAI's `torch.bucketize(..., right=False)` on the edges of "
            "`linspace(0, 1 + ε, B + 1)` in float32 makes a bin (lo, hi] (its docstring says [left, right)): "
            f"into bin k − 1 fall {lower_bin_edges(monai_bin, 10)} of the inner edges k/10 and "
            f"{lower_bin_edges(monai_bin, 20)} of the k/20; values-seg's bin is [k/B, (k + 1)/B). "
            "Identity: values-seg's `ace_from_bins` of the items binned by MONAI's rule", FLOAT32),
        row("ECE = Σ count·gap / N of `calibration_bins`", "monai", code.format("expected"), ece,
            "equal (values-seg has no ECE function: the count-weighted gap of its histogram)", FLOAT32),
    ]


# ----------------------------------------------------------------------------- failure and OoD detection


def selective_inputs(ties: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(risks, confidences)`` with binary risks (torch-uncertainty's errors are 0 or 1) and
    confidences in (0.5, 1), a top-label probability: distinct, or in a few tie groups."""
    rng = rng_for("selective", ties)
    out = []
    for n in ((10, 50, 500) if ties else (2, 3, 10, 50, 500)):
        for _ in range(2):
            risks = (rng.random(n) < 0.3).astype(float)
            conf = 0.55 + 0.1 * rng.integers(0, 4, n) if ties else 0.5 + 0.5 * rng.uniform(0.01, 1.0, n)
            out.append((risks, conf))
    if not ties:
        conf = 0.5 + 0.5 * rng.uniform(0.01, 1.0, 20)
        out += [(np.zeros(20), conf), (np.ones(20), conf)]
    for _, conf in out:
        assert (len(np.unique(conf)) < len(conf)) == ties
    return out


def ranking_inputs() -> list[tuple[np.ndarray, np.ndarray]]:
    """``(is_ood, uncertainty)``: distinct and tied scores, 20 and 40 OoD cases (TPR 0.95 reached
    exactly), a single OoD case, a single i.i.d. case, a perfect and an inverted ranking."""
    rng = rng_for("ranking")
    out = []
    for n, n_ood in ((20, 10), (37, 5), (40, 20), (80, 40), (200, 60), (2000, 300)):
        for tied in (False, True):
            y = np.zeros(n, bool)
            y[rng.choice(n, n_ood, replace=False)] = True
            s = rng.normal(size=n) + y
            out.append((y, np.round(s, 1) if tied else s))
    y = np.r_[True, np.zeros(29, bool)]
    out += [(y, rng.normal(size=30)), (~y, rng.normal(size=30))]
    s = rng.normal(size=30)
    out += [(s > 0.3, s), (s > 0.3, -s)]
    return out


def torch_uncertainty_rows() -> list[Row]:
    from torch_uncertainty.metrics import AUGRC, AURC, FPR95

    def tu(metric, risks, conf):
        # a top-label probability p > 0.5 predicts class 1; the target is 1 where the case is correct
        quiet(metric.update, torch.from_numpy(conf), torch.from_numpy((risks == 0).astype(np.int64)))
        return float(quiet(metric.compute))

    def first(conf):  # the case torch-uncertainty ranks first (its sort order inside a tie group)
        return int(torch.from_numpy(conf).argsort(descending=True)[0])

    def areas(ties):
        out = {"aurc": [], "augrc": []}
        for r, c in selective_inputs(ties):
            n, r1 = len(r), r[first(c)]
            a, g = tu(AURC(), r, c), tu(AUGRC(), r, c)
            out["aurc"].append((metrics.aurc(r, c), a, a * (1 - 1 / n) + r1 / n))
            out["augrc"].append((metrics.augrc(r, c), g, g * (1 - 1 / n) + r1 / (2 * n * n)))
        return out

    distinct, tied = areas(False), areas(True)
    fpr = []
    for y, s in ranking_inputs():
        metric = quiet(FPR95, pos_label=1)
        quiet(metric.update, torch.from_numpy(s), torch.from_numpy(y.astype(np.int64)))
        fpr.append((metrics.fpr_at_95_tpr(y, s), float(quiet(metric.compute))))
    norm = ("torch-uncertainty's curve starts at coverage 1/N and is rescaled by 1/(1 − 1/N); values-seg's "
            "(fd-shifts') runs on to coverage 0, {}, r₁ the risk of the most confident case. Identity: "
            "values-seg = torch-uncertainty × (1 − 1/N) + {}")
    ties = ("with ties in confidence no identity holds: a tie group is one chord of values-seg's curve "
            "(fd-shifts' convention, by design: tied cases are kept or rejected together), torch-uncertainty "
            "steps through it one case at a time in its sort order. Counted: the identity above, r₁ the case it "
            "ranks first")
    code = "`metrics.{}()`, top-label probabilities in (0.5, 1)"
    return [
        row("`aurc`, distinct confidences", "torch-uncertainty", code.format("AURC"), distinct["aurc"],
            norm.format("its last point's risk r₁ held", "r₁/N"), FLOAT32),
        row("`augrc`, distinct confidences", "torch-uncertainty", code.format("AUGRC"), distinct["augrc"],
            norm.format("the generalized risk falling from r₁/N to 0", "r₁/(2N²)"), FLOAT32),
        row("`aurc`, tied confidences", "torch-uncertainty", code.format("AURC"), tied["aurc"], ties, FLOAT32),
        row("`augrc`, tied confidences", "torch-uncertainty", code.format("AUGRC"), tied["augrc"], ties, FLOAT32),
        row("`fpr_at_95_tpr`", "torch-uncertainty", "`metrics.FPR95(pos_label=1)`, the uncertainty as score", fpr,
            "equal: both the first threshold of complete tie groups reaching TPR ≥ 0.95 (values-seg tests it in "
            "integers, 20·TP ≥ 19·P; torch-uncertainty in float32)", FLOAT32),
    ]


def ncc_inputs() -> list[tuple[np.ndarray, np.ndarray]]:
    """``(reference map, predicted map)``: correlated, anticorrelated, 3D, ties, either map constant."""
    rng = rng_for("ncc")
    out = []
    for shape in ((16, 16), (6, 7, 8)):
        a = rng.random(shape)
        out += [(a, a + rng.random(shape)), (a, -a + 0.3 * rng.random(shape)), (a, rng.random(shape))]
    a = np.round(rng.random((12, 12)), 1)
    out += [(a, np.round(a + rng.random((12, 12)), 1)), (a, np.full((12, 12), 0.4)), (np.full((12, 12), 0.2), a)]
    return out


def torchmetrics_rows() -> list[Row]:
    from torchmetrics.classification import BinaryAUROC, BinaryAveragePrecision
    from torchmetrics.regression import PearsonCorrCoef

    def tm(metric, *args):
        return float(quiet(metric, *(torch.from_numpy(np.ascontiguousarray(a).reshape(-1)) for a in args)))

    ranking = ranking_inputs()
    auroc = [(metrics.auroc(y, s), tm(BinaryAUROC(thresholds=None), s, y.astype(np.int64))) for y, s in ranking]
    ap = [(metrics.auprc(y, s), tm(BinaryAveragePrecision(thresholds=None), s, y.astype(np.int64))) for y, s in ranking]
    ncc = [(metrics.ncc(a, b), tm(PearsonCorrCoef(), b, a)) for a, b in ncc_inputs()]
    return [
        row("`auroc`", "torchmetrics", "`BinaryAUROC(thresholds=None)`", auroc,
            "equal (ties count ½ in both)", FLOAT32),
        row("`auprc`", "torchmetrics", "`BinaryAveragePrecision(thresholds=None)`", ap,
            "equal: Σ (R_k − R_{k−1}) P_k over complete tie groups, no interpolation", FLOAT32),
        row("`ncc`", "torchmetrics", "`PearsonCorrCoef()` on the flattened maps", ncc,
            "equal (the NCC is Pearson's r); a constant map: NaN in both", FLOAT32),
    ]


# ----------------------------------------------------------------------------- Dice and GED


def binary_masks() -> list[tuple[np.ndarray, np.ndarray]]:
    """``(prediction, reference)`` in {0, 1}: random overlaps in 2D and 3D, either or both empty, equal."""
    rng = rng_for("binary masks")
    out = []
    for shape in ((16, 16), (6, 7, 8)):
        for _ in range(3):
            ref = rng.random(shape) < 0.3
            out.append(((ref ^ (rng.random(shape) < 0.2)).astype(np.int64), ref.astype(np.int64)))
    ref = (rng.random((16, 16)) < 0.3).astype(np.int64)
    empty = np.zeros((16, 16), np.int64)
    out += [(empty, ref), (ref, empty), (empty, empty), (ref, ref)]
    return out


IGNORE = 255


def label_maps() -> list[tuple[np.ndarray, np.ndarray, int | None]]:
    """``(prediction, reference, ignore_index)`` with 4 classes: class 3 absent from both in some,
    a reference with ignored pixels, every foreground class absent."""
    rng = rng_for("label maps")
    out = []
    for top in (4, 3):  # labels below top: with top 3, class 3 is absent from both maps
        for ignore in (None, IGNORE):
            for _ in range(2):
                ref = rng.integers(0, top, (16, 16))
                pred = np.where(rng.random((16, 16)) < 0.3, rng.integers(0, top, (16, 16)), ref)
                if ignore is not None:
                    ref[:5, :] = ignore
                out.append((pred, ref, ignore))
    out.append((np.zeros((16, 16), np.int64), np.zeros((16, 16), np.int64), None))
    return out


def monai_dice(pred: np.ndarray, ref: np.ndarray, num_classes: int, ignore_index: int | None = None) -> np.ndarray:
    """MONAI's per-class Dice of the foreground classes, ``[B, classes - 1]`` for label maps stacked
    ``[B, ...]``; a class empty in both maps scores 1."""
    from monai.metrics import compute_dice

    def t(a):
        return torch.from_numpy(np.asarray(a, dtype=np.int64))[:, None]

    return compute_dice(t(pred), t(ref), include_background=False, ignore_empty=False, num_classes=num_classes,
                        ignore_index=ignore_index).double().numpy()


def present_mean(per_class: np.ndarray, pred: np.ndarray, ref: np.ndarray, ignore_index: int | None) -> float:
    """The mean over the foreground classes present in either map (1 where none is)."""
    keep = ref != ignore_index if ignore_index is not None else np.ones(ref.shape, bool)
    present = [c for c in range(1, len(per_class) + 1) if (pred[keep] == c).any() or (ref[keep] == c).any()]
    return float(np.mean([per_class[c - 1] for c in present])) if present else 1.0


def ged_inputs() -> list[tuple[np.ndarray, np.ndarray, int]]:
    """``(predicted masks [P, ...], reference masks [R, ...], num_classes)``, empty masks among them."""
    rng = rng_for("ged")
    out = []
    for p, r in ((1, 1), (3, 4), (5, 2)):
        base = rng.random((12, 12)) < 0.3
        pred = np.stack([base ^ (rng.random((12, 12)) < 0.15) for _ in range(p)]).astype(np.int64)
        ref = np.stack([base ^ (rng.random((12, 12)) < 0.1) for _ in range(r)]).astype(np.int64)
        out.append((pred, ref, 2))
    pred = (rng.random((3, 12, 12)) < 0.3).astype(np.int64)
    ref = (rng.random((3, 12, 12)) < 0.3).astype(np.int64)
    pred[0] = 0
    ref[1] = 0
    out += [(pred, ref, 2), (np.zeros((2, 12, 12), np.int64), np.zeros((3, 12, 12), np.int64), 2)]
    for p, r in ((2, 3), (4, 4)):
        out.append((rng.integers(0, 3, (p, 12, 12)), rng.integers(0, 3, (r, 12, 12)), 3))
    return out


def monai_dice_rows() -> list[Row]:
    binary = [(metrics.dice(p, r), monai_dice(p[None], r[None], 2)[0, 0]) for p, r in binary_masks()]
    multi = []
    for p, r, ignore in label_maps():
        per_class = monai_dice(p[None], r[None], 4, ignore)[0]
        multi.append((metrics.dice(p, r, num_classes=4, ignore_index=ignore), float(per_class.mean()),
                      present_mean(per_class, p, r, ignore)))
    ged = []
    for pred, ref, c in ged_inputs():
        masks = np.concatenate([pred, ref])
        M, P = len(masks), len(pred)
        i, j = np.divmod(np.arange(M * M), M)  # every ordered pair, in one batch
        per_pair = monai_dice(masks[i], masks[j], c)
        d = np.array([1.0 - present_mean(per_pair[k], masks[i[k]], masks[j[k]], None) for k in range(M * M)])
        d = d.reshape(M, M)
        ged.append((metrics.ged(pred, ref, num_classes=c),
                    2 * d[:P, P:].mean() - d[P:, P:].mean() - d[:P, :P].mean()))
    code = "`compute_dice(include_background=False, ignore_empty=False)`"
    return [
        row("`dice`, binary masks", "monai", code, binary,
            "equal: two empty masks score 1 in both (MONAI's `ignore_empty=True`, its default, gives NaN where "
            "the reference is empty)", FLOAT32),
        row("`dice`, 4 classes, `ignore_index`", "monai", code[:-2] + ", num_classes=4, ignore_index=255)`", multi,
            "values-seg's Dice is the mean of MONAI's per-class Dice over the foreground classes present in "
            "either map (MONAI scores a class absent from both 1, values-seg leaves it out; 1 where none is "
            "present). As is: MONAI's mean over every foreground class", FLOAT32),
        row("`ged`", "monai", "GED from " + code + " of every ordered pair", ged,
            "equal: 2 E d(ŷ, y) − E d(y, y′) − E d(ŷ, ŷ′), d = 1 − Dice (the Dice of the two rows above), each "
            "mean over all ordered pairs including i = j (Kohl et al.'s implementation)", FLOAT32),
    ]


# ----------------------------------------------------------------------------- conformal


def mapie_rows() -> list[Row]:
    from mapie.risk_control import SemanticSegmentationController
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    grid = np.arange(0.0, 1.0, 0.01)
    crc = []
    for seed in range(4):
        rng = rng_for("crc", seed)
        n = 40
        truth = rng.random((n, 6, 6)) < 0.3
        truth[:, 0, 0] = True  # MAPIE's recall is undefined on an empty mask
        proba = np.clip(np.where(truth, rng.beta(5, 2, truth.shape), rng.beta(2, 5, truth.shape)), 0, 1)
        for alpha in (0.05, 0.1, 0.2, 0.3):
            controller = SemanticSegmentationController(predict_function=lambda x: x[:, None], risk="recall",
                                                        method="crc", target_level=1 - alpha, predict_params=grid)
            quiet(controller.calibrate, proba, truth.reshape(n, -1).astype(int))
            theirs = float(np.asarray(controller.best_predict_param).reshape(-1)[0])
            ours = metrics.crc_threshold(list(proba), list(truth), alpha)
            crc.append((ours, theirs, grid[grid < ours].max(), theirs))
    hb = []
    r_hat = np.array([0.0, 0.05, 0.1, 0.13, 0.3, 0.5, 0.9])
    for n in (5, 40, 300):
        for level in (0.1, 0.25):
            theirs = compute_hoeffding_bentkus_p_value(r_hat, n, level)[:, 0]
            hb += zip(metrics.hoeffding_bentkus_p_value(r_hat, n, level), theirs)
    return [
        row("`crc_threshold` (FNR, mean over raters)", "MAPIE", "`SemanticSegmentationController(risk=\"recall\", "
            "method=\"crc\")` on the grid 0, 0.01, …, 0.99", crc,
            "MAPIE searches a grid and keeps {p > λ}, values-seg the exact t̂ over the scores and keeps {p ≥ t}. "
            "Identity: MAPIE's λ̂ is the largest grid point below t̂", FLOAT64),
        row("`hoeffding_bentkus_p_value`", "MAPIE", "`risk_control.methods.compute_hoeffding_bentkus_p_value`", hb,
            "equal: the smaller of the Hoeffding and the Bentkus p-value", FLOAT64),
    ]


# ----------------------------------------------------------------------------- aggregations


def aggregation_inputs() -> list[tuple[np.ndarray, np.ndarray]]:
    """``(uncertainty map, predicted labels)``: uniform, with exact zeros and a plateau, smooth; three
    classes in blobs, background only, a thin line, noise; two shapes."""
    out = []
    for shape in ((8, 8), (13, 21)):
        rng = rng_for("aggregation", shape)
        h, w = shape
        plateau = rng.random(shape)
        plateau[: h // 2, : w // 2] = 0.5
        plateau[-1, -1] = 0.0
        smooth = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
        blobs = np.zeros(shape, np.int64)
        blobs[h // 5: 3 * h // 4, w // 6: 2 * w // 3] = 1
        blobs[h // 2:, w // 2:] = 2
        line = np.zeros(shape, np.int64)
        line[:, w // 2] = 1
        layouts = [blobs, np.zeros(shape, np.int64), line, rng.integers(0, 3, shape)]
        out += [(u.astype(np.float32), labels) for u in (rng.random(shape), plateau, smooth) for labels in layouts]
    return out


def aggrigator_rows() -> list[Row]:
    from aggrigator.methods import AggregationMethods as A
    from aggrigator.spatial_decomposition import spatial_decomposition
    from aggrigator.uncertainty_maps import UncertaintyMap

    def ours(name, u, labels, **params):
        return registry.create("aggregation", name, **params)(torch.from_numpy(u), prediction=torch.from_numpy(labels))

    def theirs(method, u, labels, param=None):
        return float(quiet(method, UncertaintyMap(u, mask=labels), param))

    inputs = aggregation_inputs()
    plain = {"max": A.max, "std": A.std_dev, "geometric_mean": A.geometric_mean, "harmonic_mean": A.harmonic_mean,
             "above_quantile_mean_fg_ratio": A.above_quantile_mean_fg_ratio, "morans_i": A.morans_I,
             "gearys_c": A.gearys_C}
    values: dict[str, list] = {name: [(ours(name, u, m), theirs(f, u, m)) for u, m in inputs]
                               for name, f in plain.items()}
    constant = (np.full((6, 7), 0.5, np.float32), np.zeros((6, 7), np.int64))
    for name in ("morans_i", "gearys_c"):
        values[name].append((ours(name, *constant), theirs(plain[name], *constant)))
    values["above_threshold_mean"] = [(ours("above_threshold_mean", u, m, t=t), theirs(A.above_threshold_mean, u, m, t))
                                      for u, m in inputs for t in (0.2, 0.5, 0.9, 2.0)]
    values["above_quantile_mean"] = [(ours("above_quantile_mean", u, m, q=q), theirs(A.above_quantile_mean, u, m, q))
                                     for u, m in inputs for q in (0.0, 0.2, 0.5, 0.9, 1.0)]
    values["class_mean"] = [(ours("class_mean", u, m, label=int(c)), theirs(A.class_mean, u, m, int(c)))
                            for u, m in inputs for c in np.unique(m)]
    for name, method in (("class_boundary_mean", A.class_boundary_mean), ("class_interior_mean", A.class_interior_mean)):
        values[name] = []
        for u, m in inputs:
            for c in np.unique(m):
                for nbhood in ("full", "star"):
                    for thickness in (1, 2):
                        t = theirs(method, u, m, {"id": int(c), "thickness": thickness, "nbhood": nbhood})
                        o = ours(name, u, m, label=int(c), thickness=thickness, nbhood=nbhood)
                        values[name].append((o, t, float(u.astype(np.float64).mean()) if math.isnan(t) else t))
    for name, method in (("class_mean_equal", A.class_mean_w_equal_weights),
                         ("class_mean_occurrence", A.class_mean_weighted_by_occurrence)):
        values[name] = [(ours(name, u, m, include_background=b, empty_value=0.0), theirs(method, u, m, b))
                        for u, m in inputs for b in (False, True)]
    values["spatial_mass_ratio"] = [
        (ours("spatial_mass_ratio", u, np.zeros(u.shape, np.int64), measure=measure, window=window),
         quiet(spatial_decomposition, UncertaintyMap(u), window, measure)[3])
        for u, _ in inputs[::4] for measure in ("entropy", "eds", "moran") for window in (3, 5)]
    code = {name: f"`AggregationMethods.{f.__name__}`" for name, f in plain.items()}
    code |= {name: f"`AggregationMethods.{name}`" for name in ("above_threshold_mean", "above_quantile_mean",
                                                                "class_mean", "class_boundary_mean", "class_interior_mean")}
    code |= {"class_mean_equal": "`AggregationMethods.class_mean_w_equal_weights`",
             "class_mean_occurrence": "`AggregationMethods.class_mean_weighted_by_occurrence`",
             "spatial_mass_ratio": "`spatial_decomposition(...)[3]` (measure, window)"}
    identity = {
        "morans_i": "equal; a constant map: 1 in both", "gearys_c": "equal; a constant map: 1 in both",
        "above_threshold_mean": "equal; no value above t: 0 in both",
        "class_interior_mean": "Aggrigator gives NaN where the eroded class is empty, values-seg the map's mean "
                               "(its `empty_value` unset). Identity: NaN read as the map's mean",
        "class_mean_equal": "equal with `empty_value=0` (no class counted: Aggrigator's 0)",
        "class_mean_occurrence": "equal with `empty_value=0` (no class counted: Aggrigator's 0)",
    }
    return [row(f"aggregation `{name}`", "aggrigator", code[name], v, identity.get(name, "equal"), FLOAT32)
            for name, v in values.items()]


# ----------------------------------------------------------------------------- fd-shifts' cases


FD_SHIFTS = ROOT / "tests" / "values_seg" / "metrics" / "data" / "fd_shifts_rc_stats_cases.json"


def fd_shifts_rows() -> list[Row]:
    data = json.loads(FD_SHIFTS.read_text())

    def case(c):
        conf = np.array([np.nan if v is None else v for v in data["confidences"][c["confidences"]]])
        correct = np.array([np.nan if v is None else v for v in data["correctness"][c["correctness"]]])
        return 1.0 - correct, conf

    valued = [c for c in data["cases"] if "aurc" in c]
    peer = f"fd-shifts {data['source']['commit'][:7]}"
    code = "`RC_STATS_TEST_CASES` (`fd_shifts/tests/utils.py`), committed as JSON"
    rows = []
    for fn in (metrics.aurc, metrics.eaurc, metrics.augrc):
        equal = sum(close(fn(*case(c)), c[fn.__name__], FLOAT32) for c in valued)
        rows.append(Row(f"`{fn.__name__}`", peer, code, len(valued), equal, equal, "equal (risk = 1 − correctness)",
                        FLOAT32))

    def raises(fn, c):
        try:
            fn(*case(c))
        except ValueError as e:
            return "NaN" in str(e)
        return False

    nan = [(fn, c) for c in data["cases"] if "aurc" not in c for fn in (metrics.aurc, metrics.eaurc, metrics.augrc)]
    rows.append(Row("`aurc`, `eaurc`, `augrc`, inputs with NaN", peer, code, len(nan), 0,
                    sum(raises(fn, c) for fn, c in nan),
                    "fd-shifts returns NaN; values-seg raises a `ValueError` naming the NaN. Counted: the raises",
                    FLOAT32))
    return rows


# ----------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class Peer:
    name: str  # as the table's peer column starts
    module: str | None  # what must import, else the peer's rows are skipped
    rows: Callable[[], list[Row]]


PEERS = [
    Peer("netcal", "netcal", netcal_rows),
    Peer("monai", "monai", lambda: monai_rows() + monai_dice_rows()),
    Peer("torch-uncertainty", "torch_uncertainty", torch_uncertainty_rows),
    Peer("torchmetrics", "torchmetrics", torchmetrics_rows),
    Peer("MAPIE", "mapie", mapie_rows),
    Peer("aggrigator", "aggrigator", aggrigator_rows),
    Peer("fd-shifts", None, fd_shifts_rows),
]


def table_lines(text: str) -> list[str]:
    """The rows between the markers (header and rule left out)."""
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"{PAGE}: the table's markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip().splitlines()
    assert block[0] == "| " + " | ".join(HEADER) + " |", block[0]
    return block[2:]


def peer_of(line: str) -> str:
    """The peer's name in a row of the table (its second cell: name, version, then its code)."""
    return line.split(" | ")[1].split("<br>")[0].rsplit(" ", 1)[0]


def write_rows(peer: str, lines: list[str]) -> None:
    """Replace ``peer``'s rows of the page's table, the peers in the order of :data:`PEERS`."""
    text = PAGE.read_text()
    current = table_lines(text)
    rows = {p.name: [l for l in current if peer_of(l) == p.name] for p in PEERS}
    rows[peer] = lines
    block = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER), *[l for p in PEERS for l in rows[p.name]]]
    head, rest = text.split(BEGIN, 1)
    PAGE.write_text(head + BEGIN + "\n" + "\n".join(block) + "\n" + END + rest.split(END, 1)[1])


@pytest.mark.parametrize("peer", PEERS, ids=[p.name for p in PEERS])
def test_the_page_states_what_the_peer_computes(peer):
    if peer.module:
        pytest.importorskip(peer.module, reason=f"{peer.name} is not installed (the test extra installs it)")
    lines = [r.line() for r in peer.rows()]
    assert all(peer_of(line) == peer.name for line in lines)
    if os.environ.get("VALUES_SEG_REGENERATE") == "1":
        write_rows(peer.name, lines)
        return
    committed = [line for line in table_lines(PAGE.read_text()) if peer_of(line) == peer.name]
    assert committed == lines, (
        f"docs/agreement.md differs from what {peer.name} computes now:\n  page:\n    " + "\n    ".join(committed)
        + "\n  now:\n    " + "\n    ".join(lines)
        + "\nIf the change is meant: VALUES_SEG_REGENERATE=1 python -m pytest tests/peers/test_agreement.py")


def test_the_table_holds_every_peer_and_nothing_else():
    peers = [peer_of(line) for line in table_lines(PAGE.read_text())]
    assert list(dict.fromkeys(peers)) == [p.name for p in PEERS]  # each peer's rows together, in order
