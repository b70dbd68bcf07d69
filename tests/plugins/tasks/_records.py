"""Hand-made :class:`EvaluationResult`s for the task tests: DataFrames built from plain lists.

``make_result`` builds one result for ``n`` test cases ``c0 .. c{n-1}`` plus distractor records
that every task must ignore: a validation case ``v0`` and an active-learning pool case ``p0``,
each with extreme scores, NCC, Dice and GED.

The standard example (``standard()``), 6 test cases, 3 i.i.d. (c0-c2) then 3 OoD (c3-c5)::

    case   ood    dice  ged   pe/image pe/patch ee/image ee/patch mi/image mi/patch  ncc pe / ee / mi
    c0     False  0.9   0.2   0.1      0.5      0.2      0.3      0.3      0.1       0.5 / 0.6 / 0.1
    c1     False  0.8   0.4   0.3      0.1      0.2      0.4      0.1      0.2       0.3 / 0.4 / 0.2
    c2     False  0.6   0.3   0.2      0.4      0.5      0.1      0.2      0.3       nan / nan / nan
    c3     True   0.7   0.5   0.6      0.2      0.5      0.2      0.9      0.8       0.1 / 0.0 / 0.3
    c4     True   0.4   0.7   0.5      0.6      0.2      0.6      0.8      0.5       0.2 /-0.1 / nan
    c5     True   0.5   0.6   0.4      0.3      0.9      0.5      0.2      0.4       0.3 / 0.2 / nan

pe = predictive_entropy (PU), ee = expected_entropy (AU), mi = mutual_information (EU), as for a
bayesian prediction model. ``ms`` (max_softmax) has NCC NaN on every case.
"""

from __future__ import annotations

import math

import pandas as pd

from values_seg.metrics import CalibrationBins
from values_seg.components.task import EvaluationResult
from values_seg_plugins.quantities.calibration import CalibrationOutput
from values_seg_plugins.tasks._active_learning_cycle import ActiveLearningResult

NAN = math.nan
PE, EE, MI, MS = "predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"

STANDARD_DICE = [0.9, 0.8, 0.6, 0.7, 0.4, 0.5]
STANDARD_OOD = [False, False, False, True, True, True]
STANDARD_GED = [0.2, 0.4, 0.3, 0.5, 0.7, 0.6]
STANDARD_SCORES = {
    (PE, "image"): [0.1, 0.3, 0.2, 0.6, 0.5, 0.4],
    (PE, "patch"): [0.5, 0.1, 0.4, 0.2, 0.6, 0.3],
    (EE, "image"): [0.2, 0.2, 0.5, 0.5, 0.2, 0.9],  # ties, across and within subsets
    (EE, "patch"): [0.3, 0.4, 0.1, 0.2, 0.6, 0.5],
    (MI, "image"): [0.3, 0.1, 0.2, 0.9, 0.8, 0.2],
    (MI, "patch"): [0.1, 0.2, 0.3, 0.8, 0.5, 0.4],
}
STANDARD_NCC = {
    PE: [0.5, 0.3, NAN, 0.1, 0.2, 0.3],
    EE: [0.6, 0.4, NAN, 0.0, -0.1, 0.2],
    MI: [0.1, 0.2, NAN, 0.3, NAN, NAN],
    MS: [NAN] * 6,
}
BAYESIAN_TYPES = {PE: "PU", EE: "AU", MI: "EU"}
DETERMINISTIC_TYPES = {PE: "PU", MS: "PU"}




def bins(**per_bin) -> CalibrationBins:
    """20 calibration bins; ``per_bin``: ``b<index>=(count, confidence_sum, correct_sum)``."""
    out = CalibrationBins.empty(20)
    for key, (count, confidence_sum, correct_sum) in per_bin.items():
        i = int(key[1:])
        out.count[i], out.confidence_sum[i], out.correct_sum[i] = count, confidence_sum, correct_sum
    return out


