"""The run directory's tables: tidy results (with bootstrap intervals), the bootstrap distributions,
per-case records, calibration bins, the tasks' curves, montages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from values_seg import registry
from values_seg.storage import atomic, run_directory
from values_seg.storage.failure_record import COLUMNS
from values_seg.storage.run_files import (BOOTSTRAP, CASES, COSTS, CURVES, FAILURES, MONTAGES, RESULTS_CSV,
                                         RESULTS_PARQUET)

from values_seg.runner.statistics import write as write_distributions
from values_seg.config.sweep import Combination
from values_seg.components.task import EvaluationResult

CONTEXT = ["dataset", "scenario", "seed", "backbone", "prediction_model", "family"]
RESULT_COLUMNS = CONTEXT + ["measure", "versus", "uncertainty_type", "aggregation", "task", "metric", "split", "value",
                            "ci_low", "ci_high", "supported", "support_note"]


def _atomic_csv(df: pd.DataFrame, path: Path) -> None:
    run_directory.write_owned(path.parent, path, lambda tmp: df.to_csv(tmp, index=False))


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    run_directory.write_owned(path.parent, path, lambda tmp: df.to_parquet(tmp, index=False))


def result_rows(combo: Combination, rows: list[dict]) -> list[dict]:
    """Task rows completed with the combination's context and the measure's uncertainty type
    (interval, bootstrap ``samples`` and the support mark of :mod:`values_seg.runner.support` passed on
    where the row has them)."""
    types = combo.measure_types()
    out = []
    for r in rows:
        measure = r.get("measure")
        out.append({**combo.context, "measure": measure, "versus": r.get("versus"),
                    "uncertainty_type": types.get(measure) if measure else None,
                    **{k: r[k] for k in ("aggregation", "task", "metric", "split", "value")},
                    **{k: _number(r.get(k)) for k in ("ci_low", "ci_high")}, "samples": r.get("samples"),
                    "supported": bool(r.get("supported", True)), "support_note": r.get("support_note", "")})
    return out


def _number(value) -> float:
    return float("nan") if value is None else float(value)


def case_table(combo: Combination, result: EvaluationResult) -> pd.DataFrame:
    """Per-case records, long: one row per (case, measure, aggregation) with its score and the
    case's per-measure quantities (e.g. NCC)."""
    cases = result.cases.copy()
    scores = result.scores.merge(result.per_measure, on=["case_id", "split", "measure"], how="left")
    table = cases.merge(scores, on=["case_id", "split"], how="left")
    table["uncertainty_type"] = table["measure"].map(combo.measure_types())
    for key, value in reversed(list(combo.context.items())):
        table.insert(0, key, value)
    return table


def quantity_tables(combo: Combination, result: EvaluationResult, quantities: dict) -> dict[str, pd.DataFrame]:
    """The run-directory tables the computed quantities declare (:attr:`Quantity.table`), for one
    combination: file name -> rows with the combination's context and the measure's uncertainty type."""
    types = combo.measure_types()
    out = {}
    for name, quantity in quantities.items():
        if quantity.table and name in result.outputs:
            rows = [{**combo.context, "measure": r["measure"], "uncertainty_type": types.get(r["measure"]),
                     **{k: v for k, v in r.items() if k != "measure"}} for r in quantity.table_rows(result.outputs[name])]
            out[quantity.table] = pd.DataFrame(rows)
    return out


def curve_table(combo: Combination, result: EvaluationResult, tasks: dict) -> pd.DataFrame | None:
    """The curves the tasks computed for their metrics (a task's optional ``curves(result)``: a data frame
    with a ``curve`` column naming the kind of curve), with the combination's context, the task's label
    and the measure's uncertainty type; None where no task has any."""
    types, frames = combo.measure_types(), []
    for label, task in tasks.items():
        frame = task.curves(result) if callable(getattr(task, "curves", None)) else None
        if frame is None or frame.empty:
            continue
        frame = frame.copy()
        frame.insert(0, "task", label)
        for key, value in reversed(list(combo.context.items())):
            frame.insert(0, key, value)
        if "measure" in frame.columns:
            frame["uncertainty_type"] = frame["measure"].map(types).fillna("")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None


