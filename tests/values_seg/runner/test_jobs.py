"""Job functions: what a job predicts follows the run's settings (``threads``, ``prediction_dtype``)."""

from __future__ import annotations

import pytest

from values_seg.config.loading import load_config
from values_seg.engine import inference
from values_seg.components.run_context import RunContext
from values_seg.runner import run_experiment
from values_seg.config.sweep import expand

from tiny import tiny_config

TINY = tiny_config(name="tiny_threads", recipe={"epochs": 1, "batch_size": 4}, threads=2,
                   evaluation={"montage_cases": 0})


@pytest.fixture(scope="module")
def two_thread_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("threads")
    cfg = load_config(base=TINY)
    summary = run_experiment(cfg, run_dir, progress=False)
    assert summary.ok, summary.describe()
    return cfg, run_dir


@pytest.fixture
def no_prediction(monkeypatch):
    """Any case predicted again fails the test (the run's cache must serve it)."""
    def refuse(model, networks, case, *args, **kwargs):
        raise AssertionError(f"case {case.case_id} was predicted again instead of read from the cache")

    monkeypatch.setattr(inference, "predict_case", refuse)


def test_second_cycle_job_predicts_with_the_runs_threads(two_thread_run, no_prediction):
    """The job gets the run's evaluation settings (threads included), so the first cycle's cached
    samples of a run with ``threads: 2`` are read, not predicted again with one thread."""
    cfg, run_dir = two_thread_run
    combo = expand(cfg)[0]
    from values_seg_plugins.tasks._active_learning_cycle import second_cycle_dice_job

    dataset = combo.dataset.create()
    ood = [c for c in dataset.case_ids("test") if dataset.load(c).meta.get("ood")]
    assert ood
    run = RunContext(str(run_dir / "cache"), "cpu", cfg.threads, cfg.plugins)  # as the runner builds it
    dice = second_cycle_dice_job(combo, combo.specs, ood, run, cfg.evaluation.prediction_dtype)
    assert sorted(dice) == sorted(ood) and all(0.0 <= d <= 1.0 for d in dice.values())


def test_map_export_reads_the_samples_of_a_run_with_two_threads(two_thread_run, no_prediction, caplog):
    """``--save-maps`` / ``validate-nnunet``'s map export predicts with the run's ``threads``, so it
    reads the run's cached samples instead of predicting every case again."""
    from values_seg_plugins.datasets._nnunet_raw.maps import save_maps  # (a dataset plugin's module)

    cfg, run_dir = two_thread_run
    with caplog.at_level("INFO", logger="values_seg.engine"):
        index = save_maps(cfg, run_dir, ["predictive_entropy"], progress=False)
    assert "predicting" not in caplog.text
    assert index.read_text().count("\n") == 1 + len(expand(cfg)[0].dataset.create().case_ids("test"))
