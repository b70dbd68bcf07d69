"""The process executor's pool: inside ``open()`` one pool serves every stage of a run (each
worker pays its imports once), a ``run`` outside ``open()`` has its own, and a pool broken by a
dying worker is replaced for the next stage."""

from __future__ import annotations

import os
import time
from pathlib import Path

from values_seg.runner.executors import Job, ProcessExecutor


def _pid() -> int:
    return os.getpid()


def _meet(folder: str, n: int) -> int:
    """Note this worker in ``folder`` and wait until ``n`` jobs are there (so a stage of ``n`` such
    jobs runs on ``n`` workers at once); a hang guard of 10 minutes."""
    Path(folder, str(os.getpid())).touch()
    for _ in range(6000):
        if len(list(Path(folder).iterdir())) >= n:
            return os.getpid()
        time.sleep(0.1)
    raise TimeoutError(f"{n} jobs never ran at once")


def _die() -> None:
    os._exit(1)  # as if killed


def _stage(executor: ProcessExecutor, name: str, n: int) -> list[int]:
    outcomes = list(executor.run([Job(f"{name}{i}", name, _pid) for i in range(n)]))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    return [o.value for o in outcomes]


def test_an_open_process_executor_starts_its_workers_once_for_all_stages(tmp_path):
    executor = ProcessExecutor(2)
    stages = []
    with executor.open(tmp_path):
        for name in ("train", "evaluate", "al_train"):  # each stage on both workers at once
            (tmp_path / name).mkdir()
            outcomes = list(executor.run([Job(f"{name}{i}", name, _meet, (str(tmp_path / name), 2)) for i in range(2)]))
            assert all(o.ok for o in outcomes), [o.error for o in outcomes]
            stages.append([o.value for o in outcomes])
            assert executor.workers_started == 2
    workers = {pid for pids in stages for pid in pids}
    assert len(workers) == 2 and os.getpid() not in workers
    assert executor.workers_started == 2
    assert all(not os.path.exists(f"/proc/{pid}") or _zombie(pid) for pid in workers)  # shut at the end


def test_a_run_outside_open_has_a_pool_of_its_own():
    executor = ProcessExecutor(1)
    first, second = _stage(executor, "a", 2), _stage(executor, "b", 2)
    assert len(set(first)) == 1 and len(set(second)) == 1 and set(first) != set(second)
    assert executor.workers_started == 2


def test_a_stage_after_a_worker_died_gets_a_new_pool(tmp_path):
    executor = ProcessExecutor(1)
    with executor.open(tmp_path):
        [died] = list(executor.run([Job("dies", "evaluate", _die)]))
        assert not died.ok and "terminated abruptly" in died.error
        assert len(set(_stage(executor, "next", 2))) == 1  # the next stage runs, on a new worker
        assert executor.workers_started == 2


def _zombie(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _tunables() -> str | None:
    return os.environ.get("GLIBC_TUNABLES")


def test_the_workers_allocate_with_huge_pages_and_the_parent_environment_is_kept(monkeypatch):
    """values_seg.runtime.allocator.huge_pages: the pool's workers start with glibc's huge-page tunable
    (after the user's own tunables); the parent's environment is as it was."""
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    outcomes = list(ProcessExecutor(1).run([Job("t", "evaluate", _tunables)]))
    assert outcomes[0].ok, outcomes[0].error
    assert outcomes[0].value == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"
