"""The runner end to end on tiny toy data: outputs, reuse, failure isolation, resume after a kill."""

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from values_seg.cli import main
from values_seg.config.loading import load_config
from values_seg.runner import run_experiment

from tiny import tiny_config, toy

TINY = tiny_config(
    prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 2}}],
    measures=["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"],
    aggregations=[{"name": "patch", "params": {"size": 5}}, "threshold"],
    tasks=["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "separation",
           "ndsc_retention", "dice_retention"],
)


def read(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "results.csv").sort_values(
        ["prediction_model", "task", "metric", "split", "measure", "aggregation"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    summary = run_experiment(load_config(base=TINY), run_dir, progress=False)
    return run_dir, summary


def test_run_directory_holds_everything(tiny_run):
    run_dir, summary = tiny_run
    assert summary.ok, summary.describe()
    assert summary.combinations == 2 and summary.trainings == 2  # the ensemble reuses the deterministic seed
    for name in ("config.yaml", "results.csv", "results.parquet", "cases.csv", "calibration.csv"):
        assert (run_dir / name).exists(), name
    table = read(run_dir)
    assert set(table["task"]) == {"segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity",
                                  "separation", "ndsc_retention", "dice_retention"}
    det = table[table["prediction_model"] == "deterministic"]
    assert set(det["measure"].dropna()) == {"predictive_entropy", "max_softmax"}  # the type table's rule
    assert set(table.loc[table["measure"] == "mutual_information", "uncertainty_type"]) == {"EU"}
    cases = pd.read_csv(run_dir / "cases.csv")
    assert len(cases[(cases["prediction_model"] == "deterministic")]["case_id"].unique()) == 63  # Table 1 test set
    assert (run_dir / "config.yaml").read_text().count("toy_2") == 1


def test_rerun_reuses_everything(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    before = read(run_dir)
    summary = run_experiment(load_config(base=TINY), run_dir, progress=False)
    assert summary.ok and summary.trained == 0
    assert summary.reused == summary.evaluated == summary.combinations and summary.tables_reused  # nothing redone
    pd.testing.assert_frame_equal(read(run_dir), before)


def test_a_no_op_rerun_imports_no_torch_scipy_or_matplotlib(tiny_run, tmp_path):
    """Issue 34, item 3: a rerun with nothing to do decides so from the run's record
    (:mod:`values_seg.runner.run_record`), without importing torch, scipy, matplotlib or a plugin,
    and says what the full way says (the summary, and the warnings given at the start)."""
    import yaml

    run_dir, _ = tiny_run
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    full = run_experiment(load_config(config), run_dir, progress=False)  # the full way, a no-op: recorded
    assert full.ok and full.trained == 0 and full.tables_reused
    script = ("import sys; from values_seg.cli import main; "
              f"status = main(['run', {str(config)!r}, '--out', {str(run_dir)!r}, '--no-progress']); "
              "print(status, sorted({m.split('.')[0] for m in sys.modules} "
              "& {'torch', 'scipy', 'matplotlib', 'values_seg_plugins'}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)  # a hang guard
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout
    timing = re.compile(r" in \d+ s -> ")
    assert timing.sub(" in - s -> ", full.describe()) in timing.sub(" in - s -> ", out.stdout), out.stdout
    assert f"report: {run_dir / 'report.md'}" in out.stdout
    assert out.stderr.count("produces no rows") == 3, out.stderr  # said again, as the full way says them


def test_a_rerun_goes_the_full_way_when_anything_changed(tiny_run, tmp_path, monkeypatch):
    """The record of a finished run holds only while its config, its code and its files are
    unchanged: a changed parameter, a changed plugin source file, an edited table or a missing
    checkpoint each send the rerun the full way."""
    from values_seg.storage import provenance
    from values_seg.config.loading import resolved_config
    from values_seg.runner import run_record

    run_dir = tmp_path / "copy"
    shutil.copytree(tiny_run[0], run_dir)
    assert run_experiment(load_config(base=TINY), run_dir, progress=False).tables_reused
    cache, cfg = run_dir / "cache", resolved_config(base=TINY)
    assert run_record.finished(run_dir, cache, cfg)["summary"]["combinations"] == 2
    key = run_record.rerun_key(cfg, [])
    assert run_record.rerun_key(resolved_config(base={**TINY, "recipe": {"epochs": 2}}), []) != key
    plugin = tmp_path / "acme_rerun.py"
    plugin.write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    provenance.clear_caches()
    with_plugin = resolved_config(base={**TINY, "plugins": ["acme_rerun"]})
    before = run_record.rerun_key(with_plugin, [])
    assert before != key
    plugin.write_text("SCALE = 2\n")
    provenance.clear_caches()
    assert run_record.rerun_key(with_plugin, []) != before
    results = run_dir / "results.csv"
    original = results.read_bytes()
    results.write_bytes(original.replace(b",", b";", 1))
    assert run_record.finished(run_dir, cache, cfg) is None
    results.write_bytes(original)
    assert run_record.finished(run_dir, cache, cfg) is not None
    checkpoint = next((cache / "checkpoints").glob("*.pt"))
    checkpoint.rename(tmp_path / "aside.pt")
    assert run_record.finished(run_dir, cache, cfg) is None


def test_runs_with_failures_or_unnoted_data_files_are_not_recorded():
    """Only a run whose every input the record can check is recorded: not one with a failure,
    nor one whose data set read files it did not note (:mod:`values_seg.storage.input_files`)."""
    from values_seg.storage import input_files
    from values_seg.runner import run_record
    from values_seg.runner.summary import RunSummary

    tiny, done = load_config(base=TINY), RunSummary(Path("."))
    with input_files.recording() as reads:
        assert run_record.recordable(tiny, done, reads)
        assert not run_record.recordable(tiny, RunSummary(Path("."), failures=[{"stage": "train", "job": "x",
                                                                                 "error": ""}]), reads)
        input_files.unnoted("dataset acme noted none of the files its fingerprint reads")
    assert not run_record.recordable(tiny, done, reads)


def test_measures_without_rows_are_named_at_the_start_and_in_the_summary(tiny_run, caplog):
    run_dir, summary = tiny_run
    results = pd.read_csv(run_dir / "results.csv")
    ensemble_measures = set(results.loc[results["prediction_model"] == "ensemble", "measure"].dropna())
    assert "max_softmax" not in ensemble_measures  # the gap is real: no rows
    assert summary.measure_gaps["max_softmax"] == {"ensemble": "bayesian"}
    assert set(summary.measure_gaps) == {"max_softmax", "expected_entropy", "mutual_information"}
    assert ("Not run (said at the start): expected_entropy, mutual_information, max_softmax (no uncertainty "
            "type for a model's family)") in summary.describe()
    assert "produces no rows" not in summary.describe()  # said once, at the start
    with caplog.at_level("WARNING", logger="values_seg.runner"):
        run_experiment(load_config(base=TINY), run_dir, progress=False)
    said = [r.getMessage() for r in caplog.records if "produces no rows" in r.getMessage()]
    assert len(said) == 3 and any("'max_softmax' produces no rows under ensemble" in m for m in said)


def test_same_config_same_numbers_in_a_fresh_directory(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    other = tmp_path / "again"
    assert run_experiment(load_config(base=TINY), other, progress=False).ok
    pd.testing.assert_frame_equal(read(other), read(run_dir))


FAILING = '''
import torch
from values_seg import hookimpl
from values_seg.components.prediction_model import PredictionModel


def broken_measure(samples):
    """Always fails."""
    raise RuntimeError("broken measure")


class BrokenModel(PredictionModel):
    """Fails at inference."""
    name = "broken_model"
    family = "deterministic"

    def predict(self, networks, image):
        raise RuntimeError("broken model")


@hookimpl
def values_seg_measures():
    return [broken_measure]


@hookimpl
def values_seg_prediction_models():
    return [BrokenModel]
'''


def test_a_failing_plugin_is_isolated(tmp_path, monkeypatch):
    (tmp_path / "acme_broken.py").write_text(textwrap.dedent(FAILING))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {**TINY, "plugins": ["acme_broken"], "prediction_models": ["deterministic", "broken_model"],
              "measures": TINY["measures"] + ["broken_measure"], "tasks": ["segmentation", "ood_detection"]}
    run_dir = tmp_path / "run"
    summary = run_experiment(load_config(base=config), run_dir, progress=False)
    assert not summary.ok
    from values_seg.storage import run_directory
    from values_seg.runner import run_record

    assert run_directory.remembered(run_dir, run_record.RECORD) is None  # a rerun goes the full way
    failures = pd.read_csv(run_dir / "failures.csv")
    jobs = " ".join(failures["job"])
    assert "broken_model" in jobs and "measure broken_measure" in jobs
    assert "broken model" in " ".join(failures["error"])
    table = read(run_dir)
    assert set(table["prediction_model"]) == {"deterministic"}  # the rest went on
    assert "broken_measure" not in set(table["measure"].dropna())
    assert {"predictive_entropy", "max_softmax"} <= set(table["measure"].dropna())


def test_cli_exit_status_and_config_errors(tmp_path, capsys):
    import yaml

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**TINY, "measures": ["nope"]}))
    assert main(["run", str(config), "--out", str(tmp_path / "r")]) == 2
    assert "unknown measure 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing started


def test_resume_after_kill(tmp_path, tiny_run, wait_until):
    import yaml

    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "recipe": {"epochs": 3}}))
    run_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "values_seg.cli", "run", str(config), "--out", str(run_dir), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    checkpoints = run_dir / "cache" / "checkpoints"
    wait_until(lambda: list(checkpoints.glob("*.pt")) or proc.poll() is not None, "the first training finished")
    os.killpg(proc.pid, signal.SIGKILL)  # midway: after the first training, before the end
    proc.wait()
    assert not (run_dir / "results.csv").exists()
    first = {p.name for p in checkpoints.glob("*.pt")}
    assert first, "no training finished before the kill"
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    assert first <= {p.name for p in checkpoints.glob("*.pt")}  # finished work was kept
    clean = tmp_path / "clean"
    assert subprocess.run(cmd[:-3] + ["--out", str(clean), "--no-progress"], capture_output=True).returncode == 0
    pd.testing.assert_frame_equal(read(run_dir), read(clean))


