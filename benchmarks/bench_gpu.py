"""GPU training throughput and the paper configs' costs (issue 27), through the engine's own ``train``.

``throughput``: the paper's toy 3D U-Net (width 8, 64^3, batch 8, Dice + CE, flips + noise) for
each precision x loader workers; cases/s from two runs of S1 and S2 steps (the difference removes
the fixed costs: network build, worker start), the GPU busy share sampled with NVML every 50 ms
during the longer run, and the peak GPU memory. The fp32 / 0-worker cell is the baseline of the
ratios, measured in the same run.

``paper-configs``: for ``experiments/lidc_texture.yaml`` and ``gta_cityscapes.yaml``, every
distinct training of every prediction model (the config's backbone, recipe and heads) on
synthetic cases of the real sizes (``_synthetic.py``: 64^3 crops; 256 x 478 frames, 24 classes),
a few steps each: seconds per step and per epoch (the real training-set sizes), peak GPU memory
in training and in one case's inference (all samples in one batch), and the predicted wall time
of the full study on one GPU (trainings one after another; prediction and evaluation excluded).

    python benchmarks/bench_gpu.py throughput --out throughput.json
    python benchmarks/bench_gpu.py paper-configs --out paper_configs.json
    python benchmarks/bench_gpu.py determinism       # bit-identical twice on the device? fp32 vs CPU

``benchmarks/device_checks.sh`` runs all of them, the paper-sized toy study and the Ray check on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from values_seg import registry
from values_seg.engine import Recipe, TrainingSpec, dataset_ref, train
from values_seg.engine.networks import arch_info, build_network
from values_seg.engine.precision import autocast

ROOT = Path(__file__).resolve().parent.parent
#: training cases of the paper's studies: LIDC texture split (Table 3), GTA5 train = 75 % of the
#: GTA5 frames (24,966) not in the pool (as many as Cityscapes' 2,975 train frames; appendix B.3, Figure 7)
TRAIN_CASES = {"lidc_texture": 513, "gta_cityscapes": round(0.75 * (24966 - 2975))}
SHAPES = {"lidc_texture": dict(shape=[64, 64, 64], in_channels=1, num_classes=2, raters=4),
          "gta_cityscapes": dict(shape=[256, 478], in_channels=3, num_classes=24, raters=5, ignore_index=255)}


class BusySampler:
    """The GPU's utilisation (NVML, % of time a kernel ran) sampled every ``period`` seconds."""

    def __init__(self, period: float = 0.05):
        self.period, self.samples, self._stop = period, [], threading.Event()

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append(torch.cuda.utilization())
            except Exception:  # noqa: BLE001 - no NVML: no samples
                return
            time.sleep(self.period)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def busy(self) -> float | None:
        return sum(self.samples) / len(self.samples) / 100 if self.samples else None


def _memoised(ds):
    """Load every case once (timing the trainings, not the data generation)."""
    cache = {}
    load = ds.load

    def cached(case_id):
        if case_id not in cache:
            cache[case_id] = load(case_id)
        return cache[case_id]

    ds.load = cached
    for split in ("train",):
        for cid in ds.case_ids(split):
            cached(cid)
    return ds


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def throughput(args) -> dict:
    device = torch.device(args.device)
    ref = dataset_ref("toy", {"scenario": "1", "dims": 3, "size": args.size, "train_cases": args.cases,
                              "val_cases": 4})
    ds = _memoised(ref.create())
    rows = []
    for precision in args.precisions:
        for workers in args.workers:
            def run(steps):
                recipe = Recipe.preset("unet", epochs=1, steps_per_epoch=steps, precision=precision)
                spec = TrainingSpec.create(ref, "unet", backbone_params={"base_width": 8}, recipe=recipe, seed=0)
                _sync()
                start = time.perf_counter()
                train(spec, device=device, progress=False, dataset=ds, loader_workers=workers)
                _sync()
                return time.perf_counter() - start

            run(3)  # warm-up (cuDNN, allocator)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            short = run(args.s1)
            with BusySampler() as sampler:
                long = run(args.s2)
            cases = 8 * (args.s2 - args.s1) / max(long - short, 1e-9)
            row = {"precision": precision, "loader_workers": workers, "cases_per_s": round(cases, 2),
                   "s_per_step": round((long - short) / (args.s2 - args.s1), 5), "gpu_busy": sampler.busy,
                   "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if device.type == "cuda" else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = rows[0]["cases_per_s"]
    for r in rows:
        r["ratio_to_fp32_0_workers"] = round(r["cases_per_s"] / base, 2)
    return {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "rows": rows,
            "setup": f"toy 3D {args.size}^3, U-Net width 8, batch 8, steps {args.s1} vs {args.s2}"}


def determinism(args) -> dict:
    """The same spec trained twice per precision on the device (0 and 4 loader workers): bit-identical
    weights? And fp32 on the device against fp32 on the CPU: the largest weight difference."""
    device = torch.device(args.device)
    ref = dataset_ref("toy", {"scenario": "1", "dims": 3, "size": 32, "train_cases": 16, "val_cases": 4})
    ds = _memoised(ref.create())
    out = {}
    weights = {}
    for precision in ("fp32", "bf16"):
        recipe = Recipe.preset("unet", epochs=2, steps_per_epoch=10, precision=precision)
        spec = TrainingSpec.create(ref, "unet", backbone_params={"base_width": 8}, recipe=recipe, seed=0)
        a = train(spec, device=device, progress=False, dataset=ds, loader_workers=0)
        b = train(spec, device=device, progress=False, dataset=ds, loader_workers=4)
        out[f"{precision}_identical_twice"] = all(torch.equal(a[k], b[k]) for k in a)
        weights[precision] = a
    cpu = train(TrainingSpec.create(ref, "unet", backbone_params={"base_width": 8},
                                    recipe=Recipe.preset("unet", epochs=2, steps_per_epoch=10), seed=0),
                device="cpu", progress=False, dataset=ds)
    out["fp32_device_vs_cpu_max_abs_diff"] = max(float((weights["fp32"][k].float() - cpu[k].float()).abs().max())
                                                 for k in cpu if cpu[k].is_floating_point())
    print(json.dumps(out), flush=True)
    return out


def _specs(config: str, synthetic, precision: str):
    """(model, spec) for every distinct training of the config's prediction models."""
    cfg = OmegaConf.to_container(OmegaConf.load(ROOT / "experiments" / f"{config}.yaml"), resolve=False)
    backbone = cfg["backbones"][0]
    backbone = {"name": backbone} if isinstance(backbone, str) else backbone
    fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg.get("recipe", {}).items() if k != "preset"}
    recipe = Recipe.preset(cfg["recipe"].get("preset", "unet"), **fields).replace(precision=precision)
    base = TrainingSpec.create(synthetic, backbone["name"], backbone_params=backbone.get("params", {}), recipe=recipe,
                               seed=0)
    seen, out = set(), []
    for entry in cfg["prediction_models"]:
        entry = {"name": entry} if isinstance(entry, str) else entry
        model = registry.create("prediction_model", entry["name"], **entry.get("params", {}))
        specs = model.training_specs(base)
        out.append((model, specs, [s for s in specs if s.key() not in seen]))
        seen.update(s.key() for s in specs)
    return cfg, out


