"""Report section: which method to pick, per scenario and task (:mod:`values_seg.report.recommendation`)."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.report.section import ReportSection


class RecommendationSection(ReportSection):
    """The recommendation: the best method per scenario and task, and whether the data separate it from the rest."""

    name = "recommendation"
    what = "the recommendation"
    order = 10

    def build(self, ctx) -> None:
        from values_seg.report.recommendation import recommendation_section

        run = ctx.run
        ctx.add(*recommendation_section(run.results, run.spec, run.distributions))


@hookimpl
def values_seg_report_sections():
    return [RecommendationSection]
