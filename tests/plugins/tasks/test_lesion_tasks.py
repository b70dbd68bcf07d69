"""The lesion quantity and the lesion tasks on constructed cases: FP lesions that are the uncertain
ones (AUROC 1) and that are the certain ones (AUROC 0); lesion F1 and F1-retention by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from values_seg import metrics, registry
from values_seg.components.case_context import CaseContext
from values_seg.components.settings import EvaluationSettings
from values_seg.components.measure import SampleStatistics
from values_seg.components.quantity import CaseInputs, CaseView
from values_seg.components.task import EvaluationResult

GOOD, BAD = "fp_uncertain", "fp_certain"


def _case(case_id: str, shift: int = 0):
    """Predicted lesions A, B (TP) and C (FP, no reference); a reference lesion D that is missed."""
    shape = (24, 24)
    pred = torch.zeros(shape, dtype=torch.long)
    ref = torch.zeros(shape, dtype=torch.long)
    pred[1:4, 1:4] = 1  # A
    ref[1:4, 1:4] = 1
    pred[8:12, 8 + shift:12 + shift] = 1  # B
    ref[8:12, 8 + shift:12 + shift] = 1
    pred[18:20, 2:4] = 1  # C: FP
    ref[18:22, 18:22] = 1  # D: FN
    onehot = torch.stack([1.0 - pred.float(), pred.float()])[None]
    fp = torch.zeros(shape)
    fp[18:20, 2:4] = 1.0
    maps = torch.stack([0.1 + 0.8 * fp, 0.9 - 0.8 * fp])  # GOOD: the FP lesion uncertain; BAD: certain
    return CaseInputs(CaseContext(case_id, num_classes=2, ignore_index=None, background=0), ref[None],
                      SampleStatistics(onehot), pred, maps, [GOOD, BAD])


def _result(n_cases: int = 2) -> EvaluationResult:
    quantity = registry.create("quantity", "lesions")
    entries = []
    for i in range(n_cases):
        inputs = _case(f"c{i}", shift=i)
        values = quantity.compute(CaseView(inputs, quantity))
        entries.append((inputs.case_id, {}, dict(zip([GOOD, BAD], values))))
    records = quantity.load(quantity.save(entries, [GOOD, BAD], EvaluationSettings()))
    cases = pd.DataFrame({"case_id": [f"c{i}" for i in range(n_cases)], "split": "test", "ood": False, "shift": "none"})
    return EvaluationResult(context={}, cases=cases, scores=pd.DataFrame(columns=["case_id", "split", "measure",
                                                                                  "aggregation", "score"]),
                            outputs={"lesions": records})


def _rows(task_name: str) -> dict:
    task = registry.create("task", task_name)
    return {(r["metric"], r["measure"], r["aggregation"]): r["value"] for r in task.score(_result()) if r["split"] == "iid"}


def test_records_count_the_lesions():
    records = _result().outputs["lesions"]
    assert len(records.lesions) == 6  # 3 predicted lesions per case
    assert records.matches["tp"].sum() == 4 and records.references["fn"].sum() == 2
    sizes = sorted(records.lesions[records.lesions.case_id == "c0"]["size"])
    assert sizes == [4, 9, 16]


@pytest.mark.parametrize("aggregation", ["lesion_mean", "lesion_max", "lesion_grown_mean"])
def test_fp_detection_auroc_one_and_zero(aggregation):
    rows = _rows("lesion_detection")
    assert rows[("lesion_fp_auroc", GOOD, aggregation)] == 1.0
    assert rows[("lesion_fp_auroc", BAD, aggregation)] == 0.0
    assert rows[("lesion_fp_auprc", GOOD, aggregation)] == 1.0
    # per case: TP 2, FP 1, FN 1 -> F1 = 2 / 3
    assert rows[("lesion_f1", None, None)] == pytest.approx(2 / 3)


def test_lesion_sum_follows_the_size():
    # GOOD: the FP lesion 4 voxels x 0.9 = 3.6 against TPs of 9 x 0.1 and 16 x 0.1 (0.9, 1.6)
    # BAD: 4 x 0.1 = 0.4 against 9 x 0.9 and 16 x 0.9: the FP the least uncertain
    rows = _rows("lesion_detection")
    assert rows[("lesion_fp_auroc", GOOD, "lesion_sum")] == 1.0
    assert rows[("lesion_fp_auroc", BAD, "lesion_sum")] == 0.0


def test_f1_retention_rows_match_the_curve():
    rows = _rows("lesion_retention")
    # pooled over the two cases: 4 TPs scored 0.1, 2 FPs scored 0.9, 2 missed lesions
    scores = np.array([0.1, 0.1, 0.9, 0.1, 0.1, 0.9])
    tp = np.array([True, True, False, True, True, False])
    good = metrics.lesion_f1_retention(scores, tp, 2)
    bad = metrics.lesion_f1_retention(1 - scores, tp, 2)
    assert rows[("lesion_f1_auc", GOOD, "lesion_mean")] == pytest.approx(good.f1_auc)
    assert rows[("lesion_f1_at_95", GOOD, "lesion_mean")] == pytest.approx(good.f1_at(0.95))
    assert rows[("lesion_f1_auc", BAD, "lesion_mean")] == pytest.approx(bad.f1_auc)
    assert good.f1_auc > good.random.mean() and np.allclose(good.values, good.ideal)


def test_bootstrap_resamples_whole_cases():
    task = registry.create("task", "lesion_detection")
    stats = {(s.metric, s.measure, s.aggregation): s for s in task.statistics(_result()) if s.split == "iid"}
    f1 = stats[("lesion_f1", None, None)].statistic(np.array([[0, 0], [1, 1], [0, 1]]))
    np.testing.assert_allclose(f1, [2 / 3] * 3)
    auroc = stats[("lesion_fp_auroc", GOOD, "lesion_mean")].statistic(np.array([[0, 0], [1, 0]]))
    np.testing.assert_allclose(auroc, [1.0, 1.0])


def test_patient_scale_aggregation_is_the_max_or_sum_of_the_lesion_scores():
    inputs = _case("c0")
    u = inputs.maps[0]
    top = registry.create("aggregation", "lesion_mean")(u, prediction=inputs.prediction)
    total = registry.create("aggregation", "lesion_mean", patient="sum")(u, prediction=inputs.prediction)
    assert top == pytest.approx(0.9)
    assert total == pytest.approx(0.1 + 0.1 + 0.9)
    assert registry.create("aggregation", "lesion_max")(u, prediction=torch.zeros_like(inputs.prediction)) == 0.0
    with pytest.raises(ValueError, match="patient"):
        registry.create("aggregation", "lesion_mean", patient="mean")


def test_grown_margin_reaches_the_neighbourhood():
    u = torch.zeros(9, 9, dtype=torch.float64)
    u[4, 6] = 1.0  # two voxels right of a 1-voxel lesion at (4, 4)
    labels = torch.zeros(9, 9, dtype=torch.long)
    labels[4, 4] = 1
    assert registry.create("aggregation", "lesion_grown_mean", margin=1)(u, prediction=labels) == 0.0
    # margin 2: a diamond of 13 voxels around the lesion, one of them 1.0
    assert registry.create("aggregation", "lesion_grown_mean", margin=2)(u, prediction=labels) == pytest.approx(1 / 13)


def test_curves_carry_the_areas_and_the_scores():
    result = _result()
    retention = registry.create("task", "lesion_retention").curves(result)
    rows = _rows("lesion_retention")
    good = retention[(retention.measure == GOOD) & (retention.aggregation == "lesion_mean") & (retention.split == "iid")]
    assert good["area"].iloc[0] == pytest.approx(rows[("lesion_f1_auc", GOOD, "lesion_mean")])
    assert good["f1"].to_numpy() == pytest.approx(good["ideal"].to_numpy())  # FPs rejected first
    assert good["f1"].iloc[-1] == pytest.approx(4 / (4 + 0.5 * (2 + 2)))  # all kept: the pooled lesion F1
    scores = registry.create("task", "lesion_detection").curves(result)
    part = scores[(scores.measure == GOOD) & (scores.aggregation == "lesion_mean") & (scores.split == "iid")]
    assert sorted(part["tp_fraction"]) == [0, 0, 1, 1, 1, 1]
    assert part.loc[part.tp_fraction == 0, "score"].tolist() == pytest.approx([0.9, 0.9])


def test_pooled_resample_statistics_equal_the_expanded_lesions():
    """The vectorised statistics of case resamples equal the plain metrics on the drawn cases' lesions
    listed out (a case drawn twice: its lesions twice), per rater and then the mean."""
    from values_seg_plugins.quantities.lesions import CaseLesions
    from values_seg_plugins.tasks._lesion import Pooled, pooled_statistic

    rng = np.random.default_rng(1)
    cases = []
    for _ in range(7):
        n = int(rng.integers(0, 5))
        tp = rng.random((2, n)) < 0.6
        counted = rng.random((2, n)) < 0.9
        cases.append(CaseLesions(np.round(rng.random(n), 1), tp & counted, counted, rng.integers(0, 3, 2).astype(float)))
    indices = rng.integers(0, 7, size=(6, 7))
    pooled = Pooled(cases)
    got = {s: pooled_statistic(pooled, indices, statistic=s) for s in ("fp_auroc", "fp_auprc", "f1_auc", "f1_at_95")}
    for b, row in enumerate(indices):
        expected = {k: [] for k in got}
        for r in range(2):
            scores = np.concatenate([cases[i].scores[cases[i].counted[r]] for i in row])
            tp = np.concatenate([cases[i].tp[r][cases[i].counted[r]] for i in row])
            fn = sum(cases[i].fn[r] for i in row)
            if 0 < tp.sum() < tp.size:
                expected["fp_auroc"].append(metrics.auroc(~tp, scores))
                expected["fp_auprc"].append(metrics.auprc(~tp, scores))
            curve = metrics.lesion_f1_retention(scores, tp, fn)
            expected["f1_auc"].append(curve.f1_auc)
            expected["f1_at_95"].append(curve.f1_at(0.95))
        for k, values in expected.items():
            if values:
                assert got[k][b] == pytest.approx(np.mean(values)), (k, b)
            else:
                assert np.isnan(got[k][b])


def test_resamples_without_a_defined_statistic_give_nan_without_a_warning():
    """A resample that draws only a case without FP lesions has no FP-lesion AUROC for any rater: NaN,
    stated, not numpy's "Mean of empty slice"; the other resamples keep their value."""
    import warnings

    from values_seg_plugins.quantities.lesions import CaseLesions
    from values_seg_plugins.tasks._lesion import Pooled, pooled_statistic

    only_tp = CaseLesions(np.array([0.2, 0.4]), np.ones((2, 2), bool), np.ones((2, 2), bool), np.zeros(2))
    mixed = CaseLesions(np.array([0.1, 0.9]), np.array([[True, False]] * 2), np.ones((2, 2), bool), np.zeros(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pooled_statistic(Pooled([only_tp, mixed]), np.array([[0, 0], [1, 1], [0, 1]]), statistic="fp_auroc")
    # row 0: no FP lesion; row 1: the FP (0.9) above the TP (0.1); row 2: the FP above all three TPs
    np.testing.assert_array_equal(got, [np.nan, 1.0, 1.0])


def test_case_retention_rows_and_resamples_match_the_curve():
    """Case-level retention: each case rejected by the maximum of its lesions' scores; per case 2 TP,
    3 predicted lesions and 1 missed lesion (one rater). The rows equal the curve of the metric function,
    and a resample's statistic equals the curve of the drawn cases (a case drawn twice: two alike cases)."""
    from values_seg_plugins.tasks._lesion import CasePooled

    rows = _rows("lesion_retention")
    for measure, top in ((GOOD, 0.9), (BAD, 0.9)):
        curve = metrics.lesion.case_f1_retention([top, top], [2, 2], [3, 3], [1, 1])
        assert rows[("case_f1_auc", measure, "lesion_mean")] == pytest.approx(curve.f1_auc)
        assert rows[("case_f1_at_95", measure, "lesion_mean")] == pytest.approx(curve.f1_at(0.95))
    from values_seg_plugins.quantities.lesions import CaseLesions

    rng = np.random.default_rng(4)
    cases = []
    for _ in range(6):
        n = int(rng.integers(0, 5))
        counted = rng.random((2, n)) < 0.9
        cases.append(CaseLesions(rng.random(n), (rng.random((2, n)) < 0.6) & counted, counted,
                                 rng.integers(0, 3, 2).astype(float)))
    top = [float(c.scores.max()) if c.scores.size else 0.0 for c in cases]
    indices = np.vstack([np.arange(6), rng.integers(0, 6, size=(5, 6))])
    for statistic in ("f1_auc", "f1_at_95"):
        got = CasePooled(cases).per_rater(indices, statistic)
        for b, row in enumerate(indices):
            per_rater = []
            for r in range(2):
                curve = metrics.lesion.case_f1_retention(
                    [top[i] for i in row], [(cases[i].tp[r] & cases[i].counted[r]).sum() for i in row],
                    [cases[i].counted[r].sum() for i in row], [cases[i].fn[r] for i in row])
                per_rater.append(curve.f1_auc if statistic == "f1_auc" else curve.f1_at(0.95))
            assert got[b] == pytest.approx(np.mean(per_rater), abs=1e-12)
    curves = registry.create("task", "lesion_retention").curves(_result())
    case = curves[(curves.curve == "case_f1_retention") & (curves.measure == GOOD) & (curves.split == "iid")
                  & (curves.aggregation == "lesion_mean")]
    assert case["f1"].iloc[-1] == pytest.approx(4 / (4 + 0.5 * (2 + 2)))  # all kept: the pooled lesion F1
    assert (case["ideal"] >= case["f1"] - 1e-12).all()
