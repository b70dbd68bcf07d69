"""Executors run independent jobs of one stage: in-process, on local worker processes, or on Ray.

A job is a module-level function with picklable arguments. Every executor isolates failures:
an exception becomes a failed :class:`Outcome` carrying the traceback, and the other jobs go on.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence


@dataclass
class Job:
    id: str
    stage: str
    fn: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass
class Outcome:
    job: Job
    ok: bool
    value: Any = None
    error: str | None = None  # the formatted traceback of a failed job


def call(fn: Callable, args: tuple, kwargs: dict) -> tuple[bool, Any]:
    """Run one job, turning an exception into ``(False, traceback)``."""
    try:
        return True, fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - recorded, the sweep goes on
        return False, traceback.format_exc()


class LocalExecutor:
    """One job after another in this process (the default; the engine's progress bars show)."""

    name = "local"
    parallel = False

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        for job in jobs:
            ok, value = call(job.fn, job.args, job.kwargs)
            yield Outcome(job, ok, value if ok else None, None if ok else value)


def die_with_parent(parent: int | None = None) -> None:
    """Make this (worker) process end when its parent does, even if the parent is killed with
    SIGKILL: Linux's parent-death signal where available, and a watchdog thread everywhere."""
    import signal
    import threading
    import time

    parent = os.getppid() if parent is None else parent
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="values-seg-watchdog", daemon=True).start()


def _worker_init(threads: int, parent: int) -> None:
    import torch

    die_with_parent(parent)
    torch.set_num_threads(threads)


class ProcessExecutor:
    """Jobs on ``workers`` local processes (spawned, so CUDA and torch threads behave)."""

    name = "processes"
    parallel = True

    def __init__(self, workers: int = 2):
        self.workers = max(1, workers)

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        if not jobs:
            return
        threads = max(1, (os.cpu_count() or 1) // self.workers)
        context = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(self.workers, mp_context=context, initializer=_worker_init,
                                    initargs=(threads, os.getpid())) as pool:
            futures = {pool.submit(call, job.fn, job.args, job.kwargs): job for job in jobs}
            for future in cf.as_completed(futures):
                job = futures[future]
                try:
                    ok, value = future.result()
                except Exception:  # noqa: BLE001 - a worker that died takes only its job down
                    ok, value = False, traceback.format_exc()
                yield Outcome(job, ok, value if ok else None, None if ok else value)


class RayExecutor:
    """Jobs as Ray tasks, on a local Ray instance or the cluster ``RAY_ADDRESS`` points to."""

    name = "ray"
    parallel = True

    def __init__(self, workers: int = 2):
        try:
            import ray
        except ImportError as e:
            raise ValueError("executor 'ray' needs Ray: pip install 'values-seg[ray]'") from e
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True, log_to_driver=False)

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        remote = self.ray.remote(call)
        refs = {remote.remote(job.fn, job.args, job.kwargs): job for job in jobs}
        pending = list(refs)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            job = refs[done[0]]
            try:
                ok, value = self.ray.get(done[0])
            except Exception:  # noqa: BLE001
                ok, value = False, traceback.format_exc()
            yield Outcome(job, ok, value if ok else None, None if ok else value)


def make_executor(name: str, workers: int = 2):
    if name == "local":
        return LocalExecutor()
    if name == "processes":
        return ProcessExecutor(workers)
    if name == "ray":
        return RayExecutor(workers)
    raise ValueError(f"unknown executor {name!r}; available: local, processes, ray")
