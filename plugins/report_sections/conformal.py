"""Report section of the conformal task: per scenario, a figure (:mod:`._conformal_plot`), the table per
prediction model × set family at the task's α, the per-class and several-risks tables where the task made
them, and the accepted-coverage ranking of risk-controlled selection, read from ``curves.parquet`` and the
results table; nothing is computed again (docs/design-rationale.md, "The conformal section").
"""

from __future__ import annotations

import math

import pandas as pd

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.common import model_key, scenarios, select, support_notes
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import FIGURES, TABLES

CURVE = "crc_risk"


#: the column of the per-class and per-bin tables that judges the i.i.d. interval against α
VERDICT = "i.i.d. FNR ≤ α?"


class ConformalSection(ReportSection):
    """Conformal risk control and risk-controlled selection: what a guarantee costs each method, and where a shift breaks it."""

    name = "conformal_guarantees"
    what = "the conformal guarantees"
    order = 75
    early = 6
    outputs = (f"{FIGURES}/conformal_*.png", f"{TABLES}/conformal_*.csv")
    curves = (CURVE,)

    def build(self, ctx) -> None:
        _conformal(ctx)


#: the mark of a value no guarantee covers, or one the data cannot support (values_seg.runner.support): never ranked
NO_GUARANTEE = "†"


