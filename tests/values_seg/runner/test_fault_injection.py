"""Fault injection: ``kill -9`` of ``values-seg run`` at random points (training, prediction,
evaluation, scoring, report), then a rerun. The rerun must give a ``results.csv`` byte-identical
to an uninterrupted run, and recompute nothing that was finished (intact checkpoints and complete
evaluations keep their files untouched)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tiny import tiny_config, toy

CONFIG = tiny_config(
    name="faults", datasets=[toy("3b", train_cases=12)], recipe={"epochs": 3},
    prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 3}},
                       {"name": "test_time_dropout", "params": {"num_samples": 4}}],
    measures=["predictive_entropy", "mutual_information", "max_softmax"],
    aggregations=["image", "threshold"],
    tasks=["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity"],
    evaluation={"montage_cases": 1},
)
KILLS = 8


def _start(work: Path, out: str) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "values_seg.cli", "run", "faults.yaml", "--out", out, "--no-progress"],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finished(run: Path) -> dict[Path, int]:
    """Files of finished work: intact-looking checkpoints and complete evaluations, with mtimes."""
    cache = run / "cache"
    files = [p for p in (cache / "checkpoints").glob("*.pt") if p.with_name(p.name + ".json").exists()]
    files += list((cache / "evaluations").glob("*/done.json"))
    return {p: p.stat().st_mtime_ns for p in files}


@pytest.mark.slow
def test_kill_minus_9_anywhere_then_rerun_gives_identical_results(tmp_path):
    (tmp_path / "faults.yaml").write_text(yaml.safe_dump(CONFIG))
    start = time.time()
    reference = _start(tmp_path, "reference")
    assert reference.wait(timeout=1800) == 0, reference.stdout.read()
    duration = time.time() - start
    expected = (tmp_path / "reference" / "results.csv").read_bytes()

    rng = random.Random(2024)
    delays = sorted(rng.uniform(1.0, duration) for _ in range(KILLS))
    outcomes = []
    for i, delay in enumerate(delays):
        out = f"killed{i}"
        proc = _start(tmp_path, out)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = _finished(tmp_path / out)
        rerun = _start(tmp_path, out)
        assert rerun.wait(timeout=1800) == 0, rerun.stdout.read()
        got = (tmp_path / out / "results.csv").read_bytes()
        identical = got == expected
        if not identical:  # say what differs
            import difflib

            diff = difflib.unified_diff(expected.decode().splitlines(), got.decode().splitlines(), lineterm="", n=0)
            print(f"\nkill at {delay:.1f} s: results differ:\n" + "\n".join(list(diff)[:20]))
        untouched = all(p.exists() and p.stat().st_mtime_ns == m for p, m in finished.items())
        outcomes.append((round(delay, 1), len(finished), identical, untouched))
    print(f"\nkill points (s after start, finished artefacts at the kill, identical results, nothing redone): {outcomes}")
    assert all(identical for _, _, identical, _ in outcomes), outcomes
    assert all(untouched for *_, untouched in outcomes), outcomes
