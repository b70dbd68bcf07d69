"""Figures of the report (matplotlib ``Figure`` objects rendered with Agg; no pyplot state)."""

from values_seg.report.plots.curves import plot_reliability, plot_risk_coverage
from values_seg.report.plots.deviation import plot_deviations
from values_seg.report.plots.montage import plot_montage
from values_seg.report.plots.ranks import plot_rank_histograms
from values_seg.report.plots.separation import plot_measure_summary

__all__ = ["plot_deviations", "plot_measure_summary", "plot_risk_coverage", "plot_reliability", "plot_montage",
           "plot_rank_histograms"]
