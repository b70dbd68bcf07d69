"""The run next to the paper's published values (Kahl et al. 2024): "Comparison with the paper".

The paper's numbers are data (``plugins/report_sections/data/paper_<study>.csv``, ``paper_settings.csv``);
their columns and how a run is matched and compared: docs/design-rationale.md, "Comparison with the paper".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.report import latex, markdown
from values_seg.report.common import UNSUPPORTED, support_notes
from values_seg.report.intervals import Distributions, interval
from values_seg.report.spec import ReportSpec
from values_seg.report.stats import format_plain, format_signed, mean_std
from values_seg.storage.run_directory import write_owned
from values_seg.storage.run_files import COMPONENTS

DATA = Path(__file__).parent / "data"
SETTINGS_FILE = "paper_settings.csv"
PAPER = "Kahl, Lüth et al., ValUES (ICLR 2024)"
VALUE_COLUMNS = ("table", "column", "setting", "pm", "um", "ut", "agg", "prediction_model", "measure",
                 "aggregation", "task", "metric", "split", "value", "note")
SETTING_COLUMNS = ("setting", "dataset", "match", "paper_params", "paper_setup")
TRAINING = "paper_training"  # optional column of paper_settings.csv (JSON, keys of run_settings)
ROW_KEYS = ("pm", "um", "ut", "agg")
ROW_HEADERS = {"pm": "PM", "um": "UM", "ut": "UT", "agg": "AGG"}
#: the columns of the long comparison table (``tables/paper_comparison.csv``)
COMPARISON_COLUMNS = ("table", "column", "setting", "scenario", *ROW_KEYS, "prediction_model", "measure",
                      "aggregation", "task", "metric", "split", "paper", "run", "run_std", "n", "ci_low", "ci_high",
                      "outside", "diff", "note", "support_note")
#: the mark of a cell whose paper value lies outside the run's interval
OUTSIDE = "†"


def _read(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as e:
        raise ValueError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected {list(columns)}")
    return df


def _json(text: str, where: str) -> dict:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {text!r}")
    return value


def load_settings(directory: str | Path = DATA) -> pd.DataFrame:
    """``paper_settings.csv`` with ``match``, ``paper_params`` and ``paper_training`` (optional) parsed to dicts."""
    path = Path(directory) / SETTINGS_FILE
    df = _read(path, SETTING_COLUMNS)
    if TRAINING not in df.columns:
        df[TRAINING] = ""
    for column in ("match", "paper_params", TRAINING):
        df[column] = [_json(text, f"{path}, row {i + 2} (setting {name!r}), column {column!r}")
                      for i, (name, text) in enumerate(zip(df["setting"], df[column]))]
    dup = df["setting"][df["setting"].duplicated()].tolist()
    if dup:
        raise ValueError(f"{path}: setting(s) {dup} listed more than once")
    return df


def load_values(directory: str | Path = DATA) -> pd.DataFrame:
    """Every ``paper_*.csv`` but the settings, concatenated in file order (``value`` as float,
    ``file`` added); each row's setting must be in ``paper_settings.csv`` and each cell unique."""
    directory = Path(directory)
    settings = set(load_settings(directory)["setting"])
    frames = []
    for path in sorted(directory.glob("paper_*.csv")):
        if path.name == SETTINGS_FILE:
            continue
        df = _read(path, VALUE_COLUMNS)
        values = pd.to_numeric(df["value"], errors="coerce")
        bad = df.index[~np.isfinite(values.to_numpy(dtype=float))].tolist()
        if bad:
            raise ValueError(f"{path}, row(s) {[i + 2 for i in bad]}: 'value' must be a number")
        unknown = sorted(set(df["setting"]) - settings)
        if unknown:
            raise ValueError(f"{path}: setting(s) {unknown} are not in {SETTINGS_FILE} "
                             f"(known: {', '.join(sorted(settings))})")
        key = ["table", "column", *ROW_KEYS]
        dup = df[df.duplicated(key, keep=False)]
        if not dup.empty:
            raise ValueError(f"{path}: cell(s) listed twice: rows {[i + 2 for i in dup.index]}")
        df = df.assign(value=values.astype(float), file=path.name)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*VALUE_COLUMNS, "file"])
    return pd.concat(frames, ignore_index=True)


@lru_cache(maxsize=1)
def _packaged() -> tuple[pd.DataFrame, pd.DataFrame]:
    return load_settings(), load_values()


