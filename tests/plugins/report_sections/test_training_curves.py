"""The learning-curves section: which trainings it flags, and its figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pytest import approx

from values_seg_plugins.report_sections.training_curves import plateau, plot_training_curves, under_trained


def frame(model: str, member: int, key: str, losses, phase_until: int = 0, seed: int = 0) -> pd.DataFrame:
    n = len(losses)
    return pd.DataFrame({"dataset": "toy", "scenario": "toy_1", "seed": seed, "prediction_model": model,
                         "member": member, "spec_key": key, "epoch": np.arange(1, n + 1), "loss": losses,
                         "val_dice": [0.5 if e % 2 == 0 else np.nan for e in range(1, n + 1)],
                         "phase": ["pre-training (mean only)" if e <= phase_until else "" for e in range(1, n + 1)]})


def test_flags_only_a_loss_that_has_not_flattened():
    flat = [1.0, 0.7, 0.6, 0.52, 0.51, 0.5, 0.5, 0.5, 0.49]
    falling = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    curves = pd.concat([frame("deterministic", 0, "a", flat), frame("ensemble", 0, "a", flat),
                        frame("ensemble", 1, "b", falling), frame("ssn", 0, "c", [1.0, 0.5])])
    flagged = under_trained(curves)
    assert [f["key"] for f in flagged] == ["b"]  # "a" flattened; "c" too short to judge
    f = flagged[0]
    assert f["before"] == np.mean(falling[3:6]) and f["last"] == np.mean(falling[6:])
    assert f["drop"] == (np.mean(falling[3:6]) - np.mean(falling[6:])) / np.mean(falling[3:6])
    assert f["models"] == ["ensemble"]


def test_figure_of_an_ensemble_and_an_ssn(tmp_path):
    curves = pd.concat([frame("ensemble", m, f"e{m}", list(np.linspace(1, 0.5, 8) + 0.05 * m)) for m in range(3)]
                       + [frame("ssn", 0, "s", list(np.linspace(2, 1, 8)), phase_until=3)])
    out = plot_training_curves(curves, "toy_1", tmp_path / "curves.png")
    assert out is not None and out.stat().st_size > 0


def test_flag_names_the_last_two_validation_dice_points():
    falling = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    f = under_trained(frame("deterministic", 0, "k", falling))[0]
    assert f["dice"] == [(2, 0.5), (4, 0.5), (6, 0.5), (8, 0.5)]
    from values_seg_plugins.report_sections.training_curves import _dice_text

    assert _dice_text(f["dice"]) == "; validation Dice 0.500 at epoch 6, 0.500 at epoch 8"
    assert _dice_text([(5, 0.5)]) == ""


def test_plateau():
    assert plateau([1.0, 0.8, 0.6, 0.5, 0.4, 0.3]) == (False, approx((0.8 - 0.4) / 0.8))
    assert plateau([1.0, 0.6, 0.5, 0.5, 0.5, 0.5, 0.49, 0.5])[0]
    assert plateau([1.0, 0.5])[0]  # too short to say
