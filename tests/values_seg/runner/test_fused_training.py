"""Fused training in a run: one job per group, a diverging member fails alone, ``fuse_training: false``."""

from __future__ import annotations

import pandas as pd
import pytest

from values_seg.config.loading import load_config
from values_seg.engine import Checkpoints, training_setup
from values_seg.runner import run_experiment
from values_seg.config.sweep import expand, unique_training_specs

from tiny import tiny_config

TINY = tiny_config(name="tiny_fused",
                   prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 3}}],
                   evaluation={"montage_cases": 0})


def test_fuse_training_is_the_default_and_false_keeps_the_one_by_one_keys():
    fused = unique_training_specs(expand(load_config(base=TINY)))
    plain = unique_training_specs(expand(load_config(base={**TINY, "fuse_training": False})))
    assert all(s.fused for s in fused) and not any(s.fused for s in plain)
    assert [s.replace(fused=False) for s in fused] == plain
    assert {s.key() for s in fused}.isdisjoint(s.key() for s in plain)


def test_a_diverging_member_fails_alone_and_the_run_goes_on(tmp_path, monkeypatch):
    loss_function = training_setup._loss_function

    def blow_up_seed_1(spec, ignore_index):  # a test hook: the ensemble member of seed 1 diverges
        base = loss_function(spec, ignore_index)
        return lambda output, target, epoch: base(output, target, epoch) * (float("nan") if spec.seed == 1 else 1.0)

    monkeypatch.setattr(training_setup, "_loss_function", blow_up_seed_1)
    cfg = load_config(base=TINY)
    summary = run_experiment(cfg, tmp_path / "run", executor="local", progress=False)
    specs = {s.seed: s for s in unique_training_specs(expand(cfg))}
    train_failures = [f for f in summary.failures if f["stage"] == "train"]
    assert [f["job"] for f in train_failures] == [specs[1].key()]  # named by its own key, as a lone training
    assert "loss became nan" in train_failures[0]["error"] and "seed1" in train_failures[0]["error"]
    store = Checkpoints(tmp_path / "run" / "cache" / "checkpoints")
    assert store.has(specs[0]) and store.has(specs[2]) and not store.has(specs[1])
    assert summary.trained == 2
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(results["prediction_model"]) == {"deterministic"}  # the ensemble needs the failed member
    assert any(f["stage"] == "evaluate" and "ensemble" in f["job"] for f in summary.failures)


@pytest.mark.slow
def test_a_members_rows_do_not_depend_on_what_else_the_run_trains(tmp_path):
    """The ensemble of seed 0 on toy 2: the same rows, byte for byte, in a run of it alone and in a
    run that adds seed 1, scenario 3b and test-time dropout (its members train in other groups)."""
    alone = {**TINY, "prediction_models": [{"name": "ensemble", "params": {"members": 3}}]}
    more = {**alone, "seeds": [0, 1],
            "datasets": [*TINY["datasets"], {"name": "toy", "label": "toy_3b", "params": {
                "scenario": "3b", "dims": 2, "size": 32, "train_cases": 8, "val_cases": 4}}],
            "prediction_models": [*alone["prediction_models"], {"name": "test_time_dropout", "params": {"num_samples": 3}}]}
    rows = []
    for name, base in (("alone", alone), ("more", more)):
        summary = run_experiment(load_config(base=base), tmp_path / name, executor="local", progress=False)
        assert summary.ok, summary.describe()
        table = pd.read_csv(tmp_path / name / "results.csv", dtype=str)
        keep = (table["prediction_model"] == "ensemble") & (table["scenario"] == "toy_2") & (table["seed"] == "0")
        rows.append(table[keep].drop(columns=[c for c in table if c.startswith("ci_")]).to_csv(index=False))
    assert rows[0].count("\n") > 1
    assert rows[0] == rows[1]


def test_where_the_device_does_not_vectorise_each_training_is_a_job_of_its_own(tmp_path, monkeypatch):
    """On a GPU (here the CPU standing in, by the test hook below) the run gives each training
    its own job, trained by the engine's own loop: the weights of the one-by-one run, under the
    fused keys."""
    from values_seg.engine import fused
    from values_seg.runner import run

    for module in (run, fused):  # the run's plan and the job's engine, as on a GPU
        monkeypatch.setattr(module, "vectorises", lambda device: False)
    cfg = load_config(base={**TINY, "workers": 2})
    jobs = []
    real = run.Runner.stage

    def stage(self, name, stage_jobs):  # records the training jobs the run plans
        if name == "train":
            jobs.extend(j.id for j in stage_jobs)
        return real(self, name, stage_jobs)

    monkeypatch.setattr(run.Runner, "stage", stage)
    summary = run_experiment(cfg, tmp_path / "run", executor="local", progress=False)
    assert summary.ok, summary.describe()
    specs = unique_training_specs(expand(cfg))
    assert sorted(jobs) == sorted(s.key() for s in specs) and all(s.fused for s in specs)
    store = Checkpoints(tmp_path / "run" / "cache" / "checkpoints")
    one_by_one = run_experiment(load_config(base={**TINY, "fuse_training": False}), tmp_path / "plain",
                                executor="local", progress=False)
    assert one_by_one.ok
    plain = Checkpoints(tmp_path / "plain" / "cache" / "checkpoints")
    for s in specs:
        a, b = store.load(s)["state_dict"], plain.load(s.replace(fused=False))["state_dict"]
        assert all(a[k].equal(b[k]) for k in a)