def paper_configs(args) -> dict:
    device = torch.device(args.device)
    registry.load("_synthetic")
    report = {}
    for config in args.configs:
        synthetic = dataset_ref("synthetic", {**SHAPES[config], "train_cases": args.cases})
        ds = _memoised(synthetic.create())
        cfg, models = _specs(config, synthetic, args.precision)
        rows, train_seconds_per_seed = [], 0.0
        for model, specs, new in models:
            spec = specs[0]
            steps_per_epoch = -(-TRAIN_CASES[config] // spec.recipe.batch_size)
            short_spec = lambda n: spec.replace(recipe=spec.recipe.replace(epochs=1, steps_per_epoch=n))  # noqa: E731
            train(short_spec(2), device=device, progress=False, dataset=ds, loader_workers=args.loader_workers)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            _sync()
            t = time.perf_counter()
            train(short_spec(2), device=device, progress=False, dataset=ds, loader_workers=args.loader_workers)
            _sync()
            t2 = time.perf_counter()
            train(short_spec(2 + args.steps), device=device, progress=False, dataset=ds,
                  loader_workers=args.loader_workers)
            _sync()
            per_step = (time.perf_counter() - t2 - (t2 - t)) / args.steps
            train_peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
            # inference of one case: every network of the model, all its samples in one batch
            arch = arch_info(ds)
            nets = [build_network(s, arch).to(device).eval() for s in specs]
            case = ds.load(ds.case_ids("test")[0])
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            _sync()
            t = time.perf_counter()
            with torch.inference_mode(), autocast(spec.recipe.precision, device):
                samples = model.predict_case(nets, case, device)
            _sync()
            infer_s = time.perf_counter() - t
            infer_peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
            del nets, samples
            epoch_s = per_step * steps_per_epoch
            train_seconds_per_seed += len(new) * epoch_s * spec.recipe.epochs
            row = {"prediction_model": model.name, "trainings": len(specs), "new_trainings": len(new),
                   "batch": spec.recipe.batch_size, "s_per_step": round(per_step, 4),
                   "s_per_epoch": round(epoch_s, 1), "epochs": spec.recipe.epochs,
                   "train_peak_gib": None if train_peak is None else round(train_peak, 2),
                   "inference_s_per_case": round(infer_s, 3),
                   "inference_peak_gib": None if infer_peak is None else round(infer_peak, 2)}
            rows.append(row)
            print(config, json.dumps(row), flush=True)
        seeds = len(cfg.get("seeds", [0]))
        report[config] = {"rows": rows, "train_cases": TRAIN_CASES[config], "seeds": seeds,
                          "train_hours_per_seed": round(train_seconds_per_seed / 3600, 1),
                          "train_hours_full_study": round(seeds * train_seconds_per_seed / 3600, 1),
                          "largest_job_peak_gib": max((r["train_peak_gib"] or 0) for r in rows)}
        print(config, {k: v for k, v in report[config].items() if k != "rows"}, flush=True)
    return report


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--size", type=int, default=64)
    t.add_argument("--cases", type=int, default=32)
    t.add_argument("--s1", type=int, default=20)
    t.add_argument("--s2", type=int, default=220)
    t.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    t.add_argument("--workers", nargs="+", type=int, default=[0, 4])
    d = sub.add_parser("determinism")
    c = sub.add_parser("paper-configs")
    c.add_argument("--configs", nargs="+", default=["lidc_texture", "gta_cityscapes"])
    c.add_argument("--cases", type=int, default=12)
    c.add_argument("--steps", type=int, default=6)
    c.add_argument("--precision", default="bf16")
    c.add_argument("--loader-workers", type=int, default=4)
    for q in (t, c, d):
        q.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
        q.add_argument("--out")
    args = p.parse_args(argv)
    result = {"throughput": throughput, "paper-configs": paper_configs, "determinism": determinism}[args.what](args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
