"""Learned aggregations, fitted on the validation split only: ``learned_risk`` (Zenk et al., MedIA
2025) and ``gmm_meta`` (Karg et al., CVPR 2026).

Their features and fits: docs/design-rationale.md,
"SegmentationFailures' aggregations and the meta-aggregation".
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import torch
from scipy import ndimage

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map, as_prediction
from values_seg.params import Range
from values_seg_plugins.aggregations.boundary_mean import boundary_band

FEATURES = ("mean", "max", "std", "q90", "foreground_mean", "background_mean", "boundary_mean",
            "foreground_share", "log_foreground_size", "components")


def prediction_features(prediction) -> tuple:
    """What the features take from the predicted label map: the foreground and boundary masks
    (flat), the foreground's share, log size and number of connected components."""
    labels = torch.as_tensor(prediction)
    foreground = labels != 0
    band = boundary_band(labels, 0)  # pixels with a face neighbour of another label
    size = int(foreground.sum())
    components = ndimage.label(foreground.numpy())[1] if size else 0
    return (foreground.reshape(-1).numpy(), band.reshape(-1).numpy(), size / labels.numel(), float(np.log1p(size)),
            float(components))


def map_features(u: np.ndarray, shared: tuple) -> np.ndarray:
    """The features (:data:`FEATURES`) of a flat float64 map ``u`` with its :func:`prediction_features`."""
    foreground, band, share, log_size, components = shared
    mean = u.mean()

    def region(mask):
        n = np.count_nonzero(mask)
        return float(u[mask].sum() / n) if n else float(mean)

    return np.array([mean, u.max(), u.std(), np.quantile(u, 0.9), region(foreground), region(~foreground),
                     region(band), share, log_size, components])


def case_features(umap, prediction) -> np.ndarray:
    """The heuristic features (:data:`FEATURES`) of one map and its predicted label map."""
    u = as_map(umap, "learned_risk aggregation")
    as_prediction(prediction, tuple(u.shape), "learned_risk aggregation")
    return map_features(u.double().reshape(-1).numpy(), prediction_features(prediction))


class Forest:
    """A fitted random-forest regressor as arrays, every tree walked at once for one case (one step
    per level): RandomForestRegressor.predict's set-up costs ~10x that for a single case."""

    def __init__(self, forest):
        trees = [t.tree_ for t in forest.estimators_]
        n = max(t.node_count for t in trees)

        def padded(values, fill):
            out = np.full((len(trees), n), fill, dtype=np.asarray(values(trees[0])).dtype)
            for i, t in enumerate(trees):
                out[i, : t.node_count] = values(t)
            return out

        self.left, self.right = padded(lambda t: t.children_left, -1), padded(lambda t: t.children_right, -1)
        self.feature, self.threshold = padded(lambda t: t.feature, 0), padded(lambda t: t.threshold, 0.0)
        self.value = padded(lambda t: t.value[:, 0, 0], 0.0)
        self.depth = max(t.max_depth for t in trees)

    def predict(self, x: np.ndarray) -> float:
        """The mean over the trees of the leaf value of ``x`` (features, float32 as scikit-learn's trees)."""
        x = np.asarray(x, dtype=np.float32)
        rows, node = np.arange(len(self.left)), np.zeros(len(self.left), dtype=np.int64)
        for _ in range(self.depth):
            left = self.left[rows, node]
            inner = left >= 0
            go_left = x[self.feature[rows, node]] <= self.threshold[rows, node]
            node = np.where(inner, np.where(go_left, left, self.right[rows, node]), node)
        return float(self.value[rows, node].mean())


def _enough(name: str, n: int, min_cases: int) -> None:
    if n < min_cases:
        raise ValueError(f"{name} aggregation: needs at least {min_cases} validation cases to fit, got {n}")


