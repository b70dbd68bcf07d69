"""``build_report(run_dir)``: ``report.md``, ``figures/*.png`` and ``tables/*.tex`` of a run.

The report is rebuilt from the run directory alone (DESIGN.md, "Results"); output is
deterministic (sorted orders, no timestamps). A missing optional input skips its part with a
note; a part that fails anyway is replaced by a warning in the report (and logged), so one broken
figure never costs the rest of the report.
"""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg import provenance, run_directory
from values_seg.report import latex, markdown
from values_seg.report.common import model_key, scenarios, select, slugify
from values_seg.report.deviations import component_deviations
from values_seg.report.plots import (
    plot_deviations,
    plot_measure_summary,
    plot_montage,
    plot_rank_histograms,
    plot_reliability,
    plot_risk_coverage,
)
from values_seg.report.paper import comparison_section
from values_seg.report import comparisons, ranking
from values_seg.report.recommendation import recommendation_section
from values_seg.report.render import Renderer
from values_seg.report.rundir import RunData, load_run
from values_seg.report.spec import ALL_TYPES, HIGHER, LOWER, natural_key
from values_seg.report.separation import QUESTIONS, measure_summary, separation_summary, separation_table
from values_seg.report.tables import DownstreamTable, downstream_tables, summary_frame

log = logging.getLogger(__name__)

GENERATED = {
    "figures": ("fig3_*.png", "separation_*.png", "risk_coverage_*.png", "generalized_risk_coverage_*.png",
                "reliability_*.png", "montage_*.png", "ranks_*.png"),
    "tables": ("downstream_*.tex", "downstream_*.csv", "separation*.tex", "summary.csv", "rank_histograms.csv",
               "metric_agreement.csv", "paper_*.tex", "paper_*.csv"),
}


#: Sections that hand the most work to the figure workers (run before the others).
HEAVY = ("the uncertainty-map montages", "the paired comparisons", "the risk-coverage curves", "the reliability diagrams",
         "the ranking stability")


class _Report:
    """The report being built: markdown blocks in order, some of them waiting for their figures."""

    def __init__(self, run: RunData, renderer: Renderer):
        self.run = run
        self.dir = run.run_dir
        self.figures = self.dir / "figures"
        self.tables = self.dir / "tables"
        self.renderer = renderer
        # per section: markdown blocks, or (what, function giving blocks) once the figures are drawn
        self.sections: dict[str, list] = {"": []}
        self.lines = self.sections[""]
        self.warnings: list[str] = []
        self._section = ""

    def add(self, *blocks: str) -> None:
        for b in blocks:
            self.lines += [b, ""]

    def figure(self, plot, out: Path, *args, inputs=(), **kwargs):
        """Queue ``plot(*args, **kwargs)``, which draws ``out`` (from the arguments and the files
        ``inputs``); a future of its return value."""
        return self.renderer.submit(plot, out, *args, inputs=inputs, **kwargs)

    def later(self, compose) -> None:
        """Blocks that need drawn figures: ``compose()`` gives them when the report is assembled."""
        self.lines.append((self._section, compose))

    def section(self, what: str, fn) -> None:
        """Run ``fn``, whose blocks form the section ``what`` (sections may run in any order:
        :meth:`assemble` puts them in the order asked for)."""
        self._section = what
        self.lines = self.sections.setdefault(what, [])
        try:
            fn()
        except Exception as e:  # keep the rest of the report
            self.warn(what, e)

    def warn(self, what: str, e: Exception) -> None:
        log.error("report: could not build %s", what, exc_info=e)
        message = f"could not build {what}: {type(e).__name__}: {e}"
        self.warnings.append(message)
        self.add(f"> **Warning:** {message}")

    def assemble(self, order: list[str]) -> list[str]:
        """The report's lines, sections in ``order``, each waiting block composed (in order) now
        that its figures are drawn."""
        out = []
        for what in order:
            self.lines = []
            for item in self.sections.get(what, []):
                if isinstance(item, str):
                    self.lines.append(item)
                    continue
                try:
                    self.add(*item[1]())
                except Exception as e:  # keep the rest of the report
                    self.warn(item[0], e)
            out += self.lines
        return out

    def rel(self, path: Path) -> str:
        return path.relative_to(self.dir).as_posix()

    def write_text(self, path: Path, text: str) -> None:
        """Write a table file of the report (atomically, never through a link)."""
        run_directory.write_text(self.dir, path, text)

    def write_csv(self, frame: pd.DataFrame, path: Path) -> None:
        run_directory.atomic_write(self.dir, path, lambda tmp: frame.to_csv(tmp, index=False))


