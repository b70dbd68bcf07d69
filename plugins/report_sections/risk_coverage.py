"""Report section: risk-coverage and generalized-risk-coverage curves, from the curves a task wrote
(curve kinds ``risk_coverage`` and ``generalized_risk_coverage`` in ``curves.parquet``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.common import scenarios, select
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import CURVES, FIGURES


class RiskCoverageSection(ReportSection):
    """The risk-coverage curves: selective and generalized risk of the cases kept as the least confident are rejected."""

    name = "risk_coverage"
    what = "the risk-coverage curves"
    order = 70
    early = 3
    outputs = (f"{FIGURES}/risk_coverage_*.png", f"{FIGURES}/generalized_risk_coverage_*.png")
    curves = ("risk_coverage", "generalized_risk_coverage")

    def build(self, ctx) -> None:
        _risk_coverage(ctx)


def _risk_coverage(report) -> None:
    report.add("## Failure detection: risk-coverage and generalized-risk-coverage curves")
    from values_seg_plugins.report_sections._curves import plot_risk_coverage

    spec = report.run.spec
    curves = [report.run.curve(kind) for kind in RiskCoverageSection.curves]
    curves = pd.concat([c for c in curves if c is not None], ignore_index=True)
    drawn = []
    for sc in scenarios(curves):
        part = select(curves, sc)  # only what the figure shows: its key changes with nothing else
        plain, general = (report.figures / f"{kind}_{sc.slug}.png" for kind in ("risk_coverage",
                                                                               "generalized_risk_coverage"))
        drawn.append((sc, report.figure(plot_risk_coverage, plain, part, sc, plain, spec),
                      report.figure(plot_risk_coverage, general, part, sc, general, spec, generalized=True)))

    def compose() -> list[str]:
        blocks = []
        for sc, plain, general in drawn:
            if plain.result() is None:
                continue
            blocks += _risk_coverage_blocks(report, sc, *plain.result(), general.result()[0])
        return blocks or [f"Skipped: `{CURVES}` holds no risk-coverage curve of an uncertainty measure."]

    report.later(compose)


def _risk_coverage_blocks(report, sc, path: Path, agg: str, general: Path) -> list[str]:
    spec = report.run.spec
    return [
        markdown.figure(
            report.rel(path), f"risk-coverage {sc.title}",
            f"{sc.title}: selective risk (1 − Dice) of the cases kept when the least confident are rejected, per "
            f"prediction model (columns) and test subset (rows), one curve per measure with "
            f"{spec.label('aggregation', agg)} aggregation; lower is better, the dashed oracle is the best possible "
            f"ranking; legend: AURC ×100 (mean over seeds)."),
        markdown.figure(
            report.rel(general), f"generalized risk-coverage {sc.title}",
            f"{sc.title}: generalized risk (Traub et al. 2024): the summed risk (1 − Dice) of the accepted cases "
            f"over all cases, i.e. the share of all cases that are accepted and fail, as the least confident are "
            f"rejected; same panels and curves; dashed: oracle, dotted: random ranking; legend: AUGRC ×100 (mean "
            f"over seeds). Read from coverage 1 to 0 it is the image-level Dice error-retention curve of Shifts "
            f"(retained fraction = coverage, rejected cases replaced by the reference)."),
    ]


@hookimpl
def values_seg_report_sections():
    return [RiskCoverageSection]
