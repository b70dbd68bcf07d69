"""Fused training against one by one: the quick study's trainings, alternating, in one run.

Builds the trainings of ``experiments/toy_quick.yaml`` (4 scenarios x 5 ensemble members, test-time
dropout and SSN: 28) as the runner does, with ``fuse_training`` false and true, and trains each
set into a fresh checkpoint store with :func:`values_seg.engine.ensure_trained` (datasets built
once beforehand), alternating, ``--rounds`` times; the best round of each side is compared. The
last line reads ``fused training: X.XX× the one-by-one speed (N trainings in G groups)``.

    python benchmarks/bench_fused_training.py                       # the quick study (2D 32^2, 15 epochs)
    python benchmarks/bench_fused_training.py --epochs 3 --rounds 2 # shorter
    python benchmarks/bench_fused_training.py --dims 3 --size 64 --width 8 --epochs 1 --steps-per-epoch 5
    python benchmarks/bench_fused_training.py --k 1,4,8,16,28,84   # step time against group size only
    python benchmarks/bench_fused_training.py --identity --device cuda  # a member alone (twice) vs in groups of 2, 8

``--k`` and ``--identity`` train the group vectorised on any device (:func:`values_seg.engine.fused.
train_group`; the engine vectorises on the CPU only, one by one elsewhere).
``--k``: seconds per step of a fused group of K specs (seeds 0..K-1, toy 1) and per model-step,
from the difference of a run of ``2 S`` and one of ``S`` steps (set-up cancels), beside the
one-by-one step (``one``). ``--precision bf16`` and ``--compile`` (the vmapped forward through
:func:`torch.compile`, inside the vmap) for a GPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from values_seg.config.loading import load_config
from values_seg.engine import Checkpoints, Recipe, TrainingSpec, dataset_ref, ensure_trained, resolve
from values_seg.engine import fused, training
from values_seg.config.sweep import expand, unique_training_specs

ROOT = Path(__file__).resolve().parents[1]


def quick_specs(args, fuse: bool) -> list[TrainingSpec]:
    cfg = OmegaConf.to_container(load_config(ROOT / "experiments" / "toy_quick.yaml").config, resolve=True)
    for d in cfg["datasets"]:
        d["params"].update(dims=args.dims, size=args.size)
    cfg["backbones"][0]["params"]["base_width"] = args.width
    cfg["recipe"]["precision"] = args.precision
    if args.epochs:
        cfg["recipe"]["epochs"] = args.epochs
    if args.steps_per_epoch:
        cfg["recipe"]["steps_per_epoch"] = args.steps_per_epoch
    for m in cfg["prediction_models"]:  # SSN pre-trains its mean 2 of 15 epochs: keep it within the epochs
        if isinstance(m, dict) and m["name"] == "ssn" and args.epochs:
            m["params"]["pretrain_epochs"] = min(m["params"]["pretrain_epochs"], max(args.epochs - 1, 0))
    cfg.update(fuse_training=fuse, threads=1, device=args.device)
    return unique_training_specs(expand(load_config(base=cfg)))


def sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed_training(specs, dev, datasets, vectorised: bool = False) -> float:
    """Seconds to train ``specs`` as the engine does (``ensure_trained``), or ``vectorised`` in one
    fused group whatever the device (:func:`fused.train_group`, which the engine uses on the CPU)."""
    with tempfile.TemporaryDirectory() as root:
        sync(dev)
        t = time.perf_counter()
        if vectorised:
            fused.train_group(specs, Checkpoints(root), device=dev, progress=False, datasets=datasets)
        else:
            ensure_trained(specs, Checkpoints(root), device=dev, progress=False, datasets=datasets)
        sync(dev)
        return time.perf_counter() - t


def compare(args, dev) -> None:
    one, fu = quick_specs(args, False), quick_specs(args, True)
    datasets = {s.dataset: s.dataset.create() for s in one}
    groups = fused.job_groups(fu)
    print(f"{len(one)} trainings ({args.dims}D {args.size}, width {args.width}, {args.precision}) on {dev}; "
          f"fused: {len(groups)} groups of {[len(g) for g in groups]}", flush=True)
    best = {"one by one": float("inf"), "fused": float("inf")}
    for r in range(args.rounds):
        for name, specs in (("one by one", one), ("fused", fu)):
            seconds = timed_training(specs, dev, datasets)
            best[name] = min(best[name], seconds)
            print(f"round {r + 1}: {name:>10}: {seconds:7.1f} s", flush=True)
    print(f"fused training: {best['one by one'] / best['fused']:.2f}× the one-by-one speed "
          f"({len(fu)} trainings in {len(groups)} groups)")


def step_times(args, dev) -> None:
    data = dataset_ref("toy", {"scenario": "1", "dims": args.dims, "size": args.size, "train_cases": 16, "val_cases": 2})
    ds = data.create()
    datasets = {data: ds}

    def spec(seed, steps, fuse):
        recipe = Recipe(epochs=1, steps_per_epoch=steps, batch_size=args.batch, precision=args.precision)
        return TrainingSpec.create(data, "unet", backbone_params={"base_width": args.width}, recipe=recipe, seed=seed,
                                   fused=fuse)

    def per_step(k, fuse):
        s = args.steps
        timed_training([spec(i, 1, fuse) for i in range(k)], dev, datasets, fuse)  # warm: autotuning, compilation at K
        t1 = timed_training([spec(i, s, fuse) for i in range(k)], dev, datasets, fuse)
        t2 = timed_training([spec(i, 2 * s, fuse) for i in range(k)], dev, datasets, fuse)
        return (t2 - t1) / s

    base = per_step(1, False)
    print(f"{args.dims}D {args.size}, width {args.width}, batch {args.batch}, {args.precision}"
          f"{', compiled' if args.compile else ''} on {dev}")
    print(f"{'K':>4} {'s/step':>9} {'s/model-step':>13} {'vs one by one':>14}")
    print(f"{'one':>4} {base:9.4f} {base:13.4f} {1.0:14.2f}")
    for k in args.k:
        t = per_step(k, True)
        print(f"{k:>4} {t:9.4f} {t / k:13.4f} {base / (t / k):14.2f}", flush=True)


def identity(args, dev) -> None:
    """A member's weights alone, in a group of 2 and in one of 8 (other seeds), on ``dev``."""
    data = dataset_ref("toy", {"scenario": "1", "dims": args.dims, "size": args.size, "train_cases": 16, "val_cases": 2})
    recipe = Recipe(epochs=1, steps_per_epoch=args.steps, batch_size=args.batch, precision=args.precision)

    def spec(seed):
        return TrainingSpec.create(data, "unet", backbone_params={"base_width": args.width}, recipe=recipe, seed=seed,
                                   fused=True)

    weights = []
    for group in ([spec(0)], [spec(0)], [spec(1), spec(0)], [spec(i) for i in range(1, 8)] + [spec(0)]):
        with tempfile.TemporaryDirectory() as root:
            store = Checkpoints(root)
            fused.train_group(group, store, device=dev, progress=False)
            weights.append(store.load(spec(0))["state_dict"])
    for name, w in zip(("alone again", "group of 2", "group of 8"), weights[1:]):
        diff = max((w[k].float() - weights[0][k].float()).abs().max().item() for k in w)
        same = all(torch.equal(w[k], weights[0][k]) for k in w)
        print(f"identity on {dev} ({args.precision}, {args.dims}D {args.size}, {args.steps} steps): alone vs {name}: "
              f"{'bit-identical' if same else f'differ, largest |diff| {diff:.3g}'}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dims", type=int, default=2)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--width", type=int, default=8, help="the U-Net's base width")
    ap.add_argument("--epochs", type=int, default=None, help="default: the quick study's 15")
    ap.add_argument("--steps-per-epoch", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=1, help="alternate one by one and fused this often; best kept")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the fused forward")
    ap.add_argument("--k", type=lambda s: [int(v) for v in s.split(",")], default=None,
                    help="group sizes: print step time against K instead")
    ap.add_argument("--steps", type=int, default=5, help="--k: timed steps (S and 2S); --identity: steps")
    ap.add_argument("--identity", action="store_true",
                    help="a member alone (twice) vs in groups of 2 and 8, bit for bit")
    ap.add_argument("--batch", type=int, default=8, help="--k: batch size")
    args = ap.parse_args(argv)
    dev = resolve(args.device)
    if dev.type == "cuda":
        training.deterministic_cuda()
    if args.compile:
        vmap = fused.vmap
        fused.vmap = lambda fn, **kw: vmap(torch.compile(fn), **kw)  # (compiling the vmap itself fails in torch 2.x)
    torch.set_num_threads(1)
    if args.identity:
        identity(args, dev)
    elif args.k:
        step_times(args, dev)
    else:
        compare(args, dev)


if __name__ == "__main__":
    main()
