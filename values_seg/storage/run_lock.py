"""One writer at a time: an exclusive lock on a run directory while a command writes it, a shared
one while a command only reads it, and a lock per entry of a shared cache (docs/design-rationale.md,
"One writer at a time").
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import threading
from pathlib import Path
from typing import Iterator

from values_seg.storage.run_files import LOCK
from values_seg.storage.atomic import RefusedWrite


class RunDirectoryBusy(RefusedWrite):
    """Another command is writing the run directory."""


#: the errors of a folder this process may not write: no permission, a read-only file system
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


_held: dict[Path, list] = {}  # folder -> [file descriptor, depth, pid of the holder]
_entries: set[int] = set()  # the file descriptors of the cache entries' locks and the read locks this process holds
_guard = threading.RLock()
_writers_child = False  # forked while its parent held a run directory's lock


def _forget_in_child() -> None:
    """A forked child (a report's figure worker, a data loader) shares the parent's lock but never
    holds it: its copy is closed, so the lock ends with the parent even where the child lives on."""
    global _guard, _writers_child
    _writers_child = _writers_child or bool(_held)
    for fd in [held[0] for held in _held.values()] + list(_entries):
        os.close(fd)
    _held.clear()
    _entries.clear()
    _guard = threading.RLock()


os.register_at_fork(after_in_child=_forget_in_child)


def _key(run_dir: str | Path) -> Path:
    return Path(run_dir).resolve()


def holds(run_dir: str | Path) -> bool:
    """Whether this process holds the lock of ``run_dir``."""
    held = _held.get(_key(run_dir))
    return held is not None and held[2] == os.getpid()


def writers_child() -> bool:
    """Whether this process was forked by a command writing a run directory (a report's figure
    worker): the files it writes are recorded by that command, not by it."""
    return _writers_child


@contextlib.contextmanager
def locked(run_dir: str | Path) -> Iterator[None]:
    """Hold the lock of the existing folder ``run_dir`` while the block runs;
    :class:`RunDirectoryBusy` at once when another process holds it."""
    key = _key(run_dir)
    with _guard:
        if holds(key):
            _held[key][1] += 1
        else:
            _held[key] = [_acquire(Path(run_dir)), 1, os.getpid()]
    try:
        yield
    finally:
        with _guard:
            held = _held[key]
            held[1] -= 1
            if held[1] == 0:
                del _held[key]
                os.ftruncate(held[0], 0)
                os.close(held[0])  # releases the lock


def _open(path: Path, flags: int) -> int:
    """The lock file ``path`` opened with ``flags`` (never through a link: refused)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise RefusedWrite(f"{path} is a symbolic link, not values-seg's lock; remove it") from None


def _acquire(run_dir: Path) -> int:
    try:
        fd = _open(run_dir / LOCK, os.O_RDWR | os.O_CREAT)
    except OSError as e:
        if e.errno in UNWRITABLE:  # the folder cannot be written: said of the folder, not of its lock file
            raise OSError(e.errno, e.strerror, str(run_dir)) from None
        raise
    _lock(fd, fcntl.LOCK_EX, run_dir)
    os.ftruncate(fd, 0)
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python"
    os.pwrite(fd, f"pid {os.getpid()}: {command}"[:400].encode(), 0)
    return fd


def _lock(fd: int, kind: int, run_dir: Path) -> None:
    """``flock`` of kind ``kind`` at once, or :class:`RunDirectoryBusy` naming the writer (``fd`` closed)."""
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 400, 0).decode("utf-8", "replace").strip() or "a process"
        os.close(fd)
        if kind == fcntl.LOCK_EX and _read_now(run_dir / LOCK):
            raise RunDirectoryBusy(f"{run_dir} is being read by another values-seg command (compare, or a rerun "
                                   f"with nothing to do); wait until it ends") from None
        raise RunDirectoryBusy(f"{run_dir} is being written by another values-seg command ({holder}); one command "
                               f"writes a run directory at a time: wait until it ends, or write elsewhere "
                               f"(values-seg run --out)") from None


def _read_now(path: Path) -> bool:
    """Whether the lock ``path`` is held shared (by readers): a shared lock can be had beside them."""
    fd = _open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def reading(run_dir: str | Path) -> Iterator[None]:
    """Hold a shared lock of the existing folder ``run_dir`` while the block reads it: other readers
    go on, a writer is refused meanwhile, and a folder being written is refused at once
    (:class:`RunDirectoryBusy`). A folder this process may not write is read all the same: its lock
    file opened read-only, or no lock where there is none (no writer can have held one there)."""
    run_dir = Path(run_dir)
    if holds(run_dir):  # this process writes it: it reads what it wrote
        yield
        return
    fd = None
    try:
        fd = _open(run_dir / LOCK, os.O_RDONLY)  # a shared lock needs no write access
    except FileNotFoundError:
        try:
            fd = _open(run_dir / LOCK, os.O_RDWR | os.O_CREAT)  # a writer that starts meanwhile is refused
        except OSError as e:
            if e.errno not in UNWRITABLE:
                raise
    if fd is None:  # no lock file and none can be made: no writer can hold one either
        yield
        return
    _lock(fd, fcntl.LOCK_SH, run_dir)
    _entries.add(fd)  # a forked child closes its copy
    try:
        yield
    finally:
        _entries.discard(fd)
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def writing_entry(path: str | Path) -> Iterator[None]:
    """Hold the lock of the cache entry ``path`` (the file ``<path>.lock`` beside it) while the block
    writes it; another process writing the same entry waits until it ends."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    _entries.add(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        _entries.discard(fd)
        os.close(fd)
