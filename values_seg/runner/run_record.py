"""A finished run's record: whether running the same command again has nothing to do, decided
from the run directory before anything is built (no torch, no plugin imported). The rerun key follows
the one keying rule; beside it the record keeps the files the components read and the cache files the
results came from (sizes, modification times) and the run's summary and warnings (docs/caching.md,
"One keying rule"; :mod:`values_seg.storage.provenance`, :mod:`values_seg.storage.input_files`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Iterator

from omegaconf import DictConfig, OmegaConf

from values_seg.storage import input_files, provenance, run_directory
from values_seg.storage.canonical import sha256_json
from values_seg.storage.atomic import sha256_file
from values_seg.storage.redaction import redact
from values_seg.registry import BUILTIN_PACKAGE, ENTRY_POINT_GROUP
from values_seg.runner.summary import RunSummary

#: the marker's key (:func:`values_seg.storage.run_directory.remember`) under which the record is kept
RECORD = "finished run"
#: the summary fields a no-op rerun says again (:class:`~values_seg.runner.summary.RunSummary`)
SUMMARY_FIELDS = ("combinations", "trainings", "evaluated", "rows", "unsupported", "measure_gaps", "left_out")


def rerun_key(cfg: DictConfig, roots: Iterable[str]) -> str:
    """The key of everything a run's results follow from, read without importing it: ``cfg``
    (:func:`values_seg.config.loading.resolved_config`) and the code from ``roots`` (the modules the
    run's stage keys started from), with every module of values-seg, its built-in plugins, the
    installed plugins' entry points and the config's ``plugins``."""
    plugins = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    modules = set(roots) | {ep.value.split(":")[0] for ep in plugins} | {str(m) for m in cfg.get("plugins") or []}
    for top in (*provenance.PROJECT_PACKAGES, BUILTIN_PACKAGE):
        modules.update(provenance.package_modules(top))
    return sha256_json({
        "config": OmegaConf.to_container(cfg, resolve=True),
        "cwd": os.getcwd(),  # the config's relative paths name other files elsewhere
        "code": provenance.code(modules),
        "plugins": sorted([ep.name, ep.value, ep.dist.name if ep.dist else None,
                           ep.dist.version if ep.dist else None] for ep in plugins),
    })


def recordable(cfg, summary, reads: input_files.Reads) -> bool:
    """Whether a run may be recorded as finished: no failure, no tracker (each run logs to
    them), and every file its components read noted (``reads``, :func:`values_seg.storage.input_files.recording`)."""
    return summary.ok and not cfg.config.get("tracking") and not reads.unnoted


def remember(run_dir: str | Path, cfg: DictConfig, summary, warnings: list[str], roots: Iterable[str],
             reads: input_files.Reads) -> None:
    """Keep the record of a finished run whose stage keys started from ``roots``
    (:func:`values_seg.storage.provenance.recording_roots`) and whose components read ``reads``
    (:func:`values_seg.storage.input_files.recording`); called with the run directory locked."""
    values = asdict(summary)
    roots = sorted(roots)
    record = {"key": rerun_key(cfg, roots), "roots": roots, "inputs": dict(sorted(reads.stamps.items())),
              "summary": {k: values[k] for k in SUMMARY_FIELDS}, "gaps": [[*k, n] for k, n in summary.gaps.items()],
              "warnings": list(warnings), "cache_files": summary.cache_files}
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


def finished(run_dir: str | Path, cache_dir: str | Path, cfg: DictConfig) -> dict[str, Any] | None:
    """The record of a run in ``run_dir`` whose rerun key for ``cfg`` is unchanged and whose
    files are all as it left them (every file values-seg wrote, by sha256; the files the
    components read and the cache files, by size and modification time), or ``None``: the run
    must go the full way."""
    run_dir, cache_dir = Path(run_dir), Path(cache_dir)
    text = run_directory.remembered(run_dir, RECORD)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("roots"), list) \
            or not isinstance(record.get("inputs"), dict) or record.get("key") != rerun_key(cfg, record["roots"]):
        return None  # changed, or a record of an older format
    if not input_files.unchanged(record["inputs"]):
        return None
    for name, sha256 in run_directory.written(run_dir).items():
        path = run_dir / name
        if not path.is_file() or path.is_symlink() or sha256_file(path) != sha256:
            return None
    stamps = {str(cache_dir / name): stamp for name, stamp in record.get("cache_files", {}).items()}
    if any(Path(name).is_symlink() for name in stamps) or not input_files.unchanged(stamps):
        return None
    return record


def summary_of(run_dir: str | Path, record: dict[str, Any], seconds: float) -> RunSummary:
    """The :class:`RunSummary` a rerun with nothing to do reports."""
    values = record["summary"]
    return RunSummary(Path(run_dir), **values, reused=values["evaluated"], tables_reused=True, seconds=seconds,
                      gaps={tuple(g[:-1]): g[-1] for g in record["gaps"]})
