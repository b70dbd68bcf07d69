"""Report section: the uncertainty separation study (paper Figure 2, Table 4; :mod:`._separation`)."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.report import latex, markdown
from values_seg.report.common import model_key
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import BOOTSTRAP, COMPONENTS, CONFIG, FIGURES, TABLES

from values_seg_plugins.report_sections._separation import QUESTIONS, measure_summary, separation_summary, separation_table


#: why an older run directory shows no evidence: its declarations name no separation roles
OUTDATED = (f" This run's `{COMPONENTS}` predates the tasks' separation roles (`Reading.separation_role`): "
            f"run it again (`values-seg run RUN/{CONFIG} --out RUN`) to record them.")


class SeparationSection(ReportSection):
    """The separation study: do AU- and EU-measures capture the uncertainty type they stand for (Q1-Q4)?"""

    name = "separation_study"
    what = "the separation study"
    order = 40
    outputs = (f"{FIGURES}/separation_*.png", f"{TABLES}/separation*.tex")

    def build(self, ctx) -> None:
        _separation(ctx)


def _separation(report) -> None:
    report.add("## Separation study (paper Figure 2, Table 4)")
    res, spec, dist = report.run.results, report.run.spec, report.run.distributions
    per_model = separation_table(res, spec, dist)
    summary = separation_summary(res, spec, dist)
    level = dist.level if dist is not None else 0.95
    if not per_model:
        report.add("No separation evidence: the results hold no NCC or OoD AUROC of AU- and EU-measures."
                   + (OUTDATED if spec.predates("separation_role") else ""))
    else:
        report.add(
            "Q1 do AU-measures capture AU? (expected yes: NCC of the AU-measure above the EU-measure's) · "
            "Q2 do EU-measures capture AU? (expected no: the EU-measure's NCC below every PU- and AU-measure's) · "
            "Q3 do EU-measures capture EU? (expected yes: OoD AUROC above 0.5) · "
            "Q4 do AU-measures capture EU? (expected no: the EU-measure's AUROC above the AU-measure's). "
            "Each answer is decided over all units of evidence (seeds × aggregations × measure pairs), each by its "
            f"{level:.0%} interval: decided only where the interval lies on one side of the boundary (Δ = 0, AUROC = 0.5), "
            "undecided where it contains it. A difference (Q1, Q2, Q4) has the paired interval: every measure is "
            "bootstrapped on the same resamples of the test cases, so the difference (for Q2 the EU-measure's NCC "
            "minus the lower of the PU- and AU-measures', resample by resample) is taken on each resample"
            + (" (the run's stored resamples, or the separation task's paired rows)" if dist is not None else
               f"; this run has no stored resamples (`{BOOTSTRAP}`), so a difference without a paired row is "
               "decided by its point estimate, and the cell says so") + ". "
            "Yes if every unit is decided yes, no if every unit is decided no, partial where decided units disagree, "
            "undecided where they agree but some are undecided (a unit built on a row the data cannot support, ⚠, is "
            "never decided); ✓ / ✗ agrees / disagrees with theory, ~ partial, "
            "? undecided, – no evidence; the counts: the units on each side (the side theory expects first) and "
            "undecided. NCC on the i.i.d. cases and AUROC as raw values (not × 100), as in Table 4."
        )
        scen = [r.scenario for r in summary]
        headers = ["Question"] + [s.title for s in scen]
        rows = [[f"{q}: {QUESTIONS[q][0]} (expected {QUESTIONS[q][1]})"]
                + [r.answers[q].text(with_detail=False) + _counts(r.answers[q]) for r in summary]
                for q in QUESTIONS]
        report.add("### Summary over prediction models (Figure 2a)", markdown.table(headers, rows, keys=1))
        several = len({r.backbone for r in per_model}) > 1
        headers2 = ["Scenario", "Prediction model"] + [f"{q}: {QUESTIONS[q][0]}" for q in QUESTIONS]
        rows2 = [[r.scenario.title, model_key(r.backbone, r.prediction_model, several, spec.label)]
                 + [r.answers[q].text() for q in QUESTIONS] for r in per_model]
        report.add("### Per prediction model (Table 4)", markdown.table(headers2, rows2, keys=2))
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
    from values_seg_plugins.report_sections._separation_plot import plot_measure_summary

    drawn = report.figure(plot_measure_summary, out, measure_summary(res, spec), out, spec)
    report.later(lambda: [] if drawn.result() is None else [markdown.figure(
        report.rel(out), "NCC and AUROC per measure",
        "Figure 2b-like: top, NCC between each measure's map and the raters' variance on scenarios with "
        "ambiguity (AU-measures should be high, EU-measures low); bottom, OoD-detection AUROC on shifted "
        "scenarios (EU-measures should be above the dashed random line). Bars: mean over prediction models and "
        "aggregations, error bars ±1 std; colour = the uncertainty type the measure stands for.")])


def _counts(answer) -> str:
    """E.g. " (70 EU better, 1 AU better, 85 undecided of 156)"; "" without evidence."""
    return f" ({answer.counts()})" if answer.total else ""


@hookimpl
def values_seg_report_sections():
    return [SeparationSection]
