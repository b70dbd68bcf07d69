"""Per-case lesion records (Shifts 2.0, appendix C.2.2): every predicted lesion of a case, whether it
is a TP for each rater, and its uncertainty under every lesion-scale aggregation and measure.

What a lesion and a TP are, and the payload's tables: docs/design-rationale.md, "Lesion records".
"""

from __future__ import annotations

import functools
import io
import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from values_seg import hookimpl, registry
from values_seg.components.lesion_scale import LesionVoxels, is_lesion_scale
from values_seg.metrics.lesion import lesion_f1, lesion_match
from values_seg.components.quantity import Quantity


def lesion_aggregations() -> dict:
    """Every registered lesion-scale aggregation, by name, with its default parameters."""
    return _instances(tuple((c.name, c.obj) for c in registry.components("aggregation")))


@functools.lru_cache(maxsize=8)
def _instances(classes: tuple) -> dict:
    """One (stateless) instance of each lesion-scale class of ``classes``, made once per set of classes."""
    return {name: registry.create("aggregation", name) for name, cls in classes if is_lesion_scale(cls)}


class Lesions(Quantity):
    """Per predicted lesion: class, size, TP per rater and score per measure x lesion-scale aggregation; per rater and class: reference lesions and FN."""

    name = "lesions"
    label = "Lesions"
    needs = ("maps", "prediction", "references")
    per_measure = True
    payload = True
    table = "lesions.csv"

    def compute(self, case, fitted=None):
        if case.background is None:
            raise ValueError("quantity 'lesions': a lesion needs a background class; this data set has none")
        prediction, raters = case.prediction.numpy(), case.raters.numpy()
        settings = case.settings
        if "_aggregations" not in self.__dict__:  # once per quantity instance (per evaluation), not per case
            self.__dict__["_aggregations"] = lesion_aggregations()
        aggregations = self.__dict__["_aggregations"]
        maps = case.maps.double().numpy()
        classes, labels, tp, counted, refs = [], [], [], [], []
        scores = [{a: [] for a in aggregations} for _ in case.measures]
        for c in range(case.num_classes):
            if c in (case.background, case.ignore_index):
                continue
            reference = (raters == c).astype(np.int64)
            if case.ignore_index is not None:
                reference[raters == case.ignore_index] = -1
            match = lesion_match(prediction == c, reference, settings.lesion_iou, settings.lesion_connectivity,
                                 None if case.ignore_index is None else -1, settings.lesion_iou_rule)
            classes += [c] * match.n
            labels.append(np.bincount(match.labels.reshape(-1), minlength=match.n + 1)[1:])
            tp.append(match.tp)
            counted.append(match.counted)
            refs.append({"class": c, "n_reference": match.n_reference.tolist(), "fn": match.fn.tolist()})
            lesions = LesionVoxels(maps, match.labels, match.n)  # what the aggregations share, derived once
            for a, agg in aggregations.items():
                for m, values in enumerate(agg.scores_of(lesions)):
                    scores[m][a].append(np.asarray(values, np.float64))
        shared = {"class": np.asarray(classes, np.int64),
                  "size": np.concatenate(labels) if labels else np.zeros(0, np.int64),
                  "tp": np.concatenate(tp, axis=1) if tp else np.zeros((len(raters), 0), bool),
                  "counted": np.concatenate(counted, axis=1) if counted else np.zeros((len(raters), 0), bool),
                  "references": refs}
        return [{"shared": shared, "scores": {a: np.concatenate(v) if v else np.zeros(0) for a, v in s.items()}}
                for s in scores]

    def save(self, entries, measures, settings):
        cols = {k: {c: [] for c in columns} for k, columns in COLUMNS.items()}
        for case_id, _meta, by_measure in entries:
            records = {m: r for m, r in by_measure.items() if m in measures}
            if not records:
                continue
            shared = next(iter(records.values()))["shared"]
            n, R = len(shared["class"]), shared["tp"].shape[0]
            index = np.arange(n)
            _extend(cols["lesions"], case_id=[case_id] * n, lesion=index, **{"class": shared["class"]},
                    size=shared["size"])
            _extend(cols["matches"], case_id=[case_id] * (n * R), lesion=np.tile(index, R),
                    rater=np.repeat(np.arange(R), n), tp=shared["tp"].reshape(-1), counted=shared["counted"].reshape(-1))
            for ref in shared["references"]:
                k = len(ref["fn"])
                _extend(cols["references"], case_id=[case_id] * k, **{"class": [ref["class"]] * k},
                        rater=np.arange(k), n_reference=ref["n_reference"], fn=ref["fn"])
            for m, record in records.items():
                for a, values in record["scores"].items():
                    _extend(cols["scores"], case_id=[case_id] * n, lesion=index, measure=[m] * n,
                            aggregation=[a] * n, score=values)
        import pyarrow as pa
        import pyarrow.parquet as pq

        out = {}
        for key, columns in cols.items():  # straight to Arrow: a pandas frame on the way costs 3x the write
            table = pa.table({c: pa.array(_joined(parts, TYPES[c]), type=TYPES[c]) for c, parts in columns.items()})
            buf = io.BytesIO()
            pq.write_table(table, buf)
            out[f"{key}.parquet"] = buf.getvalue()
        return out

    def load(self, files):
        return LesionRecords(**{k: pd.read_parquet(io.BytesIO(files[f"{k}.parquet"]))
                                for k in ("lesions", "matches", "references", "scores")})

    def table_rows(self, output):
        merged = output.scores.merge(output.lesions, on=["case_id", "lesion"])
        tp = output.matches[output.matches["counted"]].groupby(["case_id", "lesion"])["tp"].mean().rename("tp_fraction")
        merged = merged.merge(tp.reset_index(), on=["case_id", "lesion"], how="left")
        return merged.to_dict("records")


