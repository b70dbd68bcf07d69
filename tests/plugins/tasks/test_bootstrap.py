"""Every task's bootstrap row b equals its score on the cases of resample b (rebuilt as a result of its own).

The reference is the task's own ``score`` (each tested against hand computations, loops and
scikit-learn in the task's test module) on an :class:`EvaluationResult` made of the resampled
cases, so the batched path is checked against the plain one on every resample and every metric.
"""

from __future__ import annotations

import numpy as np
import pytest

from values_seg import metrics, registry
from values_seg.statistics import CaseResamples
from values_seg.components.task import ROW_KEY
from values_seg_plugins.tasks._active_learning_cycle import ActiveLearningResult

from ._records import PE, active_learning_result, full_kwargs, make_result, without_ood
from .test_registration import ALL_TASKS

B = 6


def resampled(kwargs: dict, idx: np.ndarray) -> object:
    """:func:`make_result` of the cases ``idx`` (positions into c0 .. c{n-1}); new case j is old case idx[j]."""
    take = lambda values: [values[i] for i in idx]  # noqa: E731
    new = dict(kwargs)
    for key in ("dice", "ood", "ged", "ndsc"):
        if kwargs.get(key) is not None:
            new[key] = take(kwargs[key])
    for key in ("scores", "ncc", "ndsc_rauc"):
        if kwargs.get(key) is not None:
            new[key] = {k: take(v) for k, v in kwargs[key].items()}
    old = [f"c{i}" for i in idx]
    if kwargs.get("case_calibration"):
        per_case = {m: {f"c{j}": bins[c] for j, c in enumerate(old)} for m, bins in kwargs["case_calibration"].items()}
        new["case_calibration"] = per_case
        new["calibration"] = {(m, s): sum(per_case[m][f"c{j}"] for j in range(len(idx)) if new["ood"][j] == (s == "ood"))
                              for m, _ in kwargs["calibration"] for s in ("iid", "ood")}
    al = kwargs.get("active_learning")
    if al is not None:
        ood = [j for j in range(len(idx)) if new["ood"][j]]
        random = {f"c{j}": al.random_case_dice[old[j]] for j in ood}
        method = {k: {f"c{j}": v[old[j]] for j in ood} for k, v in al.method_case_dice.items()}
        new["active_learning"] = active_learning_result([new["dice"][j] for j in ood], random, method)
    return make_result(**new)


def keyed(rows, value: str) -> dict:
    return {tuple(r.get(k) for k in ROW_KEY): r[value] for r in rows}


@pytest.mark.parametrize("name", ALL_TASKS)
def test_bootstrap_rows_are_the_score_on_each_resample(name):
    task = registry.create("task", name)
    kwargs = full_kwargs()
    result = make_result(**kwargs)
    resamples = CaseResamples.draw([f"c{i}" for i in range(6)], kwargs["ood"], B, seed=3)
    samples = keyed(task.bootstrap(result, resamples), "samples")
    scored = keyed(task.score(result), "value")
    with_interval = {k for k in scored if not (name == "calibration" and k[0] == "ace_reference")}
    assert with_interval <= set(samples), f"{name}: score rows without bootstrap samples"
    for b in range(B):
        expected = keyed(task.score(resampled(kwargs, resamples.indices[b])), "value")
        for key in with_interval:
            got = samples[key][b]
            if key in expected:
                assert got == pytest.approx(expected[key], abs=1e-12), (name, key, b)
            else:  # undefined on this resample (e.g. NCC NaN on every drawn case): NaN, no row
                assert np.isnan(got), (name, key, b)


def test_identity_resample_gives_the_value():
    # a resample that draws every case once is the data itself
    kwargs = full_kwargs()
    result = make_result(**kwargs)
    resamples = CaseResamples.draw([f"c{i}" for i in range(6)], kwargs["ood"], 2, seed=0)
    object.__setattr__(resamples, "indices", np.tile(np.arange(6), (2, 1)))
    for name in ALL_TASKS:
        task = registry.create("task", name)
        samples = keyed(task.bootstrap(result, resamples), "samples")
        for key, value in keyed(task.score(result), "value").items():
            if key in samples:
                np.testing.assert_allclose(samples[key], value, atol=1e-12, err_msg=f"{name} {key}")


def test_subsets_are_resampled_within_themselves():
    # FD on the i.i.d. cases only: every resample's AURC is the AURC of resampled i.i.d. cases
    task = registry.create("task", "failure_detection")
    result = without_ood()
    resamples = CaseResamples.draw(["c0", "c1", "c2"], [False] * 3, 50, seed=1)
    rows = keyed(task.bootstrap(result, resamples), "samples")
    dice = np.array([0.9, 0.8, 0.6])
    score = np.array([0.1, 0.3, 0.2])  # pe/image
    expected = [metrics.aurc(1 - dice[i], -score[i]) for i in resamples.indices]
    np.testing.assert_allclose(rows[("aurc", "iid", "predictive_entropy", "image", None)], expected, atol=1e-12)


def test_tasks_without_per_case_data_have_no_samples():
    result = make_result(**{**full_kwargs(), "case_calibration": None})
    resamples = CaseResamples.draw([f"c{i}" for i in range(6)], full_kwargs()["ood"], 4, seed=0)
    assert registry.create("task", "calibration").bootstrap(result, resamples) == []
    legacy = make_result(**{**full_kwargs(), "active_learning": ActiveLearningResult(0.5, 0.55, {(PE, "image"): 0.6})})
    assert registry.create("task", "active_learning").bootstrap(legacy, resamples) == []
