"""The calibration quantity: per-case calibration bins (appendix A.5, eq. 11) of Platt-scaled
confidences, Platt scaling fitted on the validation split; with its numerics (the validation
histograms, the binning over all (pixel, rater) pairs) and its per-case bins file."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from values_seg import hookimpl, metrics
from values_seg.components.quantity import Quantity
from values_seg.components.settings import EvaluationSettings
from values_seg.numerics import kernels

#: per-case calibration bins are kept at this multiple of the ACE's bins (``coarsen_bins`` merges
#: them back): the ACE reference simulates each fine bin, whose variance the histogram overstates
#: by at most its width (values_seg.metrics.calibration_reference): 1 % at 100 bins (5 % at 20),
#: at half the simulation cost of 200 bins
FINE_BINS = 5
SUBSETS = ("iid", "ood")
FLOAT16_CODES = 1 << 16
#: the arrays of the per-case bins file, one per field of :class:`values_seg.metrics.CalibrationBins`
BIN_FIELDS = ("count", "confidence_sum", "correct_sum")


@dataclass
class CalibrationOutput:
    """``bins``: (measure, "iid"|"ood") -> the summed bins at the ACE's resolution;
    ``case_bins``: measure -> test case id -> that case's bins at :data:`FINE_BINS` times it."""

    bins: dict = field(default_factory=dict)
    case_bins: dict = field(default_factory=dict)


class Calibration(Quantity):
    """Per measure, the calibration bins of the Platt-scaled confidence (fitted on validation) over all (pixel, rater) pairs.

    Validation: per measure, a histogram of (uncertainty, agreeing raters) pixels per case
    (:class:`UncertaintyHistogram`), merged over the cases; Platt scaling is fitted on it (a measure
    whose fit fails is dropped from the combination). Test: per case and measure, calibration bins
    over all (pixel, rater) pairs at :data:`FINE_BINS` times the ACE's ``evaluation.n_bins`` (the
    bootstrap and the ACE reference use them), summed per measure and subset (i.i.d./OoD) at the
    ACE's bins in pass order (the ACE merges sparse bins to its minimum mass only after summing,
    :func:`values_seg.metrics.ace_bin_groups`, so sums stay exact). The stored output
    (:class:`CalibrationOutput`) also fills the run directory's ``calibration.csv``.
    """

    name = "calibration_bins"
    needs = ("maps", "prediction", "references")
    per_measure = True
    payload = True
    table = "calibration.csv"

    def fit_case(self, case):
        n_correct, n_valid = case.agreement()
        out = []
        for umap in case.maps:
            histogram = UncertaintyHistogram()
            histogram.add(umap, n_correct, n_raters=len(case.raters), n_valid=n_valid)
            out.append(histogram)
        return out

    def fit(self, summary):
        return summary.platt_fit()

    def compute(self, case, fitted=None):
        n_correct, n_valid = case.agreement()
        confidence = platt_confidence(case.maps, [fitted[m] for m in case.measures])
        n_bins = case.settings.n_bins * FINE_BINS
        return calibration_from_counts(confidence, n_correct, len(case.raters), n_bins, n_valid=n_valid)

    def save(self, entries, measures, settings: EvaluationSettings):
        n_bins = settings.n_bins
        summed = {(m, s): metrics.CalibrationBins.empty(n_bins) for m in measures for s in SUBSETS}
        per_case = {}
        for case_id, meta, bins in entries:  # in pass order: the sums are those of the same additions
            subset = "ood" if meta.get("ood") else "iid"
            for m, b in bins.items():
                if m in measures:
                    per_case[(case_id, m)] = b
                    summed[(m, subset)] = summed[(m, subset)] + metrics.coarsen_bins(b, n_bins)
        summary = [{"measure": m, "subset": s, "count": b.count.tolist(), "confidence_sum": b.confidence_sum.tolist(),
                    "correct_sum": b.correct_sum.tolist()} for (m, s), b in summed.items() if b.count.sum()]
        files = {"bins.json": json.dumps(summary).encode()}
        if per_case:
            files["cases.npz"] = case_bins_to_bytes(per_case)
        return files

    def load(self, files):
        bins = {(e["measure"], e["subset"]): metrics.CalibrationBins(
                    np.asarray(e["count"]), np.asarray(e["confidence_sum"]), np.asarray(e["correct_sum"]))
                for e in json.loads(files["bins.json"])}
        return CalibrationOutput(bins, case_bins_from_bytes(files.get("cases.npz")))

    def table_rows(self, output):
        return [{"measure": measure, "subset": subset, "bin": b, "count": float(bins.count[b]),
                 "confidence_sum": float(bins.confidence_sum[b]), "correct_sum": float(bins.correct_sum[b])}
                for (measure, subset), bins in sorted(output.bins.items()) for b in range(bins.n_bins)]


