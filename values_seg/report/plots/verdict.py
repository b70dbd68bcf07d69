"""The "Which aggregation?" heat map (:mod:`values_seg.report.verdict`): aggregations × panels.

Its rows, columns and marks: docs/design-rationale.md, "The verdict's heat map".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from values_seg.report.plots._style import new_figure, save
from values_seg.report.spec import ReportSpec
from values_seg.report.verdict import entry_label


def plot_verdict_heatmap(ranks: pd.DataFrame, winners: pd.DataFrame, path: Path, spec: ReportSpec) -> Path | None:
    """Draw the heat map to ``path``; None where there is nothing to rank."""
    if ranks.empty:
        return None
    if "block" in ranks:  # the main rankings: over every combination
        ranks, winners = ranks[ranks["block"] == 0], winners[winners["block"] == 0]
    members = dict(zip(ranks["aggregation"], ranks["members"] if "members" in ranks else ranks["aggregation"]))
    keys = ["task", "metric", "scenario", "split"]
    columns = list(dict.fromkeys(map(tuple, ranks[keys].to_numpy().tolist())))
    rows = spec.ordered("aggregation", ranks["aggregation"].unique())
    grid = np.full((len(rows), len(columns)), np.nan)
    for r in ranks.itertuples():
        grid[rows.index(r.aggregation), columns.index((r.task, r.metric, r.scenario, r.split))] = r.mean_rank
    width, height = max(5.0, 2.0 + 0.62 * len(columns)), 1.6 + 0.22 * len(rows)  # room for the title
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="viridis_r", aspect="auto", vmin=1, vmax=max(len(rows), 2))
    for i in range(len(rows)):
        for j in range(len(columns)):
            if np.isfinite(grid[i, j]):
                dark = grid[i, j] > (len(rows) + 1) / 2  # viridis_r: high (bad) ranks are dark
                ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=6,
                        color="white" if dark else "black")
    for w in winners.itertuples():
        key = (w.task, w.metric, w.scenario, w.split)
        top = [e.split(";")[0] for e in w.tied.split(" | ")] if "tied" in winners else [w.winner]
        for a in (a for a in top if key in columns and a in rows):  # a tie: every entry at the top, dashed
            i, j = rows.index(a), columns.index(key)
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.6,
                                   linestyle="-" if len(top) == 1 else "--"))
            if w.significant:
                ax.text(j + 0.42, i - 0.3, "★", ha="right", va="center", fontsize=9, color="red")
    ax.set_yticks(range(len(rows)), [entry_label(spec, members[a]) for a in rows], fontsize=7)
    split_text = {"iid": "i.i.d.", "ood": "OoD", "all": "all"}
    ax.set_xticks(range(len(columns)),
                  [f"{spec.metric_spec(t, m).title}\n{s} {split_text.get(sp, sp)}" for t, m, s, sp in columns],
                  fontsize=6, rotation=60, ha="right", rotation_mode="anchor")
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02).set_label("mean rank (1 = best)", fontsize=7)
    ax.set_title("Which aggregation? Mean rank over every model × measure\n"
                 "(outlined: winner, dashed: tie; ★: significant vs runner-up, adjusted)", fontsize=8)
    return save(fig, path)
