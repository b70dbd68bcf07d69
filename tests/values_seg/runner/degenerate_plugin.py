"""A third party's plugin that makes degenerate data on purpose (issue 31, items 11 and 12): a
measure with a constant map, a model that misses every object alike, a task that returns NaN,
and the toy data with a chosen number of i.i.d. and OoD test cases. The tests copy this module
next to their run and name it in the config's ``plugins``."""

import torch

from values_seg import hookimpl
from values_seg.components.measure import measure
from values_seg.components.prediction_model import PredictionModel
from values_seg.components.task import Metric, Task, row
from values_seg_plugins.datasets.toy import ToyDataset


@measure({"deterministic": "PU"}, label="Const")
def constant_measure(stats):
    """The same uncertainty everywhere."""
    return torch.ones(stats.mean.shape[1:])


class AllBackground(PredictionModel):
    """Predicts background everywhere (foreground probability below one half, varying with the image)."""

    name = "all_background"
    family = "deterministic"

    def training_specs(self, base):
        return []

    def predict(self, networks, image):
        fg = 0.4 * torch.sigmoid(image[:1].float())
        return torch.cat([1 - fg, fg])[None]


class NanTask(Task):
    """A task whose metric is undefined on every evaluation."""

    name = "nan_task"
    label = "NaN task"
    metrics = (Metric("mean_score", "higher", "Mean score", splits=("all",), primary=True),)

    def score(self, result):
        return [row(self.name, "mean_score", "all", float("nan"), m, a)
                for (m, a), _ in result.test_scores().groupby(["measure", "aggregation"])]


class ToyFew(ToyDataset):
    """The toy data with only the first ``test_iid`` i.i.d. and ``test_ood`` OoD test cases."""

    name = "toy_few"

    def __init__(self, scenario: str = "2", dims: int = 2, size: int = 32, train_cases: int = 8, val_cases: int = 4,
                 test_iid: int = 1, test_ood: int = 1):
        super().__init__(scenario=scenario, dims=dims, size=size, train_cases=train_cases, val_cases=val_cases)
        self.test_iid, self.test_ood = test_iid, test_ood

    def case_ids(self, split):
        ids = super().case_ids(split)
        if split != "test":
            return ids
        iid = [c for c in ids if not self.spec(c).ood][:self.test_iid]
        ood = [c for c in ids if self.spec(c).ood][:self.test_ood]
        return iid + ood


@hookimpl
def values_seg_measures():
    return [constant_measure]


@hookimpl
def values_seg_prediction_models():
    return [AllBackground]


@hookimpl
def values_seg_tasks():
    return [NanTask]


@hookimpl
def values_seg_datasets():
    return [ToyFew]