# ----------------------------------------------------------------------------- sections


def _generated(run_dir: Path) -> dict[Path, int]:
    """The report's figure and table files in ``run_dir`` with their modification times."""
    out = {}
    for folder, patterns in GENERATED.items():
        d = run_dir / folder
        if d.is_dir():
            for pattern in patterns:
                out.update({f: f.stat().st_mtime_ns for f in d.glob(pattern)})
    return out


def _remove_stale(report: _Report, current: set[Path]) -> None:
    """Remove the figures and tables an earlier build wrote that this one did not (and only those: a
    file values-seg did not write is never deleted)."""
    run_directory.remove_written(report.dir, [f for f in _generated(report.dir) if f not in current])


def _join(values) -> str:
    return ", ".join(str(v) for v in values) if len(values) else "–"


def _summary(report: _Report) -> None:
    res, spec = report.run.results, report.run.spec
    report.add("## Run summary")
    if res.empty:
        report.add("No results were found in this run directory (`results.csv` / `results.parquet`).")
    else:
        combos = res[["dataset", "scenario", "backbone", "prediction_model", "seed"]].drop_duplicates()
        methods = res[(res["measure"] != "") & (res["aggregation"] != "") & (res["versus"] == "")]
        methods = methods[["dataset", "scenario", "backbone", "prediction_model", "measure", "aggregation"]]
        seeds = sorted(res["seed"].unique(), key=natural_key)
        tasks = sorted((t for t in res["task"].unique() if t), key=natural_key)
        items = [
            ("Scenarios (dataset / scenario)", _join([f"{s.dataset} / {s.scenario}" for s in scenarios(res)])),
            ("Backbones", _join(sorted((b for b in res["backbone"].unique() if b), key=natural_key))),
            ("Prediction models", _join(spec.ordered("prediction_model", [m for m in res["prediction_model"].unique() if m]))),
            ("Uncertainty measures", _join(spec.ordered("measure", [m for m in res["measure"].unique() if m]))),
            ("Aggregations", _join(spec.ordered("aggregation", [a for a in res["aggregation"].unique() if a]))),
            ("Tasks", _join(tasks)),
            ("Seeds", f"{len(seeds)} ({_join(seeds)})"),
            ("Combinations with results (dataset × scenario × backbone × prediction model × seed)", str(len(combos))),
            ("Uncertainty methods per seed (… × measure × aggregation)", str(len(methods.drop_duplicates()))),
            ("Result rows", str(len(res))),
        ]
        gaps = _measure_gaps(res, spec)
        if gaps:
            items.append(("Measures without rows under some prediction models", gaps))
        report.add(markdown.table(["", ""], [[f"**{k}**", v] for k, v in items]))
    failures = report.run.failures
    if failures is not None and not failures.empty:
        cols = [c for c in ("job", "stage", "error") if c in failures.columns] or list(failures.columns)
        rows = [[(str(v)[:300] + ("…" if len(str(v)) > 300 else "")) for v in r]
                for r in failures[cols].itertuples(index=False)]
        report.add(f"**{len(failures)} job(s) failed**; their combinations are missing from the tables below:",
                   markdown.table(cols, rows))
    elif (report.dir / "failures.csv").exists() or failures is not None:
        report.add("No failed jobs.")
    else:
        report.add("No failed jobs recorded (no `failures.csv`).")


