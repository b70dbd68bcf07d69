"""Each combination's cost: FLOPs against a hand count, forward passes per model, the cost table of a
tiny run, and costs that change no key, no sample and no metric."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from values_seg import registry
from values_seg.engine.costs import InferenceMeter, pass_modules
from values_seg.engine.inference import predict_case
from values_seg.runner.costs import COLUMNS, RESULT_COSTS, inference_cost, training_cost
from values_seg.runner.results import CONTEXT
from values_seg.storage import provenance

from tiny import tiny_config


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Dropout2d(0.5), nn.Conv2d(4, 2, 1)).eval()


def _case(size: int = 8):
    image = np.random.default_rng(0).normal(size=(1, size, size)).astype(np.float32)
    return SimpleNamespace(case_id="c0", image=image)


def count_flops(fn) -> int:
    """The FLOPs of ``fn()`` as torch's counter counts them (the rule the meter counts the first case by)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def test_flops_of_a_tiny_conv_net_match_a_hand_count():
    net = _net()
    x = torch.zeros(1, 1, 8, 8)
    # a multiply-add is 2 FLOPs: 2 x output elements x (input channels x kernel size); biases, ReLU, dropout: none
    by_hand = 2 * (4 * 8 * 8) * (1 * 3 * 3) + 2 * (2 * 8 * 8) * (4 * 1 * 1)
    assert count_flops(lambda: net(x)) == by_hand == 5632
    assert count_flops(lambda: net(torch.zeros(3, 1, 8, 8))) == 3 * by_hand  # linear in the batch


@pytest.mark.parametrize("name, params, networks, passes", [
    ("deterministic", {}, 1, 1),
    ("ensemble", {"members": 3}, 3, 3),
    ("test_time_dropout", {"num_samples": 4}, 1, 4),
    ("test_time_augmentation", {}, 1, 8),  # every flip of 2 axes, with and without noise
])
def test_forward_passes_per_case_per_model(name, params, networks, passes):
    model = registry.create("prediction_model", name, **params)
    nets = [_net(i) for i in range(networks)]
    device = torch.device("cpu")
    meter = InferenceMeter(nets, device)
    case = _case()
    plain = predict_case(model, nets, case, device, "stream", 2)
    calls = []
    for _ in range(2):  # the first case is counted, the second timed
        with meter.case():
            calls.append(predict_case(model, nets, case, device, "stream", 2))
        record = meter.record()["cost"]
        assert record["forward_passes"] == passes == calls[-1].shape[0]  # the models' sample counts
        assert record["flops"] == passes * 5632  # one network pass on this case's shape: the hand count above
        assert record["peak_memory_bytes"] > 0 and record["device"] == "cpu"
        assert torch.equal(plain, calls[-1])  # measuring changes no sample
    assert meter.record()["cost"]["seconds"] > 0  # the counted case's time (under the counter) is left out


def test_cpu_peak_memory_is_the_peak_of_the_cases_tensors_alive_at_once():
    """By hand: conv 1→4 (4 x 8 x 8 float32: 1024 B) and ReLU (another 1024 B) alive together, then conv 4→2
    (512 B) beside the ReLU's output: a peak of 2048 B; the input and the weights, allocated before, are not
    counted, nor a view of them. Counted on the first case, with its FLOPs, and given to every case."""
    from values_seg.engine.costs import LiveTensors

    net, x = _net(), torch.zeros(1, 1, 8, 8)
    meter = InferenceMeter([net], torch.device("cpu"))
    with torch.no_grad():
        for _ in range(2):
            with meter.case():
                net(x)
            assert meter.record()["cost"]["peak_memory_bytes"] == 2048
        with LiveTensors() as live:
            view = x.view(64)  # shares the input's storage: nothing new
            doubled = view * 2  # 256 B
            del doubled
            twice = [x + 1, x + 2]  # both alive: 512 B
        assert live.peak == 512 and live.level == 512 and view.data_ptr() == x.data_ptr()
        del twice
        assert live.level == 0  # freed when the last tensor of each storage goes


def test_a_pass_goes_through_the_backbone_of_a_heads_network():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = _net()

        def forward(self, x):
            return self.backbone(x) + self.backbone(x)

    net = Head()
    assert pass_modules([net]) == [net.backbone]
    meter = InferenceMeter([net], torch.device("cpu"))
    with meter.case():
        net(torch.zeros(2, 1, 8, 8))
    assert meter.record()["cost"]["forward_passes"] == 4