def make_result(
    dice,
    ood,
    scores=None,
    ncc=None,
    ged=None,
    calibration=None,
    measure_types=None,
    active_learning: ActiveLearningResult | None = None,
    distractors: bool = True,
    case_calibration=None,
    ndsc=None,
    ndsc_rauc=None,
) -> EvaluationResult:
    """An :class:`EvaluationResult` for test cases with the given per-case lists.

    ``scores``: {(measure, aggregation): [score per test case]}; ``ncc``: {measure: [NCC per test
    case]}; ``ged``: [GED per test case] (default 0.1 each); ``case_calibration``: {measure: {case id:
    bins}}; ``ndsc``: [nDSC per test case] and ``ndsc_rauc``: {measure: [R-AUC per test case]} (the
    "retention" stage).
    """
    n = len(dice)
    assert len(ood) == n
    ids = [f"c{i}" for i in range(n)]
    ged = list(ged) if ged is not None else [0.1] * n
    scores = scores or {}
    ncc = ncc or {}
    cases = {
        "case_id": ids,
        "split": ["test"] * n,
        "ood": [bool(o) for o in ood],
        "shift": ["shifted" if o else "none" for o in ood],
        "dice": list(dice),
        "ged": ged,
        "predicted_fraction": [0.5] * n,
    }
    score_rows = [
        (cid, "test", m, a, float(v)) for (m, a), values in scores.items() for cid, v in zip(ids, values, strict=True)
    ]
    ncc_rows = [(cid, "test", m, float(v)) for m, values in ncc.items() for cid, v in zip(ids, values, strict=True)]
    if distractors:  # records of other splits, with values that would change every metric
        for cid, split, is_ood in (("v0", "val", False), ("p0", "pool", True)):
            for column, value in zip(cases, (cid, split, is_ood, "none", 0.0, 99.0, 0.5), strict=True):
                cases[column].append(value)
            score_rows += [(cid, split, m, a, 1000.0) for (m, a) in scores]
            ncc_rows += [(cid, split, m, -1.0) for m in ncc]
    if ndsc is not None:
        cases["ndsc"] = list(ndsc) + ([0.0] * (len(cases["case_id"]) - n))
    per_measure = {(cid, split, m): {"ncc": v} for cid, split, m, v in ncc_rows}
    if ndsc_rauc is not None:
        rauc_rows = [(cid, "test", m, float(v)) for m, values in ndsc_rauc.items()
                     for cid, v in zip(ids[:n], values, strict=True)]
        rauc_rows += [("v0", "val", m, 99.0) for m in ndsc_rauc] if distractors else []
        for cid, split, m, v in rauc_rows:
            per_measure.setdefault((cid, split, m), {})["ndsc_rauc"] = v
    outputs = {}
    if calibration or case_calibration:
        outputs["calibration_bins"] = CalibrationOutput(dict(calibration or {}), dict(case_calibration or {}))
    return EvaluationResult(
        context={"dataset": "hand", "scenario": None, "seed": 0, "backbone": "unet", "prediction_model": "pm"},
        cases=pd.DataFrame(cases),
        scores=pd.DataFrame(score_rows, columns=["case_id", "split", "measure", "aggregation", "score"]),
        per_measure=pd.DataFrame([{"case_id": c, "split": s, "measure": m, **v} for (c, s, m), v in per_measure.items()],
                                 columns=["case_id", "split", "measure"] + (["ncc"] if ncc_rows else [])
                                 + (["ndsc_rauc"] if ndsc_rauc is not None else [])),
        outputs=outputs,
        measure_types=dict(measure_types or {}),
        stages={} if active_learning is None else {"second_cycle": active_learning},
    )


def standard(**overrides) -> EvaluationResult:
    """The standard 6-case example of the module docstring (keyword arguments override parts)."""
    kwargs = dict(
        dice=STANDARD_DICE,
        ood=STANDARD_OOD,
        scores=STANDARD_SCORES,
        ncc=STANDARD_NCC,
        ged=STANDARD_GED,
        measure_types=BAYESIAN_TYPES,
    )
    kwargs.update(overrides)
    return make_result(**kwargs)


