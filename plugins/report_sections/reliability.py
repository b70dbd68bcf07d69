"""Report section: reliability diagrams, from the bins a task wrote (curve kind ``reliability`` in
``curves.parquet``: per bin the pixel count, confidence sum and correct sum, and the task's ACE)."""

from __future__ import annotations

from values_seg import hookimpl, metrics
from values_seg.report import markdown
from values_seg.report.common import scenarios, select
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import CURVES, FIGURES


class ReliabilitySection(ReportSection):
    """The reliability diagrams: pixel accuracy against Platt-scaled confidence per bin."""

    name = "reliability"
    what = "the reliability diagrams"
    order = 100
    early = 4
    outputs = (f"{FIGURES}/reliability_*.png",)
    curves = ("reliability",)

    def build(self, ctx) -> None:
        _reliability(ctx)


def _reliability(report) -> None:
    report.add("## Calibration: reliability diagrams")
    from values_seg_plugins.report_sections._curves import plot_reliability

    bins = report.run.curve("reliability")
    drawn = []
    for sc in scenarios(bins):
        part = select(bins, sc)  # only what the figure shows: its key changes with nothing else
        out = report.figures / f"reliability_{sc.slug}.png"
        drawn.append((sc, report.figure(plot_reliability, out, part, sc, out, report.run.spec)))
    report.later(lambda: [markdown.figure(
        report.rel(path), f"reliability {sc.title}",
        f"{sc.title}: pixel accuracy against Platt-scaled confidence per ACE bin (20 equal-width bins, those "
        f"holding under {metrics.MIN_BIN_MASS:.1%} of the pixel–rater pairs merged with their neighbours), one "
        f"panel per prediction model (rows) and measure, i.i.d. and OoD; the closer to the dashed diagonal the "
        f"better calibrated; under each panel the share of the pairs in each ACE bin (log scale, dashed: the "
        f"minimum); note: the merged-bin ACE ×100 (mean over seeds; not the paper's eq. 11, which the downstream "
        f"tables show beside it) and the number of ACE bins.") for sc, future in drawn if (path := future.result()) is not None]
        or [f"Skipped: `{CURVES}` holds no non-empty reliability bins."])


@hookimpl
def values_seg_report_sections():
    return [ReliabilitySection]