def test_intervals_and_paired_distributions(tiny_run, tmp_path):

    from values_seg.statistics import CaseResamples, batched

    run_dir, _ = tiny_run
    results = pd.read_csv(run_dir / "results.csv")
    own = results["metric"] == "ace_reference"  # a Monte-Carlo interval of the task's own
    assert results.loc[~own, "ci_low"].notna().all() and results.loc[own, "ci_low"].notna().all()
    dice = results[results["metric"] == "dice"]
    assert ((dice["ci_low"] <= dice["value"]) & (dice["value"] <= dice["ci_high"])).all()
    stored = pd.read_parquet(run_dir / "bootstrap.parquet")
    assert len(stored) == (~own).sum() and {len(s) for s in stored["samples"]} == {1000}
    # the stored AURC distribution is the AURC of the same 1000 resamples of the test cases, redrawn here
    # from cases.csv: sorted case ids, stratified by i.i.d./OoD, statistics seed 0, for EVERY model
    cases = pd.read_csv(run_dir / "cases.csv")
    for model in ("deterministic", "ensemble"):
        c = cases[(cases["prediction_model"] == model) & (cases["measure"] == "predictive_entropy")
                  & (cases["aggregation"] == "patch") & (cases["split"] == "test")]
        per_case = c.drop_duplicates("case_id").sort_values("case_id")
        resamples = CaseResamples.draw(per_case["case_id"], per_case["ood"], 1000, seed=0)
        ood = per_case[per_case["ood"]]
        expected = batched.aurc(resamples.of(list(ood["case_id"])), 1 - ood["dice"].to_numpy(), -ood["score"].to_numpy())
        got = stored[(stored["prediction_model"] == model) & (stored["metric"] == "aurc") & (stored["split"] == "ood")
                     & (stored["measure"] == "predictive_entropy") & (stored["aggregation"] == "patch")]
        np.testing.assert_allclose(got["samples"].item(), expected, rtol=1e-6, atol=1e-7)
        row = results[(results["prediction_model"] == model) & (results["metric"] == "aurc")
                      & (results["split"] == "ood") & (results["measure"] == "predictive_entropy")
                      & (results["aggregation"] == "patch")]
        assert (row["ci_low"].item(), row["ci_high"].item()) == pytest.approx(tuple(np.percentile(expected, [2.5, 97.5])),
                                                                              rel=1e-5)
    # without the bootstrap: no distributions, no intervals but the task's own (nothing retrained)
    other = tmp_path / "plain"
    shared = shutil.copytree(run_dir / "cache", tmp_path / "shared_cache")  # not inside another run's directory
    cfg = load_config(base={**TINY, "cache_dir": str(shared), "statistics": {"n_resamples": 0}})
    summary = run_experiment(cfg, other, progress=False)
    assert summary.ok and summary.trained == 0
    plain = pd.read_csv(other / "results.csv")
    assert not (other / "bootstrap.parquet").exists()
    assert plain.loc[plain["metric"] != "ace_reference", "ci_low"].isna().all()
    pd.testing.assert_series_equal(plain["value"], results["value"])


