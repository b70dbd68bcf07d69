"""Report section: the learning curves of every training (curve kind ``training`` in
``curves.parquet``, from the checkpoint sidecars; :mod:`values_seg.engine.curves`).

The figure and the "may be under-trained" flag (:func:`plateau`): docs/design-rationale.md,
"The learning-curves section".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from values_seg import hookimpl
from values_seg.report import markdown
from values_seg.report.common import scenarios, select
from values_seg.report.section import ReportSection
from values_seg.storage.run_files import FIGURES

KIND = "training"
WINDOW, TOLERANCE = 3, 0.05


class TrainingCurvesSection(ReportSection):
    """The trainings' learning curves and which of them may be under-trained."""

    name = "training_curves"
    what = "the learning curves"
    order = 105
    outputs = (f"{FIGURES}/training_curves_*.png",)
    curves = (KIND,)

    def build(self, ctx) -> None:
        _training_curves(ctx)


def plateau(losses: list[float], window: int = 3, tolerance: float = 0.05) -> tuple[bool, float]:
    """Whether a loss curve has flattened: ``(flat, drop)``, ``drop`` the relative decrease of the
    mean loss of the last ``window`` epochs against the ``window`` before them; flat when
    ``drop < tolerance`` (too short a curve counts as flat: nothing to say)."""
    if len(losses) < 2 * window:
        return True, 0.0
    before, last = float(np.mean(losses[-2 * window:-window])), float(np.mean(losses[-window:]))
    drop = (before - last) / abs(before) if before else 0.0
    return drop < tolerance, drop


def under_trained(curves: pd.DataFrame) -> list[dict]:
    """One entry per distinct training (``spec_key``) whose loss has not flattened: the models,
    the loss before and over the last epochs and the relative drop."""
    out = []
    for key, rows in curves.groupby("spec_key", sort=False):
        loss = rows.drop_duplicates("epoch").sort_values("epoch")["loss"].tolist()
        flat, drop = plateau(loss, WINDOW, TOLERANCE)
        if not flat:
            first = rows.iloc[0]
            dice = rows.drop_duplicates("epoch").dropna(subset=["val_dice"]).sort_values("epoch")
            out.append({"scenario": str(first["scenario"]), "seed": first.get("seed"),
                        "models": sorted(set(rows["prediction_model"].astype(str))), "epochs": len(loss),
                        "before": float(np.mean(loss[-2 * WINDOW:-WINDOW])), "last": float(np.mean(loss[-WINDOW:])),
                        "drop": drop, "key": str(key)[:10],
                        "dice": list(zip(dice["epoch"].astype(int), dice["val_dice"].astype(float)))})
    return out


def plot_training_curves(curves: pd.DataFrame, title: str, path: Path) -> Path | None:
    """Small multiples: a panel per (prediction model, seed), the members' curves together."""
    from values_seg.report.plots._style import new_figure, save

    if curves.empty:
        return None
    panels = list(curves.groupby(["prediction_model", "seed"], sort=False).groups)
    ncols = min(len(panels), 5)
    nrows = -(-len(panels) // ncols)
    fig = new_figure(2.6 * ncols, 2.1 * nrows + 0.4)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, (model, seed) in zip(axes, panels):
        part = curves[(curves["prediction_model"] == model) & (curves["seed"] == seed)]
        right = ax.twinx()
        for member, rows in part.groupby("member"):
            rows = rows.sort_values("epoch")
            color = f"C{int(member) % 10}"
            ax.plot(rows["epoch"], rows["loss"], color=color, lw=1.2)
            dice = rows.dropna(subset=["val_dice"])
            if not dice.empty:
                right.plot(dice["epoch"], dice["val_dice"], "o:", color=color, ms=3, lw=0.8)
        phases = part[part["phase"].astype(str) != ""] if "phase" in part.columns else part.iloc[:0]
        for phase, rows in phases.groupby("phase"):
            ax.axvspan(rows["epoch"].min() - 0.5, rows["epoch"].max() + 0.5, color="#dddddd", zorder=0)
            ax.text(rows["epoch"].min() - 0.4, 0.97, str(phase), transform=ax.get_xaxis_transform(), va="top",
                    fontsize=6, color="#555555")
        members = part["member"].nunique()
        ax.set_title(f"{model} (seed {seed})" + (f", {members} members" if members > 1 else ""), fontsize=8)
        ax.set_xlabel("epoch", fontsize=7)
        ax.set_ylabel("training loss (solid)", fontsize=7)
        right.set_ylabel("validation Dice (dots)", fontsize=7)
        right.set_ylim(0, 1)
        ax.tick_params(labelsize=6)
        right.tick_params(labelsize=6)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"{title}: learning curves", fontsize=10)
    return save(fig, path)


def _training_curves(report) -> None:
    report.add("## Learning curves")
    curves = report.run.curve(KIND)
    if "val_dice" not in curves.columns:
        curves = curves.assign(val_dice=np.nan)
    drawn = []
    for sc in scenarios(curves):
        out = report.figures / f"training_curves_{sc.slug}.png"
        drawn.append((sc, report.figure(plot_training_curves, out, select(curves, sc), sc.title, out)))
    flagged = under_trained(curves)
    distinct = curves["spec_key"].nunique()
    short = int((curves.groupby("spec_key")["epoch"].max() < 2 * WINDOW).sum())

    def compose() -> list[str]:
        blocks = [f"Each training's mean loss per epoch (solid, left axis) and its Dice on a fixed subset of the "
                  f"validation split every few epochs (dots, right axis; `learning_curves` in the config), read from "
                  f"the checkpoints' sidecars; the members of an ensemble share a panel, a head's phases are shaded "
                  f"(the SSN's pre-training of its mean). A training is flagged when its mean loss over the last "
                  f"{WINDOW} epochs is still {TOLERANCE:.0%} or more below that of the {WINDOW} epochs before."]
        for sc, future in drawn:
            path = future.result()
            if path is not None:
                blocks.append(markdown.figure(report.rel(path), f"learning curves {sc.title}",
                                              f"{sc.title}: learning curves of every training"))
        if flagged:
            lines = [f"- **{f['scenario']}**, seed {f['seed']}, training {f['key']} ({', '.join(f['models'])}): "
                     f"may be under-trained: mean loss {f['before']:.4f} over epochs {f['epochs'] - 2 * WINDOW + 1}–"
                     f"{f['epochs'] - WINDOW}, {f['last']:.4f} over epochs {f['epochs'] - WINDOW + 1}–{f['epochs']} "
                     f"({f['drop']:.0%} lower)" + _dice_text(f["dice"]) for f in flagged]
            blocks.append(f"{len(flagged)} of {distinct} distinct trainings may be under-trained (their loss has not "
                          f"flattened; more epochs may change their results):\n\n" + "\n".join(lines))
        else:
            blocks.append(f"The losses of all {distinct - short} distinct trainings judged have flattened (less than "
                          f"{TOLERANCE:.0%} lower over their last {WINDOW} epochs than over the {WINDOW} before)"
                          + (f"; {short} training(s) of fewer than {2 * WINDOW} epochs are not judged." if short else "."))
        return blocks

    report.later(compose)


def _dice_text(points: list) -> str:
    """The validation Dice at its last two points (what the last epochs bought on the validation subset)."""
    if len(points) < 2:
        return ""
    (e0, d0), (e1, d1) = points[-2], points[-1]
    return f"; validation Dice {d0:.3f} at epoch {e0}, {d1:.3f} at epoch {e1}"


@hookimpl
def values_seg_report_sections():
    return [TrainingCurvesSection]
