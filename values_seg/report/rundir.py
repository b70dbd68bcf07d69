"""Reading a run directory (docs/architecture.md, "Results") into normalised data frames.

Only the results table is required; what the optional files and the normalised columns are:
docs/design-rationale.md, "Reading a run directory".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.storage.failure_record import COLUMNS, cause_of
from values_seg.report.intervals import ROW, SAMPLE_KEYS, Distributions, attach_rows
from values_seg.report.spec import ReportSpec
from values_seg.storage.run_files import BOOTSTRAP, CASES, CONFIG, CURVES, FAILURES, MONTAGES, RESULTS_CSV, RESULTS_PARQUET

RESULT_KEYS = (
    "dataset", "scenario", "backbone", "prediction_model", "family",
    "measure", "versus", "uncertainty_type", "aggregation", "task", "metric", "split",
)
CASE_KEYS = ("dataset", "scenario", "backbone", "prediction_model", "case_id", "split", "measure",
             "uncertainty_type", "aggregation")
#: Text columns of ``curves.parquet`` (a task's own columns besides these keep their types).
CURVE_KEYS = ("dataset", "scenario", "backbone", "prediction_model", "task", "curve", "measure", "uncertainty_type",
              "aggregation", "split")

_MISSING_STRINGS = {"nan", "none", "null", "<na>"}


def _montages(run_dir: Path) -> tuple[list[Path], list[Path]]:
    """(the montages values-seg wrote for the current run, the other ``montages/*.npz``): only files
    recorded in the run's marker are shown (a stale or foreign file never is)."""
    from values_seg.storage.run_directory import written

    folder = run_dir / MONTAGES
    found = sorted(folder.glob("*.npz")) if folder.is_dir() and not folder.is_symlink() else []
    ours = written(run_dir)
    return ([p for p in found if f"{MONTAGES}/{p.name}" in ours and not p.is_symlink()],
            [p for p in found if f"{MONTAGES}/{p.name}" not in ours or p.is_symlink()])


@dataclass
class RunData:
    """Everything a report is built from."""

    run_dir: Path
    name: str
    config: dict | None
    results: pd.DataFrame
    cases: pd.DataFrame | None = None
    curves: pd.DataFrame | None = None  # curves.parquet: the points the tasks' metrics came from
    montages: list[Path] = field(default_factory=list)
    failures: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    spec: ReportSpec = field(default_factory=ReportSpec)  # the components' declarations (components.json)
    distributions: Distributions | None = None  # bootstrap.parquet; results[ROW] points into it

    def curve(self, kind: str) -> pd.DataFrame | None:
        """The rows of ``curves.parquet`` whose ``curve`` is ``kind`` (columns all-empty there dropped); None without any."""
        if self.curves is None:
            return None
        rows = self.curves[self.curves["curve"] == kind]
        return rows.dropna(axis=1, how="all") if not rows.empty else None


def _strings(df: pd.DataFrame, columns) -> None:
    for c in columns:
        if c not in df.columns:
            df[c] = ""
            continue
        col = df[c].astype(object).where(df[c].notna(), "")
        col = col.map(lambda v: "" if str(v).strip().lower() in _MISSING_STRINGS else str(v).strip())
        df[c] = col.astype(object)


def _seeds(df: pd.DataFrame) -> None:
    if "seed" not in df.columns:
        df["seed"] = 0
        return
    numeric = pd.to_numeric(df["seed"], errors="coerce")
    if numeric.notna().all() and (numeric == numeric.round()).all():
        df["seed"] = numeric.astype(np.int64)
    else:
        _strings(df, ["seed"])


def _numbers(df: pd.DataFrame, columns) -> None:
    for c in columns:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(np.float64)


def read_table(path: Path, notes: list[str], what: str) -> pd.DataFrame | None:
    """A CSV or Parquet file as a data frame; ``None`` (with a note) when missing, empty or unreadable."""
    if not path.exists():
        notes.append(f"No `{path.name}`: {what} skipped.")
        return None
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, low_memory=False)
    except pd.errors.EmptyDataError:
        notes.append(f"`{path.name}` is empty: {what} skipped.")
        return None
    except Exception as e:  # a malformed optional file must not stop the report
        notes.append(f"`{path.name}` could not be read ({type(e).__name__}: {e}): {what} skipped.")
        return None
    if df.empty:
        notes.append(f"`{path.name}` has no rows: {what} skipped.")
        return None
    return plain_strings(df)


def plain_strings(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as Python strings (``object``): pandas 3's Arrow-backed strings cost ~10x more per
    element lookup, and the report looks up many single cells."""
    for c in df.columns:
        if df[c].dtype != object and pd.api.types.is_string_dtype(df[c].dtype):
            df[c] = df[c].astype(object)
    return df


def _require(df: pd.DataFrame | None, columns, path_name: str, notes: list[str], what: str) -> pd.DataFrame | None:
    if df is None:
        return None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        notes.append(f"`{path_name}` lacks the columns {', '.join(missing)}: {what} skipped.")
        return None
    return df


def empty_results() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype=object) for c in RESULT_KEYS})
    df["seed"] = pd.Series(dtype=np.int64)
    df["value"] = pd.Series(dtype=np.float64)
    df["supported"] = pd.Series(dtype=bool)
    df["support_note"] = pd.Series(dtype=object)
    return df


def normalise_results(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    _strings(df, RESULT_KEYS)
    _seeds(df)
    for c in ("ci_low", "ci_high"):
        if c not in df.columns:
            df[c] = np.nan
    _numbers(df, ["value", "ci_low", "ci_high"])
    _support(df)
    if ROW not in df.columns:
        df[ROW] = -1
    return df.reset_index(drop=True)


def _support(df: pd.DataFrame) -> None:
    """``supported`` as booleans and ``support_note`` as text (:mod:`values_seg.runner.support`); a table
    written before they existed: every row supported where it has a finite value."""
    if "supported" in df.columns:
        df["supported"] = [str(v).strip().lower() not in ("false", "0", "0.0") for v in df["supported"]]
    else:
        df["supported"] = np.isfinite(df["value"].to_numpy(dtype=np.float64))
    _strings(df, ["support_note"])
    df.loc[~df["supported"] & (df["support_note"] == ""), "support_note"] = "no value"


def load_distributions(run_dir: Path, config: dict | None, notes: list[str]) -> tuple[pd.DataFrame, Distributions] | None:
    """``bootstrap.parquet`` as (its normalised key columns, :class:`Distributions`); ``None`` (with
    a note) when missing or unreadable. Level and seed from the config's ``statistics`` section."""
    path = run_dir / BOOTSTRAP
    if not path.exists():
        notes.append(f"No `{BOOTSTRAP}`: intervals only where the results table has them; no paired "
                     "comparisons or rank histograms.")
        return None
    try:
        df = pd.read_parquet(path)
        samples = np.stack([np.asarray(s, dtype=np.float64) for s in df["samples"]])
        keys = plain_strings(df.drop(columns=["samples"]))
        _strings(keys, [c for c in SAMPLE_KEYS if c != "seed"])
        _seeds(keys)
    except Exception as e:  # a malformed optional file must not stop the report
        notes.append(f"`{BOOTSTRAP}` could not be read ({type(e).__name__}: {e}): no paired comparisons.")
        return None
    stats = (config or {}).get("statistics") or {}
    return keys, Distributions(samples, float(stats.get("level", 0.95)), int(stats.get("seed", 0)))


def load_results(run_dir: Path, notes: list[str]) -> pd.DataFrame:
    """The results table, from ``results.csv`` (else ``results.parquet``). A file that no longer has
    the content the runner wrote (a torn row, an edit; see :mod:`values_seg.storage.run_directory`) is not
    used: the other one is, if it is intact."""
    from values_seg.storage.run_directory import intact

    candidates = [p for p in (run_dir / RESULTS_CSV, run_dir / RESULTS_PARQUET) if p.exists()]
    damaged = [p for p in candidates if intact(run_dir, p) is False]
    for p in damaged:
        notes.append(f"`{p.name}` changed after the run wrote it (damaged or edited) and is not used; "
                     "rerun `values-seg run` to rewrite it.")
    usable = [p for p in candidates if p not in damaged]
    local: list[str] = []
    df = read_table(usable[0], local, "results") if usable else None
    if df is None and len(usable) > 1:
        df = read_table(usable[1], local, "results")
    if df is None and not candidates:
        read_table(run_dir / RESULTS_CSV, local, "results")  # the note that it is missing
    df = _require(df, ("scenario", "prediction_model", "metric", "value"), RESULTS_CSV, local, "results")
    if df is None:
        notes.extend(local)
        return empty_results()
    return normalise_results(df)


def read_run_config(run_dir: Path, notes: list[str]) -> dict | None:
    path = run_dir / CONFIG
    if not path.exists():
        notes.append(f"No `{CONFIG}`: the experiment name is the run directory's name.")
        return None
    try:
        from omegaconf import OmegaConf

        cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as e:
        notes.append(f"`{CONFIG}` could not be read ({type(e).__name__}: {e}).")
        return None
    return cfg if isinstance(cfg, dict) else None


def _load_cases(run_dir: Path, notes: list[str]) -> pd.DataFrame | None:
    """``cases.csv``, normalised; None (with a note) when missing or malformed."""
    cases = read_table(run_dir / CASES, notes, "per-case records")
    cases = _require(cases, ("scenario", "prediction_model", "measure", "aggregation", "dice", "score", "ood"),
                     CASES, notes, "per-case records")
    if cases is None:
        return None
    cases = cases.copy()
    _strings(cases, CASE_KEYS)
    _seeds(cases)
    _numbers(cases, ["dice", "score", "ncc", "ged"])
    cases["ood"] = cases["ood"].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0", "yes"))
    return cases


def _load_curves(run_dir: Path, notes: list[str]) -> pd.DataFrame | None:
    """``curves.parquet`` with its key columns as strings; None (with a note) when missing or malformed."""
    curves = read_table(run_dir / CURVES, notes, "the sections that draw the tasks' curves")
    curves = _require(curves, ("scenario", "prediction_model", "task", "curve"), CURVES, notes,
                      "the sections that draw the tasks' curves")
    if curves is None:
        return None
    curves = curves.copy()
    _strings(curves, CURVE_KEYS)
    _seeds(curves)
    return curves


def load_run(run_dir: str | Path) -> RunData:
    """Read a run directory; raises ``FileNotFoundError`` only when the directory itself is missing."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    notes: list[str] = []
    config = read_run_config(run_dir, notes)
    name = str((config or {}).get("name") or run_dir.name)
    results = load_results(run_dir, notes)

    cases = _load_cases(run_dir, notes)
    curves = _load_curves(run_dir, notes)
    montages, foreign = _montages(run_dir)
    if foreign:
        notes.append(f"{len(foreign)} file(s) in `montages/` not written by this run left out: "
                     + ", ".join(f"`{p.name}`" for p in foreign[:3]) + (", ..." if len(foreign) > 3 else ""))
    if not montages:
        notes.append("No `montages/*.npz`: uncertainty-map montages skipped.")

    failures = None
    if (run_dir / FAILURES).exists():
        local: list[str] = []
        failures = read_table(run_dir / FAILURES, local, "failures table")
        if failures is not None:
            failures = failures.copy()
            _strings(failures, [c for c in COLUMNS if c in failures.columns] or list(failures.columns))
            if "cause" not in failures.columns and "error" in failures.columns:  # an earlier values-seg's table
                failures["cause"] = failures["error"].map(cause_of)

    spec = ReportSpec.load(run_dir, notes)
    distributions = None
    if not results.empty:
        loaded = load_distributions(run_dir, config, notes)
        if loaded is not None:
            keys, distributions = loaded
            results = attach_rows(results, keys)
    return RunData(run_dir=run_dir, name=name, config=config, results=results, cases=cases,
                   curves=curves, montages=montages, failures=failures, notes=notes, spec=spec,
                   distributions=distributions)
