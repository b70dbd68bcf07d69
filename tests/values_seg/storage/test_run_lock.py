"""The run directory's lock: re-entrant within one process, refused to another (issue 32, item 9)."""

from __future__ import annotations

import multiprocessing

from values_seg.storage import run_directory, run_lock

FORK = multiprocessing.get_context("fork")


def test_the_lock_is_reentrant_within_one_process_and_refuses_another(tmp_path):
    run = run_directory.claim(tmp_path / "run", "study")
    channel, theirs = FORK.Pipe()

    def try_lock() -> None:
        try:
            with run_lock.locked(run):
                theirs.send("got it")
        except run_lock.RunDirectoryBusy as e:
            theirs.send(str(e))

    with run_lock.locked(run), run_lock.locked(run):  # run builds its report under its own lock
        assert run_lock.holds(run)
        child = FORK.Process(target=try_lock)
        child.start()
        assert "is being written by another values-seg command" in channel.recv()
        child.join()
    assert not run_lock.holds(run)
    child = FORK.Process(target=try_lock)
    child.start()
    assert channel.recv() == "got it"
    child.join()


def test_a_second_writer_of_a_cache_entry_waits_and_then_finds_it_written(tmp_path):
    """Two runs sharing a cache: the second writer of an evaluation folder waits for the first and
    sees its result (run_evaluation then reuses it instead of replacing a folder being read)."""
    from values_seg.storage.run_lock import writing_entry

    entry = tmp_path / "evaluations" / "key"
    first, to_first = FORK.Pipe()
    second, to_second = FORK.Pipe()

    def write_first() -> None:
        with writing_entry(entry):
            to_first.send("writing")
            to_first.recv()
            entry.mkdir()

    def write_second() -> None:
        to_second.send("trying")
        with writing_entry(entry):
            to_second.send(entry.is_dir())

    a = FORK.Process(target=write_first)
    a.start()
    assert first.recv() == "writing"
    b = FORK.Process(target=write_second)
    b.start()
    assert second.recv() == "trying"
    first.send("go")
    assert second.recv() is True  # it got the lock only after the first had written the entry
    a.join()
    b.join()
    assert a.exitcode == b.exitcode == 0


def test_readers_share_the_lock_and_exclude_a_writer(tmp_path):
    """``compare`` and a rerun with nothing to do read under a shared lock: another reader goes on,
    a writer is refused while they read, and a reader is refused while a writer writes."""
    run = run_directory.claim(tmp_path / "run", "study")
    channel, theirs = FORK.Pipe()

    def try_lock(kind) -> None:
        try:
            with kind(run):
                theirs.send("got it")
        except run_lock.RunDirectoryBusy as e:
            theirs.send(str(e))

    def other(kind) -> str:
        child = FORK.Process(target=try_lock, args=(kind,))
        child.start()
        answer = channel.recv()
        child.join()
        return answer

    with run_lock.reading(run):
        assert other(run_lock.reading) == "got it"
        assert "is being read by another values-seg command" in other(run_lock.locked)
    with run_lock.locked(run):
        assert "is being written by another values-seg command" in other(run_lock.reading)
        with run_lock.reading(run):  # this process writes it: it reads too
            pass
    assert other(run_lock.locked) == "got it"
