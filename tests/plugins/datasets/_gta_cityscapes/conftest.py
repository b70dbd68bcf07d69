"""Small synthetic GTA5 and Cityscapes trees in the official layouts, and their preparation."""

from __future__ import annotations

import pytest

from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare
from values_seg_plugins.datasets._gta_cityscapes.synthetic import write_small_trees


@pytest.fixture(scope="session")
def trees(built_once):
    """(gta5 root, cityscapes root): 7 GTA5 frames, 2 Cityscapes train and 1 val frame (read-only)."""
    return built_once("gta-cityscapes-sources", lambda folder: write_small_trees(folder, gta5_frames=7, cityscapes_val=1))


@pytest.fixture(scope="session")
def prepared(trees, built_once):
    """(prepared folder, summary) of ``trees`` (read-only: tests that modify it copy it)."""
    return built_once("gta-cityscapes-data",
                      lambda folder: (folder / "data", prepare(*trees, folder / "data", workers=1, progress=False)))
