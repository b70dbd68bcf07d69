"""Learned aggregations: learned_risk against scikit-learn's forest on the same features, the
features by hand, gmm_meta against scikit-learn's mixture, too few validation cases, and the
no-leakage test through the runner (changing every test case leaves every fit unchanged)."""

import json
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import RandomForestRegressor
from sklearn.mixture import GaussianMixture

from values_seg import hookimpl, registry
from values_seg.config.loading import load_config
from values_seg.components.prediction_model import PredictionModel
from values_seg.runner import run_experiment
from values_seg_plugins.aggregations.learned import case_features
from values_seg_plugins.datasets.toy import ToyDataset
from toy_data_generator import generator


def data(n, seed=0, shape=(12, 14)):
    g = torch.Generator().manual_seed(seed)
    maps = [torch.rand(shape, generator=g) for _ in range(n)]
    preds = [(torch.rand(shape, generator=g) > 0.6).to(torch.uint8) for _ in range(n)]
    return maps, preds


def test_features_by_hand():
    u = torch.zeros(4, 5, dtype=torch.float64)
    u[0, 0], u[1, 1] = 1.0, 0.5
    p = torch.zeros(4, 5, dtype=torch.uint8)
    p[0, 0] = 1  # one foreground pixel, one component; its band: itself and its 2 face neighbours
    p[3, 4] = 2  # a second component
    f = dict(zip(["mean", "max", "std", "q90", "fg", "bg", "band", "share", "logsize", "components"],
                 case_features(u, p)))
    assert f["mean"] == pytest.approx(1.5 / 20) and f["max"] == 1.0
    assert f["fg"] == pytest.approx(0.5) and f["bg"] == pytest.approx(0.5 / 18)
    assert f["band"] == pytest.approx(1.0 / 6)  # (0,0),(0,1),(1,0) and (3,4),(2,4),(3,3)
    assert f["share"] == pytest.approx(0.1) and f["logsize"] == pytest.approx(np.log1p(2)) and f["components"] == 2


def test_learned_risk_is_sklearns_forest_on_the_features():
    maps, preds = data(12)
    risks = np.linspace(0.05, 0.6, 12)
    agg = registry.create("aggregation", "learned_risk", trees=30, seed=3).fit(maps, preds, risks=risks)
    X = np.stack([case_features(u, p) for u, p in zip(maps, preds)])
    reference = RandomForestRegressor(n_estimators=30, min_samples_leaf=2, random_state=3).fit(X, risks)
    test_maps, test_preds = data(5, seed=9)
    ours = [agg(u, prediction=p) for u, p in zip(test_maps, test_preds)]
    theirs = reference.predict(np.stack([case_features(u, p) for u, p in zip(test_maps, test_preds)]))
    assert ours == pytest.approx(theirs.tolist(), abs=1e-6)
    assert agg.state()["n_cases_"] == 12 and len(agg.state()["importances_"]) == 10


def test_gmm_meta_is_sklearns_mixture_on_the_iid_scores():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(20, 3))
    values[:, 2] = 1.0  # a constant aggregation: left out
    ood = np.zeros(20, bool)
    ood[-4:] = True  # OoD validation cases are not fitted on
    values[-4:] += 100
    maps, preds = data(20)
    agg = registry.create("aggregation", "gmm_meta", components=2, seed=1)
    agg.fit(maps, preds, scores=(["a", "b", "c"], values), ood=ood)
    assert agg.inputs_ == ["a", "b"]
    iid = values[:16, :2]
    z = (iid - iid.mean(axis=0)) / iid.std(axis=0)
    reference = GaussianMixture(2, covariance_type="diag", random_state=1).fit(z)
    case = {"a": 0.3, "b": -1.2, "c": 5.0}
    expected = -reference.score_samples(((np.array([0.3, -1.2]) - iid.mean(axis=0)) / iid.std(axis=0))[None])[0]
    assert agg(maps[0], prediction=preds[0], scores=case) == pytest.approx(expected, rel=1e-9)
    with pytest.raises(ValueError, match=r"no score of \['b'\]"):
        agg(maps[0], prediction=preds[0], scores={"a": 0.1})


def test_too_few_validation_cases_is_a_clear_error():
    maps, preds = data(3)
    with pytest.raises(ValueError, match="needs at least 5 validation cases to fit, got 3"):
        registry.create("aggregation", "learned_risk").fit(maps, preds, risks=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="needs at least 5 validation cases to fit, got 3"):
        registry.create("aggregation", "gmm_meta").fit(maps, preds, scores=(["a"], np.ones((3, 1))), ood=[0, 0, 0])
    with pytest.raises(ValueError, match="not fitted"):
        registry.create("aggregation", "learned_risk")(maps[0], prediction=preds[0])