def _measure_gaps(res: pd.DataFrame, spec) -> str:
    """Per measure, the prediction models of the run it has no rows for, and why where the
    declarations say (a measure runs only under the families it declares an uncertainty type for)."""
    rows = res[(res["measure"] != "") & (res["prediction_model"] != "")]
    models = rows.drop_duplicates("prediction_model").set_index("prediction_model")["family"].to_dict()
    lines = []
    for measure in spec.ordered("measure", rows["measure"].unique()):
        missing = spec.ordered("prediction_model", set(models) - set(rows.loc[rows["measure"] == measure,
                                                                                "prediction_model"]))
        if not missing:
            continue
        declared = (spec.entry("measure", measure) or {}).get("uncertainty_types")
        names = ", ".join(spec.label("prediction_model", m) for m in missing)
        text = f"{spec.label('measure', measure)}: none under {names}"
        if declared is not None and all(models[m] not in declared for m in missing):
            text += f" (it declares an uncertainty type only for {', '.join(declared)})"
        lines.append(text)
    return "; ".join(lines)


def _downstream_md(t: DownstreamTable) -> str:
    f = t.frame()
    return markdown.table(list(f.columns), f.values.tolist(),
                          align=["l"] * len(t.label_keys) + ["r"] * len(t.columns))


def _downstream_tex(t: DownstreamTable) -> str:
    headers = [{"backbone": "Backbone", "prediction_model": "PM", "measure": "UM", "uncertainty_type": "UT",
                "aggregation": "AGG"}[k] for k in t.label_keys] + [c.header for c in t.columns]
    groups: list[tuple[str, int]] = [("", len(t.label_keys))]
    for c in t.columns:
        if groups[-1][0] == c.spec.group and len(groups) > 1:
            groups[-1] = (c.spec.group, groups[-1][1] + 1)
        else:
            groups.append((c.spec.group, 1))
    rows = [t.labels(i) + [t.cell(i, j) for j in range(len(t.columns))] for i in range(len(t.rows))]
    align = "l" * len(t.label_keys) + "c" * len(t.columns)
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


def _downstream(report: _Report) -> None:
    report.add("## Downstream tasks (paper Tables 5–6)")
    spec, dist = report.run.spec, report.run.distributions
    tables = downstream_tables(report.run.results, spec, dist)
    if not tables:
        report.add("No downstream-task metrics in the results.")
        return
    report.add(
        _interval_note(tables, report.run)
        + "↑ / ↓: higher / lower is better. Dice and GED do not depend on the measure or aggregation and repeat on "
        "every row of a prediction model; ACE and NCC repeat across the aggregations of a measure. An empty cell "
        "is not applicable (e.g. AL improvement for AU measures); columns without any value are left out. "
        "PM: prediction model, UM: uncertainty measure, UT: uncertainty type it stands for, AGG: aggregation. "
        + spec.glossary()
    )
    notes = _metric_notes(tables, report.run)
    if notes:
        report.add(notes)
    report.write_csv(summary_frame(report.run.results, spec, dist), report.tables / "summary.csv")
    for t in tables:
        tex = report.tables / f"downstream_{t.scenario.slug}.tex"
        report.write_text(tex, _downstream_tex(t))
        report.write_csv(t.frame(), report.tables / f"downstream_{t.scenario.slug}.csv")
        report.add(f"### {t.scenario.title}" + (f" ({t.scenario.dataset})" if t.scenario.dataset and
                                                  t.scenario.dataset != t.scenario.title else ""),
                   _downstream_md(t),
                   f"*{_seed_note(t)}; LaTeX: `{report.rel(tex)}`.*")
    report.add(f"All metrics (raw values, mean / std / n over seeds): `{report.rel(report.tables / 'summary.csv')}`.")


