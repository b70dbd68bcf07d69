"""Report section: each component's deviation from the mean (paper Figure 3)."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.common import slugify
from values_seg.report.deviations import component_deviations, left_out
from values_seg.report.section import ReportSection
from values_seg.report.spec import ALL_TYPES, HIGHER, LOWER
from values_seg.storage.run_files import FIGURES


class ComponentsSection(ReportSection):
    """The component analysis: each component level's mean deviation from the scenario's mean (Figure 3)."""

    name = "component_analysis"
    what = "the component analysis"
    order = 60
    outputs = (f"{FIGURES}/fig3_*.png",)

    def build(self, ctx) -> None:
        _components(ctx)


def _components(report) -> None:
    report.add("## Components: deviation from the mean (paper Figure 3)")
    spec = report.run.spec
    from values_seg.report.plots import plot_deviations

    drawn = []
    for ms in spec.figure3_metrics():
        dev = component_deviations(report.run.results, ms.task, ms.metric, spec)
        out = report.figures / f"fig3_{slugify(ms.task)}_{slugify(ms.metric)}.png"
        drawn.append((ms, report.figure(plot_deviations, out, dev, ms, out, spec)))

    def compose() -> list[str]:
        blocks = []
        for ms, future in drawn:
            path = future.result()
            if path is None:
                continue
            direction = {HIGHER: "right of 0 is better", LOWER: "left of 0 is better"}.get(ms.direction, "")
            excl = [t for t in ALL_TYPES if t not in spec.suited_types(ms.task)]
            blocks.append(markdown.figure(
                report.rel(path), ms.title,
                f"{ms.title}: each point is a component level's mean deviation (×100) from the scenario's mean over "
                f"all methods, averaged over the other components (seed means first); error bars ±1 std over those "
                f"methods ({direction}). "
                + (f"{'/'.join(excl)} measures are unsuited to this task: excluded from the averages, shown as "
                   f"crosses." if excl else "All uncertainty types are included.")
                + (f" {gone}" if (gone := left_out(report.run.results, ms.task, ms.metric)) else "")))
        return blocks or ["No task metrics for the component analysis (OoD AUROC, AL improvement, AURC, ACE, NCC)."]

    report.later(compose)


@hookimpl
def values_seg_report_sections():
    return [ComponentsSection]
