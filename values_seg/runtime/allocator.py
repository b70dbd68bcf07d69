"""The C allocator of a process that evaluates case after case: freed memory kept for the next case.

:func:`keep_freed_memory` raises glibc's mmap and trim thresholds (``mallopt``), :func:`huge_pages` asks for
transparent huge pages in the workers a run starts; why and what each saves: docs/design-rationale.md,
"The C allocator".
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
from typing import Iterator

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 256 << 20
HUGE_PAGES = "glibc.malloc.hugetlb=1"  # malloc advises the kernel to back its memory with huge pages


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


def with_huge_pages(tunables: str | None) -> str:
    """``GLIBC_TUNABLES`` (``tunables``: its value, or ``None``) with :data:`HUGE_PAGES` added,
    unless it already says how malloc uses huge pages (the user's setting wins)."""
    given = [t for t in (tunables or "").split(":") if t]
    if any(t.startswith("glibc.malloc.hugetlb=") for t in given):
        return ":".join(given)
    return ":".join(given + [HUGE_PAGES])


@contextlib.contextmanager
def huge_pages() -> Iterator[None]:
    """Processes started inside (a pool's workers, a local Ray instance) allocate with
    :data:`HUGE_PAGES`; this process's environment is restored on the way out. Where glibc or
    transparent huge pages are missing, the tunable is ignored."""
    before = os.environ.get("GLIBC_TUNABLES")
    os.environ["GLIBC_TUNABLES"] = with_huge_pages(before)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GLIBC_TUNABLES", None)
        else:
            os.environ["GLIBC_TUNABLES"] = before
