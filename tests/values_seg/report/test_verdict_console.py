"""The verdict's console text prints each mean rank's interval with the point's precision (``1.29
[1.3, 1.3]`` read as a point outside its interval)."""

import re

from values_seg.report.verdict import describe, verdict

from .test_verdict import _run


def test_intervals_have_the_mean_rank_s_decimals(tmp_path):
    run = _run(tmp_path, noise=0.3)
    text = describe(verdict(run), run)
    ranked = re.findall(r"^\s+(\d+\.\d+) \[(\d+\.\d+), (\d+\.\d+)\]", text, re.M)
    assert ranked, text
    for point, low, high in ranked:
        decimals = {len(x.split(".")[1]) for x in (point, low, high)}
        assert len(decimals) == 1, (point, low, high)
