"""values_seg.runner.support: the result rows the data cannot support are marked where they are scored (issue 31, items
11 and 12), on hand-made evaluations scored by the built-in tasks themselves."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from values_seg.runner import support
from values_seg.runner.statistics import Bootstrap
from values_seg.components.task import EvaluationResult, Metric, Support, Task, row
from values_seg_plugins.tasks.failure_detection import FailureDetectionTask
from values_seg_plugins.tasks.ood_detection import OodDetectionTask


def evaluation(ood, scores, dice=None) -> EvaluationResult:
    """Test cases with their OoD flags, one (measure, aggregation) score each and their Dice."""
    n = len(ood)
    ids = [f"c{i:02d}" for i in range(n)]
    dice = np.linspace(0.5, 0.95, n) if dice is None else dice
    cases = pd.DataFrame({"case_id": ids, "split": "test", "ood": list(map(bool, ood)), "shift": "none",
                          "dice": np.asarray(dice, dtype=float)})
    scores = pd.DataFrame({"case_id": ids, "split": "test", "measure": "predictive_entropy", "aggregation": "patch",
                           "score": np.asarray(scores, dtype=float)})
    return EvaluationResult({}, cases, scores)


def scored(task, result, resamples=200):
    rows = Bootstrap(resamples).attach(task, result, task.score(result))
    return {(r["metric"], r["split"]): r for r in support.mark(task, result, rows)}


def test_constant_scores_give_auroc_one_half_marked_as_tied():
    ood = [0] * 6 + [1] * 6
    result = evaluation(ood, np.full(12, 3.0))
    auroc = scored(OodDetectionTask(), result)[("auroc", "all")]
    assert auroc["value"] == pytest.approx(roc_auc_score(ood, np.full(12, 3.0))) == 0.5
    assert (auroc["ci_low"], auroc["ci_high"]) == (0.5, 0.5)  # what the report showed as 50.00 [50.00, 50.00]
    assert not auroc["supported"] and auroc["support_note"] == "all scores tied: the uncertainty ranks no case above another"


def test_one_iid_and_one_ood_case_are_too_few_for_an_auroc():
    result = evaluation([0, 1], [0.1, 0.9])
    rows = scored(OodDetectionTask(), result)
    auroc = rows[("auroc", "all")]
    assert auroc["value"] == roc_auc_score([0, 1], [0.1, 0.9]) == 1.0 and auroc["ci_low"] == auroc["ci_high"] == 1.0
    assert not auroc["supported"]
    assert auroc["support_note"] == "1 i.i.d. and 1 OoD test case(s) in split all; the metric needs at least 3 of each"
    assert not any(r["supported"] for r in rows.values())


def test_every_case_failing_alike_leaves_nothing_to_rank():
    ood = [0] * 8 + [1] * 8
    result = evaluation(ood, np.arange(16.0), dice=np.full(16, 0.3))
    rows = scored(FailureDetectionTask(), result)
    eaurc = rows[("eaurc", "iid")]
    assert eaurc["value"] == pytest.approx(0.0, abs=1e-12) and eaurc["ci_low"] == eaurc["ci_high"]
    for r in rows.values():
        assert not r["supported"] and r["support_note"] == "every case has the same dice: nothing to rank"


def test_enough_cases_with_spread_are_supported():
    rng = np.random.default_rng(0)
    ood = [0] * 10 + [1] * 10
    result = evaluation(ood, rng.random(20) + np.array(ood))
    for task in (OodDetectionTask(), FailureDetectionTask()):
        rows = scored(task, result)
        assert rows and all(r["supported"] and r["support_note"] == "" for r in rows.values())


def test_minimum_counts_are_declared_per_metric():
    assert {(m.name, m.support.min_per_class, m.support.varies) for m in OodDetectionTask.metrics} == {
        ("auroc", 3, ("score",)), ("auprc", 3, ("score",)), ("fpr_at_95_tpr", 3, ("score",))}
    assert {(m.support.min_cases, m.support.varies) for m in FailureDetectionTask.metrics} == {(4, ("score", "dice"))}
    # the fewest for which the best ranking differs from a random one at 5 %: 1/C(6, 3) and 1/4!
    assert 1 / math.comb(6, 3) <= 0.05 < 1 / math.comb(5, 2) and 1 / math.factorial(4) <= 0.05 < 1 / math.factorial(3)
    with pytest.raises(ValueError, match="min_cases must be >= 1"):
        Support(min_cases=0)
    with pytest.raises(ValueError, match="varies must be a tuple"):
        Support(varies="score")
    assert Metric("m", "higher", support=Support(varies=["score"])).to_dict()["varies"] == ["score"]


def test_a_zero_width_interval_from_two_cases_is_marked():
    class MeanDice(Task):
        name = "mean_dice"
        metrics = (Metric("dice", "higher", splits=("iid",)),)

    result = evaluation([0, 0], [0.1, 0.2], dice=[0.8, 0.8])
    rows = support.mark(MeanDice(), result, [row("mean_dice", "dice", "iid", 0.8, ci_low=0.8, ci_high=0.8)])
    assert rows[0]["support_note"] == "zero-width interval from 2 test case(s)"
    wide = support.mark(MeanDice(), result, [row("mean_dice", "dice", "iid", 0.8, ci_low=0.7, ci_high=0.9)])
    assert wide[0]["supported"]


class NanTask(Task):
    """A third party's task whose metric is undefined on this data."""

    name = "nan_task"
    metrics = (Metric("score_mean", "higher", splits=("all",)),)

    def score(self, result):
        return [row(self.name, "score_mean", "all", float("nan"), "predictive_entropy", "patch")]


