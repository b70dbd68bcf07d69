"""The evaluation's allocator setting (values_seg.runtime.allocator): glibc keeps freed memory for the next case."""

import ctypes
import os
import ctypes.util
import platform
import resource
import subprocess
import sys

import pytest

from values_seg.runtime import allocator


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_a_cases_buffers_are_reused_by_the_next_without_new_page_faults():
    """In a fresh process, ten "cases" each allocate, touch and free blocks of a 64^3 case's sizes
    (float32 samples 21 MiB twice, maps 4 and 8 MiB, masks 1 MiB): by default glibc maps them anew
    (a fault per page touched, every case); with the setting, the first case's pages are reused."""
    probe = (
        "import ctypes, ctypes.util, resource, sys\n"
        "from values_seg.runtime.allocator import keep_freed_memory\n"
        "if sys.argv[1] == 'on': assert keep_freed_memory()\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        "libc.malloc.restype = ctypes.c_void_p; libc.malloc.argtypes = [ctypes.c_size_t]\n"
        "libc.free.argtypes = [ctypes.c_void_p]\n"
        "SIZES = [21 << 20, 4 << 20, 21 << 20, 1 << 20, 8 << 20]\n"
        "def case():\n"
        "    blocks = [libc.malloc(n) for n in SIZES]\n"
        "    for p, n in zip(blocks, SIZES): ctypes.memset(p, 1, n)\n"
        "    for p in blocks: libc.free(p)\n"
        "case()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(10): case()\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    faults = {mode: int(subprocess.run([sys.executable, "-c", probe, mode], capture_output=True, text=True,
                                       check=True).stdout) for mode in ("off", "on")}
    pages = 10 * (55 << 20) // resource.getpagesize()
    assert faults["off"] >= pages // 2, faults  # the default: fresh pages case after case
    assert faults["on"] < pages // 20, faults  # kept: (almost) no new faults


def test_keep_freed_memory_is_set_once_per_process(monkeypatch):
    calls = []

    class FakeLibc:
        def __init__(self, *_):
            self.mallopt = lambda option, value: calls.append((option, value)) or 1

    allocator.keep_freed_memory.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", FakeLibc)
    try:
        assert allocator.keep_freed_memory() and allocator.keep_freed_memory()
        assert calls == [(allocator.M_MMAP_THRESHOLD, 32 << 20), (allocator.M_TRIM_THRESHOLD, 256 << 20)]
    finally:
        allocator.keep_freed_memory.cache_clear()


def test_without_mallopt_nothing_happens(monkeypatch):
    def no_libc(*_):
        raise OSError("no C library here")

    allocator.keep_freed_memory.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    try:
        assert allocator.keep_freed_memory() is False
    finally:
        allocator.keep_freed_memory.cache_clear()


def test_the_huge_page_tunable_is_added_once_and_a_users_choice_wins(monkeypatch):
    assert allocator.with_huge_pages(None) == "glibc.malloc.hugetlb=1"
    assert allocator.with_huge_pages("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert allocator.with_huge_pages("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0"
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    with allocator.huge_pages():
        assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    assert "GLIBC_TUNABLES" not in os.environ


def _thp_mode() -> str:
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "never"
    return text.split("[")[1].split("]")[0]


def _glibc_at_least(major: int, minor: int) -> bool:
    name, version = platform.libc_ver()
    return name == "glibc" and tuple(int(v) for v in version.split(".")[:2]) >= (major, minor)


@pytest.mark.skipif(platform.system() != "Linux" or not _glibc_at_least(2, 35) or _thp_mode() != "madvise",
                    reason="glibc >= 2.35 (the hugetlb tunable) and transparent huge pages on madvise")
def test_a_process_started_with_the_tunable_asks_for_huge_pages_for_a_cases_buffers():
    """In a fresh process that allocates a 64^3 case's samples (21 MiB, from the heap as the
    evaluation sets it), the memory holding them is eligible for huge pages (the kernel's
    ``THPeligible``, whether or not it found free 2 MiB pages just then) only under the tunable."""
    probe = (
        "import ctypes, ctypes.util\n"
        "from values_seg.runtime.allocator import keep_freed_memory\n"
        "keep_freed_memory()\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        "libc.malloc.restype = ctypes.c_void_p; libc.malloc.argtypes = [ctypes.c_size_t]\n"
        "p = libc.malloc(21 << 20); ctypes.memset(p, 1, 21 << 20)\n"
        "inside = False\n"
        "for line in open('/proc/self/smaps'):\n"
        "    first = line.split()[0]\n"
        "    if '-' in first and not first.endswith(':'):\n"
        "        low, high = (int(x, 16) for x in first.split('-'))\n"
        "        inside = low <= p < high\n"
        "    elif inside and first == 'THPeligible:':\n"
        "        print(line.split()[1])\n"
    )
    eligible = {}
    for mode in ("off", "on"):
        env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
        if mode == "on":
            env["GLIBC_TUNABLES"] = allocator.HUGE_PAGES
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
        eligible[mode] = out.stdout.split()
    assert eligible == {"off": ["0"], "on": ["1"]}, eligible
