"""Progress bars whose clock moves while one long item runs."""

from __future__ import annotations

import contextlib
import threading


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
