"""The runner's bootstrap stage: intervals on the task rows, shared resamples, the stored distributions."""

import math

import numpy as np
import pandas as pd
import pytest

from values_seg.runner.statistics import Bootstrap, write
from values_seg.components.task import EvaluationResult, Metric, Task, row, samples_row


def result(ids, ood) -> EvaluationResult:
    cases = pd.DataFrame({"case_id": ids, "split": "test", "ood": ood, "dice": np.linspace(0.5, 0.9, len(ids))})
    return EvaluationResult(context={}, cases=cases, scores=pd.DataFrame())


class Plain(Task):
    """A third party's task without a bootstrap: one value, and one row with an interval of its own."""

    name = "plain"
    metrics = (Metric("m", "higher"), Metric("own", "higher"))

    def score(self, result):
        return [row(self.name, "m", "iid", 0.5), row(self.name, "own", "iid", 0.5, ci_low=0.4, ci_high=0.6)]


class MeanDice(Plain):
    """Resampled by hand: the mean Dice of the i.i.d. cases on each resample."""

    def bootstrap(self, result, resamples):
        cases = result.test_cases("iid")
        idx = resamples.of(list(cases["case_id"]))
        return [samples_row(self.name, "m", "iid", cases["dice"].to_numpy()[idx].mean(axis=1))]


class WrongLength(Plain):
    def bootstrap(self, result, resamples):
        return [samples_row(self.name, "m", "iid", np.zeros(3))]


def test_rows_without_a_bootstrap_keep_their_own_interval_or_none():
    rows = Bootstrap(200).attach(Plain(), result(["a", "b"], [False, False]), Plain().score(None))
    assert rows[0]["ci_low"] is None and "samples" not in rows[0]
    assert (rows[1]["ci_low"], rows[1]["ci_high"]) == (0.4, 0.6)


def test_interval_is_the_percentile_interval_of_the_samples():
    res = result([f"c{i}" for i in range(12)], [False] * 8 + [True] * 4)
    boot = Bootstrap(500, level=0.9, seed=3)
    rows = boot.attach(MeanDice(), res, MeanDice().score(res))
    samples = rows[0]["samples"]
    assert samples.shape == (500,)
    assert (rows[0]["ci_low"], rows[0]["ci_high"]) == pytest.approx(tuple(np.percentile(samples, [5, 95])))
    # the resamples are drawn once for the same cases, in any order
    again = result([f"c{i}" for i in reversed(range(12))], [True] * 4 + [False] * 8)
    assert boot.resamples(again) is boot.resamples(res)
    assert boot.resamples(result(["x", "y"], [False, True])) is not boot.resamples(res)


def test_wrong_number_of_samples_is_an_error_naming_the_task():
    with pytest.raises(ValueError, match="task 'plain'.*3 values, expected one per resample \\(50\\)"):
        Bootstrap(50).attach(WrongLength(), result(["a", "b"], [False, False]), WrongLength().score(None))


def test_disabled_bootstrap_and_stale_distributions(tmp_path):
    res = result(["a", "b", "c"], [False] * 3)
    rows = Bootstrap(0).attach(MeanDice(), res, MeanDice().score(res))
    assert rows[0]["ci_low"] is None and "samples" not in rows[0]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "bootstrap.parquet").write_bytes(b"not ours")
    write(foreign, [{"value": 1.0}])
    assert (foreign / "bootstrap.parquet").read_bytes() == b"not ours"  # never delete what we did not write
    from values_seg.storage import run_directory

    ours = run_directory.claim(tmp_path / "ours", "toy_quick")
    write(ours, [{"value": 1.0, "samples": np.zeros(3)}])
    assert (ours / "bootstrap.parquet").exists()
    write(ours, [{"value": 1.0}])
    assert not (ours / "bootstrap.parquet").exists()  # no stale distributions of our own left behind


def test_written_distributions_round_trip(tmp_path):
    res = result([f"c{i}" for i in range(6)], [False] * 6)
    rows = Bootstrap(100).attach(MeanDice(), res, MeanDice().score(res))
    rows = [{**r, "dataset": "d", "scenario": "s", "seed": 0, "prediction_model": "p"} for r in rows]
    write(tmp_path, rows)
    stored = pd.read_parquet(tmp_path / "bootstrap.parquet")
    assert len(stored) == 1 and stored["metric"].item() == "m" and math.isclose(stored["value"].item(), 0.5)
    np.testing.assert_allclose(stored["samples"].iloc[0], rows[0]["samples"], rtol=1e-6)  # float32
