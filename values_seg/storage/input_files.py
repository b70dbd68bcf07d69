"""The files a run's components read, keyed by their content and noted (size, modification time) for
the no-op rerun (docs/design-rationale.md, "Input files").
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from values_seg.storage.atomic import sha256_file


@dataclass(eq=False)  # each recording is itself: two with the same reads are not one
class Reads:
    """What the components read while a :func:`recording` was open: ``stamps`` ``{absolute path:
    [size, mtime_ns]}``, and ``unnoted``, the components that read files they did not note."""

    stamps: dict[str, list[int]] = field(default_factory=dict)
    unnoted: list[str] = field(default_factory=list)


_recordings: list[Reads] = []  # the open recording() blocks
_digests: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256, per process
_lock = threading.Lock()


def _stamp(path: Path) -> os.stat_result:
    st = path.stat()
    name = str(path.absolute())
    with _lock:
        for reads in _recordings:
            reads.stamps[name] = [st.st_size, st.st_mtime_ns]
    return st


@contextlib.contextmanager
def recording() -> Iterator[Reads]:
    """The files noted while the block runs, and what read files without noting them (a run's
    record; a data set's fingerprint: did it note its files?); blocks nest, each sees its own."""
    reads = Reads()
    with _lock:
        _recordings.append(reads)
    try:
        yield reads
    finally:
        with _lock:
            _recordings.remove(reads)


def note(paths: Iterable[str | os.PathLike]) -> None:
    """Note files a component read without digesting them (a data set keyed by their sizes and
    times, its own choice)."""
    for path in paths:
        _stamp(Path(path))


def file_digest(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (hashed once per process while it is unchanged), noted."""
    path = Path(path)
    st = _stamp(path)
    key = (str(path.absolute()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _digests:
        _digests[key] = sha256_file(path)
    return _digests[key]


def content_digest(path: str | os.PathLike) -> str:
    """The digest of what a parameter names: a file's bytes, or a folder's files (their relative
    names and bytes, links not followed); ``FileNotFoundError`` naming it where there is none."""
    path = Path(path)
    if path.is_file():
        return file_digest(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist (a parameter names it as a file the component reads)")
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            file = Path(folder, name)
            if not file.is_symlink():
                h.update(f"{file.relative_to(path).as_posix()}\0{file_digest(file)}\n".encode())
    return h.hexdigest()


def read_files(params, values: dict) -> dict[str, str]:
    """``{parameter: content digest}`` of the files and folders that ``values`` names for the
    parameters (:class:`values_seg.params.Param`) declared ``InputPath()`` (keyed by content)."""
    return {p.name: content_digest(values[p.name]) for p in params
            if p.reads is not None and p.reads.keyed_by == "content" and values.get(p.name) is not None}


def unnoted(what: str) -> None:
    """Say that a component read files it did not note: the runs recording now are not recorded
    for the no-op rerun."""
    with _lock:
        for reads in _recordings:
            reads.unnoted.append(what)


def unchanged(stamps: dict[str, list[int]]) -> bool:
    """Whether every file of ``stamps`` (:attr:`Reads.stamps`) is there with the same size and time."""
    for name, stamp in stamps.items():
        try:
            st = os.stat(name)
        except OSError:
            return False
        if [st.st_size, st.st_mtime_ns] != list(stamp):
            return False
    return True
