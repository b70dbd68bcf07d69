"""The report of a run directory (docs/architecture.md, "Results"): the core that assembles ``report.md`` from
the report sections the plugins contribute (hook ``values_seg_report_sections``,
:class:`ReportSection`), and the generic building blocks they share.

``build_report(run_dir)`` writes ``report.md``, ``figures/*.png`` and ``tables/*.tex``; the
building blocks are public for notebooks, tests and sections:

* :func:`load_run` — the run directory as normalised data frames (:class:`RunData`);
* :class:`ReportSection`, :class:`ReportContext` — what a section is and what it builds in;
* :func:`downstream_tables` / :func:`downstream_table` — Tables 5-6;
* :func:`component_deviations` — the numbers of Figure 3;
* :mod:`.intervals` (confidence intervals over cases and seeds), :mod:`.comparisons` (paired
  comparisons, ``values-seg compare``), :mod:`.ranking` (rank histograms, Kendall's τ).

The built-in sections live in ``plugins/report_sections/`` (``values_seg_plugins.report_sections``).
"""

from values_seg.report.build import build_report
from values_seg.report.deviations import component_deviations
from values_seg.report.rundir import RunData, load_run
from values_seg.report.section import ReportContext, ReportSection
from values_seg.report.tables import DownstreamTable, downstream_table, downstream_tables, summary_frame

__all__ = [
    "build_report",
    "load_run",
    "RunData",
    "ReportSection",
    "ReportContext",
    "downstream_table",
    "downstream_tables",
    "DownstreamTable",
    "summary_frame",
    "component_deviations",
]
