"""Uncertainty-map montages (paper appendix G.3, Figures 9-14) from ``montages/*.npz``.

Layout: one row per case (i.i.d. cases first, then OoD; at most ``max_cases``, split evenly),
columns: the image with each rater's contour (one colour per rater; class boundaries for label
maps), the raters' per-pixel
variance (the AU reference of the NCC, :func:`values_seg.metrics.rater_variance`), the
prediction, then one column per uncertainty measure (PU, AU, EU order) titled "measure (type)".
Every map column shares one colour scale over its rows, shown by a colour bar under the column.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.ticker import MaxNLocator

from values_seg import metrics
from values_seg.report.spec import ReportSpec
from values_seg.report.plots._style import measure_title, new_figure, save

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


def _plain(ax) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    for s in ax.spines.values():
        s.set_visible(False)


def plot_montage(path: Path, out: Path, spec: ReportSpec, types: dict[tuple[str, str], str] | None = None,
                 max_cases: int = 8, label: str | None = None) -> Path:
    """Render one montage file; ``types`` maps (prediction_model, measure) to PU/AU/EU for titles."""
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
    cell = 1.9
    fig = new_figure(0.6 + cell * n_cols * max(0.6, min(1.6, w / h)), 1.2 + cell * n_rows)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)

    variance = {i: _variance(raters[i]) for i in idx}
    n_labels = int(max(1, np.max(data["prediction"][idx]) if len(idx) else 1))
    for j, col in enumerate(columns):
        if col == "variance":
            stack = np.stack([variance[i] for i in idx])
        elif col.startswith("map__"):
            stack = np.asarray(data[col][idx], dtype=np.float64)
        else:
            stack = None
        vmin = vmax = None
        if stack is not None:
            finite = stack[np.isfinite(stack)]
            vmin = float(min(0.0, finite.min())) if finite.size else 0.0
            vmax = float(finite.max()) if finite.size else 1.0
            if col == "variance":  # a fixed scale: p(1 - p) of binary raters is at most 0.25
                vmin, vmax = 0.0, max(0.25, vmax)
            vmax = vmax if vmax > vmin else vmin + 1e-6
        im = None
        for r, i in enumerate(idx):
            ax = axes[r, j]
            _plain(ax)
            if col == "image":
                img = np.asarray(data["image"][i], dtype=np.float64)
                lo, hi = _normalise(img)
                ax.imshow(img, cmap="gray", vmin=lo, vmax=hi, interpolation="nearest")
                for k in range(raters.shape[1]):
                    mask = raters[i, k].astype(np.float64)
                    if mask.min() == mask.max():
                        continue
                    color = RATER_COLORS[k % len(RATER_COLORS)]
                    if mask.max() <= 1:
                        ax.contour(mask, levels=[0.5], colors=[color], linewidths=1.0)
                    else:  # label map: one-pixel class boundaries
                        ax.imshow(np.ma.masked_where(~_edges(raters[i, k]), np.ones(mask.shape)),
                                  cmap=ListedColormap([color]), vmin=0, vmax=1, interpolation="nearest")
            elif col == "prediction":
                cmap = "gray" if n_labels <= 1 else "tab20"
                ax.imshow(data["prediction"][i], cmap=cmap, vmin=0, vmax=n_labels, interpolation="nearest")
            else:
                im = ax.imshow(stack[r], cmap="inferno", vmin=vmin, vmax=vmax, interpolation="nearest")
            if r == 0:
                ax.set_title(titles[j], fontsize=9)
            if j == 0:
                subset = "OoD" if bool(data["ood"][i]) else "i.i.d."
                ax.set_ylabel(f"{data['case_ids'][i]}\n{subset}", fontsize=8)
        if im is not None:
            cb = fig.colorbar(im, ax=list(axes[:, j]), location="bottom", shrink=0.85, aspect=14, pad=0.01)
            cb.ax.tick_params(labelsize=7)
            cb.locator = MaxNLocator(3)
            cb.update_ticks()
    if raters.shape[1] > 0:
        handles = [axes[0, 0].plot([], [], color=RATER_COLORS[k % len(RATER_COLORS)], lw=1.5)[0]
                   for k in range(raters.shape[1])]
        fig.legend(handles, [f"rater {k + 1}" for k in range(raters.shape[1])], loc="outside upper left",
                   ncols=raters.shape[1], fontsize=7, frameon=False)
    title = label or " · ".join(spec.label(k, str(meta[k])) for k in ("scenario", "backbone", "prediction_model")
                                if meta.get(k))
    if "seed" in meta:
        title += f" · seed {meta['seed']}"
    fig.suptitle(title or path.stem, fontsize=10)
    return save(fig, out)
