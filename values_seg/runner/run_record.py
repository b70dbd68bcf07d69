"""A finished run's record: whether running the same command again has nothing to do, decided
from the run directory before anything is built (no torch, no plugin imported; issue 34).

After a run without failures, ``values-seg run`` remembers in the run directory's marker
(:mod:`values_seg.run_directory`) its *rerun key* (:func:`rerun_key`): the sha256 of the resolved
config (file, overrides, schema defaults, interpolations), the bytes of every source file of
values-seg, its built-in plugins, the installed plugin packages and the config's ``plugins``, the
versions of those distributions, of the numeric libraries and of Python. With it go the run's
summary, the warnings it gave and the size and modification time of every cache file it used (each
checkpoint, each file of each evaluation). A rerun is a no-op (:func:`finished`) when its key is the
same, every file values-seg wrote into the run directory still has its recorded sha256 and every
cache file is there, untouched since (same size, same modification time): the summary and the
warnings are said again and nothing else is done. Anything else goes the full way, which verifies
what it reads (sha256) and recomputes only what is missing or changed. Never recorded (always the full way): a run with
failures, with trackers (each run logs to them), or with a dataset that reads files (its
fingerprint needs the dataset built: :func:`values_seg.data.pin_fingerprint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from omegaconf import DictConfig, OmegaConf

from values_seg import provenance, run_directory
from values_seg.canonical import sha256_json
from values_seg.checked_files import sha256_file
from values_seg.redaction import redact
from values_seg.registry import ENTRY_POINT_GROUP
from values_seg.runner.summary import RunSummary

#: the marker's key (:func:`values_seg.run_directory.remember`) under which the record is kept
RECORD = "finished run"
#: the summary fields a no-op rerun says again (:class:`~values_seg.runner.summary.RunSummary`)
SUMMARY_FIELDS = ("combinations", "trainings", "evaluated", "rows", "unsupported", "measure_gaps", "left_out")


def rerun_key(cfg: DictConfig) -> str:
    """The key of everything a run's results follow from, read without importing it (see the
    module docstring); ``cfg``: :func:`values_seg.config.resolved_config`."""
    plugins = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    tops = set(provenance.PROJECT_PACKAGES) | {ep.value.split(":")[0].split(".")[0] for ep in plugins} \
        | {str(m).split(".")[0] for m in cfg.get("plugins") or []}
    return sha256_json({
        "config": OmegaConf.to_container(cfg, resolve=True),
        "sources": {top: _sources_digest(top) for top in sorted(tops)},
        "plugins": sorted([ep.name, ep.value, ep.dist.name if ep.dist else None,
                           ep.dist.version if ep.dist else None] for ep in plugins),
        "libraries": {d: provenance._version(d) for d in provenance.NUMERIC_LIBRARIES},
        "python": sys.version,
    })


def _sources_digest(top: str) -> str | None:
    """sha256 over the names and bytes of the source files of the top-level package or module
    ``top`` (``None`` where there is none), found without importing it."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    h = hashlib.sha256()
    if spec.submodule_search_locations:
        files = sorted(Path(folder, name) for root in spec.submodule_search_locations
                       for folder, dirs, names in os.walk(root) if "__pycache__" not in Path(folder).parts
                       for name in names if name.endswith(".py"))
    else:
        files = [Path(spec.origin)] if spec.origin and spec.origin.endswith(".py") else []
    for path in files:
        h.update(path.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def recordable(cfg, summary) -> bool:
    """Whether a run may be recorded as finished: no failure, no tracker, no dataset reading files."""
    from values_seg.data import FINGERPRINT

    return (summary.ok and not cfg.config.get("tracking")
            and not any(FINGERPRINT in dict(ref.kwargs) for ref in cfg.refs("datasets")))


def remember(run_dir: str | Path, key: str, summary, warnings: list[str]) -> None:
    """Keep the record of a finished run (called with the run directory locked)."""
    values = asdict(summary)
    record = {"key": key, "summary": {k: values[k] for k in SUMMARY_FIELDS},
              "gaps": [[*k, n] for k, n in summary.gaps.items()], "warnings": list(warnings), "cache_files": summary.cache_files}
    run_directory.remember(run_dir, RECORD, json.dumps(record))


@contextlib.contextmanager
def said(logger: logging.Logger) -> Iterator[list[str]]:
    """The warnings ``logger`` itself gives inside the block (a no-op rerun says them again)."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name == logger.name:
                messages.append(redact(record.getMessage()))  # kept in the marker: no credentials

    handler = Keep(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def forget(run_dir: str | Path) -> None:
    """Forget the record: a run that writes into the directory starts (called with it locked)."""
    if run_directory.remembered(run_dir, RECORD) is not None:
        run_directory.remember(run_dir, RECORD, None)


def finished(run_dir: str | Path, cache_dir: str | Path, key: str) -> dict[str, Any] | None:
    """The record of a run in ``run_dir`` finished with rerun key ``key`` whose files are all as
    it left them (see the module docstring), or ``None``: the run must go the full way."""
    run_dir, cache_dir = Path(run_dir), Path(cache_dir)
    text = run_directory.remembered(run_dir, RECORD)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    for name, sha256 in run_directory.written(run_dir).items():
        path = run_dir / name
        if not path.is_file() or path.is_symlink() or sha256_file(path) != sha256:
            return None
    for name, stamp in record.get("cache_files", {}).items():
        path = cache_dir / name
        if not path.is_file() or path.is_symlink():
            return None
        found = path.stat()
        if [found.st_size, found.st_mtime_ns] != stamp:  # changed since (or a record of an older format)
            return None
    return record


def summary_of(run_dir: str | Path, record: dict[str, Any], seconds: float) -> RunSummary:
    """The :class:`RunSummary` a rerun with nothing to do reports."""
    values = record["summary"]
    return RunSummary(Path(run_dir), **values, reused=values["evaluated"], tables_reused=True, seconds=seconds,
                      gaps={tuple(g[:-1]): g[-1] for g in record["gaps"]})
