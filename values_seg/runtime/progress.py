"""Progress: the one mechanism every counted loop uses (:func:`counted`, :func:`meter`), the bar
whose clock moves while one long item runs, and the relay that shows a worker's loops in the parent."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, Iterable, Iterator

#: Where this process's counted loops report, ``report(description, done, total, unit)`` (``done``
#: is ``None`` when the loop ends): set by an executor for the job it runs on a worker; ``None`` here.
_report: Callable | None = None


def _bar(description: str, total: int | None, unit: str, leave: bool, items: Iterable | None = None):
    """The one place a tqdm bar is made."""
    from tqdm.auto import tqdm

    return tqdm(items, total=total, desc=description, unit=unit, dynamic_ncols=True, leave=leave)


def write(message: str) -> None:
    """One line for the user, above any bar."""
    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stderr)


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


class Meter:
    """A counted loop's handle: :meth:`advance` counts ``n`` more done (with what to show beside
    the count, e.g. the running loss)."""

    def __init__(self, description: str, total: int, unit: str, show: bool, leave: bool):
        self.description, self.total, self.unit, self.done = description, total, unit, 0
        self.report, self.bar = _report, None
        if self.report is not None:  # on a worker that relays: the parent shows it
            self._send(0)
        elif show:
            self.bar = TickingBar(_bar(description, total, unit, leave))

    def _send(self, done: int | None) -> None:
        with contextlib.suppress(Exception):  # progress only: a closed relay never fails the job
            self.report(self.description, done, self.total, self.unit)

    def advance(self, n: int = 1, **postfix) -> None:
        self.done += n
        if self.report is not None:
            self._send(self.done)
        elif self.bar is not None:
            self.bar.bar.update(n)
            if postfix:
                self.bar.bar.set_postfix(postfix)

    def close(self) -> None:
        if self.report is not None:
            self._send(None)
        elif self.bar is not None:
            self.bar.close()


@contextlib.contextmanager
def meter(total: int, description: str, show: bool, unit: str = "case", leave: bool = False) -> Iterator[Meter]:
    """Within: a loop of ``total`` items counted for the user — sent to the parent when this job
    runs on a worker that relays progress (:class:`Board`), else, with ``show``, a bar here whose
    clock moves during a slow item, else nothing."""
    m = Meter(description, total, unit, show, leave)
    try:
        yield m
    finally:
        m.close()


def counted(items: Iterable, total: int, description: str, show: bool, unit: str = "case",
            leave: bool = False) -> Iterable:
    """``items``, counted for the user as :func:`meter` counts."""
    if _report is None and not show:
        return items
    return _counting(items, total, description, show, unit, leave)


def _counting(items: Iterable, total: int, description: str, show: bool, unit: str, leave: bool):
    with meter(total, description, show, unit, leave) as m:
        for item in items:
            yield item
            m.advance()


class Board:
    """The parent's bars of its workers' counted loops: one per running loop, named as the loop
    names itself, closed when the loop or its job ends. ``take()`` returns the messages
    ``(job id, description, done, total, unit)`` sent since its last call without waiting for any; a
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

    def _show(self, job: str, description: str, done: int | None, total: int, unit: str = "case") -> None:
        if job in self.ended or self.stop.is_set():
            return
        bar = self.bars.get((job, description))
        if done is None:
            if bar is not None:
                self.bars.pop((job, description)).close()
            return
        if bar is None:
            bar = self.bars[job, description] = _bar(description, total, unit, leave=False)
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