def test_cost_module_is_bookkeeping_outside_every_key():
    assert "values_seg.engine.costs" in provenance.BOOKKEEPING
    closure = provenance._closure(("values_seg.engine.inference", "values_seg.engine.training"))[0]
    assert "values_seg.engine.costs" not in closure and "values_seg.engine.inference" in closure


def test_training_and_inference_cost_from_records(tmp_path):
    from values_seg.engine.checkpoints import Checkpoints

    specs = [SimpleNamespace(key=lambda k=k: k) for k in ("a", "b")]
    store = Checkpoints(tmp_path)
    for spec, info in zip(specs, [{"steps": 10, "train_seconds": 6.0, "device": "cpu", "fused_group": 3},
                                  {"steps": 10, "train_seconds": 2.0, "device": "cuda:0"}]):
        store.root.mkdir(exist_ok=True)
        from values_seg.storage import cache_store

        cache_store.write_verified(store.path(spec), b"x", info)
    cost = training_cost(SimpleNamespace(specs=specs), store)
    assert cost == {"trainings": 2, "steps": 20, "train_seconds": 4.0, "train_device": "cpu,cuda:0"}
    assert training_cost(SimpleNamespace(specs=[]), store)["steps"] is None  # trained outside values-seg
    records = [{"seconds": s, "forward_passes": 2, "flops": 100, "peak_memory_bytes": None, "device": "cpu"}
               for s in (0.1, 0.3, 5.0)]
    got = inference_cost(records + [None])
    assert got["inference_seconds_per_case"] == 0.3 and got["forward_passes"] == 2 and got["flops_per_case"] == 100
    assert got["measured_cases"] == 3 and got["peak_memory_bytes"] is None
    assert inference_cost([None])["measured_cases"] == 0


TINY = tiny_config(name="costs", device="cpu",
                   prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 2}},
                                      {"name": "test_time_dropout", "params": {"num_samples": 3}},
                                      {"name": "temperature_scaled", "label": "ensemble_ts",
                                       "params": {"model": "ensemble", "model_params": {"members": 2}}}])


@pytest.mark.slow
def test_cost_table_of_a_tiny_run_is_read_from_the_cache(tmp_path):
    from values_seg.config.loading import load_config
    from values_seg.runner import run_experiment

    run_dir = tmp_path / "run"
    first = run_experiment(load_config(base=TINY), run_dir, progress=False)
    assert first.ok, first.describe()
    table = pd.read_csv(run_dir / "costs.csv")
    assert list(table.columns) == COLUMNS
    assert len(table) == first.combinations == 4  # one row per combination
    rows = table.set_index("prediction_model")
    assert rows.loc["deterministic", "forward_passes"] == 1 and rows.loc["deterministic", "trainings"] == 1
    assert rows.loc["ensemble", "forward_passes"] == 2 and rows.loc["ensemble", "trainings"] == 2
    assert rows.loc["test_time_dropout", "forward_passes"] == 3
    same = ["trainings", "steps", "train_seconds", "forward_passes", "flops_per_case", "inference_seconds_per_case"]
    assert rows.loc["ensemble_ts", same].tolist() == rows.loc["ensemble", same].tolist()  # the wrapped model's cost
    assert rows.loc["ensemble", "flops_per_case"] == 2 * rows.loc["deterministic", "flops_per_case"] > 0
    assert (table["steps"] > 0).all() and (table["train_seconds"] > 0).all() and (table["train_device"] == "cpu").all()
    assert (table["inference_seconds_per_case"] > 0).all() and (table["peak_memory_bytes"] > 0).all()
    assert (table["measured_cases"] == 63).all()
    # results.csv: the counts beside every row of their combination, the clocks' readings not
    results = pd.read_csv(run_dir / "results.csv")
    assert [c for c in results.columns if c.startswith("cost_")] == [f"cost_{c}" for c in RESULT_COSTS]
    joined = results.merge(table, on=CONTEXT, how="left", validate="many_to_one")
    assert len(joined) == len(results) > 0
    for c in RESULT_COSTS:
        assert (joined[f"cost_{c}"] == joined[c]).all(), c
    written = (run_dir / "costs.csv").read_bytes()
    cache = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "cache").rglob("*") if p.is_file())

    (run_dir / "costs.csv").unlink()  # written again from the cache's records: nothing trained or predicted
    again = run_experiment(load_config(base=TINY), run_dir, progress=False)
    assert again.ok and again.trained == 0
    assert (run_dir / "costs.csv").read_bytes() == written
    assert sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "cache").rglob("*") if p.is_file()) == cache
    assert "## Cost beside quality" in (run_dir / "report.md").read_text()
