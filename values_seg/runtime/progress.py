"""Progress bars whose clock moves while one long item runs, and the relay that shows a worker's
counted loops (an evaluation's cases) in the parent process."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterable

#: Where this process's counted loops report, ``report(description, done, total)`` (``done`` is
#: ``None`` when the loop ends): set by an executor for the job it runs on a worker; ``None`` here.
_report: Callable | None = None


class TickingBar:
    """A tqdm bar redrawn every second by a thread, so that its clock moves while a long item
    (a training on a worker, the bootstrap of one combination) is under way."""

    def __init__(self, bar, every: float = 1.0):
        self.bar, self.every, self.stop = bar, every, threading.Event()
        threading.Thread(target=self._tick, name="values-seg-progress", daemon=True).start()

    def _tick(self) -> None:
        while not self.stop.wait(self.every):
            with contextlib.suppress(Exception):  # the bar may be closing
                self.bar.refresh()

    def __iter__(self):
        try:
            yield from self.bar
        finally:
            self.close()

    def close(self) -> None:
        self.stop.set()
        self.bar.close()


@contextlib.contextmanager
def reporting(report: Callable | None):
    """Within: this process's counted loops send their counts to ``report`` (see :data:`_report`)."""
    global _report
    previous, _report = _report, report
    try:
        yield
    finally:
        _report = previous


def counted(items: Iterable, total: int, description: str, show: bool, unit: str = "case") -> Iterable:
    """``items``, counted for the user: sent to the parent when this job runs on a worker that
    relays progress (:class:`Board`), else, with ``show``, a bar here whose clock moves during a
    slow item; else just ``items``."""
    if _report is not None:
        return _reported(items, total, description, _report)
    if show:
        from tqdm.auto import tqdm

        return TickingBar(tqdm(items, total=total, desc=description, unit=unit, dynamic_ncols=True, leave=False))
    return items


def _reported(items: Iterable, total: int, description: str, report: Callable):
    def send(done):
        with contextlib.suppress(Exception):  # progress only: a closed relay never fails the job
            report(description, done, total)

    done = 0
    send(done)
    try:
        for item in items:
            yield item
            done += 1
            send(done)
    finally:
        send(None)


class Board:
    """The parent's bars of its workers' counted loops: one per running loop, named as the loop
    names itself, closed when the loop or its job ends. ``take()`` returns the messages
    ``(job id, description, done, total)`` sent since its last call without waiting for any; a
    thread calls it every ``every`` seconds and redraws the bars every second (so the clock of a
    slow case moves). A relay that fails (a worker died mid-message) only stops the bars moving."""

    def __init__(self, take: Callable[[], list], every: float = 0.1):
        self.take, self.every = take, every
        self.bars: dict[tuple, object] = {}
        self.ended: set[str] = set()
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.thread = threading.Thread(target=self._drain, name="values-seg-board", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        drawn = time.monotonic()
        while not self.stop.wait(self.every):
            try:
                messages = self.take()
            except Exception:  # noqa: BLE001 - the job's outcome says what happened to its worker
                messages = []
            with self.lock:
                for message in messages:
                    self._show(*message)
                if time.monotonic() - drawn >= 1.0:
                    drawn = time.monotonic()
                    for bar in self.bars.values():
                        with contextlib.suppress(Exception):
                            bar.refresh()

    def _show(self, job: str, description: str, done: int | None, total: int) -> None:
        if job in self.ended or self.stop.is_set():
            return
        bar = self.bars.get((job, description))
        if done is None:
            if bar is not None:
                self.bars.pop((job, description)).close()
            return
        if bar is None:
            from tqdm.auto import tqdm

            bar = self.bars[job, description] = tqdm(total=total, desc=description, unit="case",
                                                     dynamic_ncols=True, leave=False)
        bar.n = done
        bar.refresh()

    def finished(self, job: str) -> None:
        """``job`` ended (done, failed or its worker died): its bars close; later messages are ignored."""
        with self.lock:
            self.ended.add(job)
            for key in [k for k in self.bars if k[0] == job]:
                self.bars.pop(key).close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2.0)  # never waits on a relay that hangs
        with self.lock:
            for bar in self.bars.values():
                bar.close()
            self.bars.clear()
