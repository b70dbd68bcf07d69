"""Experiment trackers (values_seg.runner.tracking, plugins/trackers): a tiny sweep logged to a real
MLflow file store and real TensorBoard event files, read back with MLflow's client and
TensorBoard's EventAccumulator; reruns log nothing; a failing tracker warns; a third-party tracker
registers like the built-ins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from values_seg.cli import main
from values_seg.config.loading import load_config
from values_seg.config.checks import ConfigError
from values_seg.engine import Checkpoints
from values_seg.storage.run_files import CHECKPOINTS, RESULTS_CSV
from values_seg.runner.run import Runner
from values_seg.config.checks import preflight
from values_seg.runner.tracking import metric_name
from values_seg.config.sweep import expand

from tiny import tiny_config, toy

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")

CONFIG = tiny_config(
    name="tracked", seeds=[0], executor="processes", workers=2,  # workers never talk to a tracker
    datasets=[toy("1")], recipe={"preset": "unet", "lr": 3.0e-3, "epochs": 3, "steps_per_epoch": 2},
    prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 2}}], aggregations=["threshold"],
    learning_curves={"dice_every": 2, "dice_cases": 2},
)

THIRD_PARTY = '''
import json
from values_seg import hookimpl
from values_seg.components.tracker import Tracker


class JsonLines(Tracker):
    name = "jsonlines"

    def __init__(self, path: str):
        self.path = path

    def open(self, sweep):
        self.sweep = sweep.key
        try:
            self.seen = {json.loads(l)["key"] for l in open(self.path)}
        except FileNotFoundError:
            self.seen = set()

    def has(self, record):
        return record.key in self.seen

    def log(self, record):
        with open(self.path, "a") as f:
            f.write(json.dumps({"key": record.key, "kind": record.kind, "sweep": self.sweep}) + "\\n")


@hookimpl
def values_seg_trackers():
    return [JsonLines]
'''


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The tiny sweep run twice with MLflow, TensorBoard and a third-party tracker; the run
    counts after the first and the second run."""
    root = tmp_path_factory.mktemp("tracked")
    (root / "jsonlines_tracker.py").write_text(THIRD_PARTY)
    sys.path.insert(0, str(root))
    uri = (root / "mlruns").as_uri()
    overrides = [f"tracking.mlflow.uri={uri}", f"tracking.tensorboard.dir={root / 'tb'}",
                 f"tracking.jsonlines.path={root / 'log.jsonl'}", "plugins=[jsonlines_tracker]"]
    cfg = load_config(base=CONFIG, overrides=overrides)
    Runner(cfg, root / "run", progress=False).run()
    first = _runs(uri)
    events = sorted(str(p) for p in (root / "tb").rglob("events.out.tfevents*"))
    lines = (root / "log.jsonl").read_text().splitlines()
    summary = Runner(load_config(base=CONFIG, overrides=overrides), root / "run", progress=False).run()
    yield {"root": root, "uri": uri, "cfg": cfg, "first": first, "second": _runs(uri), "events": events,
           "events_after": sorted(str(p) for p in (root / "tb").rglob("events.out.tfevents*")), "lines": lines,
           "lines_after": (root / "log.jsonl").read_text().splitlines(), "summary": summary}
    sys.path.remove(str(root))


def _runs(uri: str) -> pd.DataFrame:
    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=["tracked"])


def _sidecars(sweep) -> dict:
    store = Checkpoints(sweep["root"] / "run" / "cache" / CHECKPOINTS)
    return {s.key(): store.meta(s) for c in expand(sweep["cfg"]) for s in c.specs}


def test_one_run_per_training_and_combination_nested_under_the_sweep(sweep):
    runs = sweep["first"]
    parent = runs[runs["tags.values_seg.kind"] == "sweep"]
    assert len(parent) == 1
    children = runs[runs["tags.values_seg.kind"] != "sweep"]
    assert set(children["tags.mlflow.parentRunId"]) == {parent.iloc[0]["run_id"]}
    combos = expand(sweep["cfg"])
    trainings = _sidecars(sweep)
    assert sorted(children[children["tags.values_seg.kind"] == "combination"]["tags.mlflow.runName"]) == \
        sorted(c.name for c in combos)
    assert sorted(children[children["tags.values_seg.kind"] == "training"]["tags.checkpoint_key"]) == sorted(trainings)
    assert len(trainings) == 2  # deterministic seed 0 is the ensemble's first member: one training