# ----------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class MatchedSetting:
    """A paper setting and the run dataset (scenario) that is it."""

    setting: str
    scenario: str  # the dataset's label = the results' ``scenario``
    differences: tuple[tuple[str, object, object], ...]  # (parameter, run value, paper value)
    paper_setup: str
    training_differences: tuple[tuple[str, object, object], ...] = ()  # (run_settings key, run value, paper value)


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b or str(a) == str(b)


#: a declared setting that the run's config and components do not record
NOT_RECORDED = "not recorded"


def run_settings(config: dict | None, spec: ReportSpec) -> dict[str, object]:
    """The run's resolved settings under the keys ``paper_training`` uses: ``seeds`` (how many, from
    the config), ``recipe.<field>`` (the resolved recipe the runner recorded in ``components.json``)
    and ``backbone.<name>.<param>`` / ``prediction_model.<name>.<param>`` (the components' resolved
    parameters there). What the run directory does not record is left out."""
    out: dict[str, object] = {}
    if config and isinstance(config.get("seeds"), list):
        out["seeds"] = len(config["seeds"])
    out.update({f"recipe.{k}": v for k, v in spec.recipe.items()})
    for kind in ("backbone", "prediction_model"):
        for entry in spec.components.get(kind, []):
            for k, v in (entry.get("params") or {}).items():
                out.setdefault(f"{kind}.{entry.get('name')}.{k}", v)
    return out


def _training_differences(declared: dict, run: dict, spec: ReportSpec) -> tuple[tuple[str, object, object], ...]:
    """(key, run value, paper value) of every declared key where the run differs; a component the
    run does not have is not a difference, a setting the run does not record is ("not recorded")."""
    present = {f"{kind}.{e.get('name')}" for kind in ("backbone", "prediction_model")
               for e in spec.components.get(kind, [])}
    out = []
    for key, paper in declared.items():
        parts = key.split(".")
        if parts[0] in ("backbone", "prediction_model") and ".".join(parts[:2]) not in present:
            continue
        if key not in run:
            out.append((key, NOT_RECORDED, paper))
        elif not _same(run[key], paper):
            out.append((key, run[key], paper))
    return tuple(out)


def match_settings(spec: ReportSpec, settings: pd.DataFrame, run: dict | None = None) -> list[MatchedSetting]:
    """Every (setting, run dataset) pair whose dataset has the setting's registry name and
    parameters (``components.json``), in the settings file's order; ``run``: the run's
    :func:`run_settings`, compared with each setting's ``paper_training``."""
    out = []
    datasets = spec.components.get("dataset", [])
    for s in settings.itertuples(index=False):
        for entry in datasets:
            params = entry.get("params") or {}
            if entry.get("name") != s.dataset or not all(k in params and _same(params[k], v) for k, v in s.match.items()):
                continue
            diffs = tuple((k, params.get(k), v) for k, v in s.paper_params.items() if not _same(params.get(k), v))
            training = getattr(s, TRAINING, None) or {}
            out.append(MatchedSetting(s.setting, entry["label"], diffs, s.paper_setup,
                                      _training_differences(training, run, spec) if run is not None else ()))
    return out


def _labels(spec: ReportSpec, kind: str, name: str) -> list[str]:
    """The run's labels of the components with registry ``name`` ("" stays "")."""
    if not name:
        return [""]
    entries = spec.components.get(kind)
    if not entries:  # no declarations: labels are the names
        return [name]
    return [e["label"] for e in entries if e.get("name") == name]


