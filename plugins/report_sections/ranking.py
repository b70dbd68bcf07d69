"""Report section: ranking stability under resampling and agreement between metrics (:mod:`values_seg.report.ranking`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from values_seg import hookimpl
from values_seg.report import markdown, ranking
from values_seg.report.common import scenarios
from values_seg.report.identical import identical_metrics
from values_seg.report.rundir import RunData
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import BOOTSTRAP, FIGURES, TABLES


class RankingSection(ReportSection):
    """The ranking stability: rank histograms over bootstrap resamples, Kendall's tau between a task's metrics."""

    name = "ranking_stability"
    what = "the ranking stability"
    order = 90
    early = 5
    outputs = (f"{FIGURES}/ranks_*.png", f"{TABLES}/rank_histograms.csv", f"{TABLES}/metric_agreement.csv")

    def prepare(self, ctx) -> None:
        """The rank statistics are a worker's first job: their figures wait for them."""
        run = ctx.run
        self.computed = ctx.compute(_rankings, run) if run.distributions is not None else None

    def build(self, ctx) -> None:
        _ranking(ctx, self.computed)


def _ranking(report, computed) -> None:
    """``computed``: the future of :func:`_rankings` (a worker's first job), None without
    bootstrap distributions; the rank histograms are queued as soon as it is done."""
    report.add("## Ranking stability and agreement between metrics")
    if computed is None:
        report.add(f"Skipped: no bootstrap distributions (`{BOOTSTRAP}`).")
        return
    from values_seg.report.plots import plot_rank_histograms

    hist, tau, left_out = computed.result()
    drawn = []
    if not hist.empty:
        for sc in scenarios(report.run.results):
            out = report.figures / f"ranks_{sc.slug}.png"
            drawn.append((sc, report.figure(plot_rank_histograms, out, hist[hist["scenario"] == sc.title], sc.title,
                                            out, report.run.spec)))
    report.later(lambda: ([left_out] if left_out else []) + _ranking_blocks(report, hist, tau, drawn))


def _rankings(run: RunData) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(rank histograms, Kendall's τ between metrics, the methods left out as unsupported), from one table
    of the methods."""
    methods = ranking.Methods(run)
    return ranking.rank_histograms(run, methods), ranking.metric_agreement(run, methods), methods.left_out_text()


def _agreement_note(run: RunData) -> str:
    """What the τ tables leave out (reference values and baselines) and show once (identical metrics)."""
    spec, parts = run.spec, []
    left = [(t, m) for t, m in ranking.left_out_of_agreement(spec)
            if ((run.results["task"] == t) & (run.results["metric"] == m)).any()]
    if left:
        parts.append("Left out: " + ", ".join(spec.metric_spec(t, m).label for t, m in left) + " (reference values "
                     "and baselines: the value of a fixed ranking, random or ideal, which depends on the prediction "
                     "model only, so their τ says nothing about the uncertainty methods).")
    same = identical_metrics(run.results, spec).text()
    if same:
        parts.append(f"Identical in every row of this run, so shown once, named together (a pair of them would "
                     f"have τ = 1 by construction): {same}.")
    return " ".join(parts)


def _ranking_blocks(report, hist: pd.DataFrame, tau: pd.DataFrame, drawn: list) -> list[str]:
    run, spec = report.run, report.run.spec
    blocks = []
    if not hist.empty:
        report.write_csv(hist, report.tables / "rank_histograms.csv")
        n_resamples = run.distributions.n_resamples
        blocks += [markdown.figure(
            report.rel(path), f"rank histograms {sc.title}",
            f"{sc.title}: how often each choice of a component takes each rank when the test cases are "
            f"resampled ({n_resamples} bootstrap resamples), per task's primary metric and split; outlined: the "
            f"observed rank. Choices are compared over matched combinations only: a block ranks the choices that "
            f"occur together (unless a larger block holds them all), each by its mean over the same combinations of "
            f"the other components (those in which all of them occur; named where they are not all of the "
            f"metric's), so a choice that exists only with some prediction models (a measure defined for one of "
            f"them) is ranked on those alone. A choice that keeps its rank in most resamples is a stable result; "
            f"spread-out shares are not.")
            for sc, future in drawn if (path := future.result()) is not None]
        blocks.append(f"*Rank shares and keep rates: `{report.rel(report.tables / 'rank_histograms.csv')}`.*")
    if tau.empty:
        return blocks
    report.write_csv(tau, report.tables / "metric_agreement.csv")
    note = _agreement_note(run)
    blocks += ["### Kendall's τ between the rankings of a task's metrics",
               "τ-b between the rankings of all methods (prediction model × measure × aggregation) by two metrics "
               "of one task (1: the same order, 0: unrelated, −1: reversed), with its bootstrap interval."
               + (f" {note}" if note else "")]
    columns = list(dict.fromkeys(f"{s}{ {'iid': ' i.i.d.', 'ood': ' OoD'}.get(sp, '')}"
                                 for s, sp in zip(tau["scenario"], tau["split"])))
    for task, g in tau.groupby("task", sort=False):
        cells: dict[tuple, dict] = {}
        for r in g.itertuples():
            pair = (r.label_a, r.label_b)
            col = f"{r.scenario}{ {'iid': ' i.i.d.', 'ood': ' OoD'}.get(r.split, '')}"
            text = f"{r.tau:.2f}" + (f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if np.isfinite(r.ci_low) else "")
            cells.setdefault(pair, {})[col] = text
        used = [c for c in columns if any(c in v for v in cells.values())]
        rows = [[f"{a} vs {b}"] + [v.get(c, "") for c in used] for (a, b), v in cells.items()]
        blocks += [f"**{spec.metric_spec(task, g['metric_a'].iloc[0]).group}**",
                   markdown.table(["Metrics"] + used, rows, align=["l"] + ["r"] * len(used), keys=1)]
    return blocks


@hookimpl
def values_seg_report_sections():
    return [RankingSection]
