"""One writer of a run directory at a time: while ``values-seg report`` writes a run directory, a
second ``report`` or ``compare`` is refused in one line naming the first and exits non-zero; the
lock ends with its holder, a ``kill -9`` included (issue 32, item 9). The writer is a real
``values-seg report`` in a forked process, paused while it writes until the test lets it go: the
test waits on its messages, never on a clock."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
from pathlib import Path

import pytest

from values_seg.storage import run_directory
from values_seg.cli import main

FORK = multiprocessing.get_context("fork")


def _paused_report(run: Path, channel) -> None:
    """``values-seg report run``, paused after drawing its figures (while it writes the run
    directory) until ``channel`` says go; sends its pid and its figure workers' pids first."""
    from values_seg.report import build

    page = build._page

    def paused(renderer, *args):
        channel.send([os.getpid(), *getattr(renderer._pool, "_processes", {})])
        channel.recv()
        return page(renderer, *args)

    build._page = paused
    raise SystemExit(main(["report", str(run)]))


class Writer:
    """A ``values-seg report`` of ``run`` in another process, paused while it writes."""

    def __init__(self, run: Path):
        self.channel, theirs = FORK.Pipe()
        self.process = FORK.Process(target=_paused_report, args=(run, theirs))
        self.process.start()
        theirs.close()  # a writer that dies before it says so ends the wait with EOFError
        self.pid, *self.workers = self.channel.recv()

    def go(self) -> int:
        self.channel.send("go")
        self.process.join()
        return self.process.exitcode

    def kill(self) -> None:
        """The writer and its figure workers, ended (a test that failed midway leaves none behind)."""
        for pid in (self.pid, *self.workers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.join()


@pytest.fixture()
def writers():
    started: list[Writer] = []
    yield lambda run: started.append(Writer(run)) or started[-1]
    for writer in started:
        writer.kill()


@pytest.fixture()
def run(built_report, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(built_report.parent, run)
    return run


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_second_writer_is_refused_in_one_line_while_the_first_writes(run, writers, capsys):
    writer = writers(run)
    assert main(["report", str(run)]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"values-seg: error: {run} is being written by another values-seg command (pid {writer.pid}")
    assert main(["compare", str(run), "--vary", "measure"]) == 2
    assert "is being written by another values-seg command" in _one_line(capsys)
    assert not (run / "comparisons").exists()  # the refused command wrote nothing
    assert writer.go() == 0
    capsys.readouterr()
    assert main(["report", str(run)]) == 0  # the lock ended with its writer


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:  # reaped
        return False


def test_a_writer_killed_with_sigkill_leaves_no_lock_and_no_figure_worker(run, writers, capsys, wait_until):
    """The lock ends with its holder; so do its figure workers (values_seg.runtime.worker_processes): none
    lives on, idle for ever, or finishes a figure in a run directory another command now writes."""
    writer = writers(run)
    assert writer.workers, "the report draws in worker processes (forked while it holds the lock)"
    os.kill(writer.pid, signal.SIGKILL)
    writer.process.join()
    wait_until(lambda: not any(_running(pid) for pid in writer.workers), "the figure workers to end with their writer")
    assert main(["report", str(run)]) == 0
    assert run_directory.intact(run, run / "report.md")