def _separation(report: _Report) -> None:
    report.add("## Separation study (paper Figure 2, Table 4)")
    res, spec = report.run.results, report.run.spec
    per_model = separation_table(res, spec)
    summary = separation_summary(res, spec)
    if not per_model:
        report.add("No separation evidence: the results hold no NCC or OoD AUROC of AU- and EU-measures.")
    else:
        report.add(
            "Q1 do AU-measures capture AU? (expected yes: NCC of the AU-measure above the EU-measure's) · "
            "Q2 do EU-measures capture AU? (expected no: the EU-measure's NCC below every PU- and AU-measure's) · "
            "Q3 do EU-measures capture EU? (expected yes: OoD AUROC above 0.5) · "
            "Q4 do AU-measures capture EU? (expected no: the EU-measure's AUROC above the AU-measure's). "
            "Each answer is decided over all units of evidence (seeds × aggregations × measure pairs): yes if the "
            "criterion holds on all, no on none, partial otherwise; ✓ / ✗ agrees / disagrees with theory, "
            "~ partial, – no evidence. NCC on the i.i.d. cases and AUROC as raw values (not × 100), as in Table 4."
        )
        scen = [r.scenario for r in summary]
        headers = ["Question"] + [s.title for s in scen]
        rows = [[f"{q}: {QUESTIONS[q][0]} (expected {QUESTIONS[q][1]})"]
                + [r.answers[q].text(with_detail=False) + (f" ({r.answers[q].support}/{r.answers[q].total})"
                                                            if r.answers[q].total else "") for r in summary]
                for q in QUESTIONS]
        report.add("### Summary over prediction models (Figure 2a)", markdown.table(headers, rows))
        several = len({r.backbone for r in per_model}) > 1
        headers2 = ["Scenario", "Prediction model"] + [f"{q}: {QUESTIONS[q][0]}" for q in QUESTIONS]
        rows2 = [[r.scenario.title, model_key(r.backbone, r.prediction_model, several, spec.label)]
                 + [r.answers[q].text() for q in QUESTIONS] for r in per_model]
        report.add("### Per prediction model (Table 4)", markdown.table(headers2, rows2))
        tex = report.tables / "separation.tex"
        report.write_text(tex, latex.tabular(headers2, rows2, align="ll" + "p{3.4cm}" * len(QUESTIONS), blank_repeats=1,
                                             comment="Separation study Q1-Q4 per scenario and prediction model.\n"
                                                     "Requires \\usepackage{booktabs} and amssymb (\\checkmark)."))
        tex2 = report.tables / "separation_summary.tex"
        report.write_text(tex2, latex.tabular(headers, rows, align="l" + "c" * len(scen),
                                              comment="Separation study summary (Figure 2a).\n"
                                                      "Requires \\usepackage{booktabs}."))
        report.add(f"*LaTeX: `{report.rel(tex2)}`, `{report.rel(tex)}`.*")
    out = report.figures / "separation_measures.png"
    drawn = report.figure(plot_measure_summary, out, measure_summary(res, spec), out, spec)
    report.later(lambda: [] if drawn.result() is None else [markdown.figure(
        report.rel(out), "NCC and AUROC per measure",
        "Figure 2b-like: top, NCC between each measure's map and the raters' variance on scenarios with "
        "ambiguity (AU-measures should be high, EU-measures low); bottom, OoD-detection AUROC on shifted "
        "scenarios (EU-measures should be above the dashed random line). Bars: mean over prediction models and "
        "aggregations, error bars ±1 std; colour = the uncertainty type the measure stands for.")])


def _components(report: _Report) -> None:
    report.add("## Components: deviation from the mean (paper Figure 3)")
    spec = report.run.spec
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
                   f"crosses." if excl else "All uncertainty types are included.")))
        return blocks or ["No task metrics for the component analysis (OoD AUROC, AL improvement, AURC, ACE, NCC)."]

    report.later(compose)


def _risk_coverage(report: _Report) -> None:
    report.add("## Failure detection: risk-coverage and generalized-risk-coverage curves")
    cases, spec = report.run.cases, report.run.spec
    if cases is None:
        report.add("Skipped: no per-case records (`cases.csv`).")
        return
    drawn = []
    for sc in scenarios(cases):
        part = select(cases, sc)  # only what the figure shows: its key changes with nothing else
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
        return blocks or ["Skipped: `cases.csv` holds no scored test cases."]

    report.later(compose)