@dataclass
class UncertaintyHistogram:
    """Pixel counts per float16 value of an uncertainty map, split by correctness.

    A bounded-memory, mergeable summary of (uncertainty, correct) pairs over many cases, from
    which Platt scaling is fitted with one weighted point per distinct value (appendix A.5).
    """

    correct: np.ndarray = field(default_factory=lambda: np.zeros(FLOAT16_CODES, np.int64))
    total: np.ndarray = field(default_factory=lambda: np.zeros(FLOAT16_CODES, np.int64))

    def add(self, umap: torch.Tensor, correct: torch.Tensor, n_raters: int = 1,
            n_valid: torch.Tensor | None = None) -> None:
        """Add pixels; ``correct`` counts per pixel how many of ``n_raters`` raters agree (with
        ``n_valid``: of the ``n_valid`` raters per pixel that do not mark it ignored)."""
        codes = umap.detach().to(torch.float16).view(torch.int16).reshape(-1).numpy().view(np.uint16)
        if n_valid is None:
            self.total += np.bincount(codes, minlength=FLOAT16_CODES) * n_raters
        else:
            raters = n_valid.reshape(-1).to(torch.float64).numpy()
            self.total += np.rint(np.bincount(codes, weights=raters, minlength=FLOAT16_CODES)).astype(np.int64)
        weights = correct.reshape(-1).to(torch.float64).numpy()
        self.correct += np.rint(np.bincount(codes, weights=weights, minlength=FLOAT16_CODES)).astype(np.int64)

    def __add__(self, other: "UncertaintyHistogram") -> "UncertaintyHistogram":
        return UncertaintyHistogram(self.correct + other.correct, self.total + other.total)

    def platt_fit(self) -> tuple[float, float]:
        """Platt parameters fitted on all accumulated pixels (:func:`values_seg.metrics.platt_fit`)."""
        used = np.flatnonzero(self.total)
        if used.size == 0:
            raise ValueError("Platt scaling: no validation pixels were accumulated")
        values = used.astype(np.uint16).view(np.float16).astype(np.float64)
        right, wrong = self.correct[used], self.total[used] - self.correct[used]
        u = np.concatenate([values, values])
        y = np.concatenate([np.ones_like(values), np.zeros_like(values)])
        w = np.concatenate([right, wrong]).astype(np.float64)
        keep = w > 0
        return metrics.platt_fit(u[keep], y[keep], sample_weight=w[keep])


def platt_confidence(maps: torch.Tensor, params: Sequence[tuple[float, float]]) -> torch.Tensor:
    """:func:`values_seg.metrics.platt_apply` for a stack of maps ``[M, ...]``, one (a, b) per map:
    ``1 / (1 + exp(a * (-u) + b))``, batched in torch."""
    a, b = (torch.tensor(v, dtype=maps.dtype).reshape(-1, *([1] * (maps.ndim - 1))) for v in zip(*params))
    return torch.mul(a, maps).sub_(b).sigmoid_()  # one buffer, changed in place


