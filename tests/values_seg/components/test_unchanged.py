"""Issue 32 item 3: a component cannot corrupt what it does not own. A measure that overwrites the
shared samples or statistics, an aggregation that zeroes its map, a quantity that changes the
raters, a fit that changes the validation maps: each is named, and every other component's values
equal an evaluation without it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from values_seg import registry
from values_seg.components.aggregation import Aggregation
from values_seg.evaluation.per_case import ComponentError, aggregations_for, evaluate_case
from values_seg.components.quantity import Quantity, resolve
from values_seg.evaluation.combination import LiveComponents
from values_seg.components.unchanged import Unchanged, read_only

BUILTIN = ["predictive_entropy", "expected_entropy", "mutual_information"]


def _case(seed=0, S=5, C=3, shape=(12, 14)):
    g = torch.Generator().manual_seed(seed)
    samples = torch.softmax(torch.randn(S, C, *shape, generator=g) * 2, dim=1)
    raters = torch.randint(0, C, (2, *shape), generator=g)
    return samples, raters


def _measures(*extra):
    out = {name: registry.get("measure", name).obj for name in BUILTIN}
    out.update(extra)
    return out


def overwrites_samples(samples):
    samples.zero_()  # what the probe did: every built-in measure's rows changed
    return samples[0, 0]


def overwrites_a_statistic(samples):
    raise AssertionError("called through from_statistics")


def _zero_mean(stats):
    stats.mean.zero_()
    return stats.entropy_of_mean.clone()


overwrites_a_statistic.from_statistics = _zero_mean


class ZeroesItsMap(Aggregation):
    def __call__(self, umap, prediction=None):
        umap.zero_()
        return 0.0


def _image_aggregations(measures, extra=None):
    aggs = aggregations_for(list(measures), {"image": lambda: registry.create("aggregation", "image")})
    if extra:
        aggs.update(aggregations_for(list(measures), {"zeroes": extra}))
    return aggs


def _reference(samples, raters, quantities):
    clean = _measures()
    samples = samples.clone() if isinstance(samples, torch.Tensor) else samples  # (stored: read-only)
    return evaluate_case(samples, raters, clean, _image_aggregations(clean), quantities=quantities)


@pytest.mark.parametrize("bad", [overwrites_samples, overwrites_a_statistic], ids=["samples", "statistic"])
def test_a_measure_that_changes_its_input_is_named_and_the_others_are_unaffected(bad):
    samples, raters = _case()
    quantities = resolve(["dice", "ncc"])
    measures = _measures((bad.__name__, bad))
    with pytest.raises(ComponentError, match="modified its input") as caught:
        evaluate_case(samples, raters, measures, _image_aggregations(measures), quantities=quantities)
    assert caught.value.kind == "measure" and caught.value.measure == bad.__name__
    reference = _reference(samples, raters, quantities)
    live = LiveComponents(dict(measures), _image_aggregations(measures))  # the runner drops it and goes on
    ev = live.evaluate(samples, raters, quantities=quantities)
    assert list(live.failed) == [f"measure {bad.__name__}"]
    assert ev.scores == reference.scores and ev.values == reference.values
    assert ev.values["dice"] > 0.0


@pytest.mark.parametrize("dtype, C", [("float16", 2), ("float32", 3)])
def test_cached_samples_are_handed_over_as_stored_and_made_afresh_for_the_retry(tmp_path, dtype, C):
    """Issue 34: the evaluation stage hands each case to the fused pass as stored (float16 of two
    classes: the statistics computed from the stored values; the float32 samples made for the
    measure that asks); a measure that overwrites them is dropped and the retry opens the case
    again, so every other value equals an evaluation without it."""
    from values_seg.engine.predictions import PredictionCache

    samples, raters = _case(3, C=C)
    handle = PredictionCache(tmp_path, dtype=dtype).save("model", "data", "test", "c0", samples)
    quantities = resolve(["dice", "ncc"])
    measures = _measures(("overwrites_samples", overwrites_samples))
    live = LiveComponents(dict(measures), _image_aggregations(measures))
    ev = live.evaluate(handle, raters, quantities=quantities)
    with handle.opened() as stored:
        assert (stored.bits is not None) == (dtype == "float16")
        reference = _reference(stored, raters, quantities)
    assert list(live.failed) == ["measure overwrites_samples"]
    assert ev.scores == reference.scores and ev.values == reference.values
    assert ev.values["dice"] > 0.0


def test_the_callers_samples_are_never_handed_to_a_component():
    samples, raters = _case()
    before = samples.clone()
    measures = _measures(("overwrites_samples", overwrites_samples))
    with pytest.raises(ComponentError):
        evaluate_case(samples, raters, measures)
    assert torch.equal(samples, before)
    as_numpy = before.numpy().copy()
    with pytest.raises(ComponentError):
        evaluate_case(as_numpy, raters, measures)
    assert np.array_equal(as_numpy, before.numpy())


def test_an_aggregation_that_zeroes_its_map_is_named_and_the_image_scores_are_unaffected():
    samples, raters = _case(1)
    measures = _measures()
    live = LiveComponents(dict(measures), _image_aggregations(measures, ZeroesItsMap))
    ev = live.evaluate(samples, raters)
    reference = _reference(samples, raters, {})
    assert sorted(live.failed) == sorted(f"aggregation zeroes (measure {m})" for m in BUILTIN)
    assert all("modified its input" in error for error in live.failed.values())
    assert ev.scores == reference.scores
    assert min(s for (m, a), s in ev.scores.items() if a == "image") > 0.0


class ChangesTheRaters(Quantity):
    name = "changes_the_raters"
    needs = ("references",)

    def compute(self, case, state=None):
        case.raters.fill_(0)
        return 0.0


def test_a_quantity_that_changes_its_inputs_is_named():
    samples, raters = _case(2)
    with pytest.raises(RuntimeError, match="quantity 'changes_the_raters' modified its input"):
        evaluate_case(samples, raters, _measures(), quantities={"changes_the_raters": ChangesTheRaters()})


def test_unchanged_sees_in_place_torch_operations_and_numpy_arrays_are_read_only():
    t, kept = torch.ones(4), torch.ones(3)
    watch = Unchanged(t=t, kept=kept, listed=[torch.zeros(2)])
    assert watch.modified() == []
    t[1] = 5.0
    kept.add(1.0)  # not in place: a new tensor
    assert watch.modified() == ["t"]
    array = read_only(np.zeros(3))
    with pytest.raises(ValueError):
        array[0] = 1.0
