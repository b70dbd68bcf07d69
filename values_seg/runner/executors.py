"""Executors run independent jobs of one stage: in-process, on local worker processes, or on Ray
(:mod:`values_seg.runner.ray_executor`); :func:`values_seg.runner.executor_factory.make_executor`
picks one.

Failures, storage faults, Ctrl-C and progress: docs/design-rationale.md, "Executors".
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import errno
import functools
import multiprocessing
import queue as queues
import os
import signal
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from values_seg.runtime.allocator import huge_pages
from values_seg.runtime.worker_processes import die_with_parent
from values_seg.runtime.progress import Board, reporting


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


#: Errors of the storage, not of a job: every later job would fail the same way.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def storage_fault(error: BaseException) -> bool:
    """Whether ``error`` is a full disk (or quota) or a read-only file system."""
    return isinstance(error, OSError) and error.errno in STORAGE_ERRNOS


def call(fn: Callable, args: tuple, kwargs: dict, report: Callable | None = None) -> tuple[bool, Any]:
    """Run one job, turning an exception into ``(False, traceback)``; a storage fault is raised.
    ``report``: where the job's counted loops send their counts (a worker's relay to the parent)."""
    if _stopping.is_set():  # a worker told to stop starts no job that was already queued for it
        raise KeyboardInterrupt
    _in_job.set()
    try:
        with reporting(report):
            return True, fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
        if storage_fault(e):
            raise
        return False, traceback.format_exc()
    finally:
        _in_job.clear()


class Executor:
    """Where the jobs of a stage run. ``with executor.open(shared):`` spans a run (an executor that
    needs a session, such as Ray's, connects there and checks that its workers see ``shared``, the
    directory they write into); ``run(jobs)`` yields one :class:`Outcome` per job, in the order
    they finish."""

    name = "executor"
    parallel = False
    #: Relay the jobs' counted loops to bars here (the runner sets it from ``--progress``).
    progress = False
    #: Worker processes started so far (``None``: none of its own, or not counted, as Ray's).
    workers_started: int | None = None

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


_stopping = threading.Event()


_in_job = threading.Event()


def _interrupt(signum, frame) -> None:
    """SIGTERM in a worker: a running job is interrupted (its ``finally`` blocks remove its temporary
    files); an idle worker just ends (an interruption there would print a traceback)."""
    _stopping.set()
    if _in_job.is_set():
        raise KeyboardInterrupt
    raise SystemExit(130)


#: A worker's relay to the parent's :class:`Board` (None: progress off).
_reports: Any = None


def _worker_init(threads: int, parent: int, reports=None, started=None) -> None:
    """Once per worker process: thread limits, death with the parent, signals; ``started``: the
    parent's count of worker start-ups (a shared integer)."""
    import torch

    global _reports
    if started is not None:
        with started.get_lock():
            started.value += 1
    if reports is not None:
        reports.cancel_join_thread()  # a worker never waits at exit for progress messages to leave
    _reports = reports

    die_with_parent(parent)
    torch.set_num_threads(threads)
    from values_seg.runtime.console import one_line_warnings

    one_line_warnings()
    # Ctrl-C is the parent's to handle; it stops a worker with SIGTERM, raised here as an
    # interruption so that the job's ``finally`` blocks remove its temporary files
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt)


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel the pending jobs and interrupt the running ones (their workers get SIGTERM)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # no public API before 3.14
    pool.shutdown(wait=False, cancel_futures=True)  # (it forgets the processes)
    for process in processes:
        if process.is_alive():
            process.terminate()


def _to_parent(job: str, description: str, done: int | None, total: int, unit: str) -> None:
    """(In a worker.) One count of ``job``'s loop, to the parent; never blocks (the queue's thread sends it)."""
    _reports.put_nowait((job, description, done, total, unit))


def _take(reports) -> list:
    """The messages waiting in ``reports``, without waiting for more."""
    messages = []
    with contextlib.suppress(queues.Empty):
        while len(messages) < 10_000:
            messages.append(reports.get_nowait())
    return messages


class ProcessExecutor(Executor):
    """Jobs on ``workers`` local processes (spawned, so CUDA and torch threads behave). Inside
    ``open()`` every stage of the run goes to one pool, started at the first job and shut at the
    end, so each worker pays its imports once; a ``run`` outside ``open()`` has a pool of its own.
    ``workers_started`` counts the worker processes started so far."""

    name = "processes"
    parallel = True

    def __init__(self, workers: int = 2):
        self.workers = max(1, workers)
        self._context = multiprocessing.get_context("spawn")
        self._pool: cf.ProcessPoolExecutor | None = None
        self._reports = None  # the workers' relay of their counts (progress on)
        self._started = None  # the workers' count of their start-ups (a shared integer)
        self._session = False

    @property
    def workers_started(self) -> int:
        return self._started.value if self._started is not None else 0

    @contextlib.contextmanager
    def open(self, shared: str | os.PathLike) -> Iterator["ProcessExecutor"]:
        self._session = True
        try:
            yield self
        finally:
            self._session = False
            self._close()

    def _pool_for_jobs(self) -> cf.ProcessPoolExecutor:
        """The running pool, else a new one (its workers start as jobs arrive)."""
        if self._pool is None:
            threads = max(1, (os.cpu_count() or 1) // self.workers)
            self._reports = self._context.Queue() if self.progress else None
            self._started = self._started or self._context.Value("i", 0)
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=self._context, initializer=_worker_init,
                                                initargs=(threads, os.getpid(), self._reports, self._started))
        return self._pool

    def _close(self) -> None:
        pool, self._pool, self._reports = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        if not jobs:
            return
        pool = self._pool_for_jobs()
        reports = self._reports
        if reports is not None:
            _take(reports)  # counts a finished stage's jobs sent late: not this stage's bars
        board = Board(functools.partial(_take, reports)) if reports is not None else None
        try:
            with huge_pages():  # the pool starts its workers as jobs arrive (values_seg.runtime.allocator)
                futures = {pool.submit(call, job.fn, job.args, job.kwargs,
                                       functools.partial(_to_parent, job.id) if board else None): job for job in jobs}
            for future in cf.as_completed(futures):
                if board:
                    board.finished(futures[future].id)
                if not future.cancelled() and isinstance(future.exception(), cf.process.BrokenProcessPool) \
                        and self._pool is pool:
                    self._pool = None  # a worker died: the pool takes no more jobs, the next stage starts a new one
                    pool.shutdown(wait=False)
                yield self._outcome(futures[future], future)
        except BaseException:  # Ctrl-C, a storage fault, or the caller stopped listening
            self._pool = self._reports = None  # the next stage (if any) starts a new pool
            _stop(pool)
            raise
        finally:
            if board:
                board.close()
            if not self._session:
                self._close()

    @staticmethod
    def _outcome(job: Job, future: cf.Future) -> Outcome:
        try:
            ok, value = future.result()
        except Exception as e:  # noqa: BLE001 - a worker that died takes only its job down
            if storage_fault(e):
                raise
            ok, value = False, traceback.format_exc()
        return Outcome(job, ok, value if ok else None, None if ok else value)