def test_combination_metrics_equal_results_csv(sweep):
    runs = sweep["first"]
    results = pd.read_csv(sweep["root"] / "run" / RESULTS_CSV)
    client = mlflow.MlflowClient(sweep["uri"])
    checked = 0
    for _, run in runs[runs["tags.values_seg.kind"] == "combination"].iterrows():
        model = run["params.prediction_model"]
        logged = client.get_run(run["run_id"]).data.metrics
        rows = results[results["prediction_model"] == model]
        assert len(logged) == 3 * len(rows)  # value and interval of every row
        for row in rows.itertuples(index=False):
            name = metric_name(row)
            assert logged[name] == pytest.approx(row.value, rel=1e-12)
            assert logged[name + "_ci_low"] == pytest.approx(row.ci_low, rel=1e-12)
            assert logged[name + "_ci_high"] == pytest.approx(row.ci_high, rel=1e-12)
            checked += 1
    assert checked == len(results) > 0


def test_training_curves_equal_the_sidecars_in_mlflow_and_tensorboard(sweep):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = sweep["first"]
    client = mlflow.MlflowClient(sweep["uri"])
    sidecars = _sidecars(sweep)
    for _, run in runs[runs["tags.values_seg.kind"] == "training"].iterrows():
        curve = sidecars[run["tags.checkpoint_key"]]["curve"]
        history = sorted((m.step, m.value) for m in client.get_metric_history(run["run_id"], "loss"))
        assert history == [(e, pytest.approx(v, rel=1e-12)) for e, v in enumerate(curve["epoch_loss"], start=1)]
        dice = sorted((m.step, m.value) for m in client.get_metric_history(run["run_id"], "val_dice"))
        assert dice == [(e, pytest.approx(v, rel=1e-12)) for e, v in curve["val_dice"]] and len(dice) == 2
    folders = {Path(p).parent for p in sweep["events"]}
    training = [f for f in folders if f.parent.name == "training"]
    assert len(training) == len(sidecars)
    for folder in training:
        acc = EventAccumulator(str(folder))
        acc.Reload()
        curve = sidecars[(folder / "values_seg_key").read_text()]["curve"]
        loss = [(e.step, e.value) for e in acc.Scalars("loss")]
        # event files store float32
        assert loss == [(e, pytest.approx(v, rel=1e-6)) for e, v in enumerate(curve["epoch_loss"], start=1)]


def test_report_files_attached_to_the_sweep(sweep):
    runs = sweep["first"]
    parent = runs[runs["tags.values_seg.kind"] == "sweep"].iloc[0]
    client = mlflow.MlflowClient(sweep["uri"])
    names = {a.path for a in client.list_artifacts(parent["run_id"], "report")}
    assert {"report/report.md", "report/results.csv", "report/figures"} <= names


def test_a_rerun_logs_nothing_new(sweep):
    assert sweep["summary"].trained == 0 and sweep["summary"].ok
    assert sorted(sweep["second"]["run_id"]) == sorted(sweep["first"]["run_id"])
    assert sweep["events_after"] == sweep["events"]
    assert sweep["lines_after"] == sweep["lines"]


def test_a_third_party_tracker_gets_every_record(sweep):
    records = [json.loads(line) for line in sweep["lines"]]
    kinds = sorted(r["kind"] for r in records)
    assert kinds == ["combination"] * 2 + ["training"] * 2
    assert len({r["key"] for r in records}) == 4


def test_an_unreachable_tracker_warns_and_the_run_succeeds(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({**CONFIG, "prediction_models": ["deterministic"], "executor": "local"}))
    code = main(["run", str(cfg), "tracking.mlflow.uri=http://127.0.0.1:9", "--out", str(tmp_path / "run"),
                 "--no-progress"])
    assert code == 0
    assert (tmp_path / "run" / RESULTS_CSV).exists()
    assert "tracker mlflow failed" in capsys.readouterr().err


REMOTE_MEASURE = '''
from values_seg import component, hookimpl


@component(uncertainty_types={"deterministic": "PU"})
def remote_measure(samples, *, source: str = ""):
    """Fails naming its source, as a download with credentials in its URL would."""
    raise RuntimeError(f"cannot download {source}")


@hookimpl
def values_seg_measures():
    return [remote_measure]
'''


