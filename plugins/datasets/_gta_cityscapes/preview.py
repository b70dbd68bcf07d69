"""``preview.png`` of a prepared folder: frames, training ids, a switched reference, the variance.

Composed with numpy and PIL (a grid of 256 x 478 tiles under one caption line each): fast enough
to write at the end of every preparation.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from values_seg.storage import atomic
from values_seg_plugins.datasets._gta_cityscapes import ambiguity
from values_seg_plugins.datasets._gta_cityscapes import manifest as mf

_CAPTION = 14  # pixels of caption above each tile
_GAP = 4


def _variance_tile(variance: np.ndarray) -> np.ndarray:
    """0 -> black, 2/9 -> orange."""
    scale = (variance / ambiguity.SWITCH_VARIANCE)[..., None]
    return np.rint(scale * np.array([255, 140, 0], dtype=np.float32)).astype(np.uint8)


def write_preview(root: str | Path, per_source: int = 2, seed: int = 0) -> Path:
    """Two i.i.d. (GTA5) and two OoD (Cityscapes) test frames: image, training ids, one reference
    with its switches, and the exact reference variance (appendix B.3)."""
    from values_seg_plugins.datasets._gta_cityscapes.prepared import PreparedFolder

    folder = PreparedFolder(root)
    cases = folder.parts["test_iid"][:per_source] + folder.parts["test_ood"][:per_source]
    colors = ambiguity.class_colors()
    rows = []
    for case_id in cases:
        frame = folder.read(case_id)
        reference = ambiguity.reference_samples(frame.train_ids, ambiguity.case_rng(seed, case_id), n=1)[0]
        switched = [n for n, t in zip(ambiguity.SWITCHABLE, ambiguity.TWIN_IDS) if (reference == t).any()]
        rows.append([
            (frame.image, case_id),
            (colors[frame.train_ids], "training ids (black: ignore)"),
            (colors[reference], "a reference, switched: " + (", ".join(switched) or "none")),
            (_variance_tile(ambiguity.reference_variance(frame.train_ids)), "reference variance (orange: 2/9)"),
        ])
    h, w = rows[0][0][0].shape[:2]
    cell_h, cell_w = h + _CAPTION + _GAP, w + _GAP
    canvas = Image.new("RGB", (cell_w * 4, cell_h * len(rows)), "white")
    draw = ImageDraw.Draw(canvas)
    for r, row in enumerate(rows):
        for c, (tile, caption) in enumerate(row):
            x, y = c * cell_w, r * cell_h
            draw.text((x + 2, y + 1), caption, fill="black")
            canvas.paste(Image.fromarray(tile, mode="RGB"), (x, y + _CAPTION))
    path = Path(root) / mf.PREVIEW
    buf = io.BytesIO()
    canvas.save(buf, format="PNG")
    atomic.write(path, buf.getvalue(), fsync=True)
    return path
