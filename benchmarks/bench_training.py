"""Training and inference throughput of the toy U-Net (2D and 3D), engine vs a bare PyTorch loop.

Engine: :func:`values_seg.engine.train` on the ``toy`` dataset (case loading, random rater,
flips and noise, Dice + CE, Adam; batch 8) and :func:`values_seg.engine.predict_split`
(inference, validation, float16 cache writes) for ``deterministic`` (1 pass per case) and
``test_time_dropout`` (10 passes). Baseline, run beside it: the same network, loss and optimiser
on pre-stacked random tensors, and a bare forward + softmax per case. Prints steps/second and
cases/second for both, and their ratio (engine / bare: the engine's overhead).

    python benchmarks/bench_training.py                      # 2D 64^2 and 3D 32^3 on the auto device
    python benchmarks/bench_training.py --threads 1          # steadier on a busy shared CPU
    python benchmarks/bench_training.py --size3d 64 --device cuda --steps 50
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from values_seg import registry
from values_seg.engine import (
    Checkpoints,
    PredictionCache,
    Recipe,
    TrainingSpec,
    dataset_ref,
    ensure_trained,
    load_network,
    predict_split,
    resolve,
    train_with_info,
)
from values_seg.engine.losses import dice_ce_loss


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def bare_training(dims: int, size: int, steps: int, batch: int, base_width: int, dev: torch.device) -> float:
    torch.manual_seed(0)
    net = registry.create("backbone", "unet", dims=dims, in_channels=1, num_classes=2, base_width=base_width).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=3e-4, weight_decay=1e-5)
    x = torch.randn(batch, 1, *([size] * dims), device=dev)
    y = (torch.rand(batch, *([size] * dims), device=dev) > 0.5).long()
    net.train()

    def step():
        loss = dice_ce_loss(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    _sync(dev)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(dev)
    return steps / (time.perf_counter() - t)


def bare_inference(net: torch.nn.Module, images: list[torch.Tensor], dev: torch.device) -> float:
    with torch.inference_mode():
        net(images[0][None].to(dev)).softmax(1).cpu()
        _sync(dev)
        t = time.perf_counter()
        for im in images:
            net(im[None].to(dev)).float().softmax(1).cpu()
        _sync(dev)
    return len(images) / (time.perf_counter() - t)


def engine_figures(dims: int, size: int, steps: int, batch: int, base_width: int, dev: torch.device, root: str, repeats: int) -> dict:
    """Engine and bare figures, measured alternately ``repeats`` times; the best of each is kept
    (on a shared machine the best run is the least disturbed one)."""
    data = dataset_ref("toy", {"scenario": "1", "dims": dims, "size": size, "train_cases": 2 * batch, "val_cases": 2})
    ds = data.create()
    recipe = Recipe(epochs=1, steps_per_epoch=steps, batch_size=batch)
    spec = TrainingSpec.create(data, "unet", backbone_params={"base_width": base_width}, recipe=recipe, seed=0)
    train_with_info(spec.replace(recipe=recipe.replace(steps_per_epoch=2), seed=99), device=dev, progress=False, dataset=ds)  # warm-up
    store = Checkpoints(f"{root}/ckpt_{dims}d")
    n_test = len(ds.case_ids("test"))
    models = {name: registry.create("prediction_model", name) for name in ("deterministic", "test_time_dropout")}
    best: dict[str, float] = {}

    def keep(key, value):
        best[key] = max(best.get(key, 0.0), value)

    for r in range(repeats):
        _sync(dev)
        t = time.perf_counter()
        state, info = train_with_info(spec, device=dev, progress=False, dataset=ds)
        _sync(dev)
        keep("train_steps_per_s", steps / (time.perf_counter() - t))
        keep("bare_train_steps_per_s", bare_training(dims, size, steps, batch, base_width, dev))
        if r == 0:
            store.save(spec, state, info.pop("arch"))
        for name, model in models.items():
            specs = model.training_specs(spec)
            ensure_trained(specs, store, device=dev, progress=False, datasets={data: ds})  # TTD: its own training
            if r == 0:  # warm-up
                predict_split(model, specs, store, data, "val", PredictionCache(f"{root}/warm_{dims}d_{name}"), device=dev, progress=False)
            t = time.perf_counter()
            predict_split(model, specs, store, data, "test", PredictionCache(f"{root}/pred_{dims}d_{name}_{r}"), device=dev, progress=False)
            _sync(dev)
            keep(f"{name}_cases_per_s", n_test / (time.perf_counter() - t))
        net = load_network(spec, store, dev)
        images = [torch.from_numpy(ds.load(c).image) for c in ds.case_ids("test")]
        keep("bare_inference_cases_per_s", bare_inference(net, images, dev))
    best["test_cases"] = n_test
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--steps", type=int, default=10, help="timed training steps")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--base-width", type=int, default=8)
    ap.add_argument("--size2d", type=int, default=64)
    ap.add_argument("--size3d", type=int, default=32)
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--repeats", type=int, default=3, help="alternate engine and bare runs this often, keep the best")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = resolve(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} torch threads"
    print(f"device: {dev} ({name}); toy U-Net base width {args.base_width}, batch {args.batch}, "
          f"{args.steps} timed steps; best of {args.repeats} alternating runs")
    with tempfile.TemporaryDirectory() as root:
        for dims in args.dims:
            size = args.size2d if dims == 2 else args.size3d
            f = engine_figures(dims, size, args.steps, args.batch, args.base_width, dev, root, args.repeats)
            shape = "x".join([str(size)] * dims)
            print(f"\n{dims}D toy U-Net, {shape}:")
            print(f"  training   engine {f['train_steps_per_s']:8.2f} steps/s   bare loop {f['bare_train_steps_per_s']:8.2f} steps/s"
                  f"   ratio {f['train_steps_per_s'] / f['bare_train_steps_per_s']:.2f}")
            print(f"  inference  engine {f['deterministic_cases_per_s']:8.2f} cases/s   bare loop {f['bare_inference_cases_per_s']:8.2f} cases/s"
                  f"   ratio {f['deterministic_cases_per_s'] / f['bare_inference_cases_per_s']:.2f}   (deterministic, {f['test_cases']} cases)")
            print(f"  inference  engine {f['test_time_dropout_cases_per_s']:8.2f} cases/s   (test-time dropout, 10 passes per case)")


if __name__ == "__main__":
    main()
