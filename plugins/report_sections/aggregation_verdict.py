"""Report section: "Which aggregation?" (:mod:`values_seg.report.verdict`): mean ranks, winners, flips."""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.rundir import RunData
from values_seg.report.section import ReportSection
from values_seg.run_files import FIGURES, TABLES

FIGURE = "aggregation_verdict.png"
TABLE_FILES = ("aggregation_ranks.csv", "aggregation_winners.csv", "aggregation_flips.csv")


class AggregationVerdictSection(ReportSection):
    """Which aggregation? Mean ranks of the aggregations per task and scenario, the winner and the flips."""

    name = "aggregation_verdict"
    what = "the aggregation verdict"
    order = 85
    outputs = (f"{FIGURES}/{FIGURE}", *(f"{TABLES}/{f}" for f in TABLE_FILES))

    def applies(self, run: RunData) -> bool:
        return not run.results.empty and run.results["aggregation"].replace("", np.nan).nunique() >= 2

    def prepare(self, ctx) -> None:
        from values_seg.report.verdict import verdict

        self.computed = ctx.compute(verdict, ctx.run)

    def build(self, ctx) -> None:
        from values_seg.report.plots.verdict import plot_verdict_heatmap

        ctx.add("## Which aggregation?")
        v = self.computed.result()
        if v.empty:
            ctx.add("No task metric ranks two or more aggregations over matched combinations.")
            return
        out = ctx.figures / FIGURE
        drawn = ctx.figure(plot_verdict_heatmap, out, v.ranks, v.winners, out, ctx.run.spec)
        for frame, name in zip((v.ranks, v.winners, v.flips), TABLE_FILES):
            ctx.write_csv(frame, ctx.tables / name)
        ctx.later(lambda: _blocks(ctx, v, drawn))


def _blocks(ctx, v, drawn) -> list[str]:
    spec, level = ctx.run.spec, (ctx.run.distributions.level if ctx.run.distributions is not None else 0.95)
    blocks = [f"Per task's primary metric, scenario and split, every aggregation's mean rank (1 = best) among the "
              f"aggregations within each prediction model × measure combination in which all occur (a sample-based "
              f"aggregation, e.g. the pairwise Dice, joins every measure of its model), with its {level:.0%} "
              f"bootstrap interval; the winner is bold, and marked ★ where a paired bootstrap test finds it "
              f"significantly better than the runner-up (p < {1 - level:.2g})."]
    path = drawn.result()
    if path is not None:
        blocks.append(markdown.figure(ctx.rel(path), "which aggregation heat map",
                                      "Mean ranks, aggregations × task panels; outlined: the winner, ★: significant."))
    split_text = {"iid": "i.i.d.", "ood": "OoD", "all": "all"}
    for (task, metric), g in v.ranks.groupby(["task", "metric"], sort=False):
        cols = list(dict.fromkeys(zip(g["scenario"], g["split"])))
        w = v.winners[(v.winners["task"] == task) & (v.winners["metric"] == metric)]
        best = {(r.scenario, r.split): (r.winner, r.significant) for r in w.itertuples()}
        cells: dict = {}
        for r in g.itertuples():
            text = f"{r.mean_rank:.1f}" + (f" [{r.ci_low:.1f}, {r.ci_high:.1f}]" if np.isfinite(r.ci_low) else "")
            win = best.get((r.scenario, r.split))
            if win and win[0] == r.aggregation:
                text = f"**{text}**" + (" ★" if win[1] else "")
            cells.setdefault(r.aggregation, {})[(r.scenario, r.split)] = text
        order = sorted(cells, key=lambda a: g.loc[g["aggregation"] == a, "mean_rank"].mean())
        rows = [[spec.label("aggregation", a)] + [cells[a].get(c, "") for c in cols] for a in order]
        blocks += [f"**{spec.metric_spec(task, metric).title}** {spec.arrow(task, metric)} (rows by mean rank over "
                   f"the columns)",
                   markdown.table(["Aggregation"] + [f"{s} {split_text.get(sp, sp)}" for s, sp in cols], rows,
                                  align=["l"] + ["r"] * len(cols))]
    lines = [f"- {spec.metric_spec(r.task, r.metric).title}, {r.scenario} {split_text.get(r.split, r.split)}: "
             f"**{spec.label('aggregation', r.winner)}**, " +
             (f"significantly better than {spec.label('aggregation', r.runner_up)} (p = {r.p_value:.3f})"
              if r.significant else f"not significantly better than {spec.label('aggregation', r.runner_up)}"
              + (f" (p = {r.p_value:.3f})" if np.isfinite(r.p_value) else ""))
             for r in v.winners.itertuples()]
    blocks += ["### Winners", "\n".join(lines), "### Flips"]
    if v.flips.empty:
        blocks.append("None: the same aggregation wins every scenario and split of each task, and no aggregation "
                      "puts a measure below chance.")
    else:
        blocks.append("\n".join(f"- {r.kind}: {spec.metric_spec(r.task, r.metric).title}"
                                f"{' (' + r.where + ')' if r.where else ''}: {r.detail}" for r in v.flips.itertuples()))
    blocks.append(f"*Tables: {', '.join(f'`{ctx.rel(ctx.tables / f)}`' for f in TABLE_FILES)}.*")
    return blocks


@hookimpl
def values_seg_report_sections():
    return [AggregationVerdictSection]
