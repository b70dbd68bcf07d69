"""Executors run independent jobs of one stage: in-process, on local worker processes, or on Ray
(:mod:`values_seg.runner.ray_executor`).

A job is a module-level function with picklable arguments. Every executor isolates failures:
an exception becomes a failed :class:`Outcome` carrying the traceback, and the other jobs go on.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence


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


class Executor:
    """Where the jobs of a stage run. ``with executor.open(shared):`` spans a run (an executor that
    needs a session, such as Ray's, connects there and checks that its workers see ``shared``, the
    directory they write into); ``run(jobs)`` yields one :class:`Outcome` per job, in the order
    they finish."""

    name = "executor"
    parallel = False

    @contextlib.contextmanager
    def open(self, shared: str | os.PathLike) -> Iterator["Executor"]:
        yield self

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        raise NotImplementedError


class LocalExecutor(Executor):
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


class ProcessExecutor(Executor):
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


def make_executor(name: str, workers: int = 2, *, threads: int = 1, device: str | None = "auto",
                  ray: Mapping[str, Any] | None = None) -> Executor:
    """The executor called ``name``. ``workers``: jobs at a time on this machine (worker processes,
    or the CPUs of a local Ray instance: ``workers x threads``); ``threads``: the CPU threads of
    every job; ``device``: the run's device; ``ray``: the config's ``ray`` section (a mapping)."""
    if name == "local":
        return LocalExecutor()
    if name == "processes":
        return ProcessExecutor(workers)
    if name == "ray":
        from values_seg.runner.ray_executor import RayExecutor

        return RayExecutor(ray, threads=threads, device=device, workers=workers)
    raise ValueError(f"unknown executor {name!r}; available: local, processes, ray")
