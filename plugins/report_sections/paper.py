"""Report section: the run's cells next to the paper's published values (:mod:`._paper`)."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import TABLES


class PaperSection(ReportSection):
    """The comparison with the paper: the run's values beside the published ones where the settings match."""

    name = "paper_comparison"
    what = "the comparison with the paper"
    order = 50
    outputs = (f"{TABLES}/paper_*.tex", f"{TABLES}/paper_*.csv")

    def build(self, ctx) -> None:
        from values_seg_plugins.report_sections._paper import comparison_section

        ctx.add(*comparison_section(ctx.run.results, ctx.run.spec, ctx.tables, ctx.rel, config=ctx.run.config,
                                    distributions=ctx.run.distributions))


@hookimpl
def values_seg_report_sections():
    return [PaperSection]
