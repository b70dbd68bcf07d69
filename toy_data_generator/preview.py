"""A PNG montage of example cases with their rater contours, one row per split.

Each panel shows the image (grey, 0..1) with the contours of rater 1 (smallest, red), rater 2
(yellow) and rater 3 (largest, cyan); where the three coincide (sharp cases) one green contour. 3D cases show the slice
along the first axis where the largest rater's mask is widest. The examples of a split are chosen
to cover its kinds of case (i.i.d. sharp/blurred, each shift) before repeating one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from toy_data_generator import generator as gen
from toy_data_generator import scenarios as sc

RATER_COLORS = ("#ff3b30", "#ffd60a", "#32d2ff")  # rater 1 (smallest), 2, 3 (largest)
AGREE_COLOR = "#30d158"  # one contour when all raters agree (sharp cases)


def pick_examples(specs: Sequence[sc.CaseSpec], n: int) -> list[sc.CaseSpec]:
    """Up to ``n`` specs, round-robin over the distinct (shift, blurred) kinds, in plan order."""
    kinds: dict[tuple, list[sc.CaseSpec]] = {}
    for spec in specs:
        kinds.setdefault((spec.shift, spec.blurred), []).append(spec)
    picked: list[sc.CaseSpec] = []
    queues = list(kinds.values())
    depth = 0
    while len(picked) < n and any(depth < len(q) for q in queues):
        for q in queues:
            if depth < len(q) and len(picked) < n:
                picked.append(q[depth])
        depth += 1
    return sorted(picked, key=lambda s: s.index)


def display_slice(case: gen.ToyCase) -> tuple[np.ndarray, np.ndarray, str]:
    """The 2D image and rater masks to show, and a note on which slice it is."""
    image, raters = case.image[0], case.raters
    if image.ndim == 2:
        return image, raters, ""
    areas = raters[-1].reshape(raters.shape[1], -1).sum(axis=1)
    z = int(np.argmax(areas)) if areas.any() else image.shape[0] // 2
    return image[z], raters[:, z], f" z={z}"


def _label(case: gen.ToyCase) -> str:
    m = case.meta
    kind = f"OoD: {m['shift']}" if m["ood"] else "i.i.d."
    blur = "blurred" if m["blurred"] else "sharp"
    return f"{case.case_id.split('_', 1)[1]}\n{kind}, {blur}"


def render(cases_by_split: Mapping[str, Sequence[gen.ToyCase]], path: str | os.PathLike, title: str = "") -> Path:
    """Draw the montage of ``cases_by_split`` (rows) to ``path`` (PNG)."""
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone
    from matplotlib.lines import Line2D

    rows = [(split, list(cases)) for split, cases in cases_by_split.items() if cases]
    if not rows:
        raise ValueError("nothing to preview: no cases given")
    ncols = max(len(cases) for _, cases in rows)
    fig = Figure(figsize=(2.3 * ncols, 2.55 * len(rows) + 0.6))
    axes = fig.subplots(len(rows), ncols, squeeze=False)
    for r, (split, cases) in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c >= len(cases):
                ax.axis("off")
                continue
            case = cases[c]
            image, raters, note = display_slice(case)
            ax.imshow(image, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
            drawable = raters[0].any() and not raters[0].all()
            if drawable and all(np.array_equal(raters[0], r) for r in raters[1:]):
                ax.contour(raters[0], levels=[0.5], colors=[AGREE_COLOR], linewidths=1.2)
            else:
                for k in reversed(range(raters.shape[0])):
                    if raters[k].any() and not raters[k].all():
                        ax.contour(
                            raters[k], levels=[0.5], colors=[RATER_COLORS[k % len(RATER_COLORS)]], linewidths=1.0
                        )
            ax.set_title(_label(case) + note, fontsize=7.5)
            if c == 0:
                ax.set_ylabel(split, fontsize=11, fontweight="bold")
    handles = [
        Line2D([], [], color=col, lw=2, label=f"rater {k + 1} ({round(q * 100)} % size)")
        for k, (col, q) in enumerate(zip(RATER_COLORS, gen.RATER_FRACTIONS))
    ]
    handles.append(Line2D([], [], color=AGREE_COLOR, lw=2, label="all raters agree (sharp)"))
    fig.legend(handles=handles, loc="upper right", ncol=4, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    return path


def preview_scenario(
    path: str | os.PathLike,
    specs: Mapping[str, Sequence[sc.CaseSpec]],
    dims: int,
    size: int,
    seed: int,
    per_split: int = 6,
) -> Path:
    """Generate ``per_split`` example cases of every split (in memory) and render the montage."""
    cases = {
        split: [gen.generate_case(s, dims, size, seed) for s in pick_examples(split_specs, per_split)]
        for split, split_specs in specs.items()
    }
    any_spec = next(s for split_specs in specs.values() for s in split_specs)
    title = f"toy scenario {any_spec.scenario} - {dims}D, size {size}, seed {seed}"
    return render(cases, path, title)
