"""Report section: the run summary (what the run holds) and its failed jobs."""

from __future__ import annotations

import re

import pandas as pd

from values_seg import hookimpl
from values_seg.storage.failure_record import one_line
from values_seg.report import markdown
from values_seg.report.common import scenarios
from values_seg.report.section import ReportSection
from values_seg.report.spec import natural_key
from values_seg.storage.run_files import FAILURES, RESULTS_CSV, RESULTS_PARQUET


class RunSummarySection(ReportSection):
    """The run summary: scenarios, components, tasks, seeds, counts, gaps and failed jobs."""

    name = "run_summary"
    what = "the run summary"
    order = 20

    def build(self, ctx) -> None:
        _summary(ctx)


def _join(values) -> str:
    return ", ".join(str(v) for v in values) if len(values) else "–"


def _summary(report) -> None:
    res, spec = report.run.results, report.run.spec
    report.add("## Run summary")
    if res.empty:
        report.add(f"No results were found in this run directory (`{RESULTS_CSV}` / `{RESULTS_PARQUET}`).")
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
        unsupported = res[~res["supported"]] if "supported" in res else res.iloc[:0]
        if len(unsupported):
            why = unsupported["support_note"].str.split(";").str[0].value_counts()
            items.append(("Result rows the data cannot support (⚠, never recommended; `support_note` in "
                          f"`{RESULTS_CSV}`)", f"{len(unsupported)}: " + "; ".join(f"{k} × {w}" for w, k in why.items())))
        gaps = _measure_gaps(res, spec)
        if gaps:
            items.append(("Measures without rows under some prediction models", gaps))
        report.add(markdown.table(["", ""], [[f"**{k}**", v] for k, v in items]))
    failures = report.run.failures
    if failures is not None and not failures.empty:  # one line each: what failed and why (the traceback: FAILURES)
        cols = [c for c in ("job", "stage", "cause") if c in failures.columns] or list(failures.columns)
        rows = [[_code(v) if c == "cause" else one_line(v) for c, v in zip(cols, r)]
                for r in failures[cols].itertuples(index=False)]
        report.add(f"**{len(failures)} job(s) failed**; their combinations are missing from the tables below "
                   f"(each traceback in `{FAILURES}`):", markdown.table(cols, rows))
    elif (report.dir / FAILURES).exists() or failures is not None:
        report.add("No failed jobs.")
    else:
        report.add(f"No failed jobs recorded (no `{FAILURES}`).")


def _code(value, limit: int = 300) -> str:
    """``value`` on one line (at most ``limit`` characters) as inline code: an error's text as it is
    (``__init__``, ``<lambda>``, a redacted ``***@host`` are no Markdown)."""
    text = one_line(value)
    text = text[:limit] + ("…" if len(text) > limit else "")
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


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


@hookimpl
def values_seg_report_sections():
    return [RunSummarySection]
