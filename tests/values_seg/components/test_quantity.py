"""Per-case quantities as plugins: declared inputs enforced, exactly the consumed ones computed, the
evaluation key follows the set computed, and an unknown name is one clear error."""

import types

import pytest
import torch

from values_seg import hookimpl, registry
from values_seg.evaluation.per_case import evaluate_case
from values_seg.components.quantity import NEEDS, Quantity, resolve
from values_seg.registry import RegistryError


def _case():
    g = torch.Generator().manual_seed(0)
    samples = torch.softmax(torch.randn(4, 2, 8, 8, generator=g), dim=1)
    raters = torch.zeros(2, 8, 8, dtype=torch.long)
    raters[:, 2:6, 2:6] = 1
    return samples, raters


class Sneaky(Quantity):
    """Reads the raters without declaring them."""

    name = "sneaky"
    needs = ("prediction",)

    def compute(self, case, fitted=None):
        return float(case.raters.sum())


def test_a_quantity_reads_only_what_it_declares():
    samples, raters = _case()
    with pytest.raises(AttributeError, match=r"quantity 'sneaky' reads 'raters' without declaring it: "
                                             r"add \['references'\] to its needs"):
        evaluate_case(samples, raters, {}, quantities={"sneaky": Sneaky()})


def test_exactly_the_given_quantities_are_computed():
    samples, raters = _case()
    measures = {"pe": registry.create("measure", "predictive_entropy")}
    ev = evaluate_case(samples, raters, measures, quantities=resolve(["dice", "ncc"]))
    assert set(ev.values) == {"dice", "ncc"} and set(ev.values["ncc"]) == {"pe"}
    assert set(evaluate_case(samples, raters, measures).values) == set()  # nothing asked, nothing computed


def test_every_builtin_quantity_is_a_plugin_with_a_valid_declaration():
    assert {"dice", "predicted_fraction", "ged", "ncc", "calibration_bins", "ndsc", "ndsc_rauc"} <= set(
        registry.names("quantity"))
    for component in registry.components("quantity"):
        if component.source.startswith("values_seg_plugins."):
            assert component.source.startswith("values_seg_plugins.quantities.")
            assert set(component.obj.needs) <= set(NEEDS) and component.description
    assert registry.create("quantity", "calibration_bins").fits()
    assert not registry.create("quantity", "dice").fits()


def test_an_undeclared_input_name_is_refused_at_registration():
    class Odd(Quantity):
        """Needs something the evaluation does not have."""

        name = "odd_needs"
        needs = ("samples", "weather")

    plugin = types.SimpleNamespace(values_seg_quantities=hookimpl(lambda: [Odd]), __name__="odd_plugin")
    with pytest.raises(RegistryError, match=r"quantity 'odd_needs' needs unknown input\(s\) \['weather'\]; known: "):
        registry.register(plugin, source="odd_plugin")


def test_an_unknown_quantity_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"task 'x' consumes unknown quantity 'dicee'; known quantities: calibration_bins, conformal_sets, dice"):
        resolve(["dicee"], "task 'x'")


def test_the_evaluation_key_follows_the_quantities_computed():
    from values_seg.config.loading import load_config
    from values_seg.evaluation.combination import evaluation_key
    from values_seg.config.sweep import expand

    cfg = load_config(base={"name": "k", "datasets": [{"name": "toy", "params": {"scenario": "1", "dims": 2, "size": 32,
                                                                                 "train_cases": 4, "val_cases": 2}}],
                            "backbones": [{"name": "unet", "params": {"base_width": 4}}],
                            "prediction_models": ["deterministic"], "measures": ["predictive_entropy"],
                            "aggregations": ["image"], "tasks": ["segmentation"]})
    combo = expand(cfg)[0]
    one = evaluation_key(combo, {}, ["dice"])
    assert one == evaluation_key(combo, {}, ["dice", "dice"])
    assert one != evaluation_key(combo, {}, ["dice", "ged"])  # a new quantity: computed, nothing stale
    assert one != evaluation_key(combo, {}, ["dice"], ["pool"])  # a stage's extra split too


@pytest.mark.parametrize("splits, problem", [(("val",), "splits must be"), (("test", "pool"), "splits must be")])
def test_a_quantity_declares_valid_splits(splits, problem):
    class OnSplits(Quantity):
        """Declares where it is computed."""

        name = "on_splits"
        needs = ("prediction",)

    OnSplits.splits = splits
    with pytest.raises(ValueError, match=problem):
        OnSplits.check("here")


def test_a_per_measure_column_is_not_kept_on_validation():
    class PerMeasureOnVal(Quantity):
        """A per-measure column on validation cases."""

        name = "per_measure_on_val"
        needs = ("maps",)
        per_measure = True
        splits = ("val", "test")

    with pytest.raises(ValueError, match="only a per-case value or a payload"):
        PerMeasureOnVal.check("here")
    assert registry.create("quantity", "conformal_sets").splits == ("val", "test")


def test_a_shared_derivation_runs_once_per_case_and_is_read_only():
    """Quantities that ask CaseInputs.shared for one key get the first one's result, derived once
    (e.g. the samples' volumes for volume_cv and volume_crps); an array comes back read-only."""
    import numpy as np

    from values_seg.components.case_context import CaseContext
    from values_seg.components.measure import SampleStatistics
    from values_seg.components.quantity import CaseInputs

    samples, raters = _case()
    inputs = CaseInputs(CaseContext(case_id="c", num_classes=2, background=0), raters,
                        SampleStatistics(samples), raters[0], None, [])
    calls = []
    derive = lambda: calls.append(1) or np.arange(3.0)
    first, second = inputs.shared("k", derive), inputs.shared("k", derive)
    assert len(calls) == 1 and first is second
    np.testing.assert_array_equal(first, [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 5.0
    volumes = [registry.create("quantity", n) for n in ("volume_cv", "volume_crps", "rater_volume")]
    out = evaluate_case(samples, raters, {}, quantities={q.name: q for q in volumes},
                        context=CaseContext(background=0)).values
    labels = samples.argmax(dim=1).numpy()
    sample_volumes = (labels == 1).reshape(4, -1).sum(axis=1).astype(float)
    assert out["volume_cv"] == pytest.approx(sample_volumes.std() / sample_volumes.mean())
    assert out["rater_volume"] == pytest.approx(16.0)
    crps = [np.mean(np.abs(sample_volumes - 16.0)) - np.abs(sample_volumes[:, None] - sample_volumes).mean() / 2] * 2
    assert out["volume_crps"] == pytest.approx(np.mean(crps))
