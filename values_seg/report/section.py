"""Report sections (the hook ``values_seg_report_sections``) and the context they build in.

A :class:`ReportSection` is one ``## ...`` part of ``report.md`` with its figures and table files; how the
core builds them and ``report.html`` from the same blocks: docs/design-rationale.md, "The report core";
writing one: docs/guides/report-section.md.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from values_seg.storage import run_directory
from values_seg.report.render import Renderer
from values_seg.report.rundir import RunData
from values_seg.storage.run_files import FIGURES, TABLES

log = logging.getLogger(__name__)


class ReportSection:
    """One section of the report; subclass it and return the class from ``values_seg_report_sections``.

    Class attributes: ``name`` (registry name), ``what`` (how a warning names it: "the uncertainty-map
    montages"), ``order`` (its place in ``report.md``, ascending; the built-ins use 10, 20, ... 110),
    ``early`` (sections with a number are built first, ascending: those whose figures and
    statistics the workers can start on while the others build tables; None: in ``order``),
    ``outputs`` (glob patterns, relative to the run directory, of the files it writes: an earlier
    build's file that this one did not write again is removed), ``curves`` (the kinds of curve,
    ``curves.parquet``'s ``curve`` column, that it draws: without them it does not apply).
    """

    name = ""
    what = ""
    order = 1000
    early: int | None = None
    outputs: tuple[str, ...] = ()
    curves: tuple[str, ...] = ()

    def applies(self, run: RunData) -> bool:
        """Whether this run gets the section (default: always; with ``curves``, where the run has one of them)."""
        return not self.curves or any(run.curve(kind) is not None for kind in self.curves)

    def prepare(self, ctx: ReportContext) -> None:
        """Start heavy work before any section builds (e.g. ``ctx.compute``); default: nothing."""

    def build(self, ctx: ReportContext) -> None:
        """Add the section's Markdown blocks (``ctx.add``, ``ctx.later``) and queue its figures (``ctx.figure``)."""
        raise NotImplementedError


class ReportContext:
    """The report being built: Markdown blocks per section, some of them waiting for their figures.

    ``run``: the loaded run directory; ``figures`` / ``tables``: where files go (write them with
    :meth:`figure`, :meth:`write_text` and :meth:`write_csv`, which never write through a link);
    ``options``: the arguments of ``build_report`` (``montage_seeds``, ``max_montage_cases``).
    """

    def __init__(self, run: RunData, renderer: Renderer, options: dict | None = None):
        self.run = run
        self.dir = run.run_dir
        self.figures = self.dir / FIGURES
        self.tables = self.dir / TABLES
        self.renderer = renderer
        self.options = dict(options or {})
        # per section: markdown blocks, or (what, function giving blocks) once the figures are drawn
        self.sections: dict[str, list] = {"": []}
        self.lines = self.sections[""]
        self.warnings: list[str] = []
        self._section = ""

    def add(self, *blocks: str) -> None:
        """Append Markdown blocks (each followed by an empty line) to the current section; a
        :class:`values_seg.report.rich.Block` among them keeps its data for ``report.html``."""
        for b in blocks:
            self.lines += [b, ""]

    def figure(self, plot: Callable, out: Path, *args, inputs=(), **kwargs):
        """Queue ``plot(*args, **kwargs)``, which draws ``out`` (from the arguments and the files
        ``inputs``); a future of its return value (:class:`values_seg.report.render.Renderer`)."""
        return self.renderer.submit(plot, out, *args, inputs=inputs, **kwargs)

    def compute(self, fn: Callable, *args: Any):
        """``fn(*args)`` in a worker, as a future (heavy statistics beside the figures)."""
        return self.renderer.compute(fn, *args)

    def later(self, compose: Callable[[], list[str]]) -> None:
        """Blocks that need drawn figures: ``compose()`` gives them when the report is assembled."""
        self.lines.append((self._section, compose))

    def section(self, what: str, fn: Callable[[], None]) -> None:
        """Run ``fn``, whose blocks join the section ``what``; an exception becomes a warning in it."""
        self._section = what
        self.lines = self.sections.setdefault(what, [])
        try:
            fn()
        except Exception as e:  # keep the rest of the report
            self.warn(what, e)

    def warn(self, what: str, e: Exception) -> None:
        log.error("report: could not build %s", what, exc_info=e)
        message = f"could not build {what}: {type(e).__name__}: {e}"
        self.warnings.append(message)
        self.add(f"> **Warning:** {message}")

    def assemble(self, order: list[str]) -> list[str]:
        """The report's lines, sections in ``order``, each waiting block composed now that its figures are drawn."""
        out = []
        for what in order:
            self.lines = []
            for item in self.sections.get(what, []):
                if isinstance(item, str):
                    self.lines.append(item)
                    continue
                try:
                    self.add(*item[1]())
                except Exception as e:  # keep the rest of the report
                    self.warn(item[0], e)
            out += self.lines
        return out

    def rel(self, path: Path) -> str:
        """``path`` relative to the run directory, as Markdown links it."""
        return path.relative_to(self.dir).as_posix()

    def write_text(self, path: Path, text: str) -> None:
        """Write a table file of the report (atomically, never through a link)."""
        run_directory.write_owned(self.dir, path, text)

    def write_csv(self, frame: pd.DataFrame, path: Path) -> None:
        run_directory.write_owned(self.dir, path, lambda tmp: frame.to_csv(tmp, index=False))


#: where the built-in report sections live (a report on its own registers only these built-ins)
BUILTIN_SECTIONS = "values_seg_plugins.report_sections"


def section_registry():
    """The registry a report takes its sections from: the default one where this process has
    loaded it already (``values-seg run``, or a section registered from Python); else one of the
    built-in sections, the installed plugins (entry points) and, through :func:`build_report`, the
    run config's ``plugins``, without importing every other built-in component (models, data
    sets, torch), which a report does not need."""
    from values_seg import registry

    default = registry.default()
    return default if default.loaded else registry.Registry(builtins=BUILTIN_SECTIONS)


def registered_sections(sections_from=None) -> list[ReportSection]:
    """One instance of every report section of ``sections_from`` (default: :func:`section_registry`),
    in report order (then by name)."""
    sections = [c.obj() for c in (sections_from or section_registry()).components("report_section")]
    return sorted(sections, key=lambda s: (s.order, s.name))


__all__ = ["ReportSection", "ReportContext", "registered_sections"]
