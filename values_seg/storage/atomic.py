"""Writing a file atomically, the one way values-seg does: a temporary file beside the target
moved into place (:func:`replacing`, :func:`write`), never through a link nor outside a root
(:func:`safe_path`); and the digests of what was written. Ownership of a run directory is
:mod:`values_seg.storage.run_directory`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Callable, Iterable, Iterator, Union

#: what :func:`write` writes: bytes, UTF-8 text, or a function filling the temporary path
Content = Union[bytes, str, Callable[[Path], object]]


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


class RefusedWrite(ValueError):
    """A write values-seg refuses: outside its root, through a link, into a folder not its own
    (the message says why and what to do)."""


def safe_path(root: str | Path, path: str | Path) -> Path:
    """``path``, checked for a write or delete under ``root``: inside it, and neither ``path`` nor
    a folder between ``root`` and it is a symbolic link (``root`` itself may be one)."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise RefusedWrite(f"refusing to write {path}: it is outside {root}") from None
    if ".." in parts:
        raise RefusedWrite(f"refusing to write {path}: it leaves {root} ('..')")
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise RefusedWrite(
                f"refusing to write through the symbolic link {current} (-> {os.readlink(current)}): values-seg "
                f"writes only its own files inside {root}; remove the link or choose another directory")
    if parts and not path.resolve().is_relative_to(root.resolve()):
        raise RefusedWrite(f"refusing to write {path}: it resolves outside {root}")
    return path


def make_dir(root: str | Path, path: str | Path) -> Path:
    """Create the folder ``path`` under ``root`` (and its parents), never through a link."""
    path = safe_path(root, path)
    path.mkdir(parents=True, exist_ok=True)
    return safe_path(root, path)


def write(path: str | Path, content: Content, *, root: str | Path | None = None, fsync: bool = False) -> Path:
    """Write ``path`` atomically (:func:`replacing`): ``content`` is bytes, UTF-8 text or a function
    that fills the temporary file. Under a ``root``, the path is checked (:func:`safe_path`) before
    and again just before the replace, so a link there is refused, never followed."""
    path = Path(path) if root is None else safe_path(root, path)
    if root is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        make_dir(root, path.parent)
    with replacing(path, fsync=fsync) as tmp:
        if isinstance(content, bytes):
            tmp.write_bytes(content)
        elif isinstance(content, str):
            tmp.write_text(content, encoding="utf-8")
        else:
            content(tmp)
        if root is not None:
            safe_path(root, path)
    return path


def create_text(root: str | Path, path: str | Path, text: str) -> bool:
    """Write ``path`` under ``root`` with UTF-8 ``text`` only if no file is there (atomically, as
    one step: of two processes creating it at once, one wins); returns whether this call created it."""
    path = safe_path(root, path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:  # an interrupt included
        tmp.unlink(missing_ok=True)


def links(root: str | Path, skip: Iterable[str | Path] = ()) -> list[Path]:
    """The symbolic links under ``root`` (not followed; the folders in ``skip`` not searched)."""
    root = Path(root)
    skipped = {Path(s) for s in skip}
    found = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in list(dirs):
            if here / name in skipped:
                dirs.remove(name)
            elif (here / name).is_symlink():
                found.append(here / name)
        found += [here / name for name in files if (here / name).is_symlink()]
    return sorted(found)


def refuse_links(root: Path, skip: Iterable[Path] = ()) -> None:
    found = links(root, skip)
    if found:
        shown = ", ".join(f"{p.relative_to(root)} -> {os.readlink(p)}" for p in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise RefusedWrite(
            f"refusing to write into {root}: it holds symbolic links ({shown}{more}) and values-seg never writes "
            f"or deletes through a link; remove them or choose another directory")