def comparison(results: pd.DataFrame, spec: ReportSpec, values: pd.DataFrame | None = None,
               settings: pd.DataFrame | None = None, distributions: Distributions | None = None) -> pd.DataFrame:
    """One row per (paper cell, matched run scenario and components): the paper's value, the
    run's mean / std / n over seeds, its 95 % interval (``ci_low``/``ci_high``,
    :func:`values_seg.report.intervals.interval`; NaN where the run has none), ``outside`` (the
    paper's value lies outside that interval) and Δ = run − paper (columns :data:`COMPARISON_COLUMNS`).
    Paper cells of matched settings that the run lacks have ``n = 0``; cells of settings the run
    does not have are left out."""
    if values is None or settings is None:
        packaged = _packaged()
        settings = packaged[0] if settings is None else settings
        values = packaged[1] if values is None else values
    matched: dict[str, list[MatchedSetting]] = {}
    for m in match_settings(spec, settings):
        matched.setdefault(m.setting, []).append(m)
    rows = []
    for cell in values.itertuples(index=False):
        for m in matched.get(cell.setting, []):
            tasks = spec.task_labels(cell.task)
            sel = results[(results["scenario"] == m.scenario) & results["task"].isin(tasks)
                          & (results["metric"] == cell.metric) & (results["split"] == cell.split)]
            # a component the run does not have still gives the paper's cell (run value missing)
            for pm in _labels(spec, "prediction_model", cell.prediction_model) or [None]:
                for um in _labels(spec, "measure", cell.measure) or [None]:
                    for agg in _labels(spec, "aggregation", cell.aggregation) or [None]:
                        r = sel[(sel["prediction_model"] == pm) & (sel["measure"] == um) & (sel["aggregation"] == agg)]
                        mean, std, n = mean_std(r.groupby("seed")["value"].mean().to_numpy()) if not r.empty \
                            else (math.nan, math.nan, 0)
                        # an interval where the cell is one row per seed (several backbones: none)
                        low, high = interval(r, distributions) if n and len(r) == n else (math.nan, math.nan)
                        paper = float(cell.value)
                        unsupported = " | ".join(support_notes(r, ["task"]).values())  # ⚠: marked, never judged
                        rows.append(dict(
                            table=cell.table, column=cell.column, setting=cell.setting, scenario=m.scenario,
                            pm=cell.pm, um=cell.um, ut=cell.ut, agg=cell.agg, prediction_model=pm or "",
                            measure=um or "", aggregation=agg or "", task=cell.task, metric=cell.metric, split=cell.split,
                            paper=paper, run=mean, run_std=std, n=n, ci_low=low, ci_high=high,
                            outside=bool(math.isfinite(low) and not low <= paper <= high and not unsupported),
                            diff=mean - paper if n else math.nan, note=cell.note, support_note=unsupported))
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


# ----------------------------------------------------------------------------- rendering


@dataclass
class ComparisonTable:
    """One of the paper's tables with the run's values beside it: rows as the paper prints
    them, for each paper column (and matched scenario) the cells Paper / Run / Δ."""

    table: str
    frame: pd.DataFrame  # the comparison rows of this table

    def row_keys(self) -> list[str]:
        return [k for k in ROW_KEYS if (self.frame[k] != "").any()]

    def columns(self) -> list[tuple[str, str]]:
        """(paper column, run scenario) in the paper's order."""
        return list(dict.fromkeys(zip(self.frame["column"], self.frame["scenario"])))

    def column_title(self, column: str, scenario: str) -> str:
        several = sum(c == column for c, _ in self.columns()) > 1
        return f"{column} ({scenario})" if several else column

    def rows(self) -> list[tuple]:
        """Row identities: the paper's row labels plus the run's component labels."""
        keys = self.row_keys() + ["prediction_model", "measure", "aggregation"]
        return list(dict.fromkeys(self.frame[keys].itertuples(index=False, name=None)))

    def cell(self, row: tuple, column: tuple[str, str]) -> pd.Series | None:
        i = self._cells.get((*column, *row))
        return None if i is None else self.frame.iloc[i]

    @cached_property
    def _cells(self) -> dict[tuple, int]:
        """(paper column, scenario, *row identity) -> the position of its first row in the frame."""
        keys = ["column", "scenario"] + self.row_keys() + ["prediction_model", "measure", "aggregation"]
        out: dict[tuple, int] = {}
        for i, key in enumerate(self.frame[keys].itertuples(index=False, name=None)):
            out.setdefault(key, i)
        return out

    def body(self, label) -> tuple[list[str], list[list[str]], list[str]]:
        """Headers, rows and footnotes (a note's cell gets a marker ``*k``). Where one paper row
        matches several run components (e.g. two SSN configurations), each gets a row with the
        run's labels (``label(kind, value)`` -> display label) in brackets."""
        keys = self.row_keys()
        cols = self.columns()
        headers = [ROW_HEADERS[k] for k in keys]
        for c in cols:
            title = self.column_title(*c)
            headers += [f"{title}: paper", f"{title}: run", f"{title}: Δ"]
        notes: list[str] = []
        out = []
        several = self._several_run_components()
        for row in self.rows():
            labels = list(row[: len(keys)])
            if several:
                run = [label(kind, v) for kind, v in zip(("prediction_model", "measure", "aggregation"), row[len(keys):]) if v]
                labels[0] = f"{labels[0]} ({' / '.join(run)})" if run else labels[0]
            cells = []
            for c in cols:
                hit = self.cell(row, c)
                if hit is None:
                    cells += ["", "", ""]
                    continue
                paper = format_plain(hit["paper"])
                if hit["note"]:
                    notes.append(f"{self.column_title(*c)}, {' '.join(str(v) for v in row[:len(keys)] if v)}: {hit['note']}")
                    paper += f" *{len(notes)}"
                run = "–" if hit["n"] == 0 else format_plain(hit["run"]) + (
                    f" ± {hit['run_std']:.2f}" if hit["n"] > 1 and math.isfinite(hit["run_std"]) else "") + (
                    f" [{format_plain(hit['ci_low'])}, {format_plain(hit['ci_high'])}]"
                    if math.isfinite(hit["ci_low"]) else "") + (f" {UNSUPPORTED}" if hit["support_note"] else "")
                diff = "–" if hit["n"] == 0 else _signed(hit["diff"]) + (f" {OUTSIDE}" if hit["outside"] else "")
                cells += [paper, run, diff]
            out.append(labels + cells)
        return headers, out, notes

    def _several_run_components(self) -> bool:
        keys = self.row_keys()
        per_row = self.frame.groupby(keys)[["prediction_model", "measure", "aggregation"]].apply(
            lambda g: len(g.drop_duplicates()))
        return bool((per_row > 1).any())

    def summary(self) -> str:
        f = self.frame
        have = f[f["n"] > 0]
        if have.empty:
            return f"{len(f)} paper cells; the run has none of them."
        d = have["diff"].to_numpy(dtype=float)
        with_interval = np.isfinite(have["ci_low"].to_numpy(dtype=float))
        outside = int(have["outside"].astype(bool).sum())
        intervals = (f" The paper's value lies outside the run's 95 % interval ({OUTSIDE}) in {outside} of the "
                     f"{int(with_interval.sum())} cells with an interval"
                     + (f"; {int((~with_interval).sum())} without one" if not with_interval.all() else "")
                     + f" (each cell at 95 %, not adjusted: about {0.05 * with_interval.sum():.1f} would lie outside by "
                       f"chance alone were the run the paper's setting)."
                     if with_interval.any() else " No cell has an interval (no bootstrap in this run).")
        unsupported = have[have["support_note"] != ""]
        if len(unsupported):
            why = "; ".join(dict.fromkeys(n.split(";")[0] for n in unsupported["support_note"]))
            intervals += (f" {UNSUPPORTED} {len(unsupported)} run value(s) the data cannot support ({why}): shown, "
                          f"never marked {OUTSIDE}.")
        return (f"{len(have)} of {len(f)} paper cells in the run; mean |Δ| {np.mean(np.abs(d)):.2f}, "
                f"mean Δ {np.mean(d):+.2f}; the run is higher in {int((d > 0).sum())}, lower in "
                f"{int((d < 0).sum())}.{intervals}")


