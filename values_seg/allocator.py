"""The C allocator of a process that evaluates case after case: freed memory kept for the next case.

Each case allocates the same large buffers (float32 samples ``[S, C, *spatial]``, maps, masks).
glibc serves blocks above its mmap threshold (128 KiB, raised only up to the largest block freed so
far) with fresh pages from the kernel and returns freed heap above its trim threshold at once, so
every case pays a minor page fault per 4 KiB it touches (about 2000 per 64^3 case, S = 10: 2–4 ms
of its ~18). :func:`keep_freed_memory` raises both thresholds once per process (glibc's
``mallopt``; elsewhere nothing happens): the blocks of one case are reused by the next, and the
process keeps at most ``trim`` bytes of freed memory from the kernel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 256 << 20


@functools.cache
def keep_freed_memory(mmap: int = MMAP_THRESHOLD, trim: int = TRIM_THRESHOLD) -> bool:
    """Serve blocks up to ``mmap`` bytes from the heap and keep up to ``trim`` bytes of freed heap
    (once per process); True where glibc took both settings."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl without mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap)) & bool(mallopt(M_TRIM_THRESHOLD, trim))
