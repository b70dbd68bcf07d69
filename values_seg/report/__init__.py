"""The report of a run directory (docs/architecture.md, "Results"): the core that assembles ``report.md`` from
the report sections the plugins contribute (hook ``values_seg_report_sections``, :class:`ReportSection`),
and the generic building blocks they share (:func:`build_report`, :func:`load_run`, the tables, intervals,
comparisons and rankings; docs/design-rationale.md, "The report core"). The built-in sections live in
``plugins/report_sections/`` (``values_seg_plugins.report_sections``).
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
