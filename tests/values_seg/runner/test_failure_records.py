"""``failures.csv`` and the report describe the last run of the command: a failure that is fixed
leaves no record behind; a failed component is one line in the report (what, on which case, why),
its traceback in ``failures.csv``. Through ``values-seg run`` in this process, as a user runs it."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml

from values_seg.cli import main

from tiny import tiny_config, toy

TINY = tiny_config(name="records", datasets=[toy("1", train_cases=4)], device="cpu", executor="local",
                   tasks=["segmentation", "failure_detection"], statistics={"n_resamples": 0})


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the module's runs: the training is done once."""
    return tmp_path_factory.mktemp("records") / "cache"


def _config(tmp_path: Path, cache: Path, **changes) -> list[str]:
    config = tmp_path / "records.yaml"
    config.write_text(yaml.safe_dump({**TINY, "cache_dir": str(cache), **changes}))
    return ["run", str(config), "--out", str(tmp_path / "run"), "--no-progress"]


def _run(tmp_path: Path, cache: Path, **changes) -> int:
    return main(_config(tmp_path, cache, **changes))


def test_a_report_that_failed_on_a_full_disk_leaves_no_failure_once_it_is_built(tmp_path, cache, monkeypatch,
                                                                                 capsys):
    """The disk fills while the report is drawn (exit 1, the failure recorded); space freed, the same
    command builds the report, exits 0, and neither ``failures.csv`` nor the report still says a job
    failed (before, the reused tables kept the old ``failures.csv`` and the new report read it)."""
    from values_seg import report

    build, calls = report.build_report, []

    def full_once(run_dir, **kwargs):
        calls.append(run_dir)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device", str(Path(run_dir) / "figures" / "ranks.png"))
        return build(run_dir, **kwargs)

    monkeypatch.setattr(report, "build_report", full_once)
    run = tmp_path / "run"
    assert _run(tmp_path, cache) == 1
    failures = pd.read_csv(run / "failures.csv")
    assert list(failures["stage"]) == ["report"] and "No space left on device" in failures["error"][0]
    assert "1 job(s) FAILED (stages: report)" in capsys.readouterr().out

    assert _run(tmp_path, cache) == 0  # space freed: the same command
    assert len(calls) == 2  # the report was built this time
    assert not (run / "failures.csv").exists()
    text = (run / "report.md").read_text()
    assert "job(s) failed" not in text and "No failed jobs" in text
    assert _run(tmp_path, cache) == 0 and len(calls) == 2  # nothing changed since: the report is kept


FLAKY = '''
import torch
from values_seg import component, hookimpl

CALLS = {"n": 0}


@component(uncertainty_types={"deterministic": "PU"})
def flaky(samples: torch.Tensor) -> torch.Tensor:
    """Raises on the 7th case it sees (a test case: the 4 validation cases come first)."""
    CALLS["n"] += 1
    if CALLS["n"] == 7:
        raise RuntimeError(f"flaky cannot read {__file__}")
    return samples[0, 1] * (1 - samples[0, 1])


@hookimpl
def values_seg_measures():
    return [flaky]
'''


def test_a_failed_measure_is_one_line_in_the_report_and_its_traceback_in_failures_csv(tmp_path, cache):
    """The report names the component, its kind, the case and the exception (its last line, not the
    head of a traceback), without the machine's paths; ``failures.csv`` keeps the whole traceback.
    ``values-seg run`` in a process of its own: the plugin module stays out of this one."""
    (tmp_path / "flaky_plugin.py").write_text(textwrap.dedent(FLAKY))
    argv = _config(tmp_path, cache, plugins=["flaky_plugin"], measures=["predictive_entropy", "flaky"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "values_seg.cli", *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)  # a hang guard
    assert done.returncode == 1, done.stdout + done.stderr
    run = tmp_path / "run"
    failures = pd.read_csv(run / "failures.csv")
    assert failures["error"].str.contains("Traceback (most recent call last)", regex=False).all()
    assert str(tmp_path) in failures["error"][0]  # the full record, for whoever debugs it

    text = (run / "report.md").read_text()
    section = text[text.index("job(s) failed"):]
    section = " ".join(section[:section.index("\n## ")].split())  # the failures' list, its lines unwrapped
    line = re.search(r"flaky \(measure\) on case toy1_test_\d{4}: RuntimeError: flaky cannot read …/flaky_plugin\.py",
                     section)
    assert line, section
    assert "Traceback" not in section and 'File "' not in section and str(tmp_path) not in section
    assert f"evaluate: toy_1/unet/deterministic/seed0 measure flaky: {line.group(0)}" in done.stdout
