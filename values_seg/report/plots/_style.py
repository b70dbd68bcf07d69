"""Shared figure style: Agg-rendered ``Figure`` objects, colours and markers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Figures are rendered by an explicit Agg canvas, never through pyplot: no display is needed and a
# user's interactive backend is left alone.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from values_seg.report.spec import ReportSpec

DPI = 110
UT_COLORS = {"PU": "#555555", "AU": "#1f77b4", "EU": "#d62728", "": "#8c564b"}
SPLIT_STYLE = {  # colour, marker
    "iid": ("#1f77b4", "o"),
    "ood": ("#ff7f0e", "s"),
    "all": ("#2ca02c", "D"),
}
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]


def new_figure(width: float, height: float, constrained: bool = True, dpi: float | None = None) -> Figure:
    """A figure of ``width`` x ``height`` inches; ``constrained=False`` leaves the layout to
    :func:`margins` (no layout pass, which on a grid of panels costs as much as drawing it);
    ``dpi``: set it (to :data:`DPI`) when placing images pixel for pixel."""
    fig = Figure(figsize=(width, height), layout="constrained" if constrained else None, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def margins(fig: Figure, left: float, right: float, top: float, bottom: float, wspace: float = 0.0,
            hspace: float = 0.0) -> None:
    """Fixed margins and gaps between panels, in inches."""
    w, h = fig.get_size_inches()
    ncols, nrows = fig.axes[0].get_gridspec().ncols, fig.axes[0].get_gridspec().nrows
    panel_w = (w - left - right - wspace * (ncols - 1)) / ncols
    panel_h = (h - top - bottom - hspace * (nrows - 1)) / nrows
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h,
                        wspace=wspace / panel_w, hspace=hspace / panel_h)


def save(fig: Figure, path: Path) -> Path:
    """PNG at :data:`DPI`, no software stamp (same data, same bytes), fast zlib level (a third of
    the encoding time for files ~8 % larger)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None}, pil_kwargs={"compress_level": 1})
    return path


def save_pixels(rgba: np.ndarray, path: Path) -> Path:
    """An RGBA ``uint8`` array as :func:`save` writes a figure (PNG, :data:`DPI`, fast zlib level)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgba).save(path, format="png", dpi=(DPI, DPI), compress_level=1)
    return path


def figure_title(fig: Figure, text: str, fontsize: float = 10) -> None:
    """The figure's title, its top 0.08 in under the top edge (no layout engine places it)."""
    fig.suptitle(text, fontsize=fontsize, y=1 - 0.08 / fig.get_size_inches()[1], va="top")


def panel_note(ax, text: str) -> None:
    """A small boxed note in a panel's upper left (e.g. each curve's area): one text artist where a
    legend per panel would cost a third of a grid figure's drawing."""
    ax.text(0.03, 0.97, text, transform=ax.transAxes, ha="left", va="top", fontsize=7, linespacing=1.3,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "#cccccc", "alpha": 0.85})


def top_legend(fig: Figure, handles: list, labels: list[str], below_top: float) -> None:
    """One legend for the whole figure, centred ``below_top`` inches under its top edge."""
    height = fig.get_size_inches()[1]
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - below_top / height), ncols=len(handles),
               fontsize=8, frameon=False, handlelength=2.2)


def outer_ticks(axes: np.ndarray, xlim: tuple[float, float], nx: int = 5, ny: int = 4, color: str = "#e5e5e5") -> None:
    """A grid of panels (``axes [rows, cols]``) read like shared axes, without a tick per panel: x
    from ``xlim``, y per row from 0 to above the row's highest data; tick marks and labels only
    on the bottom row (x) and the left column (y), and in every panel the same grid lines
    (:func:`grid_lines`; a panel's ticks cost more to make and draw than its curves)."""
    xt = MaxNLocator(nx).tick_values(*xlim)
    xt = xt[(xt >= xlim[0]) & (xt <= xlim[1])]
    for r, row in enumerate(axes):
        top = max((ax.dataLim.y1 for ax in row if ax.has_data()), default=1.0)
        ylim = (0.0, top * 1.05 if top > 0 else 1.0)
        yt = MaxNLocator(ny).tick_values(*ylim)
        yt = yt[(yt >= ylim[0]) & (yt <= ylim[1])]
        for c, ax in enumerate(row):
            ax.set_xlim(*xlim)
            ax.set_ylim(*ylim)
            grid_lines(ax, xt, yt, x_ticks=r == len(axes) - 1, y_ticks=c == 0, color=color)


def grid_lines(ax, xt, yt, x_ticks: bool, y_ticks: bool, color: str = "#e5e5e5") -> None:
    """Grid lines at ``xt`` and ``yt`` across the panel's current limits (one line, not a tick or a
    collection each); tick marks and labels there only where ``x_ticks`` / ``y_ticks``."""
    ax.xaxis.set_major_locator(FixedLocator(xt) if x_ticks else NullLocator())
    ax.yaxis.set_major_locator(FixedLocator(yt) if y_ticks else NullLocator())
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    xs = [v for x in xt for v in (x, x, np.nan)] + [v for _ in yt for v in (x0, x1, np.nan)]
    ys = [v for _ in xt for v in (y0, y1, np.nan)] + [v for y in yt for v in (y, y, np.nan)]
    ax.add_line(Line2D(xs, ys, color=color, lw=0.6, zorder=0))  # one artist: NaN breaks the segments


def split_style(split: str) -> tuple[str, str]:
    return SPLIT_STYLE.get(split, ("#7f7f7f", "^"))


def measure_colors(measures, spec: ReportSpec) -> dict[str, str]:
    """A stable colour per measure (the run's order)."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(spec.ordered("measure", measures))}


def measure_title(measure: str, utype: str, spec: ReportSpec) -> str:
    name = spec.label("measure", measure)
    return f"{name} ({utype})" if utype else name