#: Per-case calibration bins of pe that sum to full()'s i.i.d. (c0-c2) and OoD (c3-c5) bins.
FULL_CASE_BINS = {
    "c0": dict(b2=(1, 0.11, 1)),
    "c1": dict(b2=(1, 0.11, 1), b18=(1, 0.92, 1)),
    "c2": dict(b18=(1, 0.93, 0)),
    "c3": dict(b10=(2, 1.05, 1)),
    "c4": dict(b10=(1, 0.5, 0)),
    "c5": dict(b10=(1, 0.55, 0)),
}
#: Second-cycle Dice per OoD test case (c3-c5) after random querying and after querying with pe/image.
FULL_RANDOM_DICE = {"c3": 0.75, "c4": 0.5, "c5": 0.45}
FULL_METHOD_DICE = {(PE, "image"): {"c3": 0.8, "c4": 0.55, "c5": 0.6}}
FULL_NDSC = [0.6, 0.5, 0.2, 0.4, 0.1, 0.3]
FULL_NDSC_RAUC = {PE: [0.1, 0.2, 0.4, 0.3, 0.5, 0.2], MI: [0.2, 0.1, 0.3, 0.1, 0.4, 0.6]}


def active_learning_result(ood_dice, random_case, method_case) -> ActiveLearningResult:
    """An AL result whose means are those of its per-case Dice (as the runner builds it)."""
    mean = lambda d: sum(d.values()) / len(d)  # noqa: E731
    return ActiveLearningResult(sum(ood_dice) / len(ood_dice), mean(random_case),
                                {k: mean(v) for k, v in method_case.items()}, dict(random_case),
                                {k: dict(v) for k, v in method_case.items()})


def full_kwargs() -> dict:
    """The keyword arguments of :func:`make_result` for :func:`full`."""
    return dict(
        dice=STANDARD_DICE, ood=STANDARD_OOD, scores=STANDARD_SCORES, ncc=STANDARD_NCC, ged=STANDARD_GED,
        measure_types=BAYESIAN_TYPES,
        calibration={
            (PE, "iid"): bins(b2=(2, 0.22, 2), b18=(2, 1.85, 1)),
            (PE, "ood"): bins(b10=(4, 2.1, 1)),
        },
        case_calibration={PE: {c: bins(**b) for c, b in FULL_CASE_BINS.items()}},
        active_learning=active_learning_result(STANDARD_DICE[3:], FULL_RANDOM_DICE, FULL_METHOD_DICE),
        ndsc=FULL_NDSC, ndsc_rauc=FULL_NDSC_RAUC,
    )


def full() -> EvaluationResult:
    """The standard example with calibration bins for pe (i.i.d. and OoD, summed and per case), an
    AL result with per-case Dice, and the per-case nDSC and nDSC R-AUC of the "retention" stage."""
    return make_result(**full_kwargs())


def without_ood(**overrides) -> EvaluationResult:
    """The 3 i.i.d. cases of the standard example only (a data set without a shift)."""
    kwargs = dict(
        dice=STANDARD_DICE[:3],
        ood=STANDARD_OOD[:3],
        scores={k: v[:3] for k, v in STANDARD_SCORES.items()},
        ncc={k: v[:3] for k, v in STANDARD_NCC.items()},
        ged=STANDARD_GED[:3],
        measure_types=BAYESIAN_TYPES,
    )
    kwargs.update(overrides)
    return make_result(**kwargs)


def empty() -> EvaluationResult:
    """No test case at all (only the distractor records)."""
    return make_result(dice=[], ood=[], scores={}, ncc={}, ged=[], measure_types=BAYESIAN_TYPES)


def by_key(rows, fields=("metric", "split", "measure", "aggregation")):
    """Rows indexed by ``fields`` (asserting the index is unique) -> value."""
    out = {}
    for r in rows:
        key = tuple(r[f] for f in fields)
        assert key not in out, f"duplicate row {key}"
        out[key] = r["value"]
    return out
