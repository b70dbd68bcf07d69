"""The cache: one folder whose layout is known here and nowhere else, and the one integrity record
of every cached file.

The layout, the order of writes, checks and reads, damaged entries and layout upgrades:
docs/design-rationale.md, "The cache"; how a stage finds its entry: docs/contributing.md, "Layout".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import mmap
import os
import re
import shutil
import threading
import time
import warnings
from pathlib import Path
from typing import Iterator

from values_seg.storage import atomic
from values_seg.storage.run_files import CACHE_MARKER, CHECKPOINTS, CODE_DIGESTS, DATA_CHECKS, EVALUATIONS, PREDICTIONS

#: The core stages' kinds, each in the folder of that name; a plugin's stage declares its own
#: (:attr:`values_seg.storage.artifact.Inputs.folder`).
KINDS = (CHECKPOINTS, PREDICTIONS, EVALUATIONS, DATA_CHECKS)

#: The cache layout: bumped when the keys or folders change, so an older cache is recomputed once.
#: 1: training and prediction keys of their own; 2: every key from declared ``Inputs``; 3: one
#: keying rule (code followed into helpers, the libraries it imports, the machine's numerics,
#: the contents of the files parameters name).
LAYOUT = 3

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_LAYOUT_LOCK = ".layout.lock"

log = logging.getLogger("values_seg.engine")


class CacheStore:
    """A run's cache folder; see the module docstring."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"CacheStore({str(self.root)!r})"

    def folder(self, kind: str) -> Path:
        """The folder of one stage kind (:data:`KINDS`, or a plugin stage's own)."""
        if not _KEY.match(kind) or kind in (CACHE_MARKER, CODE_DIGESTS, _LAYOUT_LOCK) or ".layout-v" in kind:
            raise ValueError(f"unusable cache kind {kind!r}: a folder name of letters, digits, '.', '_' and '-' "
                             f"(the core stages': {', '.join(KINDS)})")
        return self.root / kind

    def path(self, kind: str, key: str) -> Path:
        """Where the entry ``key`` of ``kind`` is (or will be) stored."""
        if not _KEY.match(key):
            raise ValueError(f"unusable cache key {key!r} for {kind}: letters, digits, '.', '_' and '-' only")
        return self.folder(kind) / key

    def outputs(self, inputs) -> Path:
        """The folder of a stage's outputs (:class:`values_seg.storage.artifact.Inputs`): its kind
        (``inputs.folder``), its key (``inputs.key()``)."""
        return self.path(inputs.folder, inputs.key())

    @property
    def code_digests(self) -> Path:
        """The source files' code digests kept between runs (:mod:`values_seg.storage.provenance`)."""
        return self.root / CODE_DIGESTS

    # ------------------------------------------------------------------------- the layout

    def layout(self) -> int:
        """The layout recorded in the cache marker (1: a marker from before layouts were recorded)."""
        try:
            return int(json.loads((self.root / CACHE_MARKER).read_text()).get("layout", 1))
        except (OSError, ValueError, TypeError, AttributeError):
            return LAYOUT  # no marker yet: a new cache, written in this layout

    def upgrade(self) -> str | None:
        """Bring an older layout's cache to :data:`LAYOUT` (see the module docstring); returns the
        line that says so, or ``None`` when the cache is current. One process at a time."""
        marker = self.root / CACHE_MARKER
        if not marker.exists() or self.layout() >= LAYOUT:
            return None
        with open(atomic.safe_path(self.root, self.root / _LAYOUT_LOCK), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            old = self.layout()
            if old >= LAYOUT:  # another process upgraded it meanwhile
                return None
            aside = {kind: self.root / f"{kind}.layout-v{old}" for kind in KINDS if self.folder(kind).exists()}
            for kind, target in aside.items():  # all checked before any is moved
                if target.exists() or target.is_symlink():
                    raise FileExistsError(errno.EEXIST, f"cannot set aside the cache's {kind} of layout v{old} "
                                                        f"({self.folder(kind)})", str(target))
            for kind, target in aside.items():
                os.replace(self.folder(kind), target)
            kept = [target.name for target in aside.values()]
            data = json.loads(marker.read_text())
            data["layout"] = LAYOUT
            atomic.write(marker, root=self.root, content=json.dumps(data, indent=1, sort_keys=True))
        where = f"; its files are kept in {', '.join(kept)} (remove them by hand)" if kept else ""
        return (f"cache at {self.root} was written by an older layout (v{old}, keys derived another way); "
                f"recomputing once in layout v{LAYOUT}{where}")


# ----------------------------------------------------------------------------- the integrity record


class CorruptFileWarning(UserWarning):
    """A cached checkpoint or prediction failed its integrity check and will be recomputed."""


class CorruptFileError(RuntimeError):
    """A cached file changed or broke after it was checked; it has been set aside."""


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def entry(data: bytes) -> dict:
    """The integrity record of ``data``: ``{"sha256", "size"}``. One format for every checked file:
    a data file's sidecar, each file of an evaluation folder's manifest (``done.json``)."""
    return {"sha256": atomic.sha256_bytes(data), "size": len(data)}


def problem(record: dict, *, data: bytes | None = None, size: int | None = None) -> str | None:
    """What is wrong with a file against its :func:`entry` record (``None``: nothing): with ``data``
    its size and sha256, with ``size`` only its size (a quick check; the sha256 is checked when read)."""
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        return "no integrity record"
    actual = len(data) if data is not None else size
    if actual != record.get("size"):
        return f"size {actual} bytes, expected {record.get('size')}"
    if data is not None and atomic.sha256_bytes(data) != record["sha256"]:
        return f"sha256 {atomic.sha256_bytes(data)[:12]}..., expected {record['sha256'][:12]}..."
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


def write_verified(path: Path, data: bytes, meta: dict) -> dict:
    """Atomically write ``data`` to ``path`` with its sidecar (``meta`` + sha256 + size + the data
    file's modification time, so that a later check of an untouched file needs no hashing).

    The data go to a temporary file, the sidecar is written, and the data file is moved into place
    last: ``path`` never exists without its record, so a write interrupted at any point (Ctrl-C, a
    worker's SIGTERM) leaves at most a lone sidecar, which :func:`check` reads as absent."""
    side = dict(meta, **entry(data), file=path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(path) as tmp:
        tmp.write_bytes(data)
        side["mtime_ns"] = os.stat(tmp).st_mtime_ns  # a rename keeps it
        atomic.write(sidecar_of(path), json.dumps(side, indent=1, sort_keys=True).encode())
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

    A sidecar without its data file is absent too: it is the trace of a write interrupted before
    the data were moved into place (:func:`write_verified`), and the next write replaces it. A
    damaged pair (bad sidecar, size or hash mismatch, data without sidecar) is reported, set aside
    as ``*.corrupt`` and reported as absent (``None``). A mismatch is re-checked once after a
    moment first, in case another process was just replacing the pair."""
    path = Path(path)
    if not path.exists():
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
    except OSError:  # removed meanwhile: absent
        return None, None
    if side is None:
        return None, "its sidecar is missing or unreadable"
    wrong = problem(side, size=size)
    if wrong is not None:
        return side, wrong
    if side.get("mtime_ns") == path.stat().st_mtime_ns:  # untouched since written: hashed when read
        return side, None
    if not _verified.known(path, side["sha256"]):
        actual = atomic.sha256_file(path)
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
    return _verified_against(side, path, what, data)


def _verified_against(side: dict | None, path: Path, what: str, data):
    """``data`` (the content of ``path``) if it matches the sidecar ``side`` read before it; else
    the file is reported, set aside and a :class:`CorruptFileError` raised."""
    wrong = "sidecar missing" if side is None else problem(side, data=data)
    if wrong is not None:
        report_corrupt(path, what, wrong)
        raise CorruptFileError(f"{what} {path} is corrupt ({wrong}); it was set aside, rerun to recompute it")
    return data


@contextlib.contextmanager
def mapped(path: Path) -> Iterator[mmap.mmap | bytes]:
    """The bytes of ``path`` mapped into memory read-only (no copy) for as long as the ``with``
    block lasts; where it cannot be mapped (an empty file, a file system without memory maps), its
    bytes read as usual."""
    with open(path, "rb") as f:
        try:
            content = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # empty (ValueError), or the file system maps no files
            content = None
        if content is None:
            data = f.read()
    if content is None:
        yield data
        return
    try:
        yield content
    finally:
        try:
            content.close()
        except BufferError:  # an array still views it (e.g. held by a traceback): closed when collected
            pass


@contextlib.contextmanager
def mapped_verified(path: Path, what: str) -> Iterator[mmap.mmap | bytes]:
    """:func:`read_verified` without the copy (:func:`mapped`): for a large file, the prediction
    cache's samples, hashed and read where they lie."""
    path = Path(path)
    side = read_sidecar(path)
    stack = contextlib.ExitStack()
    try:
        content = stack.enter_context(mapped(path))
    except OSError as e:
        raise CorruptFileError(f"{what} {path} cannot be read: {e}") from e
    with stack:
        yield _verified_against(side, path, what, content)


# ----------------------------------------------------------------------------- folders written whole


def write_folder(out: Path, outputs: dict[str, bytes], info: dict, manifest: str, complete: bool = True) -> None:
    """Write ``outputs`` (file name -> bytes) into a fresh folder, the ``manifest`` (``info``, each
    file's :func:`entry`, ``complete``) last, and move it onto ``out`` atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(out) as tmp:  # removed if anything fails, Ctrl-C included
        tmp.mkdir()
        files = {}
        for name, data in outputs.items():
            (tmp / name).write_bytes(data)
            files[name] = entry(data)
        (tmp / manifest).write_text(json.dumps({**info, "files": files, "complete": complete}, sort_keys=True))
        if out.exists():  # an earlier incomplete or damaged write
            shutil.rmtree(out)


def _manifest(folder: Path, manifest: str) -> dict | None:
    try:
        data = json.loads((folder / manifest).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None


def set_folder_aside(folder: Path, what: str, wrong: str) -> None:
    """Report a damaged folder with its path and move it out of the way (``*.corrupt``)."""
    log.warning("corrupt %s %s: %s; set aside as *.corrupt and recomputing", what, folder, wrong)
    set_aside(folder)


def folder_reusable(folder: Path, what: str, manifest: str) -> bool:
    """Whether ``folder`` is complete and its files have the recorded sizes (their sha256 are
    checked when read); a damaged one is set aside."""
    if not folder.exists():
        return False
    record = _manifest(folder, manifest)
    wrong = None
    if record is None:
        wrong = f"{manifest} is missing or unreadable"
    else:
        for name, item in record["files"].items():
            path = folder / name
            if not path.exists() or problem(item, size=path.stat().st_size) is not None:
                wrong = f"{name} is missing or has the wrong size"
                break
    if wrong is not None:
        set_folder_aside(folder, what, wrong)
        return False
    return bool(record.get("complete"))


def read_folder(folder: Path, what: str, manifest: str) -> dict[str, bytes]:
    """Every file of a folder written whole, verified against its manifest; :class:`CorruptFileError`
    naming the file otherwise."""
    record = _manifest(folder, manifest)
    if record is None:
        raise CorruptFileError(f"{what} {folder}: {manifest} is missing or unreadable")
    out = {}
    for name, item in record["files"].items():
        path = folder / name
        try:
            data = path.read_bytes()
        except OSError as e:
            raise CorruptFileError(f"{what} file {path} cannot be read: {e}") from e
        wrong = problem(item, data=data)
        if wrong is not None:
            raise CorruptFileError(f"{what} file {path} does not match its recorded sha256 and size "
                                   f"(changed or damaged: {wrong})")
        out[name] = data
    return out
