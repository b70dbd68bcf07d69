"""Writes and deletes inside a folder values-seg owns: never through a symbolic link (the path
itself or a folder on the way from the root), never outside the root; files are replaced
atomically (through :func:`values_seg.checked_files.replacing`). :mod:`values_seg.run_directory`
decides which folders are values-seg's and re-exports these helpers.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable, Iterable

from values_seg.checked_files import replacing


class RunDirectoryError(ValueError):
    """A run directory that values-seg must not write into (the message says why and what to do)."""


def safe_path(root: str | Path, path: str | Path) -> Path:
    """``path``, checked for a write or delete under ``root``: inside it, and neither ``path`` nor
    a folder between ``root`` and it is a symbolic link (``root`` itself may be one)."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise RunDirectoryError(f"refusing to write {path}: it is outside {root}") from None
    if ".." in parts:
        raise RunDirectoryError(f"refusing to write {path}: it leaves {root} ('..')")
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise RunDirectoryError(
                f"refusing to write through the symbolic link {current} (-> {os.readlink(current)}): values-seg "
                f"writes only its own files inside {root}; remove the link or choose another directory")
    if parts and not path.resolve().is_relative_to(root.resolve()):
        raise RunDirectoryError(f"refusing to write {path}: it resolves outside {root}")
    return path


def make_dir(root: str | Path, path: str | Path) -> Path:
    """Create the folder ``path`` under ``root`` (and its parents), never through a link."""
    path = safe_path(root, path)
    path.mkdir(parents=True, exist_ok=True)
    return safe_path(root, path)


def atomic_write(root: str | Path, path: str | Path, write: Callable[[Path], object]) -> Path:
    """Write ``path`` under ``root`` atomically: ``write(tmp)`` fills a temporary file beside it,
    which then replaces ``path`` (a link there is refused, never followed); the temporary file is
    removed on any failure, an interrupt included."""
    path = safe_path(root, path)
    make_dir(root, path.parent)
    with replacing(path) as tmp:
        write(tmp)
        safe_path(root, path)  # checked again just before the replace
    return path


def write_text(root: str | Path, path: str | Path, text: str) -> Path:
    """:func:`atomic_write` of UTF-8 text."""
    return atomic_write(root, path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


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


def _refuse_links(root: Path, skip: Iterable[Path] = ()) -> None:
    found = links(root, skip)
    if found:
        shown = ", ".join(f"{p.relative_to(root)} -> {os.readlink(p)}" for p in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise RunDirectoryError(
            f"refusing to write into {root}: it holds symbolic links ({shown}{more}) and values-seg never writes "
            f"or deletes through a link; remove them or choose another directory")
