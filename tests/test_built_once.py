"""``built_once`` (tests/conftest.py): test data built once however many workers ask for it at once."""

import importlib.util
import threading
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("suite_conftest", Path(__file__).with_name("conftest.py"))
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)

LOCKS = Path("/proc/locks")


def _someone_waits_on(lock: Path) -> bool:
    """A blocked request (``->``) on ``lock``'s inode in the kernel's table of file locks."""
    inode = f":{lock.stat().st_ino} "
    return any("->" in line and inode in line for line in LOCKS.read_text().splitlines())


@pytest.mark.skipif(not LOCKS.exists(), reason="needs Linux's /proc/locks to see the waiting caller")
def test_a_second_caller_waits_for_the_first_build_and_reads_its_value(tmp_path, wait_until):
    started, release, builds, got = threading.Event(), threading.Event(), [], {}

    def build(folder):
        builds.append(folder)
        (folder / "data.txt").write_text("built")
        started.set()
        assert release.wait(timeout=suite.HANG_GUARD_S)
        return folder / "data.txt"

    def call(who):
        got[who] = suite.build_once(tmp_path, "data", build)

    first = threading.Thread(target=call, args=("first",))
    first.start()
    assert started.wait(timeout=suite.HANG_GUARD_S)
    second = threading.Thread(target=call, args=("second",))
    second.start()
    try:
        wait_until(lambda: _someone_waits_on(tmp_path / "data.lock"), "the second caller blocked on the lock")
    finally:
        release.set()
        first.join()
        second.join()
    assert builds == [tmp_path / "data"]
    assert got == {"first": tmp_path / "data" / "data.txt", "second": tmp_path / "data" / "data.txt"}
    assert (tmp_path / "data" / "data.txt").read_text() == "built"


def test_a_build_that_failed_halfway_is_redone_in_a_fresh_folder(tmp_path):
    def broken(folder):
        (folder / "half").write_text("half written")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        suite.build_once(tmp_path, "data", broken)
    assert suite.build_once(tmp_path, "data", lambda folder: sorted(p.name for p in folder.iterdir())) == []
    assert suite.build_once(tmp_path, "data", broken) == []  # built: the value read, nothing rebuilt