def test_silent_gaps_are_named_nan_rows_and_missing_rows():
    result = evaluation([0] * 10, np.arange(10.0))  # no OoD case
    task = NanTask()
    rows = support.mark(task, result, task.score(result))
    assert not rows[0]["supported"] and rows[0]["support_note"] == "no value: the task returned NaN"
    assert support.gaps(task, result, rows) == [("score_mean", "all", "the task returned NaN on all its 1 row(s)")]
    ood = OodDetectionTask()
    assert ood.score(result) == []
    why = "no rows: 10 i.i.d. and 0 OoD test case(s) in split all; the metric needs at least 3 of each"
    assert support.gaps(ood, result, [])[0] == ("auroc", "all", why)
    fd = FailureDetectionTask()
    assert support.gaps(fd, result, fd.score(result)) == [
        (m, "ood", "no rows: no test case in split ood") for m in ("aurc", "eaurc", "augrc", "eaugrc")]


# ----------------------------------------------------------------------------- issue 31: a guarantee that applies


def test_a_conformal_set_size_needs_test_cases_exchangeable_with_validation():
    """Toy 3a's i.i.d. test cases are declared not exchangeable: no guarantee, no supported set size;
    OoD cases never carry one; exchangeable i.i.d. cases do."""
    from values_seg_plugins.tasks.conformal import ConformalTask

    declared = {m.name: m.support.exchangeable for m in ConformalTask.metrics}
    assert declared["set_size"] and declared["set_size_probability"] and declared["coverage"]
    assert not declared["fnr"]  # a realised FNR is a finding, guarantee or not
    size = next(m for m in ConformalTask.metrics if m.name == "set_size")
    result = evaluation([0] * 6 + [1] * 6, np.arange(12.0))
    row = {"metric": "set_size", "value": 1.2, "ci_low": 1.1, "ci_high": 1.3, "measure": "predictive_entropy"}
    assert support.assess(size, {**row, "split": "iid"}, result) == ""
    assert support.assess(size, {**row, "split": "ood"}, result) == (
        "no guarantee: 6 of 6 test case(s) in split ood not exchangeable with the validation split (6 OoD)")
    result = evaluation([0] * 6 + [1] * 6, np.arange(12.0))
    result.cases["exchangeable"] = [False] * 4 + [True] * 2 + [None] * 6  # as toy 3a declares its sharp i.i.d. cases
    assert support.assess(size, {**row, "split": "iid"}, result) == (
        "no guarantee: 4 of 6 test case(s) in split iid not exchangeable with the validation split (4 declared so by "
        "the dataset)")
    fnr = next(m for m in ConformalTask.metrics if m.name == "fnr")
    assert support.assess(fnr, {**row, "metric": "fnr", "split": "ood"}, result) == ""