def test_a_model_without_measures_is_left_out_before_any_training(tmp_path, caplog):
    """Issue 32 item 10: deterministic with only mutual_information, with ambiguity and calibration:
    it used to fail with KeyError: 'ncc' / 'calibration_bins' after every training; now it is
    left out with one line at the start, and the run succeeds."""
    config = {**TINY, "prediction_models": ["deterministic", {"name": "ensemble", "params": {"members": 2}}],
              "measures": ["mutual_information"], "aggregations": ["image"], "tasks": ["ambiguity", "calibration"]}
    with caplog.at_level("WARNING", logger="values_seg.runner"):
        summary = run_experiment(load_config(base=config), tmp_path / "run", progress=False)
    assert summary.ok, summary.failures
    left_out = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(left_out) == 1 and "'deterministic'" in left_out[0]
    assert "Not run (said at the start): " in summary.describe()
    assert "; prediction model 'deterministic' (deterministic) left out" in summary.describe()
    assert "no configured measure runs under it" not in summary.describe()  # said once, at the start
    table = read(tmp_path / "run")
    assert set(table["prediction_model"]) == {"ensemble"} and {"ambiguity", "calibration"} <= set(table["task"])


MUTATING = '''
from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation


def overwrites_samples(samples):
    """Overwrites the samples it is given."""
    samples.zero_()
    return samples[0, 0]


class ZeroesItsMap(Aggregation):
    """Zeroes the map it is given."""
    name = "zeroes_its_map"

    def __call__(self, umap):
        umap.zero_()
        return 0.0


class ZeroesValidationMaps(Aggregation):
    """Zeroes the validation maps it is fitted on."""
    name = "zeroes_validation_maps"

    def fit(self, maps, predictions):
        for umap in maps:
            umap.zero_()
        return self

    def __call__(self, umap):
        return float(umap.mean())


@hookimpl
def values_seg_measures():
    return [overwrites_samples]


@hookimpl
def values_seg_aggregations():
    return [ZeroesItsMap, ZeroesValidationMaps]
'''


