"""Intervals in the report: one seed's own interval, the two-level bootstrap over seeds, cells and LaTeX."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from values_seg.report import latex, load_run
from values_seg.report.intervals import interval
from values_seg.report.tables import downstream_tables
from values_seg.statistics import seed_indices

from .conftest import write_stats_run

B = 300


def rows(values, metric="aurc", task="failure_detection", measure="predictive_entropy", aggregation="patch",
         model="ensemble", split="iid", ci=None):
    out = []
    for seed, v in enumerate(values):
        low, high = ci[seed] if ci else (np.nan, np.nan)
        out.append(dict(dataset="toy", scenario="toy_1", seed=seed, backbone="unet", prediction_model=model,
                        family="bayesian", measure=measure, versus="", uncertainty_type="PU",
                        aggregation=aggregation, task=task, metric=metric, split=split, value=v, ci_low=low,
                        ci_high=high))
    return out


def test_one_seed_keeps_the_row_interval(tmp_path):
    res = pd.DataFrame(rows([0.2], ci=[(0.15, 0.3)]))
    run = load_run(write_stats_run(tmp_path / "run", res, np.full((1, B), 0.5)))
    assert interval(run.results, run.distributions) == pytest.approx((0.15, 0.3))


def test_several_seeds_two_level_bootstrap_by_loop(tmp_path):
    rng = np.random.default_rng(0)
    values = [0.20, 0.26, 0.23]
    samples = np.stack([v + rng.normal(0, 0.02, B) for v in values])
    run = load_run(write_stats_run(tmp_path / "run", pd.DataFrame(rows(values)), samples))
    low, high = interval(run.results, run.distributions)
    # by loop: resample b draws seeds s_b1..s_b3 with replacement and averages their case resample b
    draws = seed_indices(3, B, seed=7)
    stored = samples.astype(np.float32).astype(np.float64)
    pooled = [np.mean([stored[s, b] for s in draws[b]]) for b in range(B)]
    assert (low, high) == pytest.approx(tuple(np.percentile(pooled, [2.5, 97.5])))
    # wider than the cases alone: the seeds' spread (0.03) is part of it
    cases_only = np.percentile(stored.mean(axis=0), [2.5, 97.5])
    assert high - low > cases_only[1] - cases_only[0]


def test_a_seed_without_a_distribution_gives_no_interval(tmp_path):
    samples = np.stack([np.full(B, 0.2), np.full(B, np.nan)])
    run = load_run(write_stats_run(tmp_path / "run", pd.DataFrame(rows([0.2, 0.3])), samples))
    assert np.isnan(interval(run.results, run.distributions)).all()


def test_cells_show_value_and_interval_and_mark_compatible_aces(tmp_path):
    res = pd.DataFrame(
        rows([0.1], metric="ace", task="calibration", aggregation="", ci=[(0.08, 0.13)])
        + rows([0.09], metric="ace_reference", task="calibration", aggregation="", ci=[(0.05, 0.12)])
        + rows([0.2], metric="ace", task="calibration", aggregation="", measure="mutual_information",
               ci=[(0.18, 0.22)])
        + rows([0.01], metric="ace_reference", task="calibration", aggregation="", measure="mutual_information",
               ci=[(0.005, 0.02)]))
    run = load_run(write_stats_run(tmp_path / "run", res, np.full((4, B), np.nan), tasks=("calibration",)))
    t = downstream_tables(run.results, run.spec, run.distributions)[0]
    assert t.value("ensemble", "ace", "iid", "predictive_entropy") == "10.00 [8.00, 13.00] ✓"  # 0.10 in [0.05, 0.12]
    assert t.value("ensemble", "ace", "iid", "mutual_information") == "20.00 [18.00, 22.00]"  # outside [0.005, 0.02]
    assert t.value("ensemble", "ace_reference", "iid", "predictive_entropy") == "9.00 [5.00, 12.00]"
    assert latex.escape("10.00 [8.00, 13.00] ✓") == r"$10.00\,[8.00, 13.00]$\checkmark{}"
    assert latex.escape("-1.50 [-2.00, 0.25]") == r"$-1.50\,[-2.00, 0.25]$"


def test_group_rows_matches_pandas_groupby_in_order_of_appearance():
    from values_seg.report.intervals import group_rows

    df = pd.DataFrame({"a": ["x", "y", "x", "z", "y", "x"], "b": [1, 2, 1, 1, 2, 2], "v": range(6)})
    keys, groups = group_rows(df, ["a", "b"])
    expected = df.groupby(["a", "b"], sort=False).indices  # in order of first appearance
    assert list(keys.itertuples(index=False, name=None)) == list(expected)
    for key, members in zip(expected, groups):
        np.testing.assert_array_equal(members, expected[key])
    empty_keys, empty_groups = group_rows(df.iloc[:0], ["a", "b"])
    assert empty_keys.empty and list(empty_keys.columns) == ["a", "b"] and empty_groups == []
