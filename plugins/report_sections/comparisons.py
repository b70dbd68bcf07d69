"""Report section: paired comparisons of the choices of one component (:mod:`values_seg.report.comparisons`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from values_seg import hookimpl
from values_seg.report import comparisons, markdown
from values_seg.report.rundir import RunData
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import BOOTSTRAP, COMPARISONS


class ComparisonsSection(ReportSection):
    """The paired comparisons: which choice of a component wins where, and where significantly."""

    name = "paired_comparisons"
    what = "the paired comparisons"
    order = 80
    early = 2
    #: what :func:`_compare` writes (recorded as values-seg's, so a rebuild replaces it)
    outputs = tuple(f"{COMPARISONS}/{vary}{part}.csv" for vary in comparisons.VARY for part in ("", "_wins"))

    def build(self, ctx) -> None:
        _comparisons(ctx)


def _comparisons(report) -> None:
    report.add("## Paired comparisons: which choice wins where")
    run = report.run
    if run.distributions is None:
        report.add(f"Skipped: no bootstrap distributions (`{BOOTSTRAP}`; `statistics.n_resamples` 0 or an older run).")
        return
    intro = (
        "For each set of methods that differ in one component only (same scenario, backbone and other components, "
        "one metric and split), the winner is the choice with the best value; it is compared with every other "
        "choice by the paired bootstrap of the difference on the same resampled test cases "
        f"(`values-seg compare {run.run_dir.name} --vary ...`). A cell: sets won / sets compared, in brackets the "
        "sets where the winner is significantly better than every other choice; the rest are not significant: the "
        f"data do not separate the choices there. {comparisons.significance_note(run.distributions.level, run.spec)} "
        "Table metrics only; every metric and pair in `comparisons/`.")
    computed = [(vary, report.renderer.compute(_compare, run, vary)) for vary in comparisons.VARY]  # in workers
    report.later(lambda: _with_intro(intro, [block for vary, future in computed
                                             for block in _comparison_blocks(report, vary, *future.result())]))


def _with_intro(intro: str, blocks: list[str]) -> list[str]:
    """The section's text before its tables; one line instead where there is nothing to compare."""
    if not blocks:
        return ["Nothing to compare: no two methods of this run differ in one component only (on a table metric "
                "with a declared direction)."]
    return [intro, *blocks]


def _compare(run: RunData, vary: str) -> tuple[pd.DataFrame, Path, str]:
    """The paired comparisons varying one component, written to ``comparisons/``: (wins, detail file, the
    methods left out as unsupported by the data)."""
    pairs = comparisons.compare(run, vary)
    wins = comparisons.wins(pairs, run, vary)
    detail, _ = comparisons.write(pairs, wins, run.run_dir, vary)
    return wins, detail, comparisons.left_out(run, vary)


def _comparison_blocks(report, vary: str, wins: pd.DataFrame, detail: Path, left_out: str) -> list[str]:
    spec = report.run.spec
    table_metrics = {(m.task, m.metric) for m in spec.table_metrics()}
    wins = wins[[(t, m) in table_metrics for t, m in zip(wins["task"], wins["metric"])]] if not wins.empty else wins
    if wins.empty:
        return [left_out] if left_out else []
    choices = spec.ordered(vary, wins["choice"].unique())
    rows = []
    for (task, metric, split), g in wins.groupby(["task", "metric", "split"], sort=False):
        ms = spec.metric_spec(task, metric)
        where = {"iid": " i.i.d.", "ood": " OoD"}.get(split, "")
        cells = {r.choice: f"{r.wins}/{r.sets} ({r.significant_wins})" for r in g.itertuples()}
        same = f" (same evidence as {g['same_as'].iloc[0]})" if g["same_as"].iloc[0] else ""
        rows.append([f"{ms.title}{where} {spec.arrow(task, metric)}{same}"] + [cells.get(c, "") for c in choices])
    return [f"### Varying the {COMPONENT_TITLES[vary]}",
            markdown.table(["Metric"] + [spec.label(vary, c) for c in choices], rows,
                           align=["l"] + ["r"] * len(choices), keys=1),
            f"*Every pair: `{report.rel(detail)}`.*"] + ([left_out] if left_out else [])


COMPONENT_TITLES = {"aggregation": "aggregation (C3)", "measure": "uncertainty measure (C2)",
                    "prediction_model": "prediction model (C1)"}


@hookimpl
def values_seg_report_sections():
    return [ComparisonsSection]
