"""Report section: the downstream tables (paper Tables 5-6), in Markdown, LaTeX and CSV."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.report import costs, latex, markdown
from values_seg.report.rich import Block
from values_seg.report.rundir import RunData, read_table
from values_seg.report.section import ReportSection
from values_seg.report.common import scenarios
from values_seg.report.identical import identical_metrics
from values_seg.report.tables import DownstreamTable, downstream_tables, missing_values, rich_table, summary_frame
from values_seg.storage.run_files import COSTS, TABLES


class DownstreamSection(ReportSection):
    """The downstream tables: every task's table metrics per method, mean over seeds with intervals."""

    name = "downstream_tables"
    what = "the downstream tables"
    order = 30
    outputs = (f"{TABLES}/downstream_*.tex", f"{TABLES}/downstream_*.csv", f"{TABLES}/summary.csv")

    def build(self, ctx) -> None:
        _downstream(ctx)


def _downstream_md(t: DownstreamTable) -> str:
    f = t.frame()
    return markdown.table(list(f.columns), f.values.tolist(),
                          align=["l"] * len(t.label_keys) + ["r"] * (len(t.columns) + len(t.cost_columns)),
                          keys=len(t.label_keys))


def _downstream_tex(t: DownstreamTable) -> str:
    headers = [{"backbone": "Backbone", "prediction_model": "PM", "measure": "UM", "uncertainty_type": "UT",
                "aggregation": "AGG"}[k] for k in t.label_keys] + [c.header for c in t.columns] + [
        c.header for c in t.cost_columns]
    groups: list[tuple[str, int]] = [("", len(t.label_keys))]
    for c in t.columns:
        if groups[-1][0] == c.spec.group and len(groups) > 1:
            groups[-1] = (c.spec.group, groups[-1][1] + 1)
        else:
            groups.append((c.spec.group, 1))
    if t.cost_columns:
        groups.append((costs.GROUP, len(t.cost_columns)))
    rows = [t.labels(i) + [t.cell(i, j) for j in range(len(t.columns))] + t.cost_cells(i) for i in range(len(t.rows))]
    align = "l" * len(t.label_keys) + "c" * len(t.columns) + "r" * len(t.cost_columns)
    what = ("values x 100, mean over seeds [bootstrap confidence interval]" if t.has_intervals
            else "values x 100, mean +- sample std over seeds")
    comment = (f"Downstream tasks, scenario {t.scenario.title}: {what}.\n"
               "Requires \\usepackage{booktabs}" + (" and amssymb (\\checkmark)." if t.has_references else "."))
    return latex.tabular(headers, rows, groups=groups, align=align, blank_repeats=len(t.label_keys) - 1,
                         comment=comment)


def _seed_note(t: DownstreamTable) -> str:
    ns = t.n[t.n > 0]
    if ns.size == 0:
        return ""
    lo, hi = int(ns.min()), int(ns.max())
    return f"{hi} seed{'s' if hi != 1 else ''}" if lo == hi else f"{lo}–{hi} seeds (some jobs missing)"


def _interval_note(tables: list[DownstreamTable], run: RunData) -> str:
    if not any(t.has_intervals for t in tables):
        return ("Values × 100, mean ± sample standard deviation (ddof = 1) over seeds; with one seed the mean alone "
                "(no confidence intervals in these results). ")
    dist = run.distributions
    level = f"{(dist.level if dist else 0.95) * 100:g} %"
    text = (f"Values × 100: the mean over seeds and its {level} confidence interval [low, high], a percentile "
            f"bootstrap over the test cases ({dist.n_resamples if dist else 'the configured'} resamples, i.i.d. and "
            "OoD cases resampled separately; with several seeds, seeds resampled too); without an interval, mean ± "
            "sample std over seeds (`tables/summary.csv` has both). ")
    refs = sorted({(c.task, c.metric) for t in tables for c in t.columns if run.spec.reference_metric(c.task, c.metric)})
    for task, metric in refs:
        ref = run.spec.metric_spec(task, run.spec.reference_metric(task, metric))
        mine = run.spec.metric_spec(task, metric)
        text += (f"{ref.label}: the reference value of {mine.label} (what an ideal model would get), with its own "
                 f"interval; a {mine.label} value marked ✓ lies inside that interval (compatible with the reference) "
                 "in every seed. ")
    return text