def _risk_coverage_blocks(report: _Report, sc, path: Path, agg: str, general: Path) -> list[str]:
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


def _comparisons(report: _Report) -> None:
    report.add("## Paired comparisons: which choice wins where")
    run = report.run
    if run.distributions is None:
        report.add("Skipped: no bootstrap distributions (`bootstrap.parquet`; `statistics.n_resamples` 0 or an older run).")
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


def _compare(run: RunData, vary: str) -> tuple[pd.DataFrame, Path]:
    """The paired comparisons varying one component, written to ``comparisons/``: (wins, detail file)."""
    pairs = comparisons.compare(run, vary)
    wins = comparisons.wins(pairs, run, vary)
    detail, _ = comparisons.write(pairs, wins, run.run_dir, vary)
    return wins, detail


def _comparison_blocks(report: _Report, vary: str, wins: pd.DataFrame, detail: Path) -> list[str]:
    spec = report.run.spec
    table_metrics = {(m.task, m.metric) for m in spec.table_metrics()}
    wins = wins[[(t, m) in table_metrics for t, m in zip(wins["task"], wins["metric"])]] if not wins.empty else wins
    if wins.empty:
        return []
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
                           align=["l"] + ["r"] * len(choices)),
            f"*Every pair: `{report.rel(detail)}`.*"]


COMPONENT_TITLES = {"aggregation": "aggregation (C3)", "measure": "uncertainty measure (C2)",
                    "prediction_model": "prediction model (C1)"}


def _ranking(report: _Report, computed) -> None:
    """``computed``: the future of :func:`_rankings` (a worker's first job), None without
    bootstrap distributions; the rank histograms are queued as soon as it is done."""
    report.add("## Ranking stability and agreement between metrics")
    if computed is None:
        report.add("Skipped: no bootstrap distributions (`bootstrap.parquet`).")
        return
    hist, tau = computed.result()
    drawn = []
    if not hist.empty:
        for sc in scenarios(report.run.results):
            out = report.figures / f"ranks_{sc.slug}.png"
            drawn.append((sc, report.figure(plot_rank_histograms, out, hist[hist["scenario"] == sc.title], sc.title,
                                            out, report.run.spec)))
    report.later(lambda: _ranking_blocks(report, hist, tau, drawn))