def _signed(value: float) -> str:
    """``+0.12`` / ``-0.12``; a difference that rounds to zero is ``0.00`` (never ``-0.00``)."""
    return "0.00" if abs(value) < 0.005 else format_signed(value)


def comparison_tables(frame: pd.DataFrame) -> list[ComparisonTable]:
    """The comparison rows grouped by the paper's table, in data order."""
    return [ComparisonTable(t, frame[frame["table"] == t]) for t in dict.fromkeys(frame["table"])]


def _describe(table: ComparisonTable, spec: ReportSpec) -> str:
    """E.g. "Ambiguity: NCC, i.i.d. test cases" (the run's labels of the task and metric)."""
    f = table.frame.iloc[0]
    task = (spec.task_labels(f["task"]) or [f["task"]])[0]
    split = {"iid": "i.i.d. test cases", "all": "all test cases (i.i.d. and OoD)", "ood": "OoD test cases"}
    return f"{spec.metric_spec(task, f['metric']).title}, {split.get(f['split'], f['split'])}"


def _setting_lines(matched: list[MatchedSetting]) -> list[str]:
    """One line per group of settings the run differs from in the same way."""
    groups: dict[tuple, list[MatchedSetting]] = {}
    for m in matched:
        groups.setdefault((m.differences + m.training_differences, m.paper_setup), []).append(m)
    lines = []
    for (differences, setup), ms in groups.items():
        diff = ", ".join(f"{k}={run!r} (paper {paper!r})" if paper is not None
                         else f"{k}={run!r} (paper: the dataset's default)" for k, run, paper in differences
                         if run is not NOT_RECORDED)
        unknown = ", ".join(f"{k} (paper {paper!r})" for k, run, paper in differences if run is NOT_RECORDED)
        datasets = ", ".join(f"`{m.scenario}`" for m in ms)
        lines.append(f"- **{', '.join(m.setting for m in ms)}** ↔ run dataset{'s' if len(ms) > 1 else ''} {datasets}"
                     + (f"; the run differs in {diff}" if diff else "")
                     + (f"; not recorded in the run: {unknown}" if unknown else "")
                     + (f". Paper: {setup}." if setup else "."))
    return lines


