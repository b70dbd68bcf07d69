"""Montage rendering of inputs beyond the main fixture: 3D volumes, multi-class labels, no meta."""

from __future__ import annotations

import numpy as np

from values_seg.report.plots import plot_montage
from values_seg.report.spec import ReportSpec


def test_volume_multiclass_without_meta(tmp_path):
    rng = np.random.default_rng(0)
    n, d, h, w = 2, 5, 16, 24
    labels = rng.integers(0, 4, size=(n, 2, d, h, w)).astype(np.uint8)
    path = tmp_path / "m.npz"
    np.savez(path, image=rng.normal(size=(n, d, h, w)).astype(np.float32), raters=labels,
             prediction=labels[:, 0], map__mutual_information=rng.uniform(size=(n, d, h, w)).astype(np.float32))
    out = plot_montage(path, tmp_path / "m.png", ReportSpec(), {("", "mutual_information"): "EU"})
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 3000
