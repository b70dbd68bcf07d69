"""The run directory's lock: re-entrant within one process, refused to another (issue 32, item 9)."""

from __future__ import annotations

import multiprocessing

from values_seg import run_directory

FORK = multiprocessing.get_context("fork")


def test_the_lock_is_reentrant_within_one_process_and_refuses_another(tmp_path):
    run = run_directory.claim(tmp_path / "run", "study")
    channel, theirs = FORK.Pipe()

    def try_lock() -> None:
        try:
            with run_directory.locked(run):
                theirs.send("got it")
        except run_directory.RunDirectoryBusy as e:
            theirs.send(str(e))

    with run_directory.locked(run), run_directory.locked(run):  # run builds its report under its own lock
        assert run_directory.holds(run)
        child = FORK.Process(target=try_lock)
        child.start()
        assert "is being written by another values-seg command" in channel.recv()
        child.join()
    assert not run_directory.holds(run)
    child = FORK.Process(target=try_lock)
    child.start()
    assert channel.recv() == "got it"
    child.join()
