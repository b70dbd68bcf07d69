"""Small synthetic GTA5 and Cityscapes trees in the official layouts, and their preparation."""

from __future__ import annotations

import pytest

from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare
from values_seg_plugins.datasets._gta_cityscapes.synthetic import write_small_trees


@pytest.fixture(scope="session")
def trees(tmp_path_factory):
    """(gta5 root, cityscapes root): 7 GTA5 frames, 2 Cityscapes train and 1 val frame."""
    return write_small_trees(tmp_path_factory.mktemp("sources"), gta5_frames=7, cityscapes_val=1)


@pytest.fixture(scope="session")
def prepared(trees, tmp_path_factory):
    """(prepared folder, summary) of ``trees`` (read-only: tests that modify it copy it)."""
    out = tmp_path_factory.mktemp("prepared") / "data"
    return out, prepare(*trees, out, workers=1, progress=False)
