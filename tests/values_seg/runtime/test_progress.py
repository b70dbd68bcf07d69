"""Progress of an evaluation running on a worker (issue 32, item 12): the worker's counted loop
reaches the parent, which names the combination and counts its cases while a slow case runs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from values_seg.runner.executors import Job, ProcessExecutor
from values_seg.runtime.progress import Board, counted, reporting

HERE = Path(__file__).parent

TINY = {
    "name": "tiny",
    "datasets": [{"name": "toy", "label": "toy_1", "params": {"scenario": "1", "dims": 2, "size": 32,
                                                               "train_cases": 8, "val_cases": 4}}],
    "backbones": [{"name": "unet", "params": {"base_width": 4}}],
    "recipe": {"epochs": 1},
    "device": "cpu",
    "prediction_models": ["deterministic"],
    "measures": ["predictive_entropy"],
    "aggregations": [{"name": "patch", "params": {"size": 5}}],
    "tasks": ["segmentation", "failure_detection"],
    "statistics": {"n_resamples": 10},
}


def test_a_counted_loop_reports_each_case_and_its_end_and_shows_nothing_without_a_relay(capsys):
    sent = []
    with reporting(lambda *message: sent.append(message)):
        assert list(counted("abc", 3, "evaluate c test", show=False)) == ["a", "b", "c"]
    assert sent == [("evaluate c test", done, 3) for done in (0, 1, 2, 3, None)]
    assert list(counted("abc", 3, "evaluate c test", show=False)) == ["a", "b", "c"]  # no relay: no traffic
    assert capsys.readouterr().err == ""


def test_the_board_shows_a_job_s_count_and_drops_it_once_the_job_ended(capsys):
    inbox, taken = [("j1", "evaluate c test", 0, 4), ("j1", "evaluate c test", 1, 4)], threading.Event()

    def take():
        messages = []
        while inbox:
            messages.append(inbox.pop(0))
        if not messages:
            taken.set()
        return messages

    board = Board(take, every=0.01)
    taken.wait()
    with board.lock:
        assert board.bars[("j1", "evaluate c test")].n == 1
    board.finished("j1")
    inbox.append(("j1", "evaluate c test", 2, 4))  # late: the job has ended
    taken.clear()
    taken.wait()
    board.close()
    assert board.bars == {}
    err = capsys.readouterr().err
    assert "evaluate c test:  25%" in err and " 1/4 " in err and " 2/4 " not in err


def _count(n: int) -> int:
    return sum(1 for _ in counted(range(n), n, "evaluate c test", show=False))


def test_without_progress_a_worker_s_job_counts_nothing_and_returns_the_same(capsys):
    executor = ProcessExecutor(1)
    assert [o.value for o in executor.run([Job("j", "evaluate", _count, (3,))])] == [3]
    assert "evaluate c test" not in capsys.readouterr().err


def _die_midway(n: int) -> None:
    for i in counted(range(n), n, "evaluate c test", show=False):
        if i == 1:
            os._exit(1)  # as if killed: mid-loop, its end never reported


def test_a_worker_that_dies_mid_count_fails_its_job_and_the_parent_goes_on(capsys):
    executor = ProcessExecutor(1)
    executor.progress = True
    [outcome] = list(executor.run([Job("j", "evaluate", _die_midway, (3,))]))
    assert not outcome.ok and "terminated abruptly" in outcome.error


@pytest.mark.slow
def test_a_worker_s_evaluation_names_its_combination_and_counts_cases_in_the_parent(tmp_path, monkeypatch):
    """Under ``executor: processes`` (the quick configs'): the worker's slow case is shown by the
    parent, the combination and split named, the cases counted, while it runs."""
    from values_seg import registry

    monkeypatch.syspath_prepend(str(HERE))
    from gated_progress import gated_evaluation_progress

    split, total, err = gated_evaluation_progress(tmp_path, {**TINY, "executor": "processes", "workers": 1},
                                                  dict(os.environ, OMP_NUM_THREADS="1"))
    assert total == len(registry.create("dataset", "toy", **TINY["datasets"][0]["params"]).case_ids(split)), err
