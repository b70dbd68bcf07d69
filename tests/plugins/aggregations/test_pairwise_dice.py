"""Pairwise Dice of the samples against hand computations and a float64 brute force; the
sample-based contract in the fused evaluation and in the sweep."""

import itertools

import numpy as np
import pytest
import torch

from values_seg import registry
from values_seg.components.aggregation import SAMPLES
from values_seg.config.loading import load_config
from values_seg.evaluation.per_case import evaluate_case
from values_seg.config.sweep import expand


def samples_of(labels, C):
    """Probability samples whose argmax is ``labels [S, *spatial]`` (0.8 on the label)."""
    labels = torch.as_tensor(labels)
    onehot = torch.nn.functional.one_hot(labels.long(), C).movedim(-1, 1).double()
    return onehot * (0.8 - 0.2 / (C - 1)) + 0.2 / (C - 1)


def score(labels, C=2, **params):
    return registry.create("aggregation", "pairwise_dice", **params)(samples_of(labels, C))


def test_binary_by_hand():
    # foreground: s1 {a, b}, s2 {b, c}, s3 {} -> Dice 2*1/4 = 0.5, 0, 0 -> mean 1/6
    labels = [[[1, 1, 0], [0, 0, 0]], [[0, 1, 1], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]]
    assert score(labels) == pytest.approx(1 - 1 / 6)
    assert score([[[0, 0]], [[0, 0]]]) == 0.0  # two empty masks: Dice 1
    assert score([[[1, 0]], [[1, 0]], [[1, 0]]]) == 0.0


def test_several_classes_by_hand():
    # class 1: {a, b} vs {a} -> 2/3; class 2: {c} vs {b, c} -> 2/3; mean 2/3
    labels = [[[1, 1, 2], [0, 0, 0]], [[1, 2, 2], [0, 0, 0]]]
    assert score(labels, C=3) == pytest.approx(1 - 2 / 3)
    assert score(labels, C=4) == pytest.approx(1 - 7 / 9)  # class 3 absent in both: Dice 1
    # background None: class 0 counts too: {d, e, f} in both -> 1; mean (2/3, 2/3, 1)
    assert score(labels, C=3, background=None) == pytest.approx(1 - 7 / 9)


def test_3d_against_brute_force():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, (4, 3, 4, 5))
    expected = []
    for i, j in itertools.combinations(range(4), 2):
        dice = []
        for c in (1, 2):
            a, b = labels[i] == c, labels[j] == c
            dice.append(1.0 if a.sum() + b.sum() == 0 else 2 * (a & b).sum() / (a.sum() + b.sum()))
        expected.append(np.mean(dice))
    assert score(labels, C=3) == pytest.approx(1 - np.mean(expected), abs=1e-12)


def test_fewer_than_two_samples_is_a_clear_error():
    with pytest.raises(ValueError, match="needs at least two samples, got 1"):
        score([[[1, 0]]])
    with pytest.raises(ValueError, match=r"expects samples \[S, C, \*spatial\]"):
        registry.create("aggregation", "pairwise_dice")(torch.rand(2, 3))


def test_fused_evaluation_scores_the_samples_once():
    labels = [[[1, 1, 0], [0, 0, 0]], [[0, 1, 1], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]]
    samples = samples_of(labels, 2).float()
    measures = {"predictive_entropy": registry.create("measure", "predictive_entropy")}
    aggs = {("predictive_entropy", "image"): registry.create("aggregation", "image"),
            (SAMPLES, "pairwise_dice"): registry.create("aggregation", "pairwise_dice")}
    ev = evaluate_case(samples, torch.zeros(1, 2, 3, dtype=torch.uint8), measures, aggs)
    assert ev.scores[(SAMPLES, "pairwise_dice")] == pytest.approx(1 - 1 / 6)
    assert set(ev.scores) == {("predictive_entropy", "image"), (SAMPLES, "pairwise_dice")}
    # one sample: the component fails by name (the runner drops it, the others go on)
    with pytest.raises(ValueError, match="aggregation 'pairwise_dice'.*at least two samples"):
        evaluate_case(samples[:1], torch.zeros(1, 2, 3, dtype=torch.uint8), measures, aggs)


def test_sweep_crosses_it_with_sampling_models_only():
    cfg = load_config(base={
        "datasets": [{"name": "toy", "params": {"scenario": "1", "size": 32}}], "backbones": ["unet"],
        "prediction_models": ["deterministic", "test_time_dropout", "ssn"], "measures": ["predictive_entropy"],
        "aggregations": ["image", "pairwise_dice"], "tasks": ["ood_detection"]})
    aggs = {c.model.label: [a.label for a in c.aggregations] for c in expand(cfg)}
    assert aggs == {"deterministic": ["image"], "test_time_dropout": ["image", "pairwise_dice"],
                    "ssn": ["image", "pairwise_dice"]}
