"""Report section of the lesion tasks: per scenario, the lesion-scale table (per prediction model,
measure and lesion-scale aggregation: FP-lesion AUROC / AUPRC, F1-AUC with the random and ideal
rankings' F1-AUC, F1@95 %; the lesion F1 per model), the F1-retention figure and the FP-vs-TP lesion
scores (:mod:`._lesion_plot`). Read from the results table and ``curves.parquet`` (curves
``lesion_f1_retention`` and ``lesion_scores``); nothing is computed again."""

from __future__ import annotations

import math

import pandas as pd

from values_seg import hookimpl
from values_seg.report import latex, markdown
from values_seg.report.common import model_key, scenarios, select
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import FIGURES, TABLES

RETENTION, CASES, SCORES = "lesion_f1_retention", "case_f1_retention", "lesion_scores"
COLUMNS = (("lesion_fp_auroc", "FP-lesion AUROC", True), ("lesion_fp_auprc", "FP-lesion AUPRC", False),
           ("lesion_f1_auc", "F1-AUC", True), ("lesion_f1_at_95", "F1@95%", False))


class LesionSection(ReportSection):
    """The lesion scale: lesion F1, which lesion uncertainty finds the false-positive lesions, and lesion-F1 retention."""

    name = "lesions"
    what = "the lesion-scale section"
    order = 77
    early = 7
    outputs = (f"{FIGURES}/lesion_*.png", f"{TABLES}/lesion_*.csv", f"{TABLES}/lesion_*.tex")
    curves = (RETENTION, CASES, SCORES)

    def build(self, ctx) -> None:
        _lesions(ctx)


def _fmt(value: float) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _cell(rows: pd.DataFrame, interval: bool) -> str:
    if rows.empty:
        return "–"
    text = _fmt(float(rows["value"].mean()))
    low, high = float(rows["ci_low"].mean()), float(rows["ci_high"].mean())
    if interval and math.isfinite(low) and math.isfinite(high):
        text += f" [{_fmt(low)}, {_fmt(high)}]"
    return text


def _random_ideal(curves: pd.DataFrame | None, backbone, model, measure, aggregation, split) -> list[str]:
    """The random and the ideal ranking's F1-AUC of one table row (mean over seeds; "–" without)."""
    if curves is None:
        return ["–", "–"]
    c = curves[(curves["backbone"] == backbone) & (curves["prediction_model"] == model) & (curves["measure"] == measure)
               & (curves["aggregation"] == aggregation) & (curves["split"] == split)]
    return [_fmt(float(c[k].mean()) if not c.empty else math.nan) for k in ("random_area", "ideal_area")]


