"""``build_report(run_dir)``: ``report.md`` (and ``report.html``), ``figures/*.png`` and ``tables/*.tex`` of a run.

Rebuilt from the run directory alone, deterministically; it names no section, builds the ones that apply and
replaces a failing one by a warning (docs/design-rationale.md, "The report core").
"""

from __future__ import annotations

import logging
import shlex
import time
from pathlib import Path

from values_seg.storage import atomic, provenance, run_directory, run_files, run_lock, user_files
from values_seg.storage.run_files import FIGURES, TABLES
from values_seg.report import markdown, page
from values_seg.report.render import Renderer
from values_seg.report.rundir import RunData, load_run
from values_seg.storage.cache_store import CacheStore
from values_seg.report.section import ReportContext, ReportSection, registered_sections, section_registry

log = logging.getLogger(__name__)


#: Report files an earlier build recorded, whichever section (maybe of a plugin now gone) wrote them.
RECORDED = (f"{FIGURES}/*.png", f"{TABLES}/*.tex", f"{TABLES}/*.csv")


def _generated(run_dir: Path, sections: list[ReportSection]) -> dict[Path, int]:
    """The report's files in ``run_dir`` with their modification times: those the sections declare
    (``outputs``) and those an earlier build recorded (:data:`RECORDED`)."""
    ours = [run_dir / name for name in run_directory.written(run_dir)]
    found = {f for pattern in dict.fromkeys(p for s in sections for p in s.outputs) for f in run_dir.glob(pattern)}
    found |= {f for f in ours if any(f.relative_to(run_dir).match(pattern) for pattern in RECORDED)}
    return {f: f.stat().st_mtime_ns for f in sorted(found) if f.is_file() and not user_files.is_kept(f)}


def _load_plugins(run: RunData, sections_from) -> None:
    """Register the plugin modules the run's config names (their sections join the report)."""
    for module in (run.config or {}).get("plugins") or []:
        try:
            sections_from.load(str(module))
        except Exception as e:  # noqa: BLE001 - the report goes on without that plugin's sections
            run.notes.append(f"Plugin `{module}` of the run's config could not be loaded ({e}): its report "
                             "sections are missing.")


def typed_path(path: Path) -> str:
    """``path`` as the user can type it where the command ran: relative when it lies below the
    current directory (``runs/toy_quick``), else absolute; quoted for the shell."""
    absolute = Path(path).absolute()
    try:
        text = str(absolute.relative_to(Path.cwd()))
    except ValueError:
        text = str(absolute)
    return shlex.quote(text)


def build_report(run_dir: str | Path, *, montage_seeds: str = "first", max_montage_cases: int = 8) -> Path:
    """Write ``report.md``, ``figures/*.png`` and ``tables/*.tex`` (+ CSV copies) in ``run_dir``.

    ``montage_seeds``: "first" draws one montage per (scenario, backbone, prediction model), the
    lowest seed; "all" draws every montage file. Returns the path of ``report.md``.
    """
    if montage_seeds not in ("first", "all"):
        raise ValueError(f"montage_seeds must be 'first' or 'all', got {montage_seeds!r}")
    run_directory.check(run_dir)  # values-seg's own run directory, no links to write through
    with run_lock.locked(run_dir):  # one writer at a time (within values-seg run: its own lock)
        run = load_run(run_dir)
        sections_from = section_registry()
        _load_plugins(run, sections_from)
        cache = run_directory.cache_dir(run.run_dir, (run.config or {}).get("cache_dir"))
        provenance.read_digest_file(CacheStore(cache).code_digests)  # the figure keys need no parsing
        with Renderer(run.run_dir) as renderer:
            return _build(run, renderer, {"montage_seeds": montage_seeds, "max_montage_cases": max_montage_cases},
                          registered_sections(sections_from))


def _what(section: ReportSection) -> str:
    return section.what or f"the section {section.name!r}"


def _page(renderer: Renderer, run: RunData, lines: list[str]) -> list[Path]:
    """``report.html`` of the report's blocks (kept when unchanged); a failure costs only the page."""
    try:
        start = time.perf_counter()
        path = page.submit(renderer, run.run_dir, f"{run.name}: values-seg report", lines).result()
        log.info("report: %s (%.1f MB) in %.2f s", path.name, path.stat().st_size / 1e6, time.perf_counter() - start)
        return [path]
    except (run_directory.RefusedWrite, OSError):  # a link, a full disk: said as for report.md
        raise
    except Exception as e:  # noqa: BLE001 - report.md is written; the page can be rebuilt
        log.error("report: could not write %s", run_files.REPORT_HTML, exc_info=e)
        return []


def _build(run: RunData, renderer: Renderer, options: dict, every: list[ReportSection]) -> Path:
    body = ReportContext(run, renderer, options)
    atomic.make_dir(run.run_dir, body.figures)
    atomic.make_dir(run.run_dir, body.tables)
    before = _generated(run.run_dir, every)
    sections = []
    for s in every:
        body.section(_what(s), lambda s=s: sections.append(s) if s.applies(run) else None)
    # first what the workers can start on (statistics, then the sections marked early), so that they
    # work while this process builds the tables
    for s in sections:
        body.section(_what(s), lambda s=s: s.prepare(body))
    for s in sorted(sections, key=lambda s: (s.early is None, s.early or 0, s.order, s.name)):
        body.section(_what(s), lambda s=s: s.build(body))

    head = [f"# {run.name}: values-seg report", ""]
    description = (run.config or {}).get("description")
    if description:
        head += [str(description).strip(), ""]
    where = typed_path(run.run_dir)
    head += [f"Run directory: `{where}`. Rebuild with `values-seg report {where}`.", ""]
    lines = body.assemble(list(dict.fromkeys(["", *(_what(s) for s in every)])))  # waits for the figures
    notes = run.notes + [f"Warning: {w}" for w in body.warnings]
    if notes:
        head += ["**Notes**", ""] + [f"- {n}" for n in notes] + [""]
    text = markdown.fit("\n".join(head + lines)).rstrip() + "\n"  # the full tables: report.html, tables/
    path = run.run_dir / run_files.REPORT
    run_directory.write_owned(run.run_dir, path, text)
    made = [f for f, mtime in _generated(run.run_dir, every).items() if before.get(f) != mtime]
    run_directory.record(run.run_dir, made + [path, *_page(renderer, run, head + lines)])
    stale = set(_generated(run.run_dir, every)) - set(made) - renderer.kept()
    run_directory.remove_written(run.run_dir, sorted(stale))  # never a file values-seg did not write
    log.info("report: %d figure(s) drawn, %d unchanged kept", renderer.rendered, renderer.reused)
    return path


__all__ = ["build_report"]