def _fmt(value: float, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _with_ci(row) -> str:
    text = _fmt(row["value"])
    if math.isfinite(row.get("ci_low", math.nan)) and math.isfinite(row.get("ci_high", math.nan)):
        text += f" [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"
    return text


def intro(alpha: float) -> str:
    """What the section's numbers are and how far its claims go, at the task's ``alpha``."""
    return (
        f"Conformal risk control (Angelopoulos et al., ICLR 2024) calibrates on the validation split a threshold λ̂ "
        f"such that the sets miss on average at most α = {alpha:g} of the reference foreground (FNR, mean over the "
        f"raters) on cases exchangeable with it. Two set families: the pixels with mean foreground probability "
        f"≥ 1 − λ, and the predicted foreground plus the pixels whose uncertainty reaches a threshold (a better map meets the "
        f"guarantee with fewer added pixels). *Set size*: pixels in the sets over predicted-foreground pixels (lower "
        f"is cheaper). *Re-split check*: the mean realised FNR over random calibration/test re-splits of the "
        f"validation and the exchangeable i.i.d. test cases ± 3 Monte-Carlo s.e.; ✓ where it is compatible with "
        f"≤ α; beside α its effective level on the calibration cases (the threshold holds their mean FNR to "
        f"(α (n + 1) − 1) / n, the finite-sample correction), which a ✓ must be read against: where it lies far below "
        f"α, a ✓ is nearly automatic. Comparisons of these methods (the Recommendation's \"worse: p = …\", "
        f"`values-seg compare`) resample the test cases with each method's calibrated threshold λ̂ held fixed: they "
        f"are conditional on the one calibration draw (this validation split), not over calibrations. OoD cases "
        f"carry no guarantee: **⚠** marks an OoD FNR above α (**⚠⚠**: its bootstrap interval lies "
        f"above α), the shift breaking exchangeability — a finding, not an error. **†** marks an i.i.d. FNR that no "
        f"guarantee covers either: the dataset declares those test cases not exchangeable with the validation split "
        f"(toy 3a: an all-sharp i.i.d. test split, a half-blurred validation split).")


def _conformal(report) -> None:
    from values_seg_plugins.report_sections._conformal_plot import family_label, plot_conformal

    run, spec = report.run, report.run.spec
    curves = run.curve(CURVE)
    report.add("## Guarantees: conformal risk control and risk-controlled selection")
    alpha = float(curves.loc[curves["main"].astype(bool), "alpha"].iloc[0])
    tasks = set(curves["task"].astype(str))
    results = run.results[run.results["task"].isin(tasks)]
    report.add(intro(alpha))
    drawn = []
    for sc in scenarios(curves):
        out = report.figures / f"conformal_{sc.slug}.png"
        drawn.append((sc, report.figure(plot_conformal, out, select(curves, sc), sc, out, spec)))
    classes, multi, binned = run.curve(CLASS_CURVE), run.curve(MULTI_CURVE), run.curve(BIN_CURVE)
    tables = []
    for sc in scenarios(results):
        part = select(results, sc)
        covered = _iid_covered(select(curves, sc))
        crc, selection = _crc_table(part, spec, alpha, family_label, covered), _selection_table(part, spec)
        refused = _refused(part, spec)
        per_class = class_table(select(classes, sc), spec, family_label) if classes is not None else None
        risks = multi_table(select(multi, sc), part, spec) if multi is not None else None
        bins = bin_table(select(binned, sc), spec, family_label) if binned is not None else None
        tables.append((sc, crc, selection, covered, refused, _size_ties(part, alpha), _unsupported_note(part, spec),
                       per_class, risks, bins))
        for kind, table in (("crc", crc), ("selection", selection), ("classes", per_class),
                            ("risks", risks[0] if risks else None), ("bins", bins)):
            if table is not None:
                report.write_csv(table, report.tables / f"conformal_{kind}_{sc.slug}.csv")

    def compose() -> list[str]:
        blocks = []
        figures = {sc: future.result() for sc, future in drawn}
        for sc, crc, selection, covered, refused, tie, unsupported, per_class, risks, bins in tables:
            blocks.append(f"### {sc.title}")
            path = next((p for s, p in figures.items() if s == sc), None)
            if path is not None:
                blocks.append(markdown.figure(
                    report.rel(path), f"conformal {sc.title}",
                    f"{sc.title}: realised FNR of the conformal sets against the level α they were calibrated for "
                    f"(dotted: the guarantee FNR = α; solid i.i.d., dashed OoD, red rings: OoD above α), and the "
                    f"sets' size relative to the predicted foreground (i.i.d.), per prediction model; mean over "
                    f"seeds." + ("" if covered else " The i.i.d. test cases are not exchangeable with the validation "
                                 "split (†): no guarantee holds for the solid lines either.")))
            if crc is not None:
                level = effective_level(alpha, n_calibration(run.cases, sc))
                blocks.append(f"Conformal risk control at α = {alpha:g}{level} (mean over seeds; [95 % bootstrap "
                              f"interval] over test cases):")
                blocks.append(markdown.table(list(crc.columns), crc.values.tolist(),
                                             ["l", "l"] + ["r"] * (len(crc.columns) - 2), keys=2))
                if tie is not None:
                    blocks.append(tie)
                if not covered:
                    blocks.append(f"† No guarantee covers the i.i.d. FNR of {sc.title}: its i.i.d. test cases are "
                                  f"not exchangeable with the validation split that calibrated the sets (the "
                                  f"dataset's declaration), so only the exchangeable ones are re-split; the FNR "
                                  f"above is a finding, like the OoD column.")
            if per_class is not None:
                blocks += class_blocks(per_class, alpha)
            if risks is not None:
                blocks += multi_blocks(*risks)
            if bins is not None:
                blocks += bin_blocks(bins, alpha)
            if selection is not None:
                blocks.append("Risk-controlled selection (Learn then Test, Hoeffding–Bentkus): the share of i.i.d. "
                              "test cases accepted at the certified threshold, best first (equal shares: lower "
                              "accepted risk first; an equal rank is a tie in both).")
                blocks.append(markdown.table(list(selection.columns), selection.values.tolist(),
                                             ["r", "l", "l", "l"] + ["r"] * (len(selection.columns) - 4), keys=4))
                shares = selection["accepted i.i.d."]
                if len(shares) > 1 and shares.nunique() == 1:
                    blocks.append(f"The accepted share ties at {shares.iloc[0]} across every method: selection does "
                                  f"not separate them here (no best one).")
                elif (everything := accept_everything_note(selection)):
                    blocks.append(everything)
            if unsupported:
                blocks.append(unsupported)
            if refused:
                blocks.append(f"No selection certificate for {', '.join(refused)}: fitted on the validation split's "
                              f"risks or scores, their scores there are in-sample, and a calibration on them would "
                              f"certify what the method does not give (they need cases they were not fitted on).")
        return blocks

    report.later(compose)


CLASS_CURVE, MULTI_CURVE, BIN_CURVE = "crc_class", "ltt_grid", "crc_bins"


#: the numeric columns of the per-class and per-bin curves (all-empty ones are dropped when read)
_NUMBERS = ("risk", "ci_low", "ci_high", "threshold", "effective_level", "score_low", "score_high")


def _complete(curves: pd.DataFrame) -> pd.DataFrame:
    return curves.assign(**{k: float("nan") for k in _NUMBERS if k not in curves})


def _interval(value: float, low: float, high: float) -> str:
    return "–" if not math.isfinite(value) else f"{_fmt(value)} [{_fmt(low)}, {_fmt(high)}]"


def class_table(curves: pd.DataFrame, spec, family_label) -> pd.DataFrame | None:
    """Per prediction model, set family and class (curve ``crc_class``; mean over seeds): its own λ̂ (1 − t̂
    for the probability sets, the uncertainty threshold t̂ otherwise), its calibration cases (those where the
    class is present), the effective level, the i.i.d. and OoD FNR on the cases where it is present [95 %
    bootstrap interval], and the verdict: ✓ where the i.i.d. interval is compatible with ≤ α, ✗ where it lies
    above α, "no guarantee" where too few calibration cases or the i.i.d. cases are not exchangeable."""
    if curves.empty:
        return None
    curves = _complete(curves)
    several = curves["backbone"].nunique() > 1 if "backbone" in curves else False
    rows = []
    keys = ["backbone", "prediction_model", "measure", "class_index"]
    dataset = str(curves["dataset"].iloc[0]) if "dataset" in curves else ""
    for (backbone, model, measure, c), g in curves.groupby(keys, dropna=False):
        if int(g["n_calibration"].min()) == 0 and not (g["n"] > 0).any():
            continue  # present in no case at all: nothing to claim or to show
        t = _part_mean(g, "threshold")
        probability = str(g["sets"].iloc[0]) == "probability"
        supported = bool(g["supported"].astype(bool).all())
        family = family_label(measure if isinstance(measure, str) else "", spec)
        rows.append([model_key(backbone, model, several, spec.label), family, spec.class_name(dataset, int(c)),
                     _fmt(1 - t if probability else t) if supported else "–", *_guarantee_cells(g)])
    if not rows:
        return None
    return pd.DataFrame(rows, columns=["prediction model", "set family", "class", "λ̂", *GUARANTEE_COLUMNS])


#: the columns of :func:`_guarantee_cells`, shared by the per-class and per-bin tables
GUARANTEE_COLUMNS = ["n calibration", "effective level", "n i.i.d.", "FNR i.i.d. [95 %]", VERDICT, "FNR OoD [95 %]"]


def _part_mean(part: pd.DataFrame, key: str) -> float:
    return float(part[key].mean()) if not part.empty else math.nan


def _guarantee_cells(g: pd.DataFrame) -> list:
    """One guarantee's cells (:data:`GUARANTEE_COLUMNS`; its curve rows ``g`` over seeds and splits): the
    calibration cases, the effective level, the i.i.d. test cases, the i.i.d. FNR [interval], the verdict
    against α (:func:`_verdict`) and the OoD FNR [interval]."""
    iid, ood = g[g["split"] == "iid"], g[g["split"] == "ood"]
    alpha, n_cal = float(g["alpha"].iloc[0]), int(g["n_calibration"].min())
    supported = bool(g["supported"].astype(bool).all())
    value, low, high = (_part_mean(iid, k) for k in ("risk", "ci_low", "ci_high"))
    return [n_cal, _fmt(_part_mean(g, "effective_level"), 4) if supported else "–",
            int(iid["n"].max()) if not iid.empty else 0, _interval(value, low, high),
            _verdict(supported, n_cal, alpha, iid, low),
            _interval(*(_part_mean(ood, k) for k in ("risk", "ci_low", "ci_high")))]


def class_blocks(table: pd.DataFrame, alpha: float) -> list[str]:
    """The per-class table (the probability sets; every family in its csv) and what it claims."""
    from values_seg_plugins.report_sections._conformal_plot import PROBABILITY_LABEL

    shown = table[table["set family"] == PROBABILITY_LABEL]
    shown = shown if not shown.empty else table[table["set family"] == table["set family"].iloc[0]]
    uncovered = shown[shown[VERDICT] != "✓"]
    return [f"Per-class guarantees (Mondrian by class, α = {alpha:g} fixed in the configuration): each foreground "
            f"class gets its own threshold, calibrated on the validation cases where the class is present, so the "
            f"guarantee is E[FNR of class c | c present] ≤ α on cases exchangeable with them; the effective level "
            f"(α (n + 1) − 1) / n is what λ̂ holds those n calibration cases to. FNR on the test cases where the "
            f"class is present, mean over seeds [95 % percentile bootstrap over those cases]; ✓: the i.i.d. "
            f"interval is compatible with ≤ α. OoD carries no guarantee; a class present in no case is left out. "
            f"Shown: the {shown['set family'].iloc[0]} sets (every family in the table's csv).",
            markdown.table(list(shown.columns[[0, *range(2, len(shown.columns))]]),
                           shown.drop(columns="set family").values.tolist(),
                           ["l", "l"] + ["r"] * (len(shown.columns) - 3), keys=2),
            ("Every class's i.i.d. interval is compatible with ≤ α." if uncovered.empty else
             f"Not covered (✗ or no guarantee): {len(uncovered)} of {len(shown)} class rows "
             f"({', '.join(f'{m} class {c}' for m, c in zip(uncovered['prediction model'], uncovered['class']))}).")
            + (" The guarantee is in expectation over calibration draws and the interval covers the test cases only "
               "(this one calibration held fixed), so among many classes a ✗ can occur by chance; a class whose "
               "interval lies above α in every seed is a finding."
               if uncovered[VERDICT].str.startswith("✗").any()
               else "")]


def multi_table(grid: pd.DataFrame, part: pd.DataFrame, spec) -> tuple | None:
    """Learn then Test for FNR and FDR together (curve ``ltt_grid``, rows ``multi_fnr``/``multi_fdr``): per
    prediction model (first seed's grid) the valid thresholds, the chosen one, and each risk on the test
    split [bootstrap interval] against its level; ``(table, levels text)``; None without rows."""
    if grid.empty:
        return None
    several = grid["backbone"].nunique() > 1 if "backbone" in grid else False
    first = grid.iloc[0]
    rows, n_grid = [], 0
    for (backbone, model), g in grid.groupby(["backbone", "prediction_model"]):
        if "seed" in g:
            g = g[g["seed"] == g["seed"].min()]
        n_grid = len(g)
        valid = g[g["valid"].astype(bool)]["threshold"].to_numpy()
        chosen = g[g["chosen"].astype(bool)]["threshold"]
        cells = []
        for metric, level in (("multi_fnr", float(first["fnr_level"])), ("multi_fdr", float(first["fdr_level"]))):
            for split in ("iid", "ood"):
                r = part[(part["metric"] == metric) & (part["split"] == split) & (part["backbone"] == backbone)
                         & (part["prediction_model"] == model)]
                if r.empty:
                    cells.append("–")
                    continue
                m = _mean(r)
                mark = "" if split == "ood" else (" ✓" if m["ci_low"] <= level else " ✗")
                cells.append(_interval(m["value"], m["ci_low"], m["ci_high"]) + mark)
        rows.append([model_key(backbone, model, several, spec.label),
                     "none valid" if valid.size == 0 else f"{valid.size}: {_ranges(valid)}",
                     _fmt(float(chosen.iloc[0])) if not chosen.empty else "–", *cells])
    table = pd.DataFrame(rows, columns=["prediction model", "valid thresholds t", "chosen t", "FNR i.i.d.", "FNR OoD",
                                        "FDR i.i.d.", "FDR OoD"])
    levels = (f"FNR ≤ {float(first['fnr_level']):g} and FDR ≤ {float(first['fdr_level']):g} together, δ = "
              f"{float(first['delta']):g} ({first['fwer']} over {n_grid} "
              f"thresholds fixed before the data), n = {int(first['n_calibration'])} calibration cases")
    return table, levels


def _ranges(values) -> str:
    """Sorted grid thresholds as runs "0.45–0.50, 0.60" (consecutive in the grid listed as a range)."""
    return ", ".join(f"{_fmt(a, 2)}–{_fmt(b, 2)}" if a != b else _fmt(a, 2) for a, b in _runs(sorted(values)))


def _runs(values: list) -> list[tuple]:
    if len(values) < 2:
        return [(v, v) for v in values]
    step = min(b - a for a, b in zip(values[:-1], values[1:]))
    runs, start = [], values[0]
    for a, b in zip(values[:-1], values[1:]):
        if b - a > step * 1.5:
            runs.append((start, a))
            start = b
    return runs + [(start, values[-1])]


def multi_blocks(table: pd.DataFrame, levels: str) -> list[str]:
    return [f"Several risks at once (Learn then Test, Hoeffding–Bentkus p-value per risk, a threshold valid where "
            f"both reject; the probability sets {{p ≥ t}}): {levels}. Every valid threshold holds both risks with "
            f"probability ≥ 1 − δ over the calibration draw; the chosen one is the valid threshold with the lowest "
            f"calibration FNR. Test rows at the chosen threshold, mean over seeds [95 % bootstrap interval]; ✓: the "
            f"i.i.d. interval is compatible with the risk's level; OoD carries no guarantee. \"none valid\": no "
            f"threshold is certified (too few calibration cases, or the levels cannot be met together), and no set "
            f"is claimed.",
            markdown.table(list(table.columns), table.values.tolist(), ["l"] + ["r"] * (len(table.columns) - 1),
                           keys=1)]


def _verdict(supported: bool, n_cal: int, alpha: float, iid: pd.DataFrame, low: float) -> str:
    """✓ / ✗ of an i.i.d. interval against α, or why no guarantee is claimed."""
    from values_seg.metrics import min_calibration_cases

    if not supported:
        return f"no guarantee: {n_cal} calibration cases < {min_calibration_cases(alpha)}"
    if not iid.empty and not bool(iid["exchangeable"].astype(bool).all()):
        return "no guarantee: i.i.d. not exchangeable"
    if not math.isfinite(low):
        return "–"
    return "✓" if low <= alpha else "✗ (above α)"


def bin_table(curves: pd.DataFrame, spec, family_label) -> pd.DataFrame | None:
    """Per prediction model, set family, measure, aggregation and bin of its image score (curve
    ``crc_bins``; mean over seeds): the bin's score range, calibration cases, effective level, test cases
    and FNR [95 % bootstrap interval] of the sets calibrated on the bin alone, and the verdict against α
    (the probability sets first, then each measure's own uncertainty sets)."""
    if curves.empty:
        return None
    curves = _complete(curves)
    if "sets" not in curves:
        curves = curves.assign(sets="probability")
    curves = curves.assign(_order=(curves["sets"] != "probability").astype(int))
    several = curves["backbone"].nunique() > 1 if "backbone" in curves else False
    rows = []
    for (backbone, model, _, sets, measure, aggregation, b), g in curves.groupby(
            ["backbone", "prediction_model", "_order", "sets", "measure", "aggregation", "bin"]):
        rows.append([model_key(backbone, model, several, spec.label),
                     "prob." if sets == "probability" else family_label(measure, spec),
                     f"{spec.label('measure', measure)} · {spec.label('aggregation', aggregation)}",
                     f"{int(b) + 1}: [{_fmt(_part_mean(g, 'score_low'))}, {_fmt(_part_mean(g, 'score_high'))})",
                     *_guarantee_cells(g)])
    return pd.DataFrame(rows, columns=["prediction model", "sets", "image score", "bin: score", *GUARANTEE_COLUMNS])


def bin_blocks(table: pd.DataFrame, alpha: float) -> list[str]:
    uncovered = table[table[VERDICT] != "✓"]
    return [f"Thresholds per bin of the image score (Mondrian by score bin, α = {alpha:g}): each set family "
            f"calibrated on the validation cases of the bin alone (the probability sets, \"prob.\", binned by every "
            f"measure's image score; the predicted foreground + a measure's uncertainty, \"pred. + UM\", by that "
            f"measure's own), so the "
            f"guarantee holds per bin (E[FNR | bin] "
            f"≤ α on cases exchangeable with them), not only on average; the bin edges are quantiles of the pooled "
            f"validation and test scores (no label used). FNR of the bin's test cases, mean over seeds [95 % "
            f"percentile bootstrap over them]; ✓: compatible with ≤ α; a bin with too few calibration cases "
            f"claims nothing; where a bin's effective level lies far below α (a bin near the minimum of cases), "
            f"its sets take nearly every pixel and a ✓ is nearly automatic. A score that separates easy from hard "
            f"images makes the thresholds differ between bins; the per-bin FNR shows whether each bin holds α.",
            markdown.table(list(table.columns), table.values.tolist(), ["l"] * 4 + ["r"] * (
                len(table.columns) - 4), keys=4),
            ("Every bin's i.i.d. interval is compatible with ≤ α." if uncovered.empty else
             f"Not covered (✗ or no guarantee): {len(uncovered)} of {len(table)} bins.")]


def n_calibration(cases: pd.DataFrame | None, sc) -> int | None:
    """The scenario's validation (calibration) cases in ``cases.csv``; None where it does not say."""
    if cases is None or not {"split", "case_id"} <= set(cases.columns):
        return None
    part = select(cases, sc)
    n = int(part.loc[part["split"] == "val", "case_id"].nunique())
    return n or None


def effective_level(alpha: float, n: int | None) -> str:
    """", effective level 0.0037 on the n = 60 calibration cases" (:func:`values_seg.metrics.crc_effective_level`); "" without n."""
    from values_seg.metrics import crc_effective_level, min_calibration_cases

    if n is None or n < min_calibration_cases(alpha):
        return ""
    level = crc_effective_level(alpha, n)
    return (f" (effective level {level:.2g} on the n = {n} calibration cases: the finite-sample correction takes "
            f"{1 - level / alpha:.0%} of α)")


def accept_everything_note(selection: pd.DataFrame) -> str:
    """Where most ranked methods accept every i.i.d. case, what the "best first" order ranks then: each such
    method's accepted risk is its prediction model's mean risk, the same for every measure and aggregation."""
    ranked = selection[selection["rank"] != "–"]
    every = ranked[ranked["accepted i.i.d."].astype(str).str.strip() == "1.000"]
    if len(ranked) < 2 or 2 * len(every) <= len(ranked):
        return ""
    return (f"{len(every)} of {len(ranked)} methods accept every i.i.d. test case: their accepted risk is their "
            f"prediction model's mean risk, whatever the measure and aggregation, so among them the \"best first\" "
            f"order ranks prediction models by mean risk, not uncertainty methods.")


def _mean(rows: pd.DataFrame) -> dict:
    """Mean over seeds of value and interval (one row), and why the data cannot support it ("" where
    they can in every seed: :func:`values_seg.report.common.support_notes`)."""
    return {**{k: float(rows[k].mean()) for k in ("value", "ci_low", "ci_high")},
            "unsupported": " | ".join(support_notes(rows, ["metric"]).values())}


def _unsupported_note(part: pd.DataFrame, spec) -> str:
    """What the † after an i.i.d. set size or accepted share says: why the data cannot support it
    (:mod:`values_seg.runner.support`; no guarantee covers those cases), so it ranks no method; "" where none."""
    rows = part[part["metric"].isin(["set_size", "set_size_probability", "coverage"]) & (part["split"] == "iid")]
    notes: dict[str, list] = {}
    for (t, m), why in support_notes(rows, ["task", "metric"]).items():
        notes.setdefault(why, []).append(spec.metric_spec(t, m).label)
    if not notes:
        return ""
    what = "; ".join(f"{', '.join(labels)}: {why}" for why, labels in notes.items())
    return (f"{NO_GUARANTEE} after an i.i.d. set size or accepted share: the data cannot support it ({what}); shown, "
            f"never ranked or recommended: without a guarantee a smaller set or a larger accepted share is no "
            f"better method.")


def _iid_covered(curves: pd.DataFrame) -> bool:
    """Whether the guarantee covers the scenario's i.i.d. test cases (the curves' ``exchangeable``;
    runs from before the column: as they claimed)."""
    iid = curves[curves["split"] == "iid"]
    return "exchangeable" not in iid or bool(iid["exchangeable"].astype(bool).all())


def _refused(part: pd.DataFrame, spec) -> list[str]:
    """The configured aggregations (display labels) without a selection row in ``part`` that are
    fitted on the validation cases' risks or scores (their declared ``fit_needs``): the runner keeps
    no validation score of theirs (in-sample), so no threshold is calibrated on them."""
    selected = set(part.loc[part["metric"] == "coverage", "aggregation"].dropna().astype(str))
    return [spec.label("aggregation", e["label"]) for e in spec.components.get("aggregation", [])
            if e.get("fit_needs") and e["label"] not in selected]


def _size_ties(part: pd.DataFrame, alpha: float) -> str | None:
    """What the set size cannot tell apart at ``alpha`` (i.i.d., mean over seeds, at the table's 3
    digits): every set family of every prediction model tied, or the uncertainty-map families whose
    sets are the predicted foreground alone (size exactly 1: the map added no pixel); else ``None``."""
    sizes = part[part["metric"].isin(["set_size", "set_size_probability"]) & (part["split"] == "iid")]
    values = sizes.groupby(["backbone", "prediction_model", "metric", "measure"], dropna=False)["value"].mean()
    if len(values) > 1 and values.round(3).nunique() == 1:
        return (f"Set size ties at {values.iloc[0]:.3f} across every prediction model and set family: at α = "
                f"{alpha:g} it does not separate the methods (no best one).")
    maps = values[values.index.get_level_values("metric") == "set_size"]
    alone = int((abs(maps - 1.0) <= 1e-12).sum())
    if alone > 1:
        return (f"For {alone} of {len(maps)} uncertainty-map families the predicted foreground alone meets α = "
                f"{alpha:g} (set size 1.000): their maps add no pixel, and the set size ties them.")
    return None


def _crc_table(part: pd.DataFrame, spec, alpha: float, family_label, covered: bool = True) -> pd.DataFrame | None:
    rows = []
    several = part["backbone"].nunique() > 1
    for suffix in ("_probability", ""):
        names = {m: f"{m}{suffix}" for m in ("set_size", "fnr", "resplit_fnr")}
        found = part[part["metric"].isin(list(names.values()))]
        for (backbone, model, measure), g in found.groupby(["backbone", "prediction_model", "measure"]):
            def get(metric: str, split: str) -> dict | None:
                r = g[(g["metric"] == names[metric]) & (g["split"] == split)]
                return None if r.empty else _mean(r)

            size, iid, ood, check = get("set_size", "iid"), get("fnr", "iid"), get("fnr", "ood"), \
                get("resplit_fnr", "iid")
            flag = ""
            if ood is not None and ood["value"] > alpha:
                flag = " ⚠⚠" if ood["ci_low"] > alpha else " ⚠"
            rows.append([model_key(backbone, model, several, spec.label), family_label(measure, spec),
                         (_fmt(size["value"]) + (f" {NO_GUARANTEE}" if size["unsupported"] else "")) if size else "–",
                         (_with_ci(iid) + ("" if covered else " †")) if iid else "–",
                         (_with_ci(ood) + flag) if ood else "–",
                         (f"{_fmt(check['value'])} ± {_fmt((check['ci_high'] - check['value']), 3)} "
                          f"{'✓' if check['ci_low'] <= alpha else '✗'}") if check else "–"])
    if not rows:
        return None
    table = pd.DataFrame(rows, columns=["prediction model", "set family", "set size (i.i.d.)", "FNR i.i.d.",
                                        "FNR OoD", "re-split FNR ± 3 s.e."])
    order = {spec.label("prediction_model", m): i for i, m in enumerate(spec.ordered(
        "prediction_model", part["prediction_model"].unique()))}
    return table.sort_values(["prediction model", "set family"],
                             key=lambda s: s.map(order) if s.name == "prediction model" else s).reset_index(drop=True)


def _selection_table(part: pd.DataFrame, spec) -> pd.DataFrame | None:
    cov = part[part["metric"] == "coverage"]
    if cov.empty:
        return None
    several = part["backbone"].nunique() > 1
    rows, unsupported = [], []
    for (backbone, model, measure, aggregation), g in cov.groupby(["backbone", "prediction_model", "measure",
                                                                    "aggregation"]):
        risk = part[(part["metric"] == "selective_risk") & (part["backbone"] == backbone)
                    & (part["prediction_model"] == model) & (part["measure"] == measure)
                    & (part["aggregation"] == aggregation)]
        iid, ood = g[g["split"] == "iid"], g[g["split"] == "ood"]
        r_iid, r_ood = risk[risk["split"] == "iid"], risk[risk["split"] == "ood"]
        unsupported.append(bool(support_notes(iid, ["metric"])))
        rows.append([model_key(backbone, model, several, spec.label), spec.label("measure", measure),
                     spec.label("aggregation", aggregation),
                     float(iid["value"].mean()) if not iid.empty else math.nan,
                     float(r_iid["value"].mean()) if not r_iid.empty else math.nan,
                     float(ood["value"].mean()) if not ood.empty else math.nan,
                     float(r_ood["value"].mean()) if not r_ood.empty else math.nan])
    table = pd.DataFrame(rows, columns=["prediction model", "measure", "aggregation", "accepted i.i.d.",
                                        "accepted risk i.i.d.", "accepted OoD", "accepted risk OoD"])
    table["unsupported"] = unsupported  # no certificate covers its i.i.d. cases: shown, never ranked
    table = table.sort_values(["unsupported", "accepted i.i.d.", "accepted risk i.i.d."], ascending=[True, False, True],
                              na_position="last").reset_index(drop=True)
    key = table[["accepted i.i.d.", "accepted risk i.i.d."]].round(12).fillna(-1.0).apply(tuple, axis=1)
    ranked = key[~table["unsupported"]]
    ranks = [1 + int((ranked.iloc[:i] != k).sum()) if i else 1 for i, k in enumerate(ranked)]  # ties share
    table.insert(0, "rank", ranks + ["–"] * int(table["unsupported"].sum()))
    for column in table.columns[4:-1]:
        table[column] = table[column].map(_fmt)
    table.loc[table["unsupported"], "accepted i.i.d."] += f" {NO_GUARANTEE}"
    return table.drop(columns="unsupported")


@hookimpl
def values_seg_report_sections():
    return [ConformalSection]