def lesion_table(results: pd.DataFrame, retention: pd.DataFrame | None, spec, split: str,
                 tasks: set, cases: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """One row per prediction model x measure x lesion aggregation of ``split`` (mean over seeds) from the
    rows of ``tasks`` (those that wrote the lesion curves), sorted by model and then FP-lesion AUROC, best first."""
    part = results[results["task"].isin(tasks) & (results["split"] == split)]
    scored = part[part["metric"] == "lesion_fp_auroc"]
    if scored.empty:
        return None
    several = part["backbone"].nunique() > 1
    rows = []
    for (backbone, model, measure, aggregation), g in scored.groupby(["backbone", "prediction_model", "measure",
                                                                      "aggregation"]):
        mine = part[(part["backbone"] == backbone) & (part["prediction_model"] == model)]
        f1 = mine[mine["metric"] == "lesion_f1"]
        same = mine[(mine["measure"] == measure) & (mine["aggregation"] == aggregation)]
        row = [model_key(backbone, model, several, spec.label), _cell(f1, True), spec.label("measure", measure),
               spec.label("aggregation", aggregation)]
        row += [_cell(same[same["metric"] == metric], interval) for metric, _, interval in COLUMNS]
        key = (backbone, model, measure, aggregation, split)
        case = _cell(same[same["metric"] == "case_f1_auc"], True)
        rows.append(row + _random_ideal(retention, *key) + [case] + _random_ideal(cases, *key) + [float(g["value"].mean())])
    table = pd.DataFrame(rows, columns=["prediction model", "lesion F1", "measure", "lesion aggregation",
                                        *[label for _, label, _ in COLUMNS], "F1-AUC random", "F1-AUC ideal",
                                        "case F1-AUC", "case F1-AUC random", "case F1-AUC ideal", "_key"])
    order = {spec.label("prediction_model", m): i
             for i, m in enumerate(spec.ordered("prediction_model", part["prediction_model"].unique()))}
    table["_model"] = table["prediction model"].map(lambda m: order.get(m, len(order)))
    table = table.sort_values(["_model", "_key"], ascending=[True, False]).drop(columns=["_model", "_key"])
    return table.reset_index(drop=True)


def tie_rule(config: dict | None) -> str:
    """The run's rule for a lesion whose largest IoU is exactly the threshold (``evaluation.lesion_iou``,
    ``evaluation.lesion_iou_rule``; the defaults where the config does not say)."""
    from values_seg.components.settings import EvaluationSettings

    given = {k: v for k, v in ((config or {}).get("evaluation") or {}).items() if k in ("lesion_iou", "lesion_iou_rule")}
    settings = EvaluationSettings.of(given)
    iou = f"{settings.lesion_iou:g}"
    if settings.lesion_iou_rule == "at_least":
        return (f"a TP when its largest IoU with a rater's lesion is at least {iou} (IoU ≥ {iou}, "
                f"`evaluation.lesion_iou_rule: at_least`, as the Shifts authors' code counts it; at exactly {iou} a "
                f"TP, and the rater's lesion found), else an FP")
    return (f"a TP when its largest IoU with a rater's lesion is above {iou} (IoU > {iou}; at exactly {iou} an FP, "
            f"and the rater's lesion an FN: the paper's C.2.2 is silent there, the Shifts authors' code counts a TP, "
            f"so this F1 can be lower than theirs on the same predictions; `evaluation.lesion_iou_rule: at_least` "
            f"counts as they do), else an FP")


def lesion_intro(config: dict | None) -> str:
    """What the section's numbers are, with the run's IoU rule (:func:`tie_rule`)."""
    return (
        "A lesion is a connected component of a predicted class mask (Shifts 2.0, appendix C.2.2): "
        f"{tie_rule(config)}; a rater's lesion no prediction "
        "matches is an FN; *lesion F1* = TP / (TP + (FP + FN) / 2), per rater then the mean, averaged over the "
        "cases. Each predicted lesion gets its own uncertainty from a lesion-scale aggregation of a measure's map. "
        "*FP-lesion AUROC / AUPRC*: how well these scores single out the false-positive lesions (0.5 = random; "
        "AUPRC's random level is the FP share). *F1-AUC*, *F1@95%* (Shifts 1.0): the lesion F1 of the kept "
        "lesions as the most uncertain are rejected (a rejected TP counts as missed), its area and its value "
        "at 95 % kept; beside it the random and the ideal ranking's F1-AUC. *case F1-AUC*: the same with whole "
        "cases rejected, each by its most uncertain lesion (its lesions' maximum score), the pooled lesion F1 of "
        "the kept cases' lesions tracked (random: all cases tied, kept pro rata; ideal: the best F1 of any k "
        "cases). Values are the mean over seeds with "
        "[95 % bootstrap intervals] over test cases; lesions are pooled over a subset's cases. Rows are sorted by "
        "FP-lesion AUROC; an order between rows whose intervals overlap is not established.")


def _lesions(report) -> None:
    from values_seg_plugins.report_sections._lesion_plot import plot_lesion_retention, plot_lesion_scores

    run, spec = report.run, report.run.spec
    retention, by_case, scores = run.curve(RETENTION), run.curve(CASES), run.curve(SCORES)
    tasks = set().union(*(set(c["task"].astype(str)) for c in (retention, by_case, scores) if c is not None))
    report.add("## Lesion scale: lesion F1, false-positive lesions and lesion-F1 retention")
    report.add(lesion_intro(run.config))
    drawn = []
    for sc in scenarios(retention, scores):
        out_r, out_c, out_s = (report.figures / f"lesion_{kind}_{sc.slug}.png"
                               for kind in ("retention", "case_retention", "scores"))
        drawn.append((sc,
                      report.figure(plot_lesion_retention, out_r, select(retention, sc), sc, out_r, spec)
                      if retention is not None else None,
                      report.figure(plot_lesion_retention, out_c, select(by_case, sc), sc, out_c, spec, "cases")
                      if by_case is not None else None,
                      report.figure(plot_lesion_scores, out_s, select(scores, sc), sc, out_s, spec)
                      if scores is not None else None))
    tables = {}
    for sc in scenarios(run.results[run.results["task"].isin(tasks)]):
        for split in ("iid", "ood"):
            table = lesion_table(select(run.results, sc), None if retention is None else select(retention, sc),
                                 spec, split, tasks, None if by_case is None else select(by_case, sc))
            if table is not None:
                tables[(sc, split)] = table
                report.write_csv(table, report.tables / f"lesion_{sc.slug}_{split}.csv")
                report.write_text(report.tables / f"lesion_{sc.slug}_{split}.tex",
                                  latex.tabular(list(table.columns), table.values.tolist(),
                                                align="llll" + "r" * (len(table.columns) - 4), blank_repeats=2))

    def compose() -> list[str]:
        blocks = []
        for sc, retention_future, case_future, scores_future in drawn:
            blocks.append(f"### {sc.title}")
            for split, title in (("iid", "i.i.d."), ("ood", "OoD")):
                table = tables.get((sc, split))
                if table is not None:
                    blocks.append(f"{title} test cases:")
                    blocks.append(markdown.table(list(table.columns), table.values.tolist(),
                                                 ["l", "r", "l", "l"] + ["r"] * (len(table.columns) - 4), keys=4))
            figures = (
                (retention_future, f"lesion F1 retention {sc.title}",
                 f"{sc.title}: lesion F1 of the kept predicted lesions as the most uncertain are rejected, per "
                 f"prediction model (columns) and test subset (rows), one curve per lesion-scale aggregation of "
                 f"one measure; dotted: random ranking, dashed: ideal ranking (every FP rejected before any TP); "
                 f"under each panel its curves' F1-AUC (mean over seeds)."),
                (case_future, f"case lesion F1 retention {sc.title}",
                 f"{sc.title}: the pooled lesion F1 as whole cases are rejected, the most uncertain first (a "
                 f"case's score: its most uncertain lesion's), panels as above; dotted: random ranking (all cases "
                 f"tied), dashed: ideal (the best F1 of any k cases); under each panel its curves' F1-AUC."),
                (scores_future, f"lesion scores {sc.title}",
                 f"{sc.title}: the i.i.d. predicted lesions' scores under each lesion-scale aggregation (rows), "
                 f"per prediction model (columns): false positives (TP for no rater), true lesions (TP for every "
                 f"rater) and those the raters disagree on; (n) lesions. A score that finds the false lesions "
                 f"puts the FP box to the right of the TP box."),
            )
            for future, alt, caption in figures:
                path = future.result() if future is not None else None
                if path is not None:
                    blocks.append(markdown.figure(report.rel(path), alt, caption))
        return blocks

    report.later(compose)


@hookimpl
def values_seg_report_sections():
    return [LesionSection]