def test_credentials_in_urls_are_in_no_file_and_no_message(tmp_path):
    """MLflow's ``http://user:password@host`` and a token in the query, in the tracking URI and in a
    component's parameter that fails naming it: every file under the run directory (config.yaml,
    components.json, failures.csv, the report, the cache) and everything printed shows them as
    ``***``; the tracker itself gets the real URI (noted outside the run directory). ``values-seg
    run`` in a process of its own: the plugin module stays out of this one."""
    uri = "http://alice:S3cretPassw0rd@127.0.0.1:9/?token=T0kenValue42"
    source = "https://bob:Hunter2Hunter2@data.example/weights?sig=S1gnatureValue"
    secrets = ("S3cretPassw0rd", "T0kenValue42", "Hunter2Hunter2", "S1gnatureValue")
    (tmp_path / "remote_plugin.py").write_text(REMOTE_MEASURE)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({**CONFIG, "prediction_models": ["deterministic"], "executor": "local",
                               "plugins": ["remote_plugin"], "tasks": ["segmentation", "failure_detection"],
                               "measures": ["predictive_entropy", {"name": "remote_measure", "params": {"source": source}}],
                               "tracking": {"mlflow": {"uri": uri}}}))
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from values_seg_plugins.trackers.mlflow_tracker import MLflowTracker
        opened = MLflowTracker.open
        MLflowTracker.open = lambda self, sweep: Path("given_uri").write_text(self.uri) and opened(self, sweep)
        from values_seg.cli import main
        sys.exit(main(["run", "c.yaml", "--out", "run", "--no-progress"]))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)  # a hang guard
    assert done.returncode == 1, done.stdout + done.stderr  # the measure failed
    assert (tmp_path / "given_uri").read_text() == uri  # the tracker got the real URI
    assert "tracker mlflow failed" in done.stderr and "http://***@127.0.0.1:9/?token=***" in done.stderr
    run = tmp_path / "run"
    assert "uri: http://***@127.0.0.1:9/?token=***" in (run / "config.yaml").read_text()
    assert "https://***@data.example/weights?sig=***" in (run / "components.json").read_text()
    assert "cannot download https://***@data.example/weights?sig=***" in (run / "failures.csv").read_text()
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) > 20 and (run / "report.md") in files
    leaks = {p.relative_to(run).as_posix(): s for p in files for s in secrets if s.encode() in p.read_bytes()}
    assert leaks == {}
    assert not [s for s in secrets if s in done.stdout + done.stderr]


def test_unknown_tracker_and_bad_parameter_fail_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="tracking.wandb"):
        preflight(load_config(base=CONFIG, overrides=["tracking.wandb.project=x"]))
    with pytest.raises(ConfigError, match="tracking.tensorboard"):
        preflight(load_config(base=CONFIG, overrides=["tracking.tensorboard.folder=x"]))


def test_a_missing_extra_is_named_before_any_work(tmp_path):
    """mlflow made unimportable in a fresh interpreter: the run fails naming the extra, writing nothing."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps(CONFIG))
    script = textwrap.dedent(f"""
        import sys
        sys.modules["mlflow"] = None  # as if not installed
        from values_seg.cli import main
        sys.exit(main(["run", {str(cfg)!r}, "tracking.mlflow.uri=file:./x", "--out", {str(tmp_path / 'run')!r}]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "values-seg[mlflow]" in done.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "x").exists()


def test_curves_parquet_holds_the_training_curves_of_every_combination(sweep):
    curves = pd.read_parquet(sweep["root"] / "run" / "curves.parquet")
    training = curves[curves["curve"] == "training"]
    sidecars = _sidecars(sweep)
    for combo in expand(sweep["cfg"]):
        rows = training[training["prediction_model"] == combo.context["prediction_model"]]
        assert sorted(set(rows["spec_key"])) == sorted({s.key() for s in combo.specs})
        for member, spec in enumerate(combo.specs):
            mine = rows[rows["member"] == member].sort_values("epoch")
            curve = sidecars[spec.key()]["curve"]
            assert mine["loss"].tolist() == curve["epoch_loss"]
            measured = mine.dropna(subset=["val_dice"])
            assert list(zip(measured["epoch"], measured["val_dice"])) == [tuple(p) for p in curve["val_dice"]]