class LearnedRiskAggregation(Aggregation):
    """Random forest of the failure risk on heuristic map/prediction features (fitted on validation)."""

    name = "learned_risk"
    label = "Learned risk"
    needs_prediction = True
    fit_needs = ("risks",)

    def __init__(self, trees: Annotated[int, Range(1, 2000)] = 50, min_leaf: Annotated[int, Range(1, 1000)] = 2,
                 seed: int = 0, min_cases: Annotated[int, Range(2, 100000)] = 5):
        self.trees, self.min_leaf, self.seed, self.min_cases = trees, min_leaf, seed, min_cases
        self._forest = None
        self.importances_: list[float] | None = None
        self.n_cases_: int | None = None

    def fit(self, maps, predictions, risks=None) -> "LearnedRiskAggregation":
        from sklearn.ensemble import RandomForestRegressor

        maps, predictions = list(maps), list(predictions)
        if risks is None or len(risks) != len(maps) or len(predictions) != len(maps):
            raise ValueError(f"learned_risk aggregation: fit needs one prediction and one risk per validation map, "
                             f"got {len(maps)} maps, {len(predictions)} predictions, "
                             f"{'no' if risks is None else len(risks)} risks")
        _enough("learned_risk", len(maps), self.min_cases)
        y = np.asarray(risks, dtype=float)
        if not np.isfinite(y).all():
            raise ValueError("learned_risk aggregation: the validation risks must be finite")
        X = np.stack([case_features(u, p) for u, p in zip(maps, predictions)])
        forest = RandomForestRegressor(n_estimators=self.trees, min_samples_leaf=self.min_leaf,
                                       random_state=self.seed, n_jobs=1)
        self._forest = Forest(forest.fit(X, y))
        self.importances_ = [float(v) for v in forest.feature_importances_]
        self.n_cases_ = len(maps)
        return self

    def __call__(self, umap, prediction=None) -> float:
        return self.score_many([self], as_map(umap, "learned_risk aggregation")[None], prediction=prediction)[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        if any(inst._forest is None for inst in instances):
            raise ValueError("learned_risk aggregation is not fitted: call fit(val_maps, val_predictions, risks=...)")
        as_prediction(prediction, tuple(maps.shape[1:]), "learned_risk aggregation")
        shared = prediction_features(prediction)  # once for the stack of maps
        flat = maps.reshape(len(maps), -1).double().numpy()
        return [inst._forest.predict(map_features(u, shared)) for inst, u in zip(instances, flat)]


class GmmMetaAggregation(Aggregation):
    """Negative log-likelihood of the case's scores of every other aggregation under a Gaussian mixture
    fitted on the i.i.d. validation cases."""

    name = "gmm_meta"
    label = "GMM meta"
    needs_prediction = True
    fit_needs = ("scores", "ood")

    def __init__(self, components: Annotated[int, Range(1, 100)] = 2,
                 covariance: Literal["full", "diag", "spherical", "tied"] = "diag", seed: int = 0,
                 min_cases: Annotated[int, Range(2, 100000)] = 5):
        self.components, self.covariance, self.seed, self.min_cases = components, covariance, seed, min_cases
        self._mixture = None
        self.inputs_: list[str] | None = None
        self.center_: list[float] | None = None
        self.scale_: list[float] | None = None
        self.means_: list | None = None
        self.weights_: list[float] | None = None

    def fit(self, maps, predictions, scores=None, ood=None) -> "GmmMetaAggregation":
        from sklearn.mixture import GaussianMixture

        if scores is None:
            raise ValueError("gmm_meta aggregation: fit needs the other aggregations' validation scores (scores=)")
        names, values = scores
        values = np.asarray(values, dtype=float)
        iid = ~np.asarray(ood if ood is not None else np.zeros(len(values), bool), dtype=bool)
        values = values[iid]
        if not names:
            raise ValueError("gmm_meta aggregation: no other aggregation of the measure to fit on")
        _enough("gmm_meta", len(values), max(self.min_cases, self.components))
        if not np.isfinite(values).all():
            raise ValueError("gmm_meta aggregation: the validation scores must be finite")
        scale = values.std(axis=0)
        keep = scale > 1e-12 * np.maximum(1.0, np.abs(values).max(axis=0))
        if not keep.any():
            raise ValueError("gmm_meta aggregation: every other aggregation is constant on the validation cases")
        self.inputs_ = [n for n, k in zip(names, keep) if k]
        self.center_, self.scale_ = values.mean(axis=0)[keep].tolist(), scale[keep].tolist()
        z = (values[:, keep] - self.center_) / self.scale_
        self._mixture = GaussianMixture(self.components, covariance_type=self.covariance, random_state=self.seed).fit(z)
        self.means_ = self._mixture.means_.tolist()
        self.weights_ = self._mixture.weights_.tolist()
        return self

    def __call__(self, umap, prediction=None, scores=None) -> float:
        if self._mixture is None:
            raise ValueError("gmm_meta aggregation is not fitted: call fit(..., scores=(names, values))")
        if scores is None:
            raise ValueError("gmm_meta aggregation: needs the case's other scores: agg(umap, scores={name: score})")
        missing = [n for n in self.inputs_ if n not in scores]
        if missing:
            raise ValueError(f"gmm_meta aggregation: the case has no score of {missing}, which it was fitted on")
        z = (np.array([scores[n] for n in self.inputs_]) - self.center_) / self.scale_
        if self.covariance in ("diag", "spherical"):  # closed form: score_samples' set-up is ~10x its arithmetic
            mix = self._mixture
            var = mix.covariances_ if self.covariance == "diag" else mix.covariances_[:, None]
            var = np.broadcast_to(var, mix.means_.shape)
            log = np.log(mix.weights_) - 0.5 * (np.log(2 * np.pi * var) + (z - mix.means_) ** 2 / var).sum(axis=1)
            return float(-np.logaddexp.reduce(log))
        return float(-self._mixture.score_samples(z[None])[0])


@hookimpl
def values_seg_aggregations():
    return [LearnedRiskAggregation, GmmMetaAggregation]