def comparison_section(results: pd.DataFrame, spec: ReportSpec, tables_dir: Path | None = None,
                       rel=lambda p: str(p), config: dict | None = None,
                       distributions: Distributions | None = None) -> list[str]:
    """Markdown blocks of the section; writes ``paper_<table>.tex`` and ``paper_comparison.csv``
    into ``tables_dir`` when given (``rel`` turns a path into the report's link text). ``config``:
    the run's config (its settings are compared with the paper's), ``distributions``: its stored
    bootstrap distributions (the cells' intervals)."""
    settings, values = _packaged()
    blocks = ["## Comparison with the paper"]
    matched = match_settings(spec, settings, run_settings(config, spec))
    if not matched:
        known = ", ".join(f"{s.setting} ({s.dataset} {json.dumps(s.match)})" for s in settings.itertuples())
        blocks.append(f"No dataset of this run is one of the paper's settings with published values (known: {known}).")
        return blocks
    frame = comparison(results, spec, values, settings, distributions)
    blocks.append(
        f"The run's values next to the values published in {PAPER}, cell by cell: raw values as the paper prints "
        "them (not × 100), the run's mean ± sample std over its seeds with its 95 % interval in brackets (one "
        "seed: the bootstrap over test cases; several: the two-level bootstrap of the mean over seeds), "
        f"Δ = run − paper, {OUTSIDE} where the paper's value lies outside the run's interval; – where the run "
        "lacks the cell. The interval covers the run's own sampling variation only: a paper value outside it "
        "differs by more than the run's test cases (and seeds) explain, which the settings below that differ "
        "from the paper's may. The paper's settings and this run's datasets "
        f"(from `{COMPONENTS}`), with every declared setting of the data, the training and the models where the "
        "run's resolved config differs:")
    blocks.append("\n".join(_setting_lines(matched)))
    seeds = sorted({int(n) for n in frame["n"] if n})
    if seeds:
        blocks.append(f"*Run values over {'/'.join(map(str, seeds))} seed(s) (the paper: 3).*")
    tables = comparison_tables(frame)
    for t in tables:
        headers, rows, notes = t.body(spec.label)
        blocks.append(f"### {t.table}: {_describe(t, spec)}")
        keys = len(t.row_keys())
        blocks.append(markdown.table(headers, rows, align=["l"] * keys + ["r"] * (len(headers) - keys), keys=keys))
        text = t.summary()
        if notes:
            text += " Notes on the paper's values: " + "; ".join(f"*{i + 1}: {n}" for i, n in enumerate(notes)) + "."
        if tables_dir is not None:
            tex = tables_dir / f"paper_{_slug(t.table)}.tex"
            write_owned(tables_dir.parent, tex, _tex(t, headers, rows))  # never through a link
            text += f" LaTeX: `{rel(tex)}`."
        blocks.append(f"*{text}*")
    covered = set(frame["setting"])
    missing_tables = sorted({r.table for r in values.itertuples() if r.setting in covered} - {t.table for t in tables})
    if missing_tables:
        blocks.append(f"Not shown: {', '.join(missing_tables)}.")
    if tables_dir is not None:
        csv = tables_dir / "paper_comparison.csv"
        write_owned(tables_dir.parent, csv, lambda tmp: frame.to_csv(tmp, index=False))
        blocks.append(f"All compared cells: `{rel(csv)}`.")
    return blocks


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")


def _tex(t: ComparisonTable, headers: list[str], rows: list[list[str]]) -> str:
    k = len(t.row_keys())
    cols = t.columns()
    groups = [("", k)] + [(t.column_title(*c), 3) for c in cols]
    short = headers[:k] + ["Paper", "Run", "Δ"] * len(cols)
    return latex.tabular(short, [[c.split(" *")[0] if i >= k else c for i, c in enumerate(r)] for r in rows],
                         groups=groups, align="l" * k + "r" * (3 * len(cols)), blank_repeats=1,
                         comment=f"{t.table} of {PAPER} next to this run: paper value, run mean +- std over seeds, "
                                 f"difference.\nRequires \\usepackage{{booktabs}}.")


__all__ = ["comparison", "comparison_section", "comparison_tables", "load_settings", "load_values", "match_settings",
           "run_settings", "ComparisonTable", "MatchedSetting"]
