from functools import partial

import numpy as np

from values_seg import hookimpl, Metric, CaseStatistic, CaseStatisticTask, Quantity
from values_seg.statistics import batched


class SampleDice(Quantity):
    """Mean pairwise Dice of the samples' foreground: how much the samples agree with each other."""

    name = "sample_dice"
    needs = ("samples",)

    def compute(self, case, fitted=None):
        masks = case.sample_labels.reshape(len(case.sample_labels), -1) > 0
        overlap, size = masks @ masks.T.astype(float), masks.sum(axis=1)
        pairs = 2 * overlap / np.maximum(size[:, None] + size[None, :], 1)
        pairs[(size[:, None] + size[None, :]) == 0] = 1.0  # two empty masks agree
        upper = np.triu_indices(len(masks), k=1)
        return float(pairs[upper].mean()) if upper[0].size else 1.0


class SampleAgreement(CaseStatisticTask):
    """Mean pairwise Dice between the samples of a case, i.i.d. and OoD."""

    name = "sample_agreement"
    label = "Sample agreement"
    metrics = (Metric("sample_dice", "higher", "Sample Dice", per_measure=False, per_aggregation=False),)
    consumes = ("sample_dice",)

    def statistics(self, result):  # the value and its bootstrap from one definition
        for subset in ("iid", "ood"):
            cases = result.test_cases(subset)
            if not cases.empty:
                values = cases["sample_dice"].to_numpy(float)
                yield CaseStatistic("sample_dice", subset, cases["case_id"].tolist(), partial(batched.mean, values=values))


@hookimpl
def values_seg_quantities():
    return [SampleDice]


@hookimpl
def values_seg_tasks():
    return [SampleAgreement]
