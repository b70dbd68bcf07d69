"""The active-learning stage end to end on tiny toy data (appendix A.4): requested by a task's
``requires``, it queries the pool with each suited score and at random, retrains with the queried
labels (each distinct training once) and scores the second cycle on the OoD test cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from values_seg import metrics
from values_seg.config.loading import load_config
from values_seg.engine import Checkpoints, PredictionCache, TrainingSpec, predict_split
from values_seg.runner import run_experiment

from tiny import tiny_config, toy

AL = tiny_config(
    name="al", datasets=[toy("2", pool_iid=4, pool_ood=6)], recipe={"epochs": 2, "batch_size": 4},
    prediction_models=["deterministic", "test_time_augmentation"], measures=["predictive_entropy", "max_softmax"],
    aggregations=[{"name": "patch", "params": {"size": 5}}, "image"], tasks=["segmentation", "active_learning"],
    active_learning={"query_fraction": 0.5}, evaluation={"montage_cases": 0},
)


@pytest.fixture(scope="module")
def al_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("al")
    summary = run_experiment(load_config(base=AL), run_dir, progress=False)
    assert summary.ok, summary.describe()
    return run_dir, summary


def _second_cycle_specs(run_dir: Path) -> list[TrainingSpec]:
    sidecars = (run_dir / "cache" / "checkpoints").glob("*.pt.json")
    specs = [TrainingSpec.from_dict(json.loads(p.read_text())["spec"]) for p in sidecars]
    return [s for s in specs if s.extra_cases]


def test_queries_are_the_most_uncertain_pool_cases_and_random(al_run):
    run_dir, _ = al_run
    cases = pd.read_csv(run_dir / "cases.csv")
    pool = cases[cases["split"] == "pool"]
    n_query = math.ceil(0.5 * pool["case_id"].nunique())
    trained = {frozenset(cid for _, cid in s.extra_cases) for s in _second_cycle_specs(run_dir)}
    for (model, measure, aggregation), rows in pool.groupby(["prediction_model", "measure", "aggregation"]):
        ranked = rows.sort_values(["score", "case_id"], ascending=[False, True])
        assert frozenset(ranked["case_id"].head(n_query)) in trained, (model, measure, aggregation)
    assert all(len(q) == n_query for q in trained)


def test_each_distinct_second_cycle_trains_once(al_run):
    run_dir, summary = al_run
    queries = {frozenset(cid for _, cid in s.extra_cases) for s in _second_cycle_specs(run_dir)}
    # first cycle: one training shared by both models (TTA reuses it); second: one per distinct query
    assert summary.trainings == 1 + len(queries) == summary.trained


def test_improvement_is_eq_9_10_of_the_second_cycle_dice(al_run):
    run_dir, _ = al_run
    results = pd.read_csv(run_dir / "results.csv")
    cases = pd.read_csv(run_dir / "cases.csv")
    improvement = results[results["task"] == "active_learning"]
    assert set(improvement["split"]) == {"ood"} and set(improvement["metric"]) == {"improvement"}
    assert len(improvement) == (2 + 1) * 2  # (deterministic: PE, MSR; TTA: PE) x aggregations
    cfg = load_config(base=AL)
    from values_seg.config.sweep import expand

    combos = {c.model.label: c for c in expand(cfg)}
    store = Checkpoints(run_dir / "cache" / "checkpoints")
    cache = PredictionCache(run_dir / "cache" / "predictions")
    by_query = {frozenset(cid for _, cid in s.extra_cases): s for s in _second_cycle_specs(run_dir)}
    pool = cases[cases["split"] == "pool"]
    n_query = math.ceil(0.5 * pool["case_id"].nunique())
    dataset = combos["deterministic"].dataset.create()
    rng = np.random.default_rng([0, 2024])
    random_query = frozenset(rng.choice(sorted(pool["case_id"].unique()), size=n_query, replace=False).tolist())

    def ood_dice(model_label: str, spec: TrainingSpec) -> float:
        combo = combos[model_label]
        handles = predict_split(combo.model.create(), [spec], store, combo.dataset, "test", cache, progress=False)
        ood = set(cases.loc[(cases["split"] == "test") & cases["ood"], "case_id"])
        return float(np.mean([metrics.mean_dice_over_raters(h.load().mean(0).argmax(0).numpy(), dataset.load(h.case_id).raters)
                              for h in handles if h.case_id in ood]))

    for r in improvement.itertuples(index=False):
        model_cases = cases[(cases["prediction_model"] == r.prediction_model) & (cases["split"] == "test")]
        first = model_cases[model_cases["ood"]].drop_duplicates("case_id")["dice"].mean()
        rows = pool[(pool["prediction_model"] == r.prediction_model) & (pool["measure"] == r.measure)
                    & (pool["aggregation"] == r.aggregation)]
        chosen = frozenset(rows.sort_values(["score", "case_id"], ascending=[False, True])["case_id"].head(n_query))
        method = ood_dice(r.prediction_model, by_query[chosen])
        random = ood_dice(r.prediction_model, by_query[random_query])
        assert r.value == pytest.approx(metrics.al_improvement(first, method, random), abs=1e-9)