def test_a_plugin_that_changes_its_inputs_is_named_and_the_builtin_rows_are_unchanged(tmp_path, monkeypatch):
    """Issue 32 item 3: a measure that overwrites its samples, an aggregation that zeroes its map
    and one whose fit zeroes the validation maps (fitted before the built-in threshold) are named in
    failures.csv; every built-in row equals a run without them."""
    (tmp_path / "acme_mutating.py").write_text(textwrap.dedent(MUTATING))
    monkeypatch.syspath_prepend(str(tmp_path))
    base = {**TINY, "cache_dir": str(tmp_path / "cache"), "prediction_models": ["deterministic"],
            "measures": ["predictive_entropy", "max_softmax"], "aggregations": ["image", "threshold"],
            "tasks": ["segmentation", "failure_detection", "calibration"]}
    clean = run_experiment(load_config(base=base), tmp_path / "clean", progress=False)
    assert clean.ok
    config = {**base, "plugins": ["acme_mutating"], "measures": ["overwrites_samples"] + base["measures"],
              "aggregations": ["zeroes_its_map", "zeroes_validation_maps"] + base["aggregations"]}
    summary = run_experiment(load_config(base=config), tmp_path / "plugin", progress=False)
    assert not summary.ok
    failures = pd.read_csv(tmp_path / "plugin" / "failures.csv")
    jobs = " ".join(failures["job"])
    assert "measure overwrites_samples" in jobs and "aggregation zeroes_its_map" in jobs
    assert "aggregation zeroes_validation_maps" in jobs
    assert failures["error"].str.contains("modified its input").all()
    plugin = read(tmp_path / "plugin")
    assert not {"overwrites_samples"} & set(plugin["measure"].dropna())
    assert not {"zeroes_its_map", "zeroes_validation_maps"} & set(plugin["aggregation"].dropna())
    pd.testing.assert_frame_equal(plugin, read(tmp_path / "clean"))
    dice = plugin[(plugin["task"] == "segmentation") & (plugin["metric"] == "dice")]["value"]
    assert len(dice) and (dice > 0).all()


def test_a_sweep_without_aggregations_scores_its_map_level_tasks(tmp_path):
    """No C3 listed: nothing is aggregated, and the tasks that read maps and quantities (Dice, the
    ambiguity NCC and GED) still score; the empty score table keeps its columns."""
    config = tiny_config(name="no_aggregation", datasets=[toy("1")], aggregations=[], tasks=["segmentation", "ambiguity"],
                         statistics={"n_resamples": 0})
    summary = run_experiment(load_config(base=config), tmp_path / "run", progress=False)
    assert summary.ok
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert {"dice", "ncc", "ged"} <= set(results["metric"])
