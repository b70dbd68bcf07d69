"""A user's files in a run directory are kept: a file values-seg did not write, or wrote and that
changed since, is moved aside before values-seg writes there (docs/design-rationale.md,
"A user's files").
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from values_seg.storage.atomic import sha256_file

_KEPT = re.compile(r"\.user-\d+(\.[^.]*)?$")


class UserFileKept(UserWarning):
    """A file values-seg did not write, or one changed since, was kept instead of overwritten or deleted."""


def is_kept(path: str | Path) -> bool:
    """Whether ``path`` is named as a user's file that :func:`keep` moved aside (never values-seg's)."""
    return bool(_KEPT.search(Path(path).name))


def unchanged(path: Path, recorded: str | None) -> bool:
    """Whether ``path`` is a plain file with the sha256 ``recorded`` when values-seg wrote it."""
    return recorded is not None and path.is_file() and not path.is_symlink() and sha256_file(path) == recorded


def keep(path: Path, recorded: str | None, root: Path) -> Path | None:
    """Before values-seg writes ``path``: move a file there that is not values-seg's unchanged
    (``recorded``: the sha256 the marker holds for it, ``None`` if it never wrote it) aside, with a
    one-line notice; returns where it went (``None``: nothing to keep)."""
    if not (path.exists() or path.is_symlink()) or unchanged(path, recorded):
        return None
    n = 1
    while (target := path.with_name(f"{path.stem}.user-{n}{path.suffix}")).exists() or target.is_symlink():
        n += 1
    os.rename(path, target)
    why = "values-seg did not write it" if recorded is None else "it changed after values-seg wrote it"
    warnings.warn(f"kept {_shown(path, root)} ({why}) as {target.name}; values-seg writes its own {path.name} "
                  f"in its place", UserFileKept, stacklevel=3)
    return target


def left(path: Path, root: Path) -> None:
    """The notice that a file values-seg would delete as stale is kept, since it changed after
    values-seg wrote it."""
    warnings.warn(f"left {_shown(path, root)} in place: it changed after values-seg wrote it, so it is no longer "
                  f"values-seg's to delete", UserFileKept, stacklevel=3)


def _shown(path: Path, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)