def quantity_table_files() -> list[str]:
    """The run-directory tables that the registered quantities declare (:attr:`Quantity.table`), sorted."""
    return sorted({t for n in registry.names("quantity") if (t := registry.get("quantity", n).obj.table)})


def table_files() -> tuple[str, ...]:
    """The tables :func:`write_tables` may write (besides ``montages/``), and the cost table written with them
    (:mod:`values_seg.runner.costs`)."""
    return (RESULTS_CSV, RESULTS_PARQUET, BOOTSTRAP, CASES, *quantity_table_files(), CURVES, COSTS)


def write_tables(run_dir: Path, results: list[dict], cases: list[pd.DataFrame], tables: dict[str, list[pd.DataFrame]],
                 montages: dict[str, Path], curves: list[pd.DataFrame] = (),
                 per_combination: pd.DataFrame | None = None) -> None:
    """Write results.csv/.parquet, bootstrap.parquet, cases.csv, the quantities' tables (file name ->
    per-combination frames), curves.parquet and montages/ (failures.csv: :func:`write_failures`);
    ``per_combination``: columns joined to every row of a combination by its context (the costs)."""
    write_distributions(run_dir, results)
    table = pd.DataFrame(results, columns=RESULT_COLUMNS)
    if per_combination is not None:
        table = table.merge(per_combination, on=CONTEXT, how="left", validate="many_to_one")
    table = table.sort_values(CONTEXT + ["task", "metric", "split", "measure", "versus", "aggregation"],
                              na_position="first")
    written = [run_dir / RESULTS_CSV, run_dir / RESULTS_PARQUET]
    _atomic_csv(table, written[0])
    _atomic_parquet(table, written[1])
    if cases:
        _atomic_csv(pd.concat(cases, ignore_index=True), run_dir / CASES)
        written.append(run_dir / CASES)
    for file, frames in tables.items():
        _atomic_csv(pd.concat(frames, ignore_index=True), run_dir / file)
        written.append(run_dir / file)
    curves = [c for c in curves if c is not None]
    if curves:
        _atomic_parquet(pd.concat(curves, ignore_index=True), run_dir / CURVES)
        written.append(run_dir / CURVES)
    else:
        run_directory.remove_written(run_dir, [run_dir / CURVES])
    written += write_montages(run_dir, montages)
    run_directory.record(run_dir, written)


def write_montages(run_dir: Path, montages: dict[str, Path]) -> list[Path]:
    """Copy the montages of this run's combinations into ``montages/`` and remove those values-seg
    wrote for combinations no longer in the run (a dropped model's); returns the files written."""
    montage_dir = atomic.make_dir(run_dir, run_dir / MONTAGES)
    written = []
    for name, source in montages.items():
        if source.exists():
            target = montage_dir / f"{name}.npz"
            run_directory.write_owned(run_dir, target, lambda tmp, source=source: shutil.copyfile(source, tmp))
            written.append(target)
    run_directory.remove_written(run_dir, [p for p in montage_dir.glob("*.npz") if p not in written])
    return written


def write_failures(run_dir: Path, failures: list[dict]) -> None:
    """``failures.csv`` of the run that ends (:mod:`values_seg.storage.failure_record`: each failed job's
    stage, name, cause and traceback); none left when all succeeded, a stale one of an earlier run included."""
    path = run_dir / FAILURES
    if failures:
        _atomic_csv(pd.DataFrame(failures, columns=list(COLUMNS)), path)
        run_directory.record(run_dir, [path])
    else:
        run_directory.remove_written(run_dir, [path])  # never deletes what we did not write
