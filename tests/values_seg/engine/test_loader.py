"""The training data path: plans drawn in the training process, batches read by loader workers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from values_seg.engine import augment, train
from values_seg.engine.loader import default_workers, plan_batches


def _old_loop_plans(rng, n, recipe, dims, steps):
    """The draws of the training loop before the loader (float64-free reference: the same
    generator calls in the same order, written out as that loop wrote them)."""
    def stream():
        while True:
            yield from rng.permutation(n).tolist()

    s = stream()
    return [tuple(augment.draw_plan(rng, next(s), recipe, dims) for _ in range(recipe.batch_size)) for _ in range(steps)]


@pytest.mark.parametrize("n,batch,steps", [(6, 2, 7), (5, 4, 9), (1, 3, 2)])
def test_plans_are_the_old_loops_draws(n, batch, steps, tiny_recipe):
    recipe = tiny_recipe.replace(batch_size=batch)
    ours = list(plan_batches(np.random.default_rng(3), n, recipe, 2, steps))
    assert ours == _old_loop_plans(np.random.default_rng(3), n, recipe, 2, steps)
    counts = np.bincount([p.case_index for b in ours for p in b], minlength=n)
    assert counts.max() - counts.min() <= 1 + (steps * batch) // n  # every case once per pass


def test_weights_do_not_depend_on_the_loader_workers(base_spec, toy):
    spec = base_spec.replace(recipe=base_spec.recipe.replace(steps_per_epoch=3, epochs=2))
    inline = train(spec, device="cpu", progress=False, dataset=toy, loader_workers=0)
    workers = train(spec, device="cpu", progress=False, dataset=toy, loader_workers=2)
    assert inline.keys() == workers.keys()
    for k in inline:
        assert torch.equal(inline[k], workers[k]), k


def test_default_workers():
    assert default_workers(torch.device("cpu")) == 0
    assert 0 <= default_workers(torch.device("cuda")) <= 4


def test_config_bounds_loader_workers(tmp_path):
    from values_seg.config.checks import ConfigError
    from values_seg.config.loading import load_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text("datasets: [{name: toy, params: {dims: 2, size: 32}}]\nbackbones: [unet]\n"
                   "prediction_models: [deterministic]\nmeasures: [predictive_entropy]\naggregations: [patch]\n"
                   "tasks: [segmentation]\n")
    assert load_config(cfg).loader_workers is None
    assert load_config(cfg, ["loader_workers=3"]).loader_workers == 3
    with pytest.raises(ConfigError, match="loader_workers"):
        load_config(cfg, ["loader_workers=-1"])