# --- no leakage: the runner fits on the validation split only -------------------------------

class LeakProbeToy(ToyDataset):
    """The toy data, whose test cases (only) are redrawn with ``test_seed``."""

    name = "leak_probe_toy"

    def __init__(self, scenario: str = "2", dims: int = 2, size: int = 32, seed: int = 0,
                 val_cases: int | None = None, train_cases: int | None = None, test_seed: int = 0):
        super().__init__(scenario=scenario, dims=dims, size=size, seed=seed, val_cases=val_cases,
                         train_cases=train_cases)
        self.test_seed = test_seed

    def load(self, case_id):
        spec = self.spec(case_id)
        if spec.split != "test":
            return super().load(case_id)
        from values_seg.components.dataset import Case

        toy = generator.generate_case(spec, self.dims, self.size, self.seed + 1000 * self.test_seed)
        return Case(toy.case_id, toy.image, toy.raters, toy.meta)


class IntensityModel(PredictionModel):
    """Samples from the image intensity with seeded noise: no training (as a model trained elsewhere)."""

    name = "leak_probe_intensity"
    family = "bayesian"
    uses_backbone = False
    num_samples = 4

    def training_specs(self, base):
        return []

    def predict(self, networks, image):
        g = torch.Generator().manual_seed(0)
        x = torch.as_tensor(image, dtype=torch.float32)[0]
        logits = 6 * (x - x.mean()) / (x.std() + 1e-6)
        fg = torch.sigmoid(logits[None] + torch.randn(self.num_samples, *x.shape, generator=g))
        return torch.stack([1 - fg, fg], dim=1)


registry.register(types.SimpleNamespace(values_seg_datasets=hookimpl(lambda: [LeakProbeToy]),
                                        values_seg_prediction_models=hookimpl(lambda: [IntensityModel]),
                                        __name__="leak_probe_plugin"), source="leak_probe_plugin")


def _evaluate(tmp_path: Path, test_seed: int) -> tuple[dict, pd.DataFrame]:
    cfg = load_config(base={
        "name": f"leak{test_seed}", "executor": "local",
        "datasets": [{"name": "leak_probe_toy", "params": {"scenario": "2", "size": 32, "train_cases": 8,
                                                            "val_cases": 8, "test_seed": test_seed}}],
        "backbones": ["unet"], "prediction_models": ["leak_probe_intensity"],
        "measures": ["predictive_entropy", "mutual_information"],
        "aggregations": ["image", "threshold", "morans_i", {"name": "learned_risk", "params": {"trees": 20}},
                         "gmm_meta"],
        "tasks": ["ood_detection", "failure_detection"], "statistics": {"n_resamples": 0}})
    run_dir = tmp_path / f"run{test_seed}"
    summary = run_experiment(cfg, run_dir, progress=False)
    assert summary.ok, summary.describe()
    (folder,) = [p for p in (run_dir / "cache" / "evaluations").iterdir() if p.is_dir()]  # beside its .lock
    fitted = json.loads((folder / "fitted.json").read_text())
    return fitted, pd.read_csv(run_dir / "cases.csv")


def test_no_test_case_can_influence_the_fit(tmp_path):
    fitted_a, cases_a = _evaluate(tmp_path, test_seed=0)
    fitted_b, cases_b = _evaluate(tmp_path, test_seed=1)
    states = {(e["measure"], e["aggregation"]): e["state"] for e in fitted_a["aggregations"]}
    assert {a for _, a in states} == {"image", "threshold", "morans_i", "learned_risk", "gmm_meta"}
    assert states == {(e["measure"], e["aggregation"]): e["state"] for e in fitted_b["aggregations"]}
    assert states[("predictive_entropy", "learned_risk")]["importances_"]  # fitted, not empty
    assert states[("predictive_entropy", "gmm_meta")]["inputs_"] == ["image", "threshold", "morans_i"]
    # while the test cases and their learned scores did change
    scores = [c[c["aggregation"].isin(["learned_risk", "gmm_meta"])].sort_values(["case_id", "measure", "aggregation"])
              for c in (cases_a, cases_b)]
    assert len(scores[0]) == len(scores[1]) > 0
    assert not np.allclose(scores[0]["score"].to_numpy(), scores[1]["score"].to_numpy())
