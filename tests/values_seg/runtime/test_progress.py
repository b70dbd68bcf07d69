"""Progress: one mechanism for every counted loop; a worker's counted loop reaches the parent, which
names the combination and counts its cases while a slow case runs."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

from values_seg.runner.executors import Job, ProcessExecutor
from values_seg.runtime.progress import Board, counted, meter, reporting

from tiny import tiny_config, toy

HERE = Path(__file__).parent
ROOT = HERE.parents[2]

TINY = tiny_config(datasets=[toy("1")], device="cpu", aggregations=[{"name": "patch", "params": {"size": 5}}],
                   tasks=["segmentation", "failure_detection"], statistics={"n_resamples": 10})


def test_a_counted_loop_reports_each_case_and_its_end_and_shows_nothing_without_a_relay(capsys):
    sent = []
    with reporting(lambda *message: sent.append(message)):
        assert list(counted("abc", 3, "evaluate c test", show=False)) == ["a", "b", "c"]
    assert sent == [("evaluate c test", done, 3, "case") for done in (0, 1, 2, 3, None)]
    assert list(counted("abc", 3, "evaluate c test", show=False)) == ["a", "b", "c"]  # no relay: no traffic
    assert capsys.readouterr().err == ""


def test_the_board_shows_a_job_s_count_and_drops_it_once_the_job_ended(capsys):
    inbox, taken = [("j1", "evaluate c test", 0, 4, "case"), ("j1", "evaluate c test", 1, 4, "case")], threading.Event()

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
    inbox.append(("j1", "evaluate c test", 2, 4, "case"))  # late: the job has ended
    taken.clear()
    taken.wait()
    board.close()
    assert board.bars == {}
    err = capsys.readouterr().err
    assert "evaluate c test:  25%" in err and " 1/4 " in err and " 2/4 " not in err


def test_a_meter_counts_steps_with_what_it_shows_beside_them(capsys):
    sent = []
    with reporting(lambda *message: sent.append(message)):
        with meter(5, "train x", show=False, unit="step") as bar:
            bar.advance(2, loss="0.5")
            bar.advance(3)
    assert sent == [("train x", 0, 5, "step"), ("train x", 2, 5, "step"), ("train x", 5, 5, "step"),
                    ("train x", None, 5, "step")]
    with meter(2, "train y", show=True, unit="step") as bar:
        bar.advance(2, loss="0.25")
    err = capsys.readouterr().err
    assert "train y" in err and "2/2" in err and "loss=0.25" in err
    with meter(2, "train z", show=False) as bar:  # off and no relay: nothing
        bar.advance(2)
    assert capsys.readouterr().err == ""


def _tqdm_users(root: Path) -> list[str]:
    """Every module of the project's code that makes a tqdm bar itself (imports tqdm)."""
    found = []
    for folder in ("values_seg", "plugins", "toy_data_generator"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == "tqdm" or n.startswith("tqdm.") for n in names):
                    found.append(path.relative_to(root).as_posix())
    return sorted(set(found))


def test_one_progress_mechanism_every_loop_uses():
    """Only :mod:`values_seg.runtime.progress` makes bars: the engine's loops, the runner's, the
    datasets' preparation all count through it (so a worker's loops reach the parent alike)."""
    assert _tqdm_users(ROOT) == ["values_seg/runtime/progress.py"]


def test_the_progress_scan_finds_a_second_mechanism(tmp_path):
    (tmp_path / "values_seg").mkdir()
    (tmp_path / "values_seg" / "loop.py").write_text("def f(xs):\n    from tqdm.auto import tqdm\n    return tqdm(xs)\n")
    assert _tqdm_users(tmp_path) == ["values_seg/loop.py"]


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

    from gated_progress import gated_evaluation_progress  # tests/helpers/

    split, total, err = gated_evaluation_progress(tmp_path, {**TINY, "executor": "processes", "workers": 1},
                                                  dict(os.environ, OMP_NUM_THREADS="1"))
    assert total == len(registry.create("dataset", "toy", **TINY["datasets"][0]["params"]).case_ids(split)), err