def calibration_from_counts(confidence: torch.Tensor, n_correct: torch.Tensor, n_raters: int, n_bins: int,
                            n_valid: torch.Tensor | None = None):
    """Calibration bins over all (pixel, rater) pairs for a stack of confidence maps ``[M, ...]``.

    ``n_correct`` counts per pixel how many raters agree with the prediction; every rater sees
    the same confidence, so one binning serves all raters: one compiled pass over the maps
    (:func:`values_seg.numerics.kernels.calibration_counts`) counts the pixels per (bin, number of agreeing
    raters) and sums the confidences per bin, from which every bin statistic follows. ``n_valid``:
    per pixel, the raters that do not mark it ignored (each pixel then counts once per such rater;
    :func:`_bins_with_ignored`).
    """
    M = confidence.shape[0]
    conf = confidence.reshape(M, -1)
    if n_valid is not None:
        return [_bins_with_ignored(conf[m], n_correct.reshape(-1), n_valid.reshape(-1), n_bins) for m in range(M)]
    if conf.dtype not in (torch.float32, torch.float64):
        conf = conf.float()
    values = np.ascontiguousarray(conf.detach().cpu().numpy())
    agreeing = np.ascontiguousarray(n_correct.reshape(-1).cpu().numpy())
    counts, sums = kernels.calibration_counts(values, agreeing, n_bins, values.dtype.type(n_bins), n_raters + 1)
    return [bins_from_agreement(counts[m], sums[m], n_raters) for m in range(M)]


def bins_from_agreement(counts: np.ndarray, confidence_sums: np.ndarray, n_raters: int):
    """The calibration bins over all (pixel, rater) pairs of one map, from its pixel counts per (bin,
    number of agreeing raters) ``[n_bins, n_raters + 1]`` and its confidence sum per bin: every rater
    sees the pixel's confidence, and ``k`` of them count it correct."""
    return metrics.CalibrationBins(counts.sum(axis=1).astype(np.float64) * n_raters, confidence_sums * n_raters,
                                   counts.astype(np.float64) @ np.arange(n_raters + 1, dtype=np.float64))


def _bins_with_ignored(conf: torch.Tensor, n_correct: torch.Tensor, n_valid: torch.Tensor, n_bins: int):
    """Calibration bins of one flat confidence map where raters ignore some pixels: a pixel counts
    once per rater that labels it (``n_valid``), ``n_correct`` of them agreeing."""
    index = (conf * n_bins).to(torch.int64).clamp_(max=n_bins - 1)  # c >= 0: the conversion truncates
    raters = n_valid.to(torch.float64)
    count = torch.bincount(index, weights=raters, minlength=n_bins)
    conf_sum = torch.bincount(index, weights=conf.to(torch.float64) * raters, minlength=n_bins)
    correct = torch.bincount(index, weights=n_correct.to(torch.float64), minlength=n_bins)
    return metrics.CalibrationBins(count.numpy(), conf_sum.numpy(), correct.numpy())


def case_bins_to_bytes(case_bins: dict[tuple[str, str], metrics.CalibrationBins]) -> bytes:
    """The per-case bins file (``cases.npz``): ``[cases, measures, bins]`` arrays of count, summed
    confidence and summed correctness, and which (case, measure) pairs are present; ``case_bins``:
    (case id, measure) -> that case's bins (all with the same number of bins)."""
    ids = {c: i for i, c in enumerate(sorted({c for c, _ in case_bins}))}
    names = {m: j for j, m in enumerate(sorted({m for _, m in case_bins}))}
    n_bins = next(iter(case_bins.values())).n_bins
    arrays = {f: np.zeros((len(ids), len(names), n_bins)) for f in BIN_FIELDS}
    present = np.zeros((len(ids), len(names)), dtype=bool)
    for (c, m), b in case_bins.items():
        i, j = ids[c], names[m]
        present[i, j] = True
        for f in BIN_FIELDS:
            arrays[f][i, j] = getattr(b, f)
    buf = io.BytesIO()
    np.savez_compressed(buf, case_ids=np.array(list(ids)), measures=np.array(list(names)), present=present, **arrays)
    return buf.getvalue()


def case_bins_from_bytes(data: bytes | None) -> dict[str, dict[str, metrics.CalibrationBins]]:
    """measure -> case id -> bins; empty without the file (an evaluation without calibration)."""
    if data is None:
        return {}
    with np.load(io.BytesIO(data), allow_pickle=False) as data:
        a = {k: data[k] for k in data.files}  # each access of an npz member decompresses it again
    count = a["count"].astype(np.int64)
    return {m: {c: metrics.CalibrationBins(count[i, j], a["confidence_sum"][i, j], a["correct_sum"][i, j])
                for i, c in enumerate(a["case_ids"].tolist()) if a["present"][i, j]}
            for j, m in enumerate(a["measures"].tolist())}


@hookimpl
def values_seg_quantities():
    return [Calibration]
