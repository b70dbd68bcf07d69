"""The report of a run directory (DESIGN.md, "Results"): the paper's downstream tables, the
separation study, the per-component deviation plots (Figure 3), risk-coverage curves,
reliability diagrams, uncertainty-map montages and LaTeX exports.

``build_report(run_dir)`` writes ``report.md``, ``figures/*.png`` and ``tables/*.tex``; the
building blocks are public for notebooks and tests:

* :func:`load_run` — the run directory as normalised data frames;
* :func:`downstream_tables` / :func:`downstream_table` — Tables 5-6;
* :func:`component_deviations` — the numbers of Figure 3;
* :func:`separation_table`, :func:`separation_summary`, :func:`measure_summary` — Q1-Q4, Figure 2;
* :func:`paper_comparison` — the run's cells next to the paper's published values (Table 4).
* :mod:`.intervals` (confidence intervals over cases and seeds), :mod:`.comparisons` (paired
  comparisons, ``values-seg compare``), :mod:`.ranking` (rank histograms, Kendall's τ).
"""

from values_seg.report.build import build_report
from values_seg.report.deviations import component_deviations
from values_seg.report.paper import comparison as paper_comparison
from values_seg.report.rundir import RunData, load_run
from values_seg.report.separation import measure_summary, separation_summary, separation_table, separation_units
from values_seg.report.tables import DownstreamTable, downstream_table, downstream_tables, summary_frame

__all__ = [
    "build_report",
    "load_run",
    "RunData",
    "downstream_table",
    "downstream_tables",
    "DownstreamTable",
    "summary_frame",
    "component_deviations",
    "separation_table",
    "separation_summary",
    "separation_units",
    "measure_summary",
    "paper_comparison",
]
