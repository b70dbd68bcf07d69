"""MLflow tracker (``tracking.mlflow``; extra ``values-seg[mlflow]``): the sweep is a parent run of
the experiment named after the run (or ``experiment``); each training and combination is a run
nested under it (tag ``mlflow.parentRunId``), found again by its tag ``values_seg.key``."""

from __future__ import annotations

import os
import time
from pathlib import Path

from values_seg import hookimpl
from values_seg.components.tracker import Record, Tracker

KEY_TAG = "values_seg.key"


class MLflowTracker(Tracker):
    """``uri``: a tracking URI (``file:./mlruns``, ``http://host:5000``; default: MLflow's own,
    ``$MLFLOW_TRACKING_URI``; credentials: ``$MLFLOW_TRACKING_USERNAME`` / ``$MLFLOW_TRACKING_PASSWORD``
    or ``$MLFLOW_TRACKING_TOKEN``); ``experiment``: the experiment's name (default: the run's name)."""

    name = "mlflow"
    extra = "values-seg[mlflow]"

    def __init__(self, uri: str | None = None, experiment: str | None = None):
        self.uri, self.experiment = uri, experiment
        self.client = self.parent = self.experiment_id = None
        self.logged: set[str] = set()

    def check(self) -> None:
        import mlflow  # noqa: F401

    def open(self, sweep: Record) -> None:
        # an unreachable server: fail after a few seconds rather than MLflow's minutes of retries
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        if self.uri and "://" not in self.uri.replace("file://", ""):  # a file store, asked for by name
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses it otherwise
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.uri)
        name = self.experiment or sweep.name
        found = self.client.get_experiment_by_name(name)
        self.experiment_id = found.experiment_id if found else self.client.create_experiment(
            name, tags={"mlflow.experimentKind": "custom_model_development"})  # MLflow 3's UI: training runs, not traces
        parents = self._search(f"tags.`{KEY_TAG}` = '{sweep.key}'")
        if parents:
            self.parent = parents[0].info.run_id
            self.client.update_run(self.parent, status="RUNNING")
        else:
            self.parent = self.client.create_run(self.experiment_id, run_name=sweep.name,
                                                 tags={KEY_TAG: sweep.key, "values_seg.kind": sweep.kind}).info.run_id
            self._batch(self.parent, sweep)
        self.logged = {r.data.tags.get(KEY_TAG) for r in self._search(f"tags.`mlflow.parentRunId` = '{self.parent}'")}

    def has(self, record: Record) -> bool:
        return record.key in self.logged

    def log(self, record: Record) -> None:
        run = self.client.create_run(self.experiment_id, run_name=record.name[:250],
                                     tags={**record.tags, KEY_TAG: record.key, "mlflow.parentRunId": self.parent})
        self._batch(run.info.run_id, record)
        self.client.set_terminated(run.info.run_id)
        self.logged.add(record.key)

    def attach(self, files: list[Path], folder: str) -> None:
        for f in files:
            self.client.log_artifact(self.parent, str(f), artifact_path=folder)

    def close(self) -> None:
        if self.client is not None and self.parent is not None:
            self.client.set_terminated(self.parent)

    def _search(self, query: str) -> list:
        out, token = [], None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=query, max_results=1000, page_token=token)
            out += list(page)
            token = page.token
            if not token:
                return out

    def _batch(self, run_id: str, record: Record) -> None:
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        params = [Param(k[:250], v[:6000]) for k, v in record.params.items()]
        metrics = [Metric(k, v, now, 0) for k, v in record.metrics.items()]
        metrics += [Metric(k, v, now, step) for k, points in record.series.items() for step, v in points]
        for i in range(0, len(params), 100):  # MLflow's limits per batch: 100 params, 1000 metrics
            self.client.log_batch(run_id, params=params[i:i + 100])
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i:i + 1000])


@hookimpl
def values_seg_trackers():
    return [MLflowTracker]
