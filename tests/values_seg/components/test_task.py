"""The task contract's declarations (:mod:`values_seg.components.task`)."""

from __future__ import annotations

import pytest

from values_seg.components.task import SEPARATION_ROLES, Metric, Reading, Support


def test_a_metric_declares_its_separation_role():
    assert Metric("ncc", "higher").reading.separation_role == ""
    assert Metric("ncc", "higher", reading=Reading(separation_role="AU")).to_dict()["separation_role"] == "AU"


def test_an_unknown_separation_role_lists_the_valid_ones():
    with pytest.raises(ValueError, match="separation_role must be one of") as err:
        Reading(separation_role="aleatoric")
    assert all(repr(role) in str(err.value) for role in SEPARATION_ROLES)


def test_a_baseline_names_another_metric():
    assert Metric("rauc_random", "lower", reading=Reading(baseline_of="rauc")).to_dict()["baseline_of"] == "rauc"
    with pytest.raises(ValueError, match="baseline_of must name another metric of the task"):
        Reading(baseline_of="")
    with pytest.raises(ValueError, match="'rauc_random': baseline_of must name another metric of the task"):
        Metric("rauc_random", "lower", reading=Reading(baseline_of="rauc_random"))


def test_an_oracle_excess_belongs_to_an_evidence_group():
    assert Reading(evidence="risk", oracle_excess=True).oracle_excess
    with pytest.raises(ValueError, match="oracle_excess needs the evidence group"):
        Reading(oracle_excess=True)


def test_without_a_measure_a_metric_has_no_aggregation():
    assert not Metric("dice", "higher", per_measure=False).per_aggregation
    assert Metric("ncc", "higher", per_aggregation=False).per_measure
    assert Metric("aurc", "lower").per_aggregation


def test_support_and_reading_are_their_own_objects():
    with pytest.raises(ValueError, match="support must be a Support and reading a Reading"):
        Metric("m", "higher", support={"min_cases": 4})
    with pytest.raises(TypeError):
        Metric("m", "higher", evidence="risk")  # a report field is the reading's, not the metric's


def test_the_recorded_declaration_is_one_flat_mapping():
    """``components.json`` keeps one flat mapping per metric: the report and older run directories read it so."""
    metric = Metric("eaurc", "lower", "E-AURC", support=Support(min_cases=4, varies=("score", "dice")),
                    reading=Reading(table=False, evidence="risk", oracle_excess=True))
    assert metric.to_dict() == {
        "name": "eaurc", "direction": "lower", "label": "E-AURC", "splits": ["iid", "ood"], "per_measure": True,
        "per_aggregation": True, "primary": False, "note": "", "table": False, "evidence": "risk",
        "oracle_excess": True, "reference_of": None, "baseline_of": None, "variant_of": None, "separation_role": "",
        "min_cases": 4, "min_per_class": 0, "varies": ["score", "dice"], "exchangeable": False}
