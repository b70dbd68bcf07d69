"""The reliability diagrams show the ACE's bins and how many pixel-rater pairs each holds (issue 31.8)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import StepPatch

from values_seg import metrics
from values_seg.report import load_run
from values_seg.report.common import scenarios
from values_seg_plugins.report_sections import _curves


def test_each_reliability_panel_has_a_strip_of_the_ace_bins_shares(synthetic_run, monkeypatch):
    run = load_run(synthetic_run)
    rows = run.curve("reliability")
    sc = next(s for s in scenarios(rows) if s.scenario == "toy_3b")
    drawn = {}
    monkeypatch.setattr(_curves, "save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    assert _curves.plot_reliability(rows, sc, synthetic_run / "r.png", run.spec) is not None
    panels = [ax for ax in drawn["fig"].axes if ax.get_ylim() == (0.0, 1.02)]
    assert panels
    for ax in panels:
        strips = [child for child in ax.child_axes if any(isinstance(p, StepPatch) for p in child.patches)]
        assert len(strips) == 1 and strips[0].get_yscale() == "log"
        steps = [p for p in strips[0].patches if isinstance(p, StepPatch)]
        # one step per subset (i.i.d., OoD): each ACE bin's share of the pairs, every non-empty one at least the minimum
        title = ax.get_title()
        assert len(steps) == 2, title
        for step in steps:
            shares, edges = step.get_data().values, step.get_data().edges
            assert np.isclose(np.sum(shares[shares > 1e-6]), 1.0)
            assert (shares[shares > 1e-6] >= metrics.MIN_BIN_MASS).all(), title
            assert edges[0] == 0.0 and edges[-1] == 1.0
