"""The files a run's components read, keyed by their content and noted for the no-op rerun.

Every file whose content enters a key (pretrained weights, a model folder's checkpoints, a data
set's manifest) is digested here, and its size and modification time are noted: a run records
them (:func:`noted`), and its rerun is a no-op only where each is still as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import Iterable, Iterator

from values_seg.checked_files import sha256_file

_noted: dict[str, list[int]] = {}
_collecting: list[set[str]] = []  # the open noting() blocks
_unnoted: list[str] = []  # components that read files they did not note
_digests: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256, per process
_lock = threading.Lock()


def _stamp(path: Path) -> os.stat_result:
    st = path.stat()
    name = str(path.absolute())
    with _lock:
        _noted[name] = [st.st_size, st.st_mtime_ns]
        for seen in _collecting:
            seen.add(name)
    return st


@contextlib.contextmanager
def noting() -> Iterator[set[str]]:
    """The files noted while the block runs (a data set's fingerprint: did it note its files?)."""
    seen: set[str] = set()
    with _lock:
        _collecting.append(seen)
    try:
        yield seen
    finally:
        with _lock:
            _collecting.remove(seen)


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


def noted() -> dict[str, list[int]]:
    """``{absolute path: [size, mtime_ns]}`` of every file noted in this process."""
    with _lock:
        return dict(sorted(_noted.items()))


def unnoted(what: str) -> None:
    """Say that a component read files it did not note: this run is not recorded for the no-op rerun."""
    with _lock:
        _unnoted.append(what)


def not_noted() -> list[str]:
    """What :func:`unnoted` was told in this process."""
    with _lock:
        return list(_unnoted)


def unchanged(stamps: dict[str, list[int]]) -> bool:
    """Whether every file of ``stamps`` (:func:`noted`) is there with the same size and time."""
    for name, stamp in stamps.items():
        try:
            st = os.stat(name)
        except OSError:
            return False
        if [st.st_size, st.st_mtime_ns] != list(stamp):
            return False
    return True