#: the stored tables and their columns
COLUMNS = {"lesions": ("case_id", "lesion", "class", "size"),
           "matches": ("case_id", "lesion", "rater", "tp", "counted"),
           "references": ("case_id", "class", "rater", "n_reference", "fn"),
           "scores": ("case_id", "lesion", "measure", "aggregation", "score")}


#: the Arrow type of each stored column (an empty table keeps its types)
TYPES = {"case_id": "string", "lesion": "int64", "class": "int64", "size": "int64", "rater": "int64", "tp": "bool",
         "counted": "bool", "n_reference": "int64", "fn": "int64", "measure": "string", "aggregation": "string",
         "score": "float64"}


def _joined(parts: list, arrow_type: str):
    """The parts of a column as one sequence for Arrow: strings as one Python list (Arrow converts
    it 6x faster than a NumPy unicode array), numbers as one NumPy array."""
    if arrow_type == "string":
        return list(itertools.chain.from_iterable(parts))
    return np.concatenate([np.asarray(v) for v in parts]) if parts else []


def _extend(columns: dict, **values) -> None:
    for name, value in values.items():
        columns[name].append(value)


@dataclass
class LesionRecords:
    """The stored lesion records (see the module docstring), as long tables."""

    lesions: pd.DataFrame
    matches: pd.DataFrame
    references: pd.DataFrame
    scores: pd.DataFrame

    def raters(self) -> int:
        return int(self.references["rater"].max()) + 1 if len(self.references) else 0

    def per_case(self, case_ids, measure: str | None = None, aggregation: str | None = None) -> list["CaseLesions"]:
        """Per case of ``case_ids`` (in order): its lesions' scores (of ``measure`` x ``aggregation``;
        zeros without), TP flags and counted flags ``[R, n]`` and missed lesions ``[R]``."""
        flags, scores = self._flags(), self._scores().get((measure, aggregation), {})
        R = self.raters()
        empty = (np.zeros((R, 0), bool), np.zeros((R, 0), bool), np.zeros(R))
        out = []
        for case_id in case_ids:
            tp, counted, fn = flags.get(case_id, empty)
            out.append(CaseLesions(scores.get(case_id, np.zeros(tp.shape[1])), tp, counted, fn))
        return out

    def _flags(self) -> dict:
        """case_id -> (tp [R, n], counted [R, n], fn [R]), built once."""
        if "_flags_cache" not in self.__dict__:
            R, out = self.raters(), {}
            n_of = self.lesions.groupby("case_id").size().to_dict()
            fn = self.references.groupby(["case_id", "rater"])["fn"].sum()
            for case_id, n in n_of.items():
                out[case_id] = (np.zeros((R, n), bool), np.zeros((R, n), bool), np.zeros(R))
            for (case_id, rater), value in fn.items():
                out.setdefault(case_id, (np.zeros((R, 0), bool), np.zeros((R, 0), bool), np.zeros(R)))[2][rater] = value
            m = self.matches
            case, rater, lesion = m["case_id"].to_numpy(), m["rater"].to_numpy(), m["lesion"].to_numpy()
            tp, counted = m["tp"].to_numpy(bool), m["counted"].to_numpy(bool)
            for i in range(len(m)):
                t, c, _ = out[case[i]]
                t[rater[i], lesion[i]], c[rater[i], lesion[i]] = tp[i], counted[i]
            self.__dict__["_flags_cache"] = out
        return self.__dict__["_flags_cache"]

    def _scores(self) -> dict:
        """(measure, aggregation) -> case_id -> scores in lesion order, built once."""
        if "_scores_cache" not in self.__dict__:
            table = self.scores.sort_values(["measure", "aggregation", "case_id", "lesion"])
            values = table["score"].to_numpy(np.float64)
            out: dict = {}
            for (measure, aggregation, case_id), rows in table.groupby(["measure", "aggregation", "case_id"],
                                                                     sort=False).indices.items():
                out.setdefault((measure, aggregation), {})[case_id] = values[np.sort(rows)]
            self.__dict__["_scores_cache"] = out
        return self.__dict__["_scores_cache"]


@dataclass
class CaseLesions:
    """One case's predicted lesions: ``scores [n]``, ``tp`` / ``counted`` ``[R, n]``, ``fn [R]``."""

    scores: np.ndarray
    tp: np.ndarray
    counted: np.ndarray
    fn: np.ndarray

    def f1(self) -> float:
        """The case's lesion F1 (Shifts 2.0), the mean over the raters."""
        return float(np.mean([lesion_f1(int(t.sum()), int((c & ~t).sum()), f)
                              for t, c, f in zip(self.tp, self.counted, self.fn)]))


@hookimpl
def values_seg_quantities():
    return [Lesions]
