"""Per-case records for conformal risk control (Angelopoulos et al., ICLR 2024) and risk-controlled
selection (Bates et al. 2021), on the validation (calibration) and test cases: per foreground class and
set family, exact float16 score histograms of the reference foreground and of the set, and the case's
risk. What they hold and why they are exact: docs/design-rationale.md, "Conformal records".
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np

from values_seg import hookimpl
from values_seg.components.quantity import Quantity

from values_seg_plugins.quantities.overlap import Dice

PROBABILITY = "probability"
_F16_MAX = float(np.finfo(np.float16).max)


def _codes(scores: np.ndarray) -> np.ndarray:
    """Scores ``[F, ...]`` as float16 bit patterns (clipped to its range), flat per family, int64."""
    f16 = np.clip(scores, -_F16_MAX, _F16_MAX).astype(np.float16)
    return f16.view(np.uint16).reshape(len(scores), -1).astype(np.int64)


def _histograms(codes: np.ndarray, group: np.ndarray, row: np.ndarray, pixel: np.ndarray, n_groups: int) -> list:
    """Per group ``g < n_groups``, the distinct codes and their counts of the selected entries
    ``codes[row, pixel]`` whose ``group`` is ``g`` (one sort for all groups)."""
    key = group * 65536 + codes[row, pixel]
    unique, counts = np.unique(key, return_counts=True)
    bounds = np.searchsorted(unique, np.arange(n_groups + 1) * 65536)
    return [((unique[a:b] - g * 65536).astype(np.uint16), counts[a:b].astype(np.int64))
            for g, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]


def _families(scores: np.ndarray, predicted: np.ndarray, references: np.ndarray) -> list[dict]:
    """The records of one class for every family, ``scores [F, ...]`` (the first the probability, none of
    its pixels always in; the others with the predicted pixels always in): two sorts for all of them."""
    codes = _codes(scores)
    n_families, n_raters = len(scores), len(references)
    free = np.ones(codes.shape, dtype=bool)
    free[1:] = ~predicted.reshape(-1)
    refs = references.reshape(n_raters, -1)
    f, r, p = np.nonzero(refs[None] & free[:, None])  # reference pixels of rater r not always in family f
    missed = _histograms(codes, f * n_raters + r, f, p, n_families * n_raters)
    f, p = np.nonzero(free)
    everything = _histograms(codes, f, f, p, n_families)
    base = [0] + [int(predicted.sum())] * (n_families - 1)
    return [{"missed": missed[k * n_raters:(k + 1) * n_raters], "all": everything[k], "base": base[k]}
            for k in range(n_families)]


class ConformalSets(Quantity):
    """Per class, rater and set family (mean probability; predicted foreground + each measure's uncertainty), the float16 histograms that give the FNR and set size at every threshold; validation and test cases."""

    name = "conformal_sets"
    needs = ("samples", "maps", "prediction", "references")
    per_measure = True
    payload = True
    splits = ("val", "test")

    def compute(self, case, fitted=None):
        prediction = case.prediction.numpy()
        raters = case.raters.numpy()
        mean = case.stats.mean.float().numpy()
        maps = case.maps.float().numpy()
        shared = {"dice": float(Dice.compute(self, case)), "classes": {}}
        per_measure = [{} for _ in case.measures]
        for c in range(case.num_classes):
            if c in (case.background, case.ignore_index):
                continue
            references = raters == c  # a rater's ignored pixels are never class c
            predicted = prediction == c
            probability, *by_measure = _families(np.concatenate([mean[c][None], maps]), predicted, references)
            shared["classes"][c] = {"n_ref": references.reshape(len(raters), -1).sum(axis=1).tolist(),
                                    "n_pred": int(predicted.sum()), PROBABILITY: probability}
            for m, record in enumerate(by_measure):
                per_measure[m][c] = record
        return [{"shared": shared, "measure": record} for record in per_measure]

    def save(self, entries, measures, settings):
        arrays, index = {}, []
        for case_id, _meta, by_measure in entries:
            records = {m: r for m, r in by_measure.items() if m in measures}
            if not records:
                continue
            shared = next(iter(records.values()))["shared"]
            i = len(index)
            index.append({"case_id": case_id, "dice": shared["dice"],
                          "classes": {str(c): {k: v for k, v in rec.items() if k in ("n_ref", "n_pred")}
                                      for c, rec in shared["classes"].items()}})
            for c, rec in shared["classes"].items():
                _put(arrays, (c, PROBABILITY), i, rec[PROBABILITY])
                for m, record in records.items():
                    _put(arrays, (c, m), i, record["measure"][c])
        buf = io.BytesIO()
        np.savez_compressed(buf, **{f"{c}/{key}/{part}": np.concatenate(chunks) if chunks else np.zeros(0)
                                    for (c, key), parts in arrays.items() for part, chunks in parts.items()})
        return {"cases.json": json.dumps(index).encode(), "sets.npz": buf.getvalue()}

    def load(self, files):
        index = json.loads(files["cases.json"])
        with np.load(io.BytesIO(files["sets.npz"])) as npz:
            arrays = {name: npz[name] for name in npz.files}
        return ConformalRecords.build(index, arrays)


def _put(arrays: dict, key: tuple, case: int, family: dict) -> None:
    """Append one case's family record to the concatenated arrays of ``key`` (class, family)."""
    parts = arrays.setdefault(key, {p: [] for p in ("miss_code", "miss_count", "miss_case", "miss_rater",
                                                     "all_code", "all_count", "all_case", "base")})
    for r, (codes, counts) in enumerate(family["missed"]):
        parts["miss_code"].append(codes)
        parts["miss_count"].append(counts)
        parts["miss_case"].append(np.full(codes.size, case, dtype=np.int64))
        parts["miss_rater"].append(np.full(codes.size, r, dtype=np.int64))
    codes, counts = family["all"]
    parts["all_code"].append(codes)
    parts["all_count"].append(counts)
    parts["all_case"].append(np.full(codes.size, case, dtype=np.int64))
    parts["base"].append(np.array([case, family["base"]], dtype=np.int64))


@dataclass
class FamilyRecords:
    """One (class, family) over all cases: where each case's FNR jumps (per rater) and its set sizes."""

    miss_value: np.ndarray  # float64 scores of reference-foreground pixels not always in the set
    miss_count: np.ndarray
    miss_case: np.ndarray
    miss_rater: np.ndarray
    all_value: np.ndarray
    all_count: np.ndarray
    all_case: np.ndarray
    base: np.ndarray  # [n] pixels always in the set

    def jumps(self, n_ref: np.ndarray, raters="mean"):
        """``(values, weights, case_index)`` of :class:`values_seg.metrics.conformal.LossSteps`: the FNR
        averaged over a case's raters (``raters="mean"``; a rater with an empty mask counts 0) or rater
        ``raters`` alone. ``n_ref``: ``[n, R]`` reference-foreground counts."""
        if raters == "mean":
            n_raters = np.maximum((n_ref >= 0).sum(axis=1), 1)[self.miss_case]
            keep = np.ones(self.miss_case.size, dtype=bool)
        else:
            n_raters, keep = 1, self.miss_rater == int(raters)
        total = n_ref[self.miss_case, self.miss_rater].astype(np.float64)
        weights = self.miss_count / (n_raters * np.maximum(total, 1))
        return self.miss_value[keep], weights[keep], self.miss_case[keep]

    def risks_at(self, n_ref: np.ndarray, thresholds, raters="mean") -> tuple[np.ndarray, np.ndarray]:
        """Per case and threshold ``[n, G]``, the FNR and the false-discovery rate ``|C \\ Y| / |C|`` (1 −
        precision; 0 for an empty set) of the set at each of ``thresholds``, per rater then averaged
        over the case's raters (``raters="mean"``) or rater ``raters`` alone. ``n_ref``: ``[n, R]``."""
        thresholds = np.asarray(thresholds, dtype=np.float64).reshape(-1)
        n, width = n_ref.shape
        key = self.miss_case * width + self.miss_rater
        missed = np.stack([np.bincount(key, weights=self.miss_count * (self.miss_value < t), minlength=n * width)
                           for t in thresholds], axis=-1).reshape(n, width, -1)
        size = np.stack([self.set_size(t, n) for t in thresholds], axis=-1).astype(np.float64)[:, None]
        ref = n_ref.astype(np.float64)[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            fnr = np.where(ref > 0, missed / np.maximum(ref, 1), 0.0)
            fdr = np.where(size > 0, 1.0 - (np.maximum(ref, 0) - missed) / np.maximum(size, 1), 0.0)
        present = np.broadcast_to((n_ref >= 0)[..., None], fnr.shape)
        if raters != "mean":
            present = np.zeros_like(present)
            present[:, int(raters)] = True
        count = np.maximum(present.sum(axis=1), 1)
        return (fnr * present).sum(axis=1) / count, (fdr * present).sum(axis=1) / count

    def set_size(self, threshold: float, n_cases: int) -> np.ndarray:
        """Per case, the pixels in its set at ``threshold``."""
        inside = self.all_value >= threshold
        return self.base + np.bincount(self.all_case[inside], weights=self.all_count[inside], minlength=n_cases)


@dataclass
class ConformalRecords:
    """The stored records: ``case_ids`` (validation and test cases, pass order), ``risk`` (1 - Dice),
    per class ``n_ref`` ([n, R], -1 where a case has fewer raters) and ``n_pred`` ([n]), and
    ``families[(class, family)]`` (family: "probability" or a measure)."""

    case_ids: list = field(default_factory=list)
    risk: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_ref: dict = field(default_factory=dict)
    n_pred: dict = field(default_factory=dict)
    families: dict = field(default_factory=dict)

    @classmethod
    def build(cls, index: list, arrays: dict) -> "ConformalRecords":
        n = len(index)
        classes = sorted({int(c) for e in index for c in e["classes"]})
        n_ref, n_pred = {}, {}
        for c in classes:
            width = max(len(e["classes"].get(str(c), {}).get("n_ref", [])) for e in index)
            n_ref[c] = np.full((n, width), -1, dtype=np.int64)
            n_pred[c] = np.zeros(n, dtype=np.int64)
            for i, e in enumerate(index):
                rec = e["classes"].get(str(c))
                if rec is not None:
                    n_ref[c][i, :len(rec["n_ref"])] = rec["n_ref"]
                    n_pred[c][i] = rec["n_pred"]
        keys = {tuple(name.split("/")[:2]) for name in arrays}
        families = {}
        for c, family in keys:
            get = lambda part: arrays[f"{c}/{family}/{part}"]  # noqa: E731
            base = np.zeros(n, dtype=np.int64)
            pairs = get("base").reshape(-1, 2)
            base[pairs[:, 0]] = pairs[:, 1]
            families[(int(c), family)] = FamilyRecords(
                _values(get("miss_code")), get("miss_count").astype(np.float64), get("miss_case").astype(np.int64),
                get("miss_rater").astype(np.int64), _values(get("all_code")), get("all_count").astype(np.float64),
                get("all_case").astype(np.int64), base)
        return cls([e["case_id"] for e in index], 1.0 - np.array([e["dice"] for e in index], dtype=np.float64),
                   n_ref, n_pred, families)


def _values(codes: np.ndarray) -> np.ndarray:
    return codes.astype(np.uint16).view(np.float16).astype(np.float64)


@hookimpl
def values_seg_quantities():
    return [ConformalSets]
