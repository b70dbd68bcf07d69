"""Report section: uncertainty-map montages of test cases (``montages/*.npz``, written by the runner)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.common import slugify
from values_seg.report.rich import Block
from values_seg.report.rundir import RunData
from values_seg.report.section import ReportSection
from values_seg.report.spec import natural_key
from values_seg.storage.run_files import FIGURES

log = logging.getLogger(__name__)


class MontagesSection(ReportSection):
    """The uncertainty maps: per prediction model, test cases with raters, prediction and each measure's map."""

    name = "montages"
    what = "the uncertainty-map montages"
    order = 110
    early = 1
    outputs = (f"{FIGURES}/montage_*.png",)

    def build(self, ctx) -> None:
        _montages(ctx, ctx.options.get("montage_seeds", "first"), ctx.options.get("max_montage_cases", 8))


def _types_lookup(run: RunData) -> dict[tuple[str, str], str]:
    types: dict[tuple[str, str], str] = {}
    for df in (run.results, run.cases, run.curves):
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


def _montages(report, seeds: str, max_cases: int) -> None:
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
    from values_seg.report.plots import plot_montage

    report.add("Each montage: rows are test cases (i.i.d. then OoD); columns: image with each rater's contour, the "
               "raters' per-pixel variance (the AU reference of the NCC), the prediction, then each measure's "
               "uncertainty map (type in brackets), one colour scale per column. Click a montage to enlarge it.")
    types = _types_lookup(report.run)
    for key, _, path in entries:
        out = report.figures / f"montage_{slugify(path.stem)}.png"
        drawn = report.figure(plot_montage, out, path, out, spec, types, max_cases=max_cases, inputs=[path])
        title = " · ".join(spec.label(k, v) for k, v in zip(("scenario", "backbone", "prediction_model"), key) if v)
        report.later(lambda drawn=drawn, out=out, path=path, title=title: _montage_block(report, drawn, out, path, title))


def _montage_block(report, drawn, out: Path, path: Path, title: str) -> list[str]:
    try:
        drawn.result()
    except Exception as e:  # noqa: BLE001 - one broken montage file costs only its figure
        log.error("report: could not draw montage %s", path, exc_info=e)
        message = f"could not draw montage `{path.name}`: {type(e).__name__}: {e}"
        report.warnings.append(message)
        return [f"> **Warning:** {message}"]
    return [Block(markdown.figure(
        report.rel(out), f"uncertainty maps {title or path.stem}", title or path.stem), gallery="montages")]


@hookimpl
def values_seg_report_sections():
    return [MontagesSection]
