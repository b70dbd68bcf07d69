"""Reliability (one test per problem found by trying the runner as a demanding user would):
caches keyed by code, identical numbers on every executor, failures contained per component,
protected evaluation caches, guarded output paths, early validation, process hygiene."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml

from values_seg.config.checks import ConfigError
from values_seg.config.loading import load_config
from values_seg.config.checks import preflight

from tiny import tiny_config

TINY = tiny_config(name="rel", measures=["predictive_entropy", "max_softmax"],
                   aggregations=["image", {"name": "patch", "params": {"size": 5}}],
                   tasks=["segmentation", "ood_detection", "failure_detection", "calibration"],
                   evaluation={"montage_cases": 1})

PLUGIN = '''
import torch
from values_seg import component, hookimpl

@component(uncertainty_types={{"deterministic": "PU"}})
def plugin_measure(samples: torch.Tensor) -> torch.Tensor:
    """A plugin measure under test."""
    {body}

@hookimpl
def values_seg_measures():
    return [plugin_measure]
'''


def _python_path(cwd: Path) -> str:
    """``cwd`` (the tests' plugins) first, then the test process's own import path."""
    return os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH")) if p)


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=_python_path(cwd), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "values_seg.cli", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=900)


def _write_config(work: Path, **changes) -> Path:
    path = work / "rel.yaml"
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


def _with_plugin(work: Path, body: str, module: str = "rel_plugin") -> dict:
    (work / f"{module}.py").write_text(PLUGIN.format(body=body))
    return {"plugins": [module], "measures": TINY["measures"] + ["plugin_measure"]}


def _results(run: Path) -> pd.DataFrame:
    return pd.read_csv(run / "results.csv")


# 1. ------------------------------------------------------------------------------ stale caches
def test_changing_a_measures_code_recomputes_its_evaluation(tmp_path):
    _write_config(tmp_path, **_with_plugin(tmp_path, "return samples[0, 1]"))
    assert _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=tmp_path).returncode == 0
    before = _results(tmp_path / "run")
    _with_plugin(tmp_path, "return 1 - samples[0, 1]")  # a different measure, same config
    assert _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=tmp_path).returncode == 0
    after = _results(tmp_path / "run")
    mine = lambda df: df[df["measure"] == "plugin_measure"].set_index(["task", "metric", "split", "aggregation"])["value"]  # noqa: E731
    auroc = lambda df: mine(df).loc[("ood_detection", "auroc", "all", "image")]  # noqa: E731
    assert auroc(after) == pytest.approx(1 - auroc(before))  # the reversed score: recomputed, not replayed
    builtin = lambda df: df[df["measure"] == "predictive_entropy"].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(builtin(before), builtin(after))


def test_fixing_a_faulty_plugin_does_not_replay_its_failure(tmp_path):
    _write_config(tmp_path, **_with_plugin(tmp_path, "raise RuntimeError('bug in plugin_measure')"))
    first = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=tmp_path)
    assert first.returncode == 1 and "bug in plugin_measure" in (tmp_path / "run" / "failures.csv").read_text()
    _with_plugin(tmp_path, "return samples[0, 1] * (1 - samples[0, 1])")
    second = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert not (tmp_path / "run" / "failures.csv").exists()
    assert "plugin_measure" in set(_results(tmp_path / "run")["measure"])


# 2. ------------------------------------------------------------------------ executors agree
def test_the_thread_count_is_part_of_the_training_key():
    from values_seg.engine import TrainingSpec

    spec = TrainingSpec.create("toy", "unet", dataset_params={"size": 32}, threads=1)
    assert spec.replace(threads=2).key() != spec.key()
    cfg = load_config(base={**TINY, "threads": 2})
    from values_seg.config.sweep import expand

    assert {s.threads for c in expand(cfg) for s in c.specs} == {2}


def test_local_and_processes_give_byte_identical_results(tmp_path):
    _write_config(tmp_path, prediction_models=["deterministic", {"name": "test_time_dropout", "params": {"num_samples": 3}}])
    for executor in ("local", "processes"):
        out = _cli("run", "rel.yaml", "--out", executor, "--executor", executor, "--no-progress", cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "local" / "results.csv").read_bytes() == (tmp_path / "processes" / "results.csv").read_bytes()


# 3. ------------------------------------------------------------------------- containment
@pytest.fixture(scope="module")
def faulty_runs(tmp_path_factory):
    """A measure that fails on one test case (not the first validation case), and an aggregation
    that returns NaN there, beside the built-ins."""
    work = tmp_path_factory.mktemp("faulty")
    (work / "faulty.py").write_text(textwrap.dedent('''
        import torch
        from values_seg import component, hookimpl
        from values_seg.components.aggregation import Aggregation, as_map

        CALLS = {"n": 0}

        @component(uncertainty_types={"deterministic": "PU"})
        def flaky(samples):
            """Fails on the 20th case it sees."""
            CALLS["n"] += 1
            if CALLS["n"] == 20:
                raise RuntimeError("flaky failed on its 20th case")
            return samples[0, 1] * (1 - samples[0, 1])

        @component(uncertainty_types={"deterministic": "PU"})
        def nan_map(samples):
            """NaN on the 25th case it sees."""
            CALLS["m"] = CALLS.get("m", 0) + 1
            return samples[0, 1] * (float("nan") if CALLS["m"] == 25 else 1.0)

        class NanSum(Aggregation):
            """Sum, but NaN for a map whose sum exceeds a value."""
            name = "nan_sum"
            def __call__(self, umap, prediction=None):
                s = float(as_map(umap).sum())
                return float("nan") if s > 30 else s

        @hookimpl
        def values_seg_measures():
            return [flaky, nan_map]

        @hookimpl
        def values_seg_aggregations():
            return [NanSum]
    '''))
    _write_config(work, plugins=["faulty"], measures=["predictive_entropy", "max_softmax", "flaky", "nan_map"],
                  aggregations=["image", "nan_sum"])
    out = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=work)
    return work, out


def test_a_failing_measure_loses_only_its_own_rows(faulty_runs):
    work, out = faulty_runs
    assert out.returncode == 1
    results = _results(work / "run")
    for measure in ("predictive_entropy", "max_softmax"):
        rows = results[results["measure"] == measure]
        assert set(rows["task"]) == {"ood_detection", "failure_detection", "calibration"}
        assert set(rows["aggregation"].dropna()) == {"image"} | (set() if measure == "max_softmax" else set())
    assert not {"flaky", "nan_map"} & set(results["measure"])
    failures = pd.read_csv(work / "run" / "failures.csv")
    jobs = " ".join(failures["job"])
    assert "measure flaky" in jobs and "measure nan_map" in jobs
    errors = " ".join(failures["error"])
    assert "flaky failed on its 20th case" in errors and "returned 1024 NaN or infinite value(s)" in errors
    assert "FAILED" in out.stdout and "measure flaky" in out.stdout


def test_a_nan_aggregation_loses_only_its_own_rows_and_is_named(faulty_runs):
    work, _ = faulty_runs
    results = _results(work / "run")
    image = results[(results["aggregation"] == "image") & (results["measure"] == "predictive_entropy")]
    assert {"auroc", "aurc", "eaurc"} <= set(image["metric"])
    failures = pd.read_csv(work / "run" / "failures.csv")
    named = failures[failures["job"].str.contains("aggregation nan_sum")]
    assert not named.empty and named["error"].str.contains("returned nan").all()


# 4. ----------------------------------------------------------------- evaluation-cache files
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("cache")
    _write_config(work)
    out = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=work)
    assert out.returncode == 0, out.stdout + out.stderr
    return work


def _evaluation_files(work: Path, name: str) -> list[Path]:
    return sorted((work / "run" / "cache" / "evaluations").glob(f"*/{name}"))


@pytest.mark.parametrize("name, damage", [
    ("fitted.json", lambda p: p.write_bytes(p.read_bytes()[:20])),  # truncated
    ("scores.parquet", lambda p: p.write_bytes(p.read_bytes()[:-100])),  # truncated
    ("scores.parquet", lambda p: p.write_bytes(p.read_bytes()[:200] + bytes([p.read_bytes()[200] ^ 1])
                                               + p.read_bytes()[201:])),  # one flipped bit, same size
    ("calibration_bins.bins.json", lambda p: p.write_text(p.read_text().replace("1", "2", 1))),  # edited (a quantity's own file)
])
def test_a_damaged_evaluation_file_is_found_set_aside_and_redone(finished_run, name, damage, tmp_path):
    import shutil

    work = tmp_path / "w"
    shutil.copytree(finished_run, work)
    before = (work / "run" / "results.csv").read_bytes()
    for path in _evaluation_files(work, name):
        damage(path)
    out = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=work)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "corrupt evaluation" in out.stderr and name in out.stderr or "set aside" in out.stderr
    assert (work / "run" / "results.csv").read_bytes() == before
    assert list((work / "run" / "cache" / "evaluations").glob("*.corrupt"))


def test_a_torn_results_csv_does_not_reach_the_report(finished_run, tmp_path):
    import shutil

    work = tmp_path / "w"
    shutil.copytree(finished_run, work)
    csv = work / "run" / "results.csv"
    csv.write_bytes(csv.read_bytes()[:-15])  # a torn last row
    assert _cli("report", "run", cwd=work).returncode == 0
    report = (work / "run" / "report.md").read_text()
    assert "`results.csv` changed after the run wrote it" in report
    rows = int(report.split("**Result rows** | ")[1].split(" ")[0])
    assert rows == len(pd.read_parquet(work / "run" / "results.parquet"))


# 5. --------------------------------------------------------------------------- output paths
def test_out_into_a_folder_of_user_files_is_refused_and_nothing_is_touched(tmp_path):
    _write_config(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.csv").write_text("my,own\n1,2\n")
    (mine / "notes.txt").write_text("keep me")
    out = _cli("run", "rel.yaml", "--out", "mine", "--no-progress", cwd=tmp_path)
    assert out.returncode == 2 and "refusing to write into" in out.stderr and "notes.txt" in out.stderr
    assert (mine / "results.csv").read_text() == "my,own\n1,2\n" and sorted(p.name for p in mine.iterdir()) == [
        "notes.txt", "results.csv"]


def test_out_naming_a_file_is_a_clear_error(tmp_path):
    _write_config(tmp_path)
    (tmp_path / "afile").write_text("x")
    out = _cli("run", "rel.yaml", "--out", "afile", "--no-progress", cwd=tmp_path)
    assert out.returncode == 2 and "is a file" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "a/b", ".."])
def test_names_that_escape_the_runs_folder_are_refused(name):
    with pytest.raises(ConfigError, match="config name: .*plain folder name"):
        preflight(load_config(base={**TINY, "name": name}))


def test_a_rebuilt_report_deletes_only_what_values_seg_wrote(finished_run, tmp_path):
    import shutil

    work = tmp_path / "w"
    shutil.copytree(finished_run, work)
    mine = work / "run" / "figures" / "fig3_my_own_figure.png"
    mine.write_bytes(b"not values-seg's")
    ours = sorted((work / "run" / "figures").glob("risk_coverage_*.png"))
    assert ours
    assert _cli("report", "run", cwd=work).returncode == 0
    assert mine.read_bytes() == b"not values-seg's" and all(p.exists() for p in ours)


# 6. ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize("override, message", [
    (["recipe.lr=-0.1"], r"recipe: lr must be > 0"),
    (["device=gpu"], r"device: .*valid: auto, cpu, cuda"),
    (["datasets.0.params.dims=4"], r"datasets \(toy_2\).*dims"),
    (["datasets.0.params.size=0"], r"datasets \(toy_2\).*size"),
    (["datasets.0.params.train_cases=0"], r"datasets \(toy_2\).*train"),
    (["backbones.0.params.base_width=0"], r"backbones \(unet\): cannot build it.*base_width"),
    (["evaluation.n_bins=0"], r"evaluation.n_bins: must lie in \[1, 10000\]"),
    (["evaluation.prediction_dtype=int8"], r"evaluation.prediction_dtype: must be float16 or float32"),
    (["recipe.epochs=0"], r"recipe: epochs must be in \[1, 100000\]"),
    (["threads=0"], r"threads: must lie in \[1, 1024\]"),
    (["rules.exclude=[{aggregaton: image}]"], r"rules.exclude.0.aggregaton: unknown field.*did you mean 'aggregation'"),
    (["rules.exclude=[{aggregation: imag}]"], r"rules.exclude.0.aggregation: 'imag' is not one of.*did you mean 'image'"),
])
def test_every_config_value_is_validated_before_any_work(override, message):
    with pytest.raises(ConfigError, match=message):
        preflight(load_config(base=TINY, overrides=override))


def test_the_public_api_validates_shapes_and_classes():
    import numpy as np
    import torch

    from values_seg import metrics, registry
    from values_seg_plugins.aggregations.patch import PatchAggregation

    with pytest.raises(ValueError, match="at least 2 classes"):
        registry.create("measure", "predictive_entropy")(torch.ones(3, 1, 8, 8))
    with pytest.raises(ValueError, match=r"one value per case \(1-D\), got shape \(2, 2\)"):
        metrics.auroc(np.array([[0, 1], [1, 0]]), np.arange(4.0))
    with pytest.raises(ValueError, match="stacked on the first axis"):
        metrics.ged(np.zeros((8, 8), int), np.zeros((8, 8), int))
    with pytest.raises(ValueError, match="stacked on the first axis"):
        metrics.rater_variance(np.zeros((8, 8), int))
    with pytest.raises(ValueError, match="2D or 3D map"):
        PatchAggregation()(torch.rand(20))
    with pytest.raises(ValueError, match="parameter 'size' must be an int, got 'ten'"):
        PatchAggregation(size="ten")


# 7. ---------------------------------------------------------------------- process hygiene
def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_workers_die_with_a_killed_main_process(tmp_path, wait_until):
    _write_config(tmp_path, recipe={"epochs": 40}, executor="processes", workers=2,
                  prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 3}}])
    env = dict(os.environ, PYTHONPATH=_python_path(tmp_path), OMP_NUM_THREADS="1")
    main = subprocess.Popen([sys.executable, "-m", "values_seg.cli", "run", "rel.yaml", "--out", "run", "--no-progress"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()

    def two_workers() -> bool:
        workers.update(c for c in _children(main.pid) if "spawn_main" in _cmdline(c))
        return len(workers) >= 2 or main.poll() is not None

    wait_until(two_workers, "the worker processes started", every=0.5)
    assert len(workers) >= 2, "the worker processes did not start"
    os.kill(main.pid, signal.SIGKILL)
    main.wait()
    alive = lambda: [w for w in workers if Path(f"/proc/{w}").exists() and "Z" not in _state(w)]  # noqa: E731
    wait_until(lambda: not alive(), f"workers {alive()} to end with their killed parent", every=0.3)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="ignore")
    except OSError:  # ended meanwhile
        return ""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "X"


# 8. ------------------------------------------------------------------ weights that cannot be used
def test_weights_made_non_finite_by_the_last_update_fail_that_training_alone(tmp_path):
    """The SSN's one RMSprop step at lr 1e38 overflows its weights after a finite loss: it was saved
    as trained, and every case of its evaluation was left out. Now that training fails, named with
    its first non-finite tensor, and the deterministic model beside it is scored."""
    _write_config(tmp_path, recipe={"epochs": 1, "steps_per_epoch": 1}, measures=["predictive_entropy"],
                  prediction_models=["deterministic", {"name": "ssn", "params": {"optimizer": "rmsprop", "lr": 1e38}}])
    out = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    failures = pd.read_csv(tmp_path / "run" / "failures.csv")
    train = failures[failures["stage"] == "train"]
    assert len(train) == 1 and "/ssn [" in train["error"].iloc[0]
    assert "weights became non-finite after step 1, first in 'backbone." in train["error"].iloc[0]
    assert list(failures[failures["stage"] != "train"]["error"]) == ["skipped: a training it needs failed"]
    assert set(_results(tmp_path / "run")["prediction_model"]) == {"deterministic"}
    checkpoints = list((tmp_path / "run" / "cache" / "checkpoints").glob("*.pt"))
    assert len(checkpoints) == 1  # the deterministic model's only: nothing non-finite is kept as trained


def test_a_checkpoint_of_another_architecture_is_set_aside_and_retrained(tmp_path):
    """A checkpoint of a wider U-Net under this spec's key, its sidecar matching its bytes, failed
    every run with torch's "size mismatch" for each tensor. Now it is set aside with one warning
    naming the file and what differs, retrained, and the run completes."""
    import torch

    from values_seg import registry
    from values_seg.engine import Checkpoints, ensure_trained
    from values_seg.engine.networks import arch_info
    from values_seg.storage.run_directory import claim_cache
    from values_seg.config.sweep import expand, unique_training_specs

    # the deterministic model and the ensemble of seed 0 both predict with seed 0's training
    _write_config(tmp_path, measures=["predictive_entropy"], aggregations=["image"], tasks=["segmentation"],
                  cache_dir="cache", prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 2}}])
    spec = next(s for s in unique_training_specs(expand(load_config(tmp_path / "rel.yaml"))) if s.seed == 0)
    claim_cache(tmp_path / "cache", tmp_path / "run")
    store = Checkpoints(tmp_path / "cache" / "checkpoints")
    arch = arch_info(spec.dataset.create())
    wider = registry.get("backbone", "unet").obj(2, 1, arch["num_classes"], dropout=0.0, base_width=8)
    store.save(spec, wider.state_dict(), arch)  # forged: the spec's key, its own sidecar
    out = _cli("run", "rel.yaml", "--out", "run", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    path = store.path(spec)
    notices = [line for line in out.stderr.splitlines() if "corrupt" in line]
    assert len(notices) == 1 and f"corrupt checkpoint {path}: it does not fit spec" in notices[0], out.stderr
    assert "has shape (8, 1, 3, 3), the network's (4, 1, 3, 3)" in notices[0]
    assert "size mismatch" not in out.stderr
    assert path.with_name(path.name + ".corrupt").exists()
    genuine = Checkpoints(tmp_path / "genuine")
    ensure_trained([spec], genuine, device="cpu", progress=False)
    retrained, expected = store.load(spec)["state_dict"], genuine.load(spec)["state_dict"]
    assert retrained.keys() == expected.keys() and all(torch.equal(retrained[k], expected[k]) for k in expected)
    assert set(_results(tmp_path / "run")["prediction_model"]) == {"deterministic", "ensemble"}
