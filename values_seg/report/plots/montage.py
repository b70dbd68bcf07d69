"""Uncertainty-map montages (paper appendix G.3, Figures 9-14) from ``montages/*.npz``.

Its layout: docs/design-rationale.md, "Montages".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize, to_rgb
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from values_seg import metrics
from values_seg.report.spec import ReportSpec
from values_seg.report.plots._style import DPI, figure_title, measure_title, new_figure, save_pixels

TICK = 3  # colour-bar tick length, pixels
RATER_COLORS = ["#00e5ff", "#ffea00", "#ff3d00", "#76ff03", "#d500f9", "#ffffff"]


def read_montage(path: Path) -> dict:
    """Arrays and meta of one montage file (raises on a malformed file)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = {}
    if "meta" in arrays:
        try:
            meta = json.loads(str(arrays.pop("meta")))
        except (TypeError, ValueError):
            meta = {}
    for key in ("image", "raters", "prediction"):
        if key not in arrays:
            raise ValueError(f"{path.name}: no array {key!r}")
    if arrays["image"].ndim == 4:  # [N, D, H, W]: volumes not yet reduced -> their central slice
        depth = arrays["image"].shape[1]
        for key in list(arrays):
            a = arrays[key]
            if key == "raters" and a.ndim == 5:
                arrays[key] = a[:, :, depth // 2]
            elif key != "raters" and a.ndim == 4:
                arrays[key] = a[:, depth // 2]
    n = arrays["image"].shape[0]
    arrays.setdefault("case_ids", np.array([str(i) for i in range(n)]))
    arrays.setdefault("ood", np.zeros(n, dtype=bool))
    return {"meta": meta, **arrays}


def _pick(ood: np.ndarray, max_cases: int) -> list[int]:
    iid_idx = [i for i in range(len(ood)) if not ood[i]]
    ood_idx = [i for i in range(len(ood)) if ood[i]]
    k_ood = min(len(ood_idx), max_cases // 2) if iid_idx else min(len(ood_idx), max_cases)
    k_iid = min(len(iid_idx), max_cases - k_ood)
    k_ood = min(len(ood_idx), max_cases - k_iid)
    return iid_idx[:k_iid] + ood_idx[:k_ood]


def _variance(raters: np.ndarray) -> np.ndarray:
    try:
        return metrics.rater_variance(raters)
    except ValueError:  # e.g. an ignore label outside the class range
        return (raters > 0).astype(np.float64).var(axis=0)


def _edges(labels: np.ndarray) -> np.ndarray:
    """Pixels whose right or lower neighbour has another label."""
    e = np.zeros(labels.shape, dtype=bool)
    e[:, :-1] |= labels[:, 1:] != labels[:, :-1]
    e[:-1, :] |= labels[1:, :] != labels[:-1, :]
    return e


def _normalise(image: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(image, [1, 99]) if image.size else (0.0, 1.0)
    return float(lo), float(hi if hi > lo else lo + 1e-6)


def _rgb(values: np.ndarray, cmap: str, vmin: float, vmax: float) -> np.ndarray:
    return colormaps[cmap](Normalize(vmin, vmax, clip=True)(values))[..., :3]


def _image_with_contours(image: np.ndarray, raters: np.ndarray, H: int, W: int) -> np.ndarray:
    """The grey image with each rater's outline (one pixel of the ``H`` x ``W`` cell): the
    mask's boundary for binary raters, the class boundaries for label maps; later raters on top."""
    lo, hi = _normalise(image)
    cell = _rgb(_resize(image, H, W), "gray", lo, hi)
    for j, rater in enumerate(raters):
        if rater.min() == rater.max():
            continue
        labels = _resize(rater, H, W)
        if rater.max() <= 1:
            mask = labels > 0
            inner = np.zeros_like(mask)  # mask pixels with a 4-neighbour outside it
            inner[1:-1, 1:-1] = mask[1:-1, 1:-1] & ~(mask[:-2, 1:-1] & mask[2:, 1:-1] & mask[1:-1, :-2] & mask[1:-1, 2:])
            inner[[0, -1], :] |= mask[[0, -1], :]
            inner[:, [0, -1]] |= mask[:, [0, -1]]
            edge = inner
        else:
            edge = _edges(labels)
        cell[edge] = to_rgb(RATER_COLORS[j % len(RATER_COLORS)])
    return cell


def _scale(stack: np.ndarray, column: str) -> tuple[float, float]:
    """One colour scale per map column: [min(0, smallest), largest] of its finite values."""
    finite = stack[np.isfinite(stack)]
    vmin = float(min(0.0, finite.min())) if finite.size else 0.0
    vmax = float(finite.max()) if finite.size else 1.0
    if column == "variance":  # a fixed scale: p(1 - p) of binary raters is at most 0.25
        vmin, vmax = 0.0, max(0.25, vmax)
    return vmin, (vmax if vmax > vmin else vmin + 1e-6)


def _resize(a: np.ndarray, H: int, W: int) -> np.ndarray:
    """Nearest-neighbour resize of a 2D array to ``H`` x ``W`` (an integer upsampling repeats pixels)."""
    h, w = a.shape
    return a[(np.arange(H) * h // H)[:, None], (np.arange(W) * w // W)[None, :]]


def plot_montage(path: Path, out: Path, spec: ReportSpec, types: dict[tuple[str, str], str] | None = None,
                 max_cases: int = 8, label: str | None = None) -> Path:
    """Render one montage file; ``types`` maps (prediction_model, measure) to PU/AU/EU for titles.

    The panels and the colour bars under the map columns are composed into one RGB image (colour-
    mapped with numpy) and pasted into the rendered figure's pixels (no axes, no image resampling),
    with the titles, row labels and colour-bar ticks as text around it: a grid of axes would cost a
    second per montage in layout and tick drawing alone."""
    data = read_montage(path)
    meta, types = data["meta"], types or {}
    model = str(meta.get("prediction_model", ""))
    idx = _pick(np.asarray(data["ood"]).astype(bool), max_cases)
    measures = [k[len("map__"):] for k in data if k.startswith("map__")]
    mtype = {m: types.get((model, m), "") for m in measures}
    measures.sort(key=lambda m: (spec.order_key("uncertainty_type", mtype[m] or "~"), spec.order_key("measure", m)))
    raters = np.asarray(data["raters"])
    columns = ["image", "variance", "prediction"] + [f"map__{m}" for m in measures]
    titles = ["image + raters", "raters' variance", "prediction"] + [measure_title(m, mtype[m], spec) for m in measures]
    n_rows, n_cols = len(idx), len(columns)
    h, w = data["image"].shape[-2:]
    # panel size in pixels of the figure: small cases upsampled (outlines thinner than a pixel of the
    # case), panels beyond 2.4 in scaled down to 1.9 in
    k = min(4, max(1, round(200 / max(h, w))))
    scale = k if max(h, w) * k <= 2.4 * DPI else 1.9 * DPI / max(h, w)
    H, W = max(1, round(h * scale)), max(1, round(w * scale))
    gap = max(2, round(0.06 * max(H, W)))  # white space between panels
    n_labels = int(max(1, np.max(data["prediction"][idx]) if len(idx) else 1))
    scales = {}
    cells = np.ones((n_rows, n_cols, H, W, 3))
    for j, col in enumerate(columns):
        if col == "variance":
            stack = np.stack([_variance(raters[i]) for i in idx])
        elif col.startswith("map__"):
            stack = np.asarray(data[col][idx], dtype=np.float64)
        else:
            stack = None
        if stack is not None:
            scales[j] = _scale(stack, col)
        for r, i in enumerate(idx):
            if col == "image":
                cells[r, j] = _image_with_contours(np.asarray(data["image"][i], dtype=np.float64), raters[i], H, W)
            elif col == "prediction":
                cells[r, j] = _rgb(_resize(data["prediction"][i], H, W), "gray" if n_labels <= 1 else "tab20", 0,
                                   n_labels)
            else:
                cells[r, j] = _rgb(_resize(stack[r], H, W), "inferno", *scales[j])
    bar_gap, bar_h = round(0.1 * DPI), round(0.09 * DPI) if scales else 0  # colour bars under the map columns
    mosaic = np.ones((n_rows * H + (n_rows - 1) * gap + (bar_gap + bar_h + TICK if scales else 0),
                      n_cols * W + (n_cols - 1) * gap, 3))
    for r in range(n_rows):
        for j in range(n_cols):
            mosaic[r * (H + gap):r * (H + gap) + H, j * (W + gap):j * (W + gap) + W] = cells[r, j]
    bar_top = n_rows * H + (n_rows - 1) * gap + bar_gap
    bars = {}
    for j, (vmin, vmax) in scales.items():
        x0, x1 = j * (W + gap) + round(0.075 * W), j * (W + gap) + round(0.925 * W)
        ramp = np.linspace(vmin, vmax, x1 - x0)
        mosaic[bar_top:bar_top + bar_h, x0:x1] = _rgb(ramp, "gray" if columns[j] == "prediction" else "inferno",
                                                      vmin, vmax)[None]
        mosaic[[bar_top, bar_top + bar_h - 1], x0:x1] = 0.0  # frame
        mosaic[bar_top:bar_top + bar_h, [x0, x1 - 1]] = 0.0
        ticks = [t for t in MaxNLocator(3).tick_values(vmin, vmax) if vmin - 1e-9 <= t <= vmax + 1e-9]
        bars[j] = [(x0 + (t - vmin) / (vmax - vmin) * (x1 - 1 - x0), t) for t in ticks]
        for x, _ in bars[j]:
            mosaic[bar_top + bar_h:bar_top + bar_h + TICK, round(x)] = 0.0

    left, right, top, bottom = round(0.45 * DPI), round(0.1 * DPI), round(0.75 * DPI), round(0.3 * DPI)
    fig_w, fig_h = left + right + mosaic.shape[1], top + bottom + mosaic.shape[0]
    fig = new_figure(fig_w / DPI, fig_h / DPI, constrained=False, dpi=DPI)

    def text(x: float, y: float, s: str, **kwargs) -> None:  # (x, y): pixels from the mosaic's top left
        fig.text((left + x) / fig_w, 1 - (top + y) / fig_h, s, **kwargs)

    for j, title in enumerate(titles):
        text(j * (W + gap) + W / 2, -gap, title, ha="center", va="bottom", fontsize=9)
    for r, i in enumerate(idx):
        subset = "OoD" if bool(data["ood"][i]) else "i.i.d."
        text(-gap, r * (H + gap) + H / 2, f"{data['case_ids'][i]}\n{subset}", ha="right", va="center", rotation=90,
             fontsize=8)
    for j, ticks in bars.items():
        for x, t in ticks:
            text(x, bar_top + bar_h + TICK + 1, f"{t:.3g}", ha="center", va="top", fontsize=7)
    if raters.shape[1] > 0:
        handles = [Line2D([], [], color=RATER_COLORS[j % len(RATER_COLORS)], lw=1.5) for j in range(raters.shape[1])]
        fig.legend(handles, [f"rater {j + 1}" for j in range(raters.shape[1])], loc="upper left",
                   bbox_to_anchor=(0.0, 1.0), ncols=raters.shape[1], fontsize=7, frameon=False)
    title = label or " · ".join(spec.label(key, str(meta[key])) for key in ("scenario", "backbone", "prediction_model")
                                if meta.get(key))
    if "seed" in meta:
        title += f" · seed {meta['seed']}"
    figure_title(fig, title or path.stem)
    fig.canvas.draw()  # the text; then the mosaic pasted into the pixels (no image artist, no resampling)
    pixels = np.asarray(fig.canvas.buffer_rgba()).copy()
    pixels[top:top + mosaic.shape[0], left:left + mosaic.shape[1], :3] = np.round(mosaic * 255).astype(np.uint8)
    return save_pixels(pixels, out)
