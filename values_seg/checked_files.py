"""Atomic, integrity-checked files: the one integrity scheme of values-seg.

Every checked file has a record ``{"sha256", "size"}`` (:func:`entry`), checked by one function
(:func:`problem`); a damaged file or folder is set aside as ``*.corrupt`` (:func:`set_aside`). The
record lives in a JSON sidecar beside a cached data file (checkpoints, predictions, data checks;
below), or in the manifest of a folder written whole (an evaluation's ``done.json``,
:mod:`values_seg.runner.evaluation_store`); the run directory's marker records the sha256 of each
file values-seg wrote there (:mod:`values_seg.run_directory`).

Writers write a temporary file in the target folder and ``os.replace`` it into place (data first,
sidecar last), so a reader sees either the old pair, the new pair, or a data file without a
matching sidecar, which counts as corrupt. A corrupt file is reported once (a
:class:`CorruptFileWarning`), renamed to ``*.corrupt`` and treated as missing.

Checking that a cached file is there (:func:`check`) compares size and modification time with the
sidecar and hashes only a file that was touched since it was written; reading it
(:func:`read_verified`) always verifies the sha256, so damage is caught before any use.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Iterator

log = logging.getLogger("values_seg.engine")


class CorruptFileWarning(UserWarning):
    """A cached checkpoint or prediction failed its integrity check and will be recomputed."""


class CorruptFileError(RuntimeError):
    """A cached file changed or broke after it was checked; it has been set aside."""


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def entry(data: bytes) -> dict:
    """The integrity record of ``data``: ``{"sha256", "size"}``. One format for every checked file:
    a data file's sidecar, each file of an evaluation folder's manifest (``done.json``)."""
    return {"sha256": sha256_bytes(data), "size": len(data)}


def problem(record: dict, *, data: bytes | None = None, size: int | None = None) -> str | None:
    """What is wrong with a file against its :func:`entry` record (``None``: nothing): with ``data``
    its size and sha256, with ``size`` only its size (a quick check; the sha256 is checked when read)."""
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        return "no integrity record"
    actual = len(data) if data is not None else size
    if actual != record.get("size"):
        return f"size {actual} bytes, expected {record.get('size')}"
    if data is not None and sha256_bytes(data) != record["sha256"]:
        return f"sha256 {sha256_bytes(data)[:12]}..., expected {record['sha256'][:12]}..."
    return None


def set_aside(path: str | os.PathLike) -> Path:
    """Move a damaged file or folder out of the way as ``*.corrupt`` (replacing an older one), so
    that it is recomputed and can still be looked at; returns the new path."""
    path = Path(path)
    target = path.with_name(path.name + ".corrupt")
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)
    os.replace(path, target)
    return target


#: The names :func:`replacing` gives its temporary files: ``.<name>.<pid>.<8 hex>.tmp`` (plus the
#: target's suffixes with ``keep_suffix``).
_TEMPORARY = re.compile(r"^\..+\.\d+\.[0-9a-f]{8}\.tmp(\.[^.]+)*$")


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, keep_suffix: bool = False, fsync: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` (a file or a folder) to write into; moved onto ``path``
    when the block ends, removed when it fails (an error, a full disk, Ctrl-C), so a reader sees
    the old version or the new one and no temporary file is left behind.

    ``keep_suffix``: the temporary name ends in the target's suffixes (``.nii.gz``), for writers
    that choose the format by the extension (SimpleITK). ``fsync``: the file's data reach the disk
    before it replaces ``path`` (for files that must survive a power cut, not only a killed process)."""
    path = Path(path)
    suffix = "".join(path.suffixes) if keep_suffix else ""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp{suffix}")
    try:
        yield tmp
        if fsync:
            _fsync(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def is_temporary(path: str | os.PathLike) -> bool:
    """Whether ``path`` is named as a temporary file of :func:`replacing` (one that a killed
    process left behind, for a cleaner of a folder values-seg owns)."""
    return bool(_TEMPORARY.match(Path(path).name))


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:  # no fsync: after a crash, the sha256 check catches a torn file
        tmp.write_bytes(data)


def write_with_sidecar(path: Path, data: bytes, meta: dict) -> dict:
    """Atomically write ``data`` to ``path`` and then its sidecar (``meta`` + sha256 + size + the
    data file's modification time, so that a later check of an untouched file needs no hashing)."""
    side = dict(meta, **entry(data), file=path.name)
    _atomic_write(path, data)
    side["mtime_ns"] = os.stat(path).st_mtime_ns
    _atomic_write(sidecar_of(path), json.dumps(side, indent=1, sort_keys=True).encode())
    _verified.record(path, side["sha256"])
    return side


class _Verified:
    """Per-process memo of files already hashed, keyed by (path, size, mtime, inode)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(path: Path, sha: str) -> tuple:
        st = os.stat(path)
        return (st.st_size, st.st_mtime_ns, st.st_ino, sha)

    def record(self, path: Path, sha: str) -> None:
        with self._lock:
            self._seen[str(path)] = self._stamp(path, sha)

    def known(self, path: Path, sha: str) -> bool:
        try:
            stamp = self._stamp(path, sha)
        except OSError:
            return False
        with self._lock:
            return self._seen.get(str(path)) == stamp

    def forget(self, path: Path) -> None:
        with self._lock:
            self._seen.pop(str(path), None)


_verified = _Verified()


def read_sidecar(path: Path) -> dict | None:
    try:
        return json.loads(sidecar_of(path).read_text())
    except (OSError, ValueError):
        return None


def check(path: Path, what: str) -> dict | None:
    """The sidecar of ``path`` if the pair is present and intact; ``None`` if absent.

    A damaged pair (bad sidecar, size or hash mismatch, data without sidecar) is reported,
    set aside as ``*.corrupt`` and reported as absent (``None``). A mismatch is re-checked once
    after a moment first, in case another process was just replacing the pair."""
    path = Path(path)
    if not path.exists() and not sidecar_of(path).exists():
        return None
    side, problem = _inspect(path)
    if problem is not None:
        time.sleep(0.05)
        side, problem = _inspect(path)
    if problem is None:
        return side
    report_corrupt(path, what, problem)
    return None


def _inspect(path: Path) -> tuple[dict | None, str | None]:
    side = read_sidecar(path)
    try:
        size = path.stat().st_size
    except OSError:
        return side, "the data file is missing (only its sidecar exists)"
    if side is None:
        return None, "its sidecar is missing or unreadable"
    wrong = problem(side, size=size)
    if wrong is not None:
        return side, wrong
    if side.get("mtime_ns") == path.stat().st_mtime_ns:  # untouched since written: hashed when read
        return side, None
    if not _verified.known(path, side["sha256"]):
        actual = sha256_file(path)
        if actual != side["sha256"]:
            return side, f"sha256 {actual[:12]}..., expected {side['sha256'][:12]}..."
        _verified.record(path, actual)
    return side, None


def report_corrupt(path: Path, what: str, problem: str) -> None:
    msg = f"corrupt {what} {path}: {problem}; set aside as *.corrupt and recomputing"
    warnings.warn(msg, CorruptFileWarning, stacklevel=3)  # once: no log line beside it
    discard(path, keep=True)


def discard(path: Path, keep: bool = False) -> None:
    """Remove a data file and its sidecar (``keep``: rename the data file to ``*.corrupt``)."""
    path = Path(path)
    _verified.forget(path)
    for p in (path, sidecar_of(path)):
        try:
            if keep and p == path and p.exists():
                set_aside(p)
            else:
                p.unlink(missing_ok=True)
        except OSError as e:  # pragma: no cover - racing writers
            log.warning("could not remove %s: %s", p, e)


def read_verified(path: Path, what: str) -> bytes:
    """The bytes of ``path``, verified against its sidecar in the same read.

    Raises :class:`CorruptFileError` (after setting the file aside) on a mismatch."""
    path = Path(path)
    side = read_sidecar(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CorruptFileError(f"{what} {path} cannot be read: {e}") from e
    wrong = "sidecar missing" if side is None else problem(side, data=data)
    if wrong is not None:
        report_corrupt(path, what, wrong)
        raise CorruptFileError(f"{what} {path} is corrupt ({wrong}); it was set aside, rerun to recompute it")
    return data
