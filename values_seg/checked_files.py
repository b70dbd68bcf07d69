"""Atomic writes and file digests: the primitives under the store's integrity record.

A writer writes a temporary file (or folder) beside its target and moves it into place with
``os.replace`` (:func:`replacing`), so a reader sees the old version or the new one;
:func:`sha256_file` digests a file in blocks. The integrity record built on these (``{"sha256", "size"}``), its checks and
``set_aside`` belong to the store (:mod:`values_seg.store`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Iterator


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


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


