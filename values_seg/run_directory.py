"""The run directory's claim marker and the record of the files values-seg wrote into it.

A run writes only into a directory it may call its own: a new or empty one, or one holding the
marker ``run.json`` of an earlier run (which it then resumes). The marker records every file the
framework wrote (relative path -> sha256), so that

* nothing the framework did not write is ever overwritten or deleted (a rebuilt report removes
  only the figures and tables it recorded);
* a table that changed or broke after it was written (a torn ``results.csv``) is detected when
  read, instead of showing up in the report.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Iterable

from values_seg.checked_files import sha256_file

MARKER = "run.json"
_lock = threading.Lock()
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RunDirectoryError(ValueError):
    """A run directory that values-seg must not write into (the message says why and what to do)."""


def cache_dir(run_dir: str | Path, configured: str | None = None) -> Path:
    """A run's cache folder: the config's ``cache_dir`` where set, else ``RUN_DIR/cache``."""
    return Path(configured) if configured else Path(run_dir) / "cache"


def check_name(name: str) -> str:
    """An experiment name usable as a folder under ``runs/`` (no separators, no ``..``)."""
    if not SAFE_NAME.match(str(name)) or name in (".", ".."):
        raise RunDirectoryError(
            f"experiment name {name!r} must be a plain folder name (letters, digits, '.', '_', '-'; no path): "
            f"it names runs/<name>; to write elsewhere, pass --out DIR explicitly")
    return name


def claim(run_dir: str | Path, name: str) -> Path:
    """Create ``run_dir`` or accept it when it is empty or an earlier values-seg run directory;
    raise :class:`RunDirectoryError` otherwise (a file, or a folder of someone else's files)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirectoryError(f"run directory {run_dir} is a file; give --out a new or empty directory")
    if run_dir.is_dir() and not (run_dir / MARKER).exists():
        others = sorted(p.name for p in run_dir.iterdir())
        if others:
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise RunDirectoryError(
                f"refusing to write into {run_dir}: it holds files values-seg did not write ({shown}); "
                f"choose a new or empty directory with --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / MARKER).exists():
        from values_seg import __version__

        _save(run_dir, {"values_seg": __version__, "name": name, "written": {}})
    return run_dir


def _load(run_dir: Path) -> dict:
    try:
        data = json.loads((run_dir / MARKER).read_text())
    except (OSError, ValueError):
        return {"written": {}}
    return data if isinstance(data, dict) and isinstance(data.get("written"), dict) else {"written": {}}


def _save(run_dir: Path, data: dict) -> None:
    tmp = run_dir / f".{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, run_dir / MARKER)


def _update(run_dir: Path, change) -> None:
    """Apply ``change(written)`` to the marker's record, where there is a marker."""
    if not (run_dir / MARKER).exists():
        return
    with _lock:
        data = _load(run_dir)
        change(data["written"])
        _save(run_dir, data)


def record(run_dir: str | Path, paths: Iterable[str | Path]) -> None:
    """Record files values-seg just wrote (with their sha256) in the marker, where there is one."""
    run_dir = Path(run_dir)

    def add(written: dict) -> None:
        for p in map(Path, paths):
            if p.exists():
                written[p.relative_to(run_dir).as_posix()] = sha256_file(p)

    _update(run_dir, add)


def forget(run_dir: str | Path, paths: Iterable[str | Path]) -> None:
    """Drop files values-seg removed from the record."""
    run_dir = Path(run_dir)
    _update(run_dir, lambda written: [written.pop(Path(p).relative_to(run_dir).as_posix(), None) for p in paths])


def remember(run_dir: str | Path, name: str, value: str | None) -> None:
    """Keep ``value`` under ``name`` in the marker (e.g. the key of the tables last written);
    ``None`` forgets it."""
    run_dir = Path(run_dir)
    if not (run_dir / MARKER).exists():
        return
    with _lock:
        data = _load(run_dir)
        keys = data.setdefault("keys", {})
        if value is None:
            keys.pop(name, None)
        else:
            keys[name] = value
        _save(run_dir, data)


def remembered(run_dir: str | Path, name: str) -> str | None:
    run_dir = Path(run_dir)
    keys = _load(run_dir).get("keys") if (run_dir / MARKER).exists() else None
    return keys.get(name) if isinstance(keys, dict) else None


def remove_written(run_dir: str | Path, paths: Iterable[str | Path]) -> list[Path]:
    """Delete those of ``paths`` that values-seg wrote (recorded in the marker) and forget them;
    any other file is left alone. Returns the deleted paths."""
    run_dir = Path(run_dir)
    ours = written(run_dir)
    removed = [p for p in map(Path, paths) if p.exists() and p.relative_to(run_dir).as_posix() in ours]
    for p in removed:
        p.unlink()
    forget(run_dir, removed)
    return removed


def written(run_dir: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the files values-seg wrote (empty without a marker)."""
    run_dir = Path(run_dir)
    return _load(run_dir)["written"] if (run_dir / MARKER).exists() else {}


def intact(run_dir: str | Path, path: str | Path) -> bool | None:
    """Whether ``path`` still has the content values-seg wrote; ``None`` when not recorded."""
    run_dir, path = Path(run_dir), Path(path)
    expected = written(run_dir).get(path.relative_to(run_dir).as_posix())
    if expected is None:
        return None
    return path.exists() and sha256_file(path) == expected
