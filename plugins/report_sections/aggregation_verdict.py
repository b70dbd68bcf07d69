"""Report section: "Which aggregation?" (:mod:`values_seg.report.verdict`): mean ranks, winners, flips."""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.rundir import RunData
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import FIGURES, TABLES

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
    from values_seg.report.verdict import entry_label, format_p, method_note

    spec, level = ctx.run.spec, (ctx.run.distributions.level if ctx.run.distributions is not None else 0.95)
    blocks = [f"Per task's primary metric, scenario and split, {method_note(v, spec, level)} Intervals: "
              f"{level:.0%} bootstrap; the winner is bold (every entry of a tie at the top), and marked ★ where it "
              f"is significantly better than the runner-up after the adjustment." + (f" {v.unsupported}" if v.unsupported
                                                                                  else "")]
    path = drawn.result()
    if path is not None:
        blocks.append(markdown.figure(ctx.rel(path), "which aggregation heat map",
                                      "Mean ranks over every combination, entries × task panels; outlined: the "
                                      "winner, ★: significant (adjusted); blank: not in that panel's main ranking "
                                      "(named below with the reason)."))
    split_text = {"iid": "i.i.d.", "ood": "OoD", "all": "all"}
    main, further = v.ranks[v.ranks["block"] == 0], v.ranks[v.ranks["block"] > 0]
    for (task, metric), g in main.groupby(["task", "metric"], sort=False):
        cols = list(dict.fromkeys(zip(g["scenario"], g["split"])))
        w = v.winners[(v.winners["task"] == task) & (v.winners["metric"] == metric) & (v.winners["block"] == 0)]
        best = {(r.scenario, r.split): ({e.split(";")[0] for e in r.tied.split(" | ")}, r.significant)
                for r in w.itertuples()}  # the winner, or every entry of a tie at the top
        cells: dict = {}
        for r in g.itertuples():
            text = f"{r.mean_rank:.1f}" + (f" [{r.ci_low:.1f}, {r.ci_high:.1f}]" if np.isfinite(r.ci_low) else "")
            win = best.get((r.scenario, r.split))
            if win and r.aggregation in win[0]:
                text = f"**{text}**" + (" ★" if win[1] else "")
            cells.setdefault(r.members, {})[(r.scenario, r.split)] = text
        order = sorted(cells, key=lambda a: g.loc[g["members"] == a, "mean_rank"].mean())
        rows = [[entry_label(spec, a)] + [cells[a].get(c, "") for c in cols] for a in order]
        n = ", ".join(f"{k}" for k in dict.fromkeys(g["over"]))
        blocks += [f"**{spec.metric_spec(task, metric).title}** {spec.arrow(task, metric)} (over {n}; rows by mean "
                   f"rank over the columns)",
                   markdown.table(["Aggregation"] + [f"{s} {split_text.get(sp, sp)}" for s, sp in cols], rows,
                                  align=["l"] + ["r"] * len(cols), keys=1)]
    if not v.left_out.empty:
        lines = []
        for (task, metric, a, reason), g in v.left_out.groupby(["task", "metric", "aggregation", "reason"], sort=False):
            ranked, over = [], set()
            for r in g.itertuples():
                f = further[(further["task"] == task) & (further["metric"] == metric)
                            & (further["scenario"] == r.scenario) & (further["split"] == r.split)]
                mine = f[f["aggregation"] == a]
                if not mine.empty:
                    ranked.append(f"{r.scenario} {split_text.get(r.split, r.split)} {mine['mean_rank'].iloc[0]:.1f} of "
                                  f"{len(f[f['block'] == mine['block'].iloc[0]])}")
                    n = int(mine["n_combinations"].iloc[0])
                    over.add(f"{mine['over'].iloc[0]} ({n} combination{'s' if n != 1 else ''})")
            lines.append(f"- **{spec.label('aggregation', a)}**, {spec.metric_spec(task, metric).title}: {reason}."
                         + (f" Its mean rank with the others where it exists, over {' / '.join(sorted(over))}: "
                            + ", ".join(ranked) + "." if ranked else ""))
        blocks += ["### Left out of the main ranking", "\n".join(lines)]

    def line(r) -> str:
        head = (f"- {spec.metric_spec(r.task, r.metric).title}, {r.scenario} {split_text.get(r.split, r.split)}"
                + ("" if r.block == 0 else f" (further block: {r.over})") + ": ")
        if not r.winner:
            return head + "tie: " + " and ".join(f"**{entry_label(spec, e)}**" for e in r.tied.split(" | ")) + \
                " (no winner)"
        text = head + f"**{entry_label(spec, r.winner_entry)}**"
        if not r.runner_up:
            return text
        p = f" (p = {format_p(r.p_value)}, adjusted {format_p(r.p_adjusted)})" if np.isfinite(r.p_value) else ""
        return text + (", significantly" if r.significant else ", not significantly") + \
            f" better than {entry_label(spec, r.runner_up_entry)}{p}"

    blocks += ["### Winners", "\n".join(line(r) for r in v.winners.itertuples()), "### Flips"]
    if v.flips.empty:
        blocks.append("None: no task has two different winners that are each significantly better than their "
                      "runner-up, and no aggregation of the usual orientation (higher = more uncertain) puts a "
                      "measure significantly below chance.")
    else:
        blocks.append("\n".join(f"- {r.kind}: {spec.metric_spec(r.task, r.metric).title}"
                                f"{' (' + r.where + ')' if r.where else ''}: {r.detail}" for r in v.flips.itertuples()))
    if not v.inverted.empty:
        names = ", ".join(dict.fromkeys(spec.label("aggregation", a) for a in v.chance.loc[v.chance["inverted"].astype(bool),
                                                                                               "aggregation"]))
        blocks += ["### Inverted orientation",
                   f"Declared inverted (lower score = more uncertain, e.g. Geary's C: 0 for a clustered map, 1 for a "
                   f"random one): {names}. Significantly below chance is what such a score gives read the usual way: "
                   f"a detector with its sign reversed, not a collapse, so these are not flips "
                   f"({len(v.inverted)} significant, in the same below-chance test family):",
                   "\n".join(f"- {spec.metric_spec(r.task, r.metric).title} ({r.where}): {r.detail}"
                             for r in v.inverted.itertuples())]
    if not v.chance.empty:
        blocks.append(f"Below chance: {len(v.chance)} methods on the wrong side of chance (with another aggregation of "
                      f"the same model and measure on the right side) were tested, two-sided bootstrap of value − "
                      f"chance, adjusted together; {int(v.chance['significant'].sum())} significant"
                      + (f", {len(v.inverted)} of them of an aggregation declared inverted (listed under Inverted "
                         f"orientation, not flips)." if not v.inverted.empty else "."))
    blocks.append(f"*Tables: {', '.join(f'`{ctx.rel(ctx.tables / f)}`' for f in TABLE_FILES)}.*")
    return blocks


@hookimpl
def values_seg_report_sections():
    return [AggregationVerdictSection]
