"""The task contract's declarations (:mod:`values_seg.components.task`)."""

from __future__ import annotations

import pytest

from values_seg.components.task import SEPARATION_ROLES, Metric


def test_a_metric_declares_its_separation_role():
    assert Metric("ncc", "higher").separation_role == ""
    assert Metric("ncc", "higher", separation_role="AU").to_dict()["separation_role"] == "AU"


def test_an_unknown_separation_role_lists_the_valid_ones():
    with pytest.raises(ValueError, match="separation_role must be one of") as err:
        Metric("ncc", "higher", separation_role="aleatoric")
    assert all(repr(role) in str(err.value) for role in SEPARATION_ROLES)


def test_a_baseline_names_another_metric():
    from values_seg.components.task import Metric

    assert Metric("rauc_random", "lower", baseline_of="rauc").to_dict()["baseline_of"] == "rauc"
    for bad in ("", "rauc_random"):
        with pytest.raises(ValueError, match="baseline_of must name another metric of the task"):
            Metric("rauc_random", "lower", baseline_of=bad)