def _rankings(run: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rank histograms, Kendall's τ between metrics), from one table of the methods."""
    methods = ranking.Methods(run)
    return ranking.rank_histograms(run, methods), ranking.metric_agreement(run, methods)


def _ranking_blocks(report: _Report, hist: pd.DataFrame, tau: pd.DataFrame, drawn: list) -> list[str]:
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
    blocks += ["### Kendall's τ between the rankings of a task's metrics",
               "τ-b between the rankings of all methods (prediction model × measure × aggregation) by two metrics "
               "of one task (1: the same order, 0: unrelated, −1: reversed), with its bootstrap interval."]
    columns = list(dict.fromkeys(f"{s}{ {'iid': ' i.i.d.', 'ood': ' OoD'}.get(sp, '')}"
                                 for s, sp in zip(tau["scenario"], tau["split"])))
    for task, g in tau.groupby("task", sort=False):
        cells: dict[tuple, dict] = {}
        for r in g.itertuples():
            pair = (spec.metric_spec(task, r.metric_a).label, spec.metric_spec(task, r.metric_b).label)
            col = f"{r.scenario}{ {'iid': ' i.i.d.', 'ood': ' OoD'}.get(r.split, '')}"
            text = f"{r.tau:.2f}" + (f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if np.isfinite(r.ci_low) else "")
            cells.setdefault(pair, {})[col] = text
        used = [c for c in columns if any(c in v for v in cells.values())]
        rows = [[f"{a} vs {b}"] + [v.get(c, "") for c in used] for (a, b), v in cells.items()]
        blocks += [f"**{spec.metric_spec(task, g['metric_a'].iloc[0]).group}**",
                   markdown.table(["Metrics"] + used, rows, align=["l"] + ["r"] * len(used))]
    return blocks


def _reliability(report: _Report) -> None:
    report.add("## Calibration: reliability diagrams")
    cal = report.run.calibration
    if cal is None:
        report.add("Skipped: no calibration bins (`calibration.csv`).")
        return
    drawn = []
    for sc in scenarios(cal):
        part = select(cal, sc)  # only what the figure shows: its key changes with nothing else
        out = report.figures / f"reliability_{sc.slug}.png"
        drawn.append((sc, report.figure(plot_reliability, out, part, sc, out, report.run.spec)))
    report.later(lambda: [markdown.figure(
        report.rel(path), f"reliability {sc.title}",
        f"{sc.title}: pixel accuracy against Platt-scaled confidence per bin, one panel per prediction model (rows) "
        f"and measure, i.i.d. and OoD; the closer to the dashed diagonal the better calibrated; legend: "
        f"ACE ×100 (mean over seeds).") for sc, future in drawn if (path := future.result()) is not None]
        or ["Skipped: `calibration.csv` holds no non-empty bins."])


def _types_lookup(run: RunData) -> dict[tuple[str, str], str]:
    types: dict[tuple[str, str], str] = {}
    for df in (run.results, run.cases, run.calibration):
        if df is None or df.empty or "uncertainty_type" not in df.columns:
            continue
        pairs = df[["prediction_model", "measure", "uncertainty_type"]].drop_duplicates()
        for m, meas, t in pairs.itertuples(index=False):
            if meas and t:
                types.setdefault((m, meas), t)
    return types


def _montage_meta(path: Path) -> dict:
    try:
        with np.load(path, allow_pickle=False) as data:
            return json.loads(str(data["meta"])) if "meta" in data.files else {}
    except Exception:
        return {}


def _montages(report: _Report, seeds: str, max_cases: int) -> None:
    report.add("## Uncertainty maps")
    spec = report.run.spec
    if not report.run.montages:
        report.add("Skipped: no montages (`montages/*.npz`).")
        return
    entries = []
    for path in report.run.montages:
        meta = _montage_meta(path)
        key = (str(meta.get("scenario", "")), str(meta.get("backbone", "")), str(meta.get("prediction_model", "")))
        entries.append((key, meta.get("seed", ""), path))
    entries.sort(key=lambda e: (natural_key(e[0][0]), natural_key(e[0][1]),
                                spec.order_key("prediction_model", e[0][2]), natural_key(e[1]), e[2].name))
    if seeds == "first":
        kept, seen = [], set()
        for e in entries:
            if e[0] not in seen:
                seen.add(e[0])
                kept.append(e)
        if len(kept) < len(entries):
            report.add(f"One montage per scenario, backbone and prediction model (the first seed); "
                       f"{len(entries) - len(kept)} more in `montages/`.")
        entries = kept
    types = _types_lookup(report.run)
    for key, _, path in entries:
        out = report.figures / f"montage_{slugify(path.stem)}.png"
        drawn = report.figure(plot_montage, out, path, out, spec, types, max_cases=max_cases, inputs=[path])
        title = " · ".join(spec.label(k, v) for k, v in zip(("scenario", "backbone", "prediction_model"), key) if v)
        report.later(lambda drawn=drawn, out=out, path=path, title=title: _montage_block(report, drawn, out, path, title))


def _montage_block(report: _Report, drawn, out: Path, path: Path, title: str) -> list[str]:
    try:
        drawn.result()
    except Exception as e:  # noqa: BLE001 - one broken montage file costs only its figure
        log.error("report: could not draw montage %s", path, exc_info=e)
        message = f"could not draw montage `{path.name}`: {type(e).__name__}: {e}"
        report.warnings.append(message)
        return [f"> **Warning:** {message}"]
    return [markdown.figure(
        report.rel(out), f"uncertainty maps {title or path.stem}",
        f"{title or path.stem}: rows are test cases (i.i.d. then OoD); columns: image with each rater's contour, "
        f"the raters' per-pixel variance (the AU reference of the NCC), the prediction, then each measure's "
        f"uncertainty map (type in brackets), one colour scale per column.")]


# ----------------------------------------------------------------------------- entry point


def typed_path(path: Path) -> str:
    """``path`` as the user can type it where the command ran: relative when it lies below the
    current directory (``runs/toy_quick``), else absolute; quoted for the shell."""
    absolute = Path(path).absolute()
    try:
        text = str(absolute.relative_to(Path.cwd()))
    except ValueError:
        text = str(absolute)
    return shlex.quote(text)


def build_report(run_dir: str | Path, *, montage_seeds: str = "first", max_montage_cases: int = 8) -> Path:
    """Write ``report.md``, ``figures/*.png`` and ``tables/*.tex`` (+ CSV copies) in ``run_dir``.

    ``montage_seeds``: "first" draws one montage per (scenario, backbone, prediction model), the
    lowest seed; "all" draws every montage file. Returns the path of ``report.md``.
    """
    if montage_seeds not in ("first", "all"):
        raise ValueError(f"montage_seeds must be 'first' or 'all', got {montage_seeds!r}")
    run_directory.check(run_dir)  # values-seg's own run directory, no links to write through
    run = load_run(run_dir)
    cache = run_directory.cache_dir(run.run_dir, (run.config or {}).get("cache_dir"))
    provenance.read_digest_file(cache / provenance.DIGEST_FILE)  # the figure keys need no parsing
    with Renderer(run.run_dir) as renderer:
        return _build(run, renderer, montage_seeds, max_montage_cases)


def _build(run: RunData, renderer: Renderer, montage_seeds: str, max_montage_cases: int) -> Path:
    body = _Report(run, renderer)
    run_directory.make_dir(run.run_dir, body.figures)
    run_directory.make_dir(run.run_dir, body.tables)
    before = _generated(run.run_dir)
    # the rank statistics first: their figures wait for them
    rankings = renderer.compute(_rankings, run) if run.distributions is not None else None
    sections = {  # in the report's order
        "the recommendation": lambda: body.add(*recommendation_section(run.results, run.spec, run.distributions)),
        "the run summary": lambda: _summary(body),
        "the downstream tables": lambda: _downstream(body),
        "the separation study": lambda: _separation(body),
        "the comparison with the paper": lambda: body.add(*comparison_section(run.results, run.spec, body.tables,
                                                                              body.rel)),
        "the component analysis": lambda: _components(body),
        "the risk-coverage curves": lambda: _risk_coverage(body),
        "the paired comparisons": lambda: _comparisons(body),
        "the ranking stability": lambda: _ranking(body, rankings),
        "the reliability diagrams": lambda: _reliability(body),
        "the uncertainty-map montages": lambda: _montages(body, montage_seeds, max_montage_cases),
    }
    # run first the sections whose figures and statistics the workers draw and compute, so that they
    # work while this process builds the tables
    for what in sorted(sections, key=lambda w: HEAVY.index(w) if w in HEAVY else len(HEAVY)):
        body.section(what, sections[what])

    head = [f"# {run.name}: values-seg report", ""]
    description = (run.config or {}).get("description")
    if description:
        head += [str(description).strip(), ""]
    where = typed_path(run.run_dir)
    head += [f"Run directory: `{where}`. Rebuild with `values-seg report {where}`.", ""]
    lines = body.assemble(["", *sections])  # waits for the figures
    notes = run.notes + [f"Warning: {w}" for w in body.warnings]
    if notes:
        head += ["**Notes**", ""] + [f"- {n}" for n in notes] + [""]
    text = "\n".join(head + lines).rstrip() + "\n"
    path = run.run_dir / "report.md"
    run_directory.write_text(run.run_dir, path, text)
    made = [f for f, mtime in _generated(run.run_dir).items() if before.get(f) != mtime]
    run_directory.record(run.run_dir, made + [path])
    _remove_stale(body, set(made) | renderer.kept())
    log.info("report: %d figure(s) drawn, %d unchanged kept", renderer.rendered, renderer.reused)
    return path


__all__ = ["build_report"]