def _metric_notes(tables: list[DownstreamTable], run: RunData) -> str:
    """The notes the tasks declare on their metrics in these tables, each with the range of its
    values in this run (× 100, as the tables), e.g. how far below 0 E-AURC went."""
    res, lines = run.results, []
    for task, metric in dict.fromkeys((c.task, c.metric) for t in tables for c in t.columns):
        note = (run.spec.metric(task, metric) or {}).get("note")
        rows = res[(res["task"] == task) & (res["metric"] == metric)]
        if not note or rows.empty:
            continue
        values = rows["value"].astype(float)
        seen = (f"lowest value {100 * values.min():.2f}, {int((values < 0).sum())} of {len(values)} values below 0")
        if "ci_low" in rows and rows["ci_low"].notna().any():
            low = rows["ci_low"].astype(float)
            seen += f", lowest interval bound {100 * low.min():.2f} ({int((low < 0).sum())} below 0)"
        lines.append(f"**{run.spec.metric_spec(task, metric).label}.** {note} In this run (× 100): {seen}.")
    return "\n\n".join(lines)


def _downstream(report) -> None:
    report.add("## Downstream tasks (paper Tables 5–6)")
    spec, dist = report.run.spec, report.run.distributions
    cost_table = (read_table(report.run.run_dir / COSTS, report.run.notes, "the downstream tables' cost columns")
                  if (report.run.run_dir / COSTS).is_file() else None)
    tables = downstream_tables(report.run.results, spec, dist, cost_table)
    if not tables:
        report.add("No downstream-task metrics in the results.")
        _gaps(report, tables)
        return
    report.add(
        _interval_note(tables, report.run)
        + "↑ / ↓: higher / lower is better. Dice and GED do not depend on the measure or aggregation and repeat on "
        "every row of a prediction model; ACE and NCC repeat across the aggregations of a measure. An empty cell "
        "is not applicable (e.g. AL improvement for AU measures); columns without any value are left out. "
        "PM: prediction model, UM: uncertainty measure, UT: uncertainty type it stands for, AGG: aggregation. "
        + spec.glossary()
        + (f" {costs.GROUP} (not × 100; the prediction model's, mean over seeds, from `{COSTS}`; section "
           "\"Cost beside quality\"): Train s, its trainings' seconds; per test case, Passes (images through a "
           "network), GFLOPs and ms (median)." if any(t.cost_columns for t in tables) else "")
    )
    same = identical_metrics(report.run.results, spec).text()
    if same:
        report.add(f"Identical in every row of this run (to a relative 1e-9), so one column each, named together: "
                   f"{same}.")
    notes = _metric_notes(tables, report.run)
    if notes:
        report.add(notes)
    report.write_csv(summary_frame(report.run.results, spec, dist), report.tables / "summary.csv")
    blocks = []
    for t in tables:
        tex = report.tables / f"downstream_{t.scenario.slug}.tex"
        report.write_text(tex, _downstream_tex(t))
        report.write_csv(t.frame(), report.tables / f"downstream_{t.scenario.slug}.csv")
        blocks += [f"### {t.scenario.title}" + (f" ({t.scenario.dataset})" if t.scenario.dataset and
                                                  t.scenario.dataset != t.scenario.title else ""),
                   _downstream_md(t),
                   f"*{_seed_note(t)}; LaTeX: `{report.rel(tex)}`.*"]
    # report.md: a table per scenario; report.html: one table of every scenario, filtered there
    report.add(Block("\n\n".join(blocks), table=rich_table(tables)))
    _gaps(report, tables)
    report.add(f"All metrics (raw values, mean / std / n over seeds): `{report.rel(report.tables / 'summary.csv')}`.")


def _gaps(report, tables: list[DownstreamTable]) -> None:
    """Per scenario, what its table cannot show (a declared metric without values, and why) and the
    cells marked ⚠ (values the data cannot support), so that no gap is silent."""
    said = []
    for sc in scenarios(report.run.results):
        table = next((t for t in tables if t.scenario == sc), None)
        found = [text for text in (table.support_legend() if table is not None else "",
                                   missing_values(report.run.results, sc, report.run.spec, report.run.cases)) if text]
        if found:
            said.append(f"- **{sc.title}**: " + " ".join(found))
    if said:
        report.add("What the tables do not show, and values the data cannot support:\n\n" + "\n".join(said))


@hookimpl
def values_seg_report_sections():
    return [DownstreamSection]
