"""Guarantees as a downstream task: conformal risk control of the false-negative rate (Angelopoulos,
Bates et al., ICLR 2024) and risk-controlled selection of cases (Bates et al. 2021 RCPS / Learn then
Test), calibrated on the validation split, evaluated on the i.i.d. and OoD test cases (quantity
``conformal_sets``). The sets, the rows, what the guarantee covers and its re-split check:
docs/design-rationale.md, "Conformal task".
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

import numpy as np
import pandas as pd

from values_seg import hookimpl, metrics
from values_seg.metrics.conformal import LossSteps, check_level, crc_effective_level
from values_seg.statistics.bootstrap import bootstrap_indices
from values_seg.params import Range
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric, Reading, Support, row

from values_seg_plugins.quantities.conformal import PROBABILITY, ConformalRecords

from ._common import SUBSETS

GUARANTEE_NOTE = (
    "Conformal risk control (Angelopoulos et al. 2024) promises E[FNR] ≤ α only for cases exchangeable with the "
    "validation split: the i.i.d. test cases unless the dataset declares them otherwise (toy 3a: a sharp i.i.d. test "
    "split, a half-blurred validation split); the re-split check averages the realised FNR over random "
    "calibration/test splits of the validation and the exchangeable i.i.d. test cases (interval: ± 3 Monte-Carlo "
    "s.e.). OoD cases, and i.i.d. cases not exchangeable, carry no guarantee: an FNR above α there is a finding.")
#: The conformal set sizes and accepted shares mean what they say only where the guarantee holds.
GUARANTEED = Support(exchangeable=True)
SELECTION_NOTE = (
    "Coverage: the share of test cases accepted at the lowest confidence threshold whose selective risk (mean 1 − Dice "
    "of the accepted) is certified ≤ max_risk with probability ≥ 1 − δ (Learn then Test, Hoeffding–Bentkus); 0 where "
    "no threshold is certified (too few validation cases, or too risky).")
MULTI_NOTE = (
    "Learn then Test for the FNR and the false-discovery rate (1 − precision) of the probability sets together: on a "
    "grid of thresholds fixed before the data, a threshold is valid where both Hoeffding–Bentkus p-values reject "
    "(risk > its level) with the family-wise error at δ (Bonferroni); rows at the chosen valid threshold, none where "
    "none is valid.")
#: Bootstrap resamples of the per-class FNR intervals (test cases of the class, percentile 95 %).
CLASS_RESAMPLES = 1000


def _mean(values: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return values[indices].mean(axis=1)


def _ratio(numerator: np.ndarray, denominator: np.ndarray, indices: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return numerator[indices].sum(axis=1) / denominator[indices].sum(axis=1)


class ConformalTask(CaseStatisticTask):
    """Conformal risk control of the FNR (exact; probability sets and predicted foreground + uncertainty) and risk-controlled selection (Learn then Test), calibrated on validation."""

    name = "conformal"
    label = "Conformal"
    metrics = (
        Metric("set_size", "lower", "CRC set size", per_aggregation=False, primary=True, note=GUARANTEE_NOTE,
               support=GUARANTEED),
        Metric("fnr", "lower", "CRC FNR", per_aggregation=False),
        Metric("set_size_probability", "lower", "CRC set size (prob.)", per_measure=False, support=GUARANTEED),
        Metric("fnr_probability", "lower", "CRC FNR (prob.)", per_measure=False),
        Metric("resplit_fnr", "lower", "CRC FNR re-split", splits=("iid",), per_aggregation=False,
               reading=Reading(table=False)),
        Metric("resplit_fnr_probability", "lower", "CRC FNR re-split (prob.)", splits=("iid",), per_measure=False,
               reading=Reading(table=False)),
        Metric("coverage", "higher", "Accepted", note=SELECTION_NOTE, support=GUARANTEED),
        Metric("selective_risk", "lower", "Accepted risk", reading=Reading(table=False)),
        Metric("multi_fnr", "lower", "LTT FNR", per_measure=False, note=MULTI_NOTE, reading=Reading(table=False)),
        Metric("multi_fdr", "lower", "LTT FDR", per_measure=False, reading=Reading(table=False)),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("conformal_sets",)

    def __init__(self, alpha: float = 0.1, max_risk: float = 0.2, delta: float = 0.1,
                 resplits: Annotated[int, Range(0, 100000)] = 200, raters: str = "mean", seed: int = 0,
                 selection_start: Annotated[float, Range(0.0, 1.0)] = 0.5,
                 alphas: tuple[float, ...] = (0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3),
                 per_class: bool = False, multi_risk: bool = False, multi_fnr: float = 0.1, multi_fdr: float = 0.5,
                 multi_grid: Annotated[int, Range(1, 10000)] = 99, score_bins: Annotated[int, Range(0, 100)] = 0):
        self.alpha = check_level(alpha, "conformal: alpha")
        self.max_risk = check_level(max_risk, "conformal: max_risk")
        self.delta = check_level(delta, "conformal: delta")
        self.alphas = tuple(check_level(a, "conformal: alphas") for a in alphas)
        if raters != "mean" and not str(raters).isdigit():
            raise ValueError(f"conformal: raters must be 'mean' or a rater index (0, 1, ...), got {raters!r}")
        self.raters = raters if raters == "mean" else int(raters)
        self.resplits, self.seed, self.selection_start = int(resplits), int(seed), float(selection_start)
        self.per_class, self.multi_risk, self.multi_grid = bool(per_class), bool(multi_risk), int(multi_grid)
        self.score_bins = int(score_bins)
        self.multi_levels = (check_level(multi_fnr, "conformal: multi_fnr"),
                             check_level(multi_fdr, "conformal: multi_fdr"))

    # -- the cases ---------------------------------------------------------------------------------------
    def _records(self, result: EvaluationResult):
        """The records, and the positions of the validation, i.i.d.- and OoD-test cases in them, and of
        the i.i.d. test cases exchangeable with the validation split (``"exchangeable"``)."""
        records = result.output("conformal_sets")
        if not isinstance(records, ConformalRecords) or not records.case_ids:
            return None, {}
        position = {c: i for i, c in enumerate(records.case_ids)}
        val = result.cases[result.cases["split"] == "val"]["case_id"].astype(str)
        parts = {"val": np.array([position[c] for c in val if c in position], dtype=np.int64)}
        for subset in SUBSETS:
            ids = result.test_cases(subset)["case_id"].astype(str)
            parts[subset] = np.array([position[c] for c in ids if c in position], dtype=np.int64)
        iid = result.test_cases("iid")
        declared = iid["exchangeable"] if "exchangeable" in iid else pd.Series(True, index=iid.index)
        ids = iid["case_id"].astype(str)[declared.fillna(True).astype(bool)]
        parts["exchangeable"] = np.array([position[c] for c in ids if c in position], dtype=np.int64)
        return records, parts

    def _calibrated(self, result: EvaluationResult):
        """Per family ("probability" or a measure): per class the :class:`LossSteps`, the set-size
        records, and the calibration mask; memoised per result."""
        cached = getattr(self, "_cached", None)
        if cached is not None and cached[0] is result:
            return cached[1]
        records, parts = self._records(result)
        out = {}
        if records is not None:
            n = len(records.case_ids)
            calibration = np.zeros(n, dtype=bool)
            calibration[parts["val"]] = True
            need = metrics.min_calibration_cases(self.alpha)
            if calibration.sum() < need:
                raise ValueError(
                    f"conformal: {int(calibration.sum())} validation cases of data set "
                    f"{result.context.get('dataset')!r} cannot support alpha={self.alpha:g}: "
                    f"conformal risk control needs at least {need} calibration cases (1/(n+1) <= alpha); "
                    f"give the data set more validation cases or raise alpha")
            for (c, family), fam in sorted(records.families.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                if records.n_ref[c][calibration].clip(min=0).sum() == 0:
                    continue  # class absent from every calibration reference: nothing to calibrate
                steps = LossSteps(*fam.jumps(records.n_ref[c], self.raters), n)
                out.setdefault(family, []).append((c, steps, fam))
            if records.families and not out:
                raise ValueError(f"conformal: every rater mask of every validation case of data set "
                                 f"{result.context.get('dataset')!r} is empty: the FNR is 0 for any set, there is "
                                 f"nothing to calibrate")
        value = (records, parts, calibration if records is not None else None, out)
        self._cached = (result, value)
        return value

    def _at(self, records, calibration, per_class, alpha: float):
        """Per case the FNR (mean over classes) and the set and predicted sizes (summed) at the level."""
        n = len(records.case_ids)
        loss, size, predicted = np.zeros(n), np.zeros(n), np.zeros(n)
        for c, steps, fam in per_class:
            t, index = steps.threshold(calibration, alpha)
            loss += steps.losses[:, index]
            size += fam.set_size(t, n)
            predicted += records.n_pred[c]
        return loss / len(per_class), size, predicted

    # -- metrics ------------------------------------------------------------------------------------------
    def statistics(self, result: EvaluationResult):
        records, parts, calibration, families = self._calibrated(result)
        for family, per_class in families.items():
            loss, size, predicted = self._at(records, calibration, per_class, self.alpha)
            measure, suffix = (None, "_probability") if family == PROBABILITY else (family, "")
            for subset in SUBSETS:
                cases = parts[subset]
                if cases.size == 0:
                    continue
                ids = [records.case_ids[i] for i in cases]
                yield CaseStatistic(f"fnr{suffix}", subset, ids, partial(_mean, loss[cases]), measure)
                yield CaseStatistic(f"set_size{suffix}", subset, ids,
                                    partial(_ratio, size[cases], predicted[cases]), measure)
        if records is not None:
            yield from self._selection(result, records, parts)
        multi = self._multi(result)
        if multi is not None and multi["chosen"] is not None:
            g = multi["chosen"]
            for subset in SUBSETS:
                cases = parts[subset]
                if cases.size:
                    ids = [records.case_ids[i] for i in cases]
                    for name, loss in (("multi_fnr", multi["fnr"]), ("multi_fdr", multi["fdr"])):
                        yield CaseStatistic(name, subset, ids, partial(_mean, loss[cases, g]))

    # -- several risks at once (Learn then Test) ------------------------------------------------------
    def grid(self) -> np.ndarray:
        """The thresholds of the probability sets that Learn then Test tests, fixed before the data."""
        return np.arange(1, self.multi_grid + 1, dtype=np.float64) / (self.multi_grid + 1)

    def _multi(self, result: EvaluationResult):
        """Per case the FNR and FDR ``[n, G]`` of the probability sets on :meth:`grid` (mean over the
        classes calibrated), the p-values, the valid thresholds and the chosen one (the valid threshold with
        the lowest calibration FNR, ties: the smallest set); None unless ``multi_risk``; memoised."""
        cached = getattr(self, "_cached_multi", None)
        if cached is not None and cached[0] is result:
            return cached[1]
        value = None
        records, parts, calibration, families = self._calibrated(result)
        per_class = families.get(PROBABILITY, [])
        if self.multi_risk and per_class:
            grid = self.grid()
            risks = [fam.risks_at(records.n_ref[c], grid, self.raters) for c, _, fam in per_class]
            fnr = np.mean([r[0] for r in risks], axis=0)
            fdr = np.mean([r[1] for r in risks], axis=0)
            val = parts["val"]
            p_values, p, valid = metrics.ltt_multi_risk(np.stack([fnr[val], fdr[val]]), self.multi_levels, self.delta)
            chosen = None
            if valid.any():
                candidates = np.flatnonzero(valid)
                chosen = int(candidates[np.lexsort((-grid[candidates], fnr[val][:, candidates].mean(axis=0)))[0]])
            value = {"grid": grid, "fnr": fnr, "fdr": fdr, "p_values": p_values, "p": p, "valid": valid,
                     "chosen": chosen, "n_calibration": int(val.size)}
        self._cached_multi = (result, value)
        return value

    def _multi_curve(self, result: EvaluationResult) -> list[dict]:
        multi = self._multi(result)
        if multi is None:
            return []
        val = self._calibrated(result)[1]["val"]
        cal_fnr, cal_fdr = multi["fnr"][val].mean(axis=0), multi["fdr"][val].mean(axis=0)
        return [{"curve": "ltt_grid", "measure": "", "sets": PROBABILITY, "split": "val", "threshold": float(t),
                 "fnr": float(cal_fnr[g]), "fdr": float(cal_fdr[g]), "p_fnr": float(multi["p_values"][0, g]),
                 "p_fdr": float(multi["p_values"][1, g]), "p_value": float(multi["p"][g]),
                 "valid": bool(multi["valid"][g]), "chosen": g == multi["chosen"], "fnr_level": self.multi_levels[0],
                 "fdr_level": self.multi_levels[1], "delta": self.delta, "fwer": "bonferroni",
                 "n_calibration": multi["n_calibration"]} for g, t in enumerate(multi["grid"])]

    # -- thresholds per bin of the image-level score ---------------------------------------------------
    def _bin_curve(self, result: EvaluationResult) -> list[dict]:
        """Per measure, aggregation, bin of its image score and test subset: the sets calibrated on the
        validation cases of the bin alone (Mondrian by score bin; per class as the main rows, FNR the mean
        over classes), the realised FNR on the test cases of the bin with a percentile bootstrap interval;
        the probability sets binned by every measure's score, a measure's uncertainty sets by its own. The
        bin edges are quantiles of the pooled validation and test scores (no label used: a symmetric
        function of the cases keeps them exchangeable)."""
        records, parts, _, families = self._calibrated(result)
        if not self.score_bins or records is None or not families:
            return []
        need = metrics.min_calibration_cases(self.alpha)
        n, out = len(records.case_ids), []
        position = {c: i for i, c in enumerate(records.case_ids)}
        covered = parts["exchangeable"].size == parts["iid"].size
        for (measure, aggregation), rows in result.scores.groupby(["measure", "aggregation"], sort=True):
            rows = rows[rows["split"].isin(["val", "test"]) & rows["case_id"].astype(str).isin(list(position))]
            score = np.full(n, np.nan)
            score[[position[c] for c in rows["case_id"].astype(str)]] = rows["score"].to_numpy(dtype=np.float64)
            if not np.isfinite(score[parts["val"]]).all():
                continue  # no validation score (a fitted aggregation keeps none in-sample): nothing to calibrate
            pool = score[np.isfinite(score)]
            edges = np.quantile(pool, np.arange(1, self.score_bins) / self.score_bins)
            bins = np.where(np.isfinite(score), np.searchsorted(edges, score, side="right"), -1)
            bounds = np.r_[-np.inf, edges, np.inf]
            for family in (PROBABILITY, measure):
                per_class = families.get(family, [])
                if not per_class:
                    continue
                for b in range(self.score_bins):
                    calibration = np.zeros(n, dtype=bool)
                    calibration[parts["val"]] = True
                    calibration &= bins == b
                    n_cal = int(calibration.sum())
                    loss = None
                    if n_cal >= need:
                        loss = np.mean([steps.losses[:, steps.threshold(calibration, self.alpha)[1]]
                                        for _, steps, _ in per_class], axis=0)
                    base = {"curve": "crc_bins", "measure": measure, "aggregation": aggregation,
                            "sets": PROBABILITY if family == PROBABILITY else "uncertainty",
                            "bin": b, "score_low": float(bounds[b]), "score_high": float(bounds[b + 1]),
                            "alpha": self.alpha, "n_calibration": n_cal, "supported": n_cal >= need,
                            "effective_level": crc_effective_level(self.alpha, n_cal) if n_cal >= need else np.nan}
                    for subset in SUBSETS:
                        cases = parts[subset][bins[parts[subset]] == b]
                        risk, low, high = self._interval(loss, cases)
                        out.append({**base, "split": subset, "risk": risk, "ci_low": low, "ci_high": high,
                                    "n": int(cases.size), "exchangeable": subset == "iid" and covered})
        return out

    def _interval(self, loss, cases) -> tuple[float, float, float]:
        """The mean of ``loss`` over ``cases`` and its 95 % percentile bootstrap interval (NaN without)."""
        if loss is None or not cases.size:
            return np.nan, np.nan, np.nan
        values = loss[cases]
        boot = values[bootstrap_indices(cases.size, CLASS_RESAMPLES, self.seed)].mean(axis=1)
        low, high = np.quantile(boot, [0.025, 0.975])
        return float(values.mean()), float(low), float(high)

    # -- per-class guarantees -------------------------------------------------------------------------
    def _class_curve(self, result: EvaluationResult) -> list[dict]:
        """Per set family, foreground class and test subset: the class's own threshold calibrated on the
        validation cases where the class is present (guarantee: E[FNR_c | c present] <= alpha), its
        realised FNR on the test cases where it is present with a percentile bootstrap interval; a class
        with fewer such calibration cases than alpha needs gets no threshold (``supported`` false)."""
        records, parts, _, _ = self._calibrated(result)
        if not self.per_class or records is None:
            return []
        need = metrics.min_calibration_cases(self.alpha)
        n, out = len(records.case_ids), []
        covered = parts["exchangeable"].size == parts["iid"].size
        for (c, family), fam in sorted(records.families.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            refs = records.n_ref[c] if self.raters == "mean" else records.n_ref[c][:, [self.raters]]
            present = (refs > 0).any(axis=1)  # the class in some rater's mask (the rater's, for raters=k)
            calibration = np.zeros(n, dtype=bool)
            calibration[parts["val"]] = True
            calibration &= present
            n_cal = int(calibration.sum())
            base = {"curve": "crc_class", "measure": "" if family == PROBABILITY else family,
                    "sets": PROBABILITY if family == PROBABILITY else "uncertainty", "class_index": int(c),
                    "alpha": self.alpha, "n_calibration": n_cal, "supported": n_cal >= need,
                    "effective_level": crc_effective_level(self.alpha, n_cal) if n_cal >= need else np.nan}
            threshold, loss = np.nan, None
            if n_cal >= need:
                steps = LossSteps(*fam.jumps(records.n_ref[c], self.raters), n)
                threshold, index = steps.threshold(calibration, self.alpha)
                loss = steps.losses[:, index]
            for subset in SUBSETS:
                cases = parts[subset][present[parts[subset]]]
                risk, low, high = self._interval(loss, cases)
                out.append({**base, "split": subset, "threshold": float(threshold), "risk": risk, "ci_low": low,
                            "ci_high": high, "n": int(cases.size),
                            "exchangeable": subset == "iid" and covered})
        return out

    def _selection(self, result: EvaluationResult, records: ConformalRecords, parts: dict):
        scores = result.scores
        val_ids = {records.case_ids[i]: i for i in parts["val"]}
        for (measure, aggregation), rows in scores.groupby(["measure", "aggregation"], sort=True):
            val = rows[rows["split"] == "val"]
            val = val[val["case_id"].isin(list(val_ids))]
            if val.empty:
                continue
            risks = records.risk[[val_ids[c] for c in val["case_id"].astype(str)]]
            threshold = metrics.ltt_selection_threshold(risks, -val["score"].to_numpy(dtype=np.float64),
                                                        self.max_risk, self.delta, self.selection_start)
            test = rows[rows["split"] == "test"].set_index("case_id")["score"]
            for subset in SUBSETS:
                ids = [records.case_ids[i] for i in parts[subset] if records.case_ids[i] in test.index]
                if not ids:
                    continue
                accepted = (-test.loc[ids].to_numpy(dtype=np.float64) >= threshold).astype(np.float64)
                risk = records.risk[_positions(records, ids)]
                yield CaseStatistic("coverage", subset, ids, partial(_mean, accepted), measure, aggregation)
                yield CaseStatistic("selective_risk", subset, ids, partial(_ratio, risk * accepted, accepted),
                                    measure, aggregation)

    def score(self, result: EvaluationResult) -> list[dict]:
        out = super().score(result)
        records, parts, calibration, families = self._calibrated(result)
        if self.resplits and families:  # only what is exchangeable with the calibration cases is re-split
            pool = np.concatenate([parts["val"], parts["exchangeable"]])
            for family, per_class in families.items():
                if pool.size <= parts["val"].size:
                    break
                risks = np.mean([steps.resplit_risks(pool, parts["val"].size, self.alpha, self.resplits, self.seed)
                                 for _, steps, _ in per_class], axis=0)
                mean, se = float(risks.mean()), float(risks.std(ddof=1) / np.sqrt(risks.size))
                measure, suffix = (None, "_probability") if family == PROBABILITY else (family, "")
                out.append(row(self.name, f"resplit_fnr{suffix}", "iid", mean, measure,
                               ci_low=mean - 3 * se, ci_high=mean + 3 * se))
        return out

    def curves(self, result: EvaluationResult) -> pd.DataFrame:
        """``curve`` "crc_risk": per family (measure; "" for the probability sets) and test subset, the
        realised FNR and the relative set size at each level of ``alphas`` (and ``alpha``, ``main``) that
        the validation split can support, and whether every case of the subset is exchangeable with the
        validation split (``exchangeable``: the guarantee covers the subset)."""
        records, parts, calibration, families = self._calibrated(result)
        rows = []
        for family, per_class in families.items():
            levels = sorted(set(self.alphas) | {self.alpha})
            for alpha in [a for a in levels if metrics.min_calibration_cases(a) <= parts["val"].size]:
                loss, size, predicted = self._at(records, calibration, per_class, alpha)
                for subset in SUBSETS:
                    cases = parts[subset]
                    if cases.size:
                        pred = predicted[cases].sum()
                        rows.append(("crc_risk", "" if family == PROBABILITY else family,
                                     PROBABILITY if family == PROBABILITY else "uncertainty", subset, alpha,
                                     float(loss[cases].mean()), float(size[cases].sum() / pred) if pred else np.nan,
                                     int(cases.size), int(parts["val"].size), alpha == self.alpha,
                                     subset == "iid" and parts["exchangeable"].size == cases.size))
        frames = [pd.DataFrame(rows, columns=CURVE_COLUMNS)]
        frames += [pd.DataFrame(extra) for extra in (self._class_curve(result), self._multi_curve(result),
                                                     self._bin_curve(result)) if extra]
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


CURVE_COLUMNS = ["curve", "measure", "sets", "split", "alpha", "risk", "set_size", "n", "n_calibration", "main",
                 "exchangeable"]


def _positions(records: ConformalRecords, ids: list) -> list[int]:
    position = {c: i for i, c in enumerate(records.case_ids)}
    return [position[c] for c in ids]


@hookimpl
def values_seg_tasks():
    return [ConformalTask]
