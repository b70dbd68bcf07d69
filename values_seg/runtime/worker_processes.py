"""Worker processes end with the process that started them.

:func:`die_with_parent`, each pool's initializer (the run's and the report's figures'), ends a worker when
its parent is gone, ``kill -9`` included (docs/design-rationale.md, "Worker processes").
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
