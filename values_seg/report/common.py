"""Small helpers shared by the report modules: scenario groups, file-name slugs, row filters, and the
one reading of ``supported`` (:mod:`values_seg.runner.support`) every section that shows, ranks or tests
result rows goes through (:func:`support_notes`, :func:`supported_only`, :func:`left_out_text`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from values_seg.report.spec import natural_key
from values_seg.storage.run_files import RESULTS_CSV

UNSUPPORTED = "⚠"  # the data cannot support the value (values_seg.runner.support)


@dataclass(frozen=True)
class Scenario:
    """One dataset/scenario group of the results (a table, a panel)."""

    dataset: str
    scenario: str
    slug: str  # file-name safe id, unique within a run

    @property
    def title(self) -> str:
        return self.scenario or self.dataset or "all"


def slugify(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_")
    return slug or "x"


def scenarios(*frames: pd.DataFrame | None) -> list[Scenario]:
    """The (dataset, scenario) groups found in the frames, in natural order."""
    pairs: set[tuple[str, str]] = set()
    for df in frames:
        if df is not None and not df.empty and "scenario" in df.columns:
            ds = df["dataset"] if "dataset" in df.columns else pd.Series([""] * len(df), index=df.index)
            pairs |= set(zip(ds.astype(str), df["scenario"].astype(str)))
    pairs_sorted = sorted(pairs, key=lambda p: (natural_key(p[0]), natural_key(p[1])))
    count: dict[str, int] = {}
    for _, s in pairs_sorted:
        count[s] = count.get(s, 0) + 1
    out = []
    for d, s in pairs_sorted:
        slug = slugify(s if count[s] == 1 and s else f"{d}_{s}")
        out.append(Scenario(d, s, slug))
    return out


def select(df: pd.DataFrame, scenario: Scenario) -> pd.DataFrame:
    mask = df["scenario"].astype(str) == scenario.scenario
    if "dataset" in df.columns:
        mask &= df["dataset"].astype(str) == scenario.dataset
    return df[mask]


def metric_rows(results: pd.DataFrame, task: str | list[str], metric: str) -> pd.DataFrame:
    """Rows of ``metric`` reported by ``task`` (a task label, or several)."""
    tasks = [task] if isinstance(task, str) else list(task)
    return results[(results["metric"] == metric) & results["task"].isin(tasks)]


def model_key(backbone: str, prediction_model: str, several_backbones: bool, labeller) -> str:
    """Display name of a prediction model, with its backbone where a run has several."""
    name = labeller("prediction_model", prediction_model)
    return f"{backbone} / {name}" if several_backbones and backbone else name


def support_notes(rows: pd.DataFrame, keys: list[str]) -> dict[tuple, str]:
    """Per method (``keys``) with a row the data cannot support (``supported`` False, in some seed):
    the distinct reasons (``support_note``), " | "-joined."""
    if "supported" not in rows.columns or rows.empty:
        return {}
    bad = rows[~rows["supported"].astype(bool)]
    return {k if isinstance(k, tuple) else (k,): " | ".join(dict.fromkeys(g["support_note"].astype(str)))
            for k, g in bad.groupby([bad[c] for c in keys], sort=False, dropna=False)}


def supported_only(rows: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(kept, left out)``: the rows of the methods (``keys``) the data support in every row (every
    seed), and the rows of the others, which no ranking, test or winner may use."""
    notes = support_notes(rows, keys)
    if not notes:
        return rows, rows.iloc[:0]
    out = pd.Series(list(zip(*(rows[c] for c in keys))), index=rows.index).isin(list(notes))
    return rows[~out], rows[out]


def left_out_text(left_out: pd.DataFrame, keys: list[str], what: str = "ranked or tested") -> str:
    """E.g. "⚠ 3 results (a method on one metric and split) left out (not ranked or tested): the data
    cannot support their values (all scores tied × 2; ...)"; "" where none. ``keys`` identify a result."""
    notes = support_notes(left_out, keys)
    if not notes:
        return ""
    why = pd.Series([n.split(";")[0] for n in notes.values()]).value_counts()
    reasons = "; ".join(f"{w} × {k}" for w, k in why.items())
    n = len(notes)
    return (f"{UNSUPPORTED} {n} result{'s' if n != 1 else ''} (a method on one metric and split) left out (not "
            f"{what}): the data cannot support {'their values' if n != 1 else 'its value'} ({reasons}; `supported` = "
            f"False in {RESULTS_CSV}).")
