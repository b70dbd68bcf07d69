"""Figures of the report (matplotlib ``Figure`` objects rendered with Agg; no pyplot state)."""

from values_seg.report.plots.deviation import plot_deviations
from values_seg.report.plots.montage import plot_montage
from values_seg.report.plots.ranks import plot_rank_histograms

__all__ = ["plot_deviations", "plot_montage", "plot_rank_histograms"]
