"""Which folders are values-seg's own (the marker ``run.json``), and the only way it writes or
deletes in them.

What the record means and how writes are kept safe: docs/design-rationale.md,
"Ownership of a run directory".
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from values_seg.storage import atomic, user_files
from values_seg.storage.atomic import sha256_file
from values_seg.storage.run_lock import writers_child
from values_seg.storage.atomic import RefusedWrite, refuse_links, safe_path
from values_seg.storage.run_files import CACHE, CACHE_MARKER, MARKER

FORMAT = "values-seg run directory"
CACHE_FORMAT = "values-seg cache directory"
VERSION = 1
_lock = threading.Lock()
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def cache_dir(run_dir: str | Path, configured: str | None = None) -> Path:
    """A run's cache folder: the config's ``cache_dir`` where set, else ``RUN_DIR/cache``."""
    return Path(configured) if configured else Path(run_dir) / CACHE


def check_name(name: str) -> str:
    """An experiment name usable as a folder under ``runs/`` (no separators, no ``..``)."""
    if not SAFE_NAME.match(str(name)) or name in (".", ".."):
        raise RefusedWrite(
            f"experiment name {name!r} must be a plain folder name (letters, digits, '.', '_', '-'; no path): "
            f"it names runs/<name>; to write elsewhere, pass --out DIR explicitly")
    return name


# ----------------------------------------------------------------------------- the markers


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _new_marker(name: str) -> dict:
    from values_seg import __version__

    return {"format": FORMAT, "version": VERSION, "name": name, "created": _now(), "id": uuid.uuid4().hex,
            "values_seg": __version__, "written": {}, "keys": {}}


def _not_ours(path: Path, why: str) -> RefusedWrite:
    return RefusedWrite(
        f"{path} is not a values-seg run marker ({why}), so {path.parent} is not a values-seg run directory; "
        f"values-seg writes only into directories it created: give a folder a values-seg run wrote, or a new "
        f"or empty --out")


def _parse(path: Path, text: str) -> dict:
    """The marker's record, validated (an earlier version's migrated in memory)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise _not_ours(path, f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise _not_ours(path, "not a JSON object")
    if "format" not in data and {"values_seg", "name", "written"} <= set(data):  # an earlier values-seg's
        data = {**_new_marker(data["name"]), "created": None, "values_seg": data["values_seg"],
                "written": data["written"], "keys": data.get("keys", {})}
    if data.get("format") != FORMAT:
        raise _not_ours(path, f"no \"format\": \"{FORMAT}\"" if "format" not in data
                        else f"its format is {data['format']!r}, not {FORMAT!r}")
    if not isinstance(data.get("version"), int) or data["version"] > VERSION or data["version"] < 1:
        raise _not_ours(path, f"version {data.get('version')!r}; this values-seg reads version {VERSION} "
                              f"(a newer values-seg wrote it? upgrade values-seg)")
    _check_fields(path, data)
    return data


def _check_fields(path: Path, data: dict) -> None:
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise _not_ours(path, "no experiment name")
    _check_id(data, lambda why: _not_ours(path, why))
    written, keys = data.get("written"), data.setdefault("keys", {})
    if not isinstance(written, dict) or not isinstance(keys, dict):
        raise _not_ours(path, "'written' and 'keys' must be JSON objects")
    for rel, sha in written.items():
        parts = Path(rel).parts
        if not isinstance(sha, str) or Path(rel).is_absolute() or ".." in parts or not parts:
            raise _not_ours(path, f"its record of written files has a bad entry {rel!r}")


def _check_id(data: dict, refuse: Callable[[str], RefusedWrite]) -> None:
    """A marker's identity is a uuid; ``refuse(why)`` is raised otherwise."""
    try:
        uuid.UUID(str(data.get("id")))
    except ValueError:
        raise refuse(f"its id {data.get('id')!r} is not a uuid") from None


def _listing(folder: Path) -> str:
    """The first names in ``folder``, for a refusal message."""
    names = sorted(p.name for p in folder.iterdir())
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


def _read_marker(path: Path, parse: Callable[[Path, str], dict]) -> dict:
    if path.is_symlink():
        raise RefusedWrite(f"{path} is a symbolic link, not values-seg's marker; values-seg never writes "
                                f"through a link: choose a new or empty directory")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RefusedWrite(f"cannot read {path}: {e}; check the folder's permissions or choose another "
                                f"directory") from None
    return parse(path, text)


def marker(run_dir: str | Path) -> dict:
    """The parsed, validated marker of ``run_dir``; :class:`RefusedWrite` when there is none or
    it is not values-seg's."""
    run_dir = Path(run_dir)
    path = run_dir / MARKER
    if not path.exists() and not path.is_symlink():
        raise RefusedWrite(
            f"{run_dir} is not a values-seg run directory (no {MARKER}); run 'values-seg run CONFIG --out "
            f"{run_dir}' to make one, or give the folder a run wrote")
    return _read_marker(path, _parse)


def check(run_dir: str | Path) -> dict:
    """Before a command writes into an existing run directory: it is values-seg's (its marker) and
    holds no link values-seg might write through (its cache folder is checked as a cache). Returns
    the marker."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory: it does not exist; give the folder a "
                                f"values-seg run wrote")
    if not run_dir.is_dir():
        raise RefusedWrite(f"{run_dir} is not a directory; give the folder a values-seg run wrote")
    data = marker(run_dir)
    refuse_links(run_dir, skip=[run_dir / CACHE])
    return data


def _is_cache(folder: Path) -> bool:
    return (folder / CACHE_MARKER).exists() or (folder / CACHE_MARKER).is_symlink()


def _refuse_run_in_a_cache(run_dir: Path) -> None:
    """A run directory is never a cache nor inside one (the cache's store owns every folder there)."""
    where = run_dir.resolve()
    cache = next((f for f in (where, *where.parents) if _is_cache(f)), None)
    if cache is not None:
        inside = "is a values-seg cache" if cache == where else f"lies inside the values-seg cache {cache}"
        raise RefusedWrite(f"refusing to write a run into {run_dir}: it {inside} (its {CACHE_MARKER}); a run "
                                f"directory cannot be in a cache: choose --out outside it")


def _refuse_cache_of_another(cache: Path, run_dir: Path) -> None:
    """A cache is never inside another cache, nor inside a run directory other than ``run_dir``'s
    (whose run owns what is in it): the folders from the cache up to ``run_dir`` (where it lies in
    it) or the root are checked."""
    run = run_dir.resolve()
    for folder in cache.resolve().parents:
        if folder == run:
            return
        if _is_cache(folder):
            raise RefusedWrite(f"cache_dir {cache} lies inside the values-seg cache {folder}; set cache_dir to "
                                    f"{folder} itself to share it, or to a folder outside it")
        if (other := _load(folder)) is not None:
            raise RefusedWrite(
                f"cache_dir {cache} lies inside the run directory {folder} (experiment {other['name']!r}), which "
                f"this run does not own; set cache_dir to a folder outside other runs' directories (a cache "
                f"shared between runs has a folder of its own)")


def claim(run_dir: str | Path, name: str) -> Path:
    """Create ``run_dir`` or accept it when it is empty or values-seg's run directory of the same
    experiment ``name``; raise :class:`RefusedWrite` otherwise (a file, someone else's files,
    a marker that is not values-seg's, another experiment's run, a symbolic link inside, a cache
    or a folder inside one)."""
    run_dir = Path(run_dir)
    _refuse_run_in_a_cache(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RefusedWrite(f"run directory {run_dir} is a file; give --out a new or empty directory")
    has_marker = (run_dir / MARKER).exists() or (run_dir / MARKER).is_symlink()
    if run_dir.is_dir() and not has_marker and any(run_dir.iterdir()):
        raise RefusedWrite(
            f"refusing to write into {run_dir}: it holds files values-seg did not write ({_listing(run_dir)}) and "
            f"no values-seg marker ({MARKER}); choose a new or empty directory with --out")
    if has_marker:
        data = check(run_dir)
        if data["name"] != name:
            raise RefusedWrite(
                f"refusing to write experiment {name!r} into {run_dir}: it holds the run of experiment "
                f"{data['name']!r} (its {MARKER}); choose another directory with --out, or delete {run_dir} "
                f"to replace that run")
        if data.get("created") is None:  # an earlier values-seg's marker: migrated now
            _save(run_dir, data)
        return run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    created = atomic.create_text(run_dir, run_dir / MARKER, json.dumps(_new_marker(name), indent=1, sort_keys=True))
    return run_dir if created else claim(run_dir, name)  # another command claimed it meanwhile: checked as such


def _parse_cache(path: Path, text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise _not_our_cache(path, f"not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        raise _not_our_cache(path, f"its format is not {CACHE_FORMAT!r}")
    if not isinstance(data.get("version"), int) or not 1 <= data["version"] <= VERSION:
        raise _not_our_cache(path, f"version {data.get('version')!r}; this values-seg reads version {VERSION}")
    _check_id(data, lambda why: _not_our_cache(path, why))
    return data


def _not_our_cache(path: Path, why: str) -> RefusedWrite:
    return RefusedWrite(
        f"{path} is not a values-seg cache marker ({why}), so {path.parent} is not a values-seg cache; set "
        f"cache_dir to a new or empty folder")


def claim_cache(folder: str | Path, run_dir: str | Path) -> Path:
    """Create the cache ``folder`` (with its marker) or accept it when it is empty or values-seg's
    cache; the default ``RUN_DIR/cache`` of an earlier values-seg's run (no marker yet) is adopted.
    Refuses someone else's folder, a folder with symbolic links inside, and a folder inside another
    cache or inside a run directory other than ``run_dir``."""
    folder, run_dir = Path(folder), Path(run_dir)
    _refuse_cache_of_another(folder, run_dir)
    path = folder / CACHE_MARKER
    if folder.exists() and not folder.is_dir():
        raise RefusedWrite(f"cache_dir {folder} is a file; set cache_dir to a new or empty folder")
    if path.exists() or path.is_symlink():
        _read_marker(path, _parse_cache)
    elif folder.is_dir() and any(folder.iterdir()) and folder.absolute() != (run_dir / CACHE).absolute():
        raise RefusedWrite(
            f"refusing to use {folder} as the cache: it holds files values-seg did not write ({_listing(folder)}) "
            f"and no values-seg cache marker ({CACHE_MARKER}); set cache_dir to a new or empty folder")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        from values_seg.storage.cache_store import LAYOUT

        _write_json(folder, path, {"format": CACHE_FORMAT, "version": VERSION, "created": _now(),
                                   "id": uuid.uuid4().hex, "layout": LAYOUT})
    refuse_links(folder)
    return folder


def claim_all(run_dir: str | Path, name: str, cache: str | Path) -> None:
    """Claim a run's directory and its cache folder; a cache elsewhere is checked first, so that a
    refused cache leaves no new run directory behind, and a cache inside the run directory second.
    The run directory itself cannot be the cache, nor lie in a cache, nor the cache in another cache
    or another run's directory (all refused before anything is written)."""
    run_dir, cache = Path(run_dir), Path(cache)
    if cache.resolve() == run_dir.resolve():
        raise RefusedWrite(f"cache_dir {cache} is the run directory (--out) itself; set cache_dir to another "
                                f"folder, or leave it unset to cache in {run_dir / CACHE}")
    _refuse_run_in_a_cache(run_dir)
    _refuse_cache_of_another(cache, run_dir)
    inside = run_dir.resolve() in cache.resolve().parents
    if not inside:
        claim_cache(cache, run_dir)
    claim(run_dir, name)
    if inside:
        claim_cache(cache, run_dir)


def _load(run_dir: Path) -> dict | None:
    """The marker's record, or ``None`` where there is none or it is not values-seg's."""
    path = run_dir / MARKER
    if not path.exists() or path.is_symlink():
        return None
    try:
        return _read_marker(path, _parse)
    except RefusedWrite:
        return None


def _write_json(root: Path, path: Path, data: dict) -> None:
    atomic.write(path, root=root, content=json.dumps(data, indent=1, sort_keys=True))


def _save(run_dir: Path, data: dict) -> None:
    if data.get("created") is None:  # an earlier values-seg's marker, migrated now
        data["created"] = _now()
    _write_json(run_dir, run_dir / MARKER, data)


def _update(run_dir: Path, change) -> None:
    """Apply ``change(data)`` to the marker's record, where there is a marker of values-seg's
    (anything else called ``run.json`` is never rewritten)."""
    with _lock:
        data = _load(run_dir)
        if data is None:
            return
        change(data)
        _save(run_dir, data)


def _relative(run_dir: Path, path: str | Path) -> str:
    return safe_path(run_dir, path).relative_to(run_dir).as_posix()


def record(run_dir: str | Path, paths: Iterable[str | Path]) -> None:
    """Record files values-seg just wrote (with their sha256) in the marker, where there is one."""
    run_dir = Path(run_dir)
    found = {_relative(run_dir, p): sha256_file(Path(p)) for p in paths if Path(p).exists()}
    _update(run_dir, lambda data: data["written"].update(found))


def forget(run_dir: str | Path, paths: Iterable[str | Path]) -> None:
    """Drop files values-seg removed from the record."""
    run_dir = Path(run_dir)
    gone = [Path(p).relative_to(run_dir).as_posix() for p in paths]
    _update(run_dir, lambda data: [data["written"].pop(rel, None) for rel in gone])


def remember(run_dir: str | Path, name: str, value: str | None) -> None:
    """Keep ``value`` under ``name`` in the marker (e.g. the key of the tables last written);
    ``None`` forgets it."""
    def change(data: dict) -> None:
        if value is None:
            data["keys"].pop(name, None)
        else:
            data["keys"][name] = value

    _update(Path(run_dir), change)


def remembered(run_dir: str | Path, name: str) -> str | None:
    data = _load(Path(run_dir))
    return data["keys"].get(name) if data is not None else None


def remove_written(run_dir: str | Path, paths: Iterable[str | Path]) -> list[Path]:
    """Delete those of ``paths`` that values-seg wrote (recorded in the marker) and forget them;
    any other file is left alone, and nothing is deleted through a link (refused). Returns the
    deleted paths."""
    run_dir = Path(run_dir)
    ours = written(run_dir)
    found = [p for p in map(Path, paths) if (p.exists() or p.is_symlink()) and _relative(run_dir, p) in ours]
    removed = [p for p in found if user_files.unchanged(p, ours[_relative(run_dir, p)])]
    for p in found:
        if p in removed:
            p.unlink()
        else:  # changed since values-seg wrote it: the user's now
            user_files.left(p, run_dir)
    forget(run_dir, found)
    return removed


def keep_users_file(run_dir: str | Path, path: str | Path) -> Path | None:
    """Before values-seg writes ``path`` in ``run_dir``: a file there that the marker does not record
    with its current bytes is moved aside (:func:`values_seg.storage.user_files.keep`); returns where."""
    run_dir = Path(run_dir)
    data = _load(run_dir)
    rel = _relative(run_dir, path)
    if data is None or rel == MARKER:  # not a run directory (e.g. a cache folder), or the marker itself
        return None
    return user_files.keep(Path(path), data["written"].get(rel), run_dir)


def write_owned(root: str | Path, path: str | Path, content: atomic.Content) -> Path:
    """The one way values-seg writes a file into a folder it owns: atomically and never through a
    link (:func:`values_seg.storage.atomic.write`; ``content``: bytes, text or a function filling the
    temporary file); in a run directory, a user's file at ``path`` is kept first
    (:func:`keep_users_file`) and the new file is recorded at once (a report's figure worker leaves
    that to the command that forked it)."""
    root = Path(root)
    keep_users_file(root, path)
    path = atomic.write(path, content, root=root)
    if not writers_child() and (root / MARKER).is_file():
        record(root, [path])
    return path


def written(run_dir: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the files values-seg wrote (empty without a marker of ours)."""
    data = _load(Path(run_dir))
    return data["written"] if data is not None else {}


def intact(run_dir: str | Path, path: str | Path) -> bool | None:
    """Whether ``path`` still has the content values-seg wrote; ``None`` when not recorded."""
    run_dir, path = Path(run_dir), Path(path)
    expected = written(run_dir).get(path.relative_to(run_dir).as_posix())
    if expected is None:
        return None
    return path.is_file() and not path.is_symlink() and sha256_file(path) == expected
