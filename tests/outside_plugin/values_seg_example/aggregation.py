import torch

from values_seg import hookimpl, Aggregation, as_map


class AboveValidationQuantile(Aggregation):
    """Share of pixels more uncertain than the q-quantile of the validation maps."""

    name = "above_quantile"
    label = "AboveQ"

    def __init__(self, q: float = 0.9):
        if not 0 < q < 1:
            raise ValueError(f"above_quantile: q must lie in (0, 1), got {q}")
        self.q = q

    def fit(self, maps, predictions):
        values = torch.cat([as_map(m).double().reshape(-1) for m in maps])
        self.threshold_ = float(torch.quantile(values, self.q))
        return self

    def __call__(self, umap, prediction=None):
        return float((as_map(umap) > self.threshold_).double().mean())


@hookimpl
def values_seg_aggregations():
    return [AboveValidationQuantile]
