"""Worker processes end with the process that started them.

A pool's workers wait on their parent's queue; killed with ``kill -9`` (or by the OOM killer), the
parent tells them nothing, and a forked worker, which holds its own copy of the queue's writing end,
would wait for ever: holding memory, and able to finish a figure into a run directory that another
command has meanwhile taken over (:mod:`values_seg.storage.run_lock`). :func:`die_with_parent`, each pool's
initializer (the run's, :mod:`values_seg.runner.executors`; the report's figures,
:mod:`values_seg.report.render`), ends a worker when its parent is gone.
"""

from __future__ import annotations

import os
import signal
import threading
import time


def die_with_parent(parent: int | None = None) -> None:
    """Make this (worker) process end when its parent does, even if the parent is killed with
    SIGKILL: Linux's parent-death signal where available, and a watchdog thread everywhere (the
    signal follows the thread that started the worker; the watchdog, the process)."""
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
