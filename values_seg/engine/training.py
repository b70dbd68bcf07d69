"""Training: one :class:`~values_seg.engine.specs.TrainingSpec` -> one state dict.

:func:`train` trains for real on the resolved device; :func:`ensure_trained` trains each
distinct missing spec once and stores it; :func:`load_network` rebuilds a trained network.
"""

from __future__ import annotations

import logging
import math
import time
import traceback
from pathlib import Path
from typing import Iterable

import torch
from torch import nn

from values_seg.engine import augment, fused
from values_seg.engine.curves import CurveRecorder, CurveSettings
from values_seg.engine.device import fixed_threads, resolve
from values_seg.engine.precision import LossScaler, autocast
from values_seg.engine.networks import build_network
from values_seg.engine.specs import TrainingSpec, unique_specs
from values_seg.engine.checkpoints import Checkpoints
from values_seg.engine.training_setup import (_optimizer, check_finite_weights, deterministic_cuda, non_finite, prepare,
                                              training_inputs)
from values_seg.runtime.progress import meter

log = logging.getLogger("values_seg.engine")


def train(
    spec: TrainingSpec,
    device: str | torch.device | None = None,
    progress: bool = True,
    dataset=None,
    max_cache_bytes: int = 4 << 30,
    loader_workers: int | None = None,
    curves: CurveSettings | None = None,
) -> dict[str, torch.Tensor]:
    """Train ``spec`` and return its state dict (CPU tensors).

    ``dataset``: an already built instance of ``spec.dataset`` (else it is rebuilt through the
    registry). Reproducible: the same spec on the CPU gives identical weights; it trains with
    ``spec.threads`` CPU threads (part of its key), whatever process runs it, and whatever the
    number of ``loader_workers`` (:mod:`values_seg.engine.loader`; ``None``: none on the CPU, up
    to 4 for a GPU). In ``spec.recipe.precision`` (:mod:`values_seg.engine.precision`).
    ``curves``: the validation Dice of its learning curve (:mod:`values_seg.engine.curves`; the
    weights do not depend on it).
    """
    state, _ = _train(spec, device, progress, dataset, max_cache_bytes, loader_workers, curves)
    return state


def _train(spec, device, progress, dataset, max_cache_bytes, loader_workers=None, curves=None) -> tuple[dict, dict]:
    with fixed_threads(spec.threads):
        return _train_loop(spec, device, progress, dataset, max_cache_bytes, loader_workers, curves)


def _train_loop(spec, device, progress, dataset, max_cache_bytes, loader_workers=None, curves=None) -> tuple[dict, dict]:
    dev = resolve(device)
    if dev.type == "cuda":
        deterministic_cuda()
    t0 = time.time()
    ds = dataset if dataset is not None else spec.dataset.create()
    p = prepare(spec, dev, ds, max_cache_bytes, loader_workers)
    r, net, arch, ids, gen, fill, loss_fn = spec.recipe, p.net, p.arch, p.ids, p.gen, p.fill, p.loss_fn
    steps_per_epoch, total, batches = p.steps_per_epoch, p.total, p.batches
    opt = _optimizer(spec, net.parameters())
    sched = None
    if r.lr_schedule == "poly" and total > 0:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(1 - s / total, 0.0) ** 0.9)
    scaler = LossScaler(r.precision, dev)
    curve = CurveRecorder(spec, curves, ds, arch, steps_per_epoch, dev)

    net.train()
    step, running, pending = 0, None, []
    sync_every = 1 if dev.type == "cpu" else 10
    with meter(total, f"train {spec.describe()}", progress, unit="step") as bar:
        for x, y, plans in batches:
            epoch = step // steps_per_epoch
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            x, y = augment.apply(x, y, plans, r, gen, fill_label=fill)
            extra = training_inputs(spec, y)
            with autocast(r.precision, dev):  # forward and loss (autocast keeps the losses in float32)
                loss = loss_fn(net(x, *extra), y, epoch)
            opt.zero_grad(set_to_none=True)
            scaler.step(loss, opt)
            if sched is not None:
                sched.step()
            step += 1
            pending.append(loss.detach())
            if step % steps_per_epoch == 0 and curve.due(epoch):
                net.eval()
                curve.epoch_end(epoch, net)
                net.train()
            if len(pending) >= sync_every or step == total:  # on a GPU, sync only now and then
                for i, value in enumerate(torch.stack(pending).tolist()):
                    curve.loss(step - len(pending) + i, value)
                    if not math.isfinite(value):
                        raise FloatingPointError(f"spec {spec.describe()}: loss became {value} near step {step} (epoch {epoch})")
                    running = value if running is None else 0.9 * running + 0.1 * value
                bar.advance(len(pending), epoch=epoch, loss=f"{running:.4f}")
                pending.clear()
    state = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    check_finite_weights(spec, state, step)
    info = {
        "arch": arch,
        "steps": step,
        "final_loss": running,
        "train_seconds": round(time.time() - t0, 3),
        "device": str(dev),
        "num_train_cases": len(ids),
        "curve": curve.record(),
    }
    log.info("trained %s: %d steps in %.1fs, loss %.4f", spec.describe(), step, info["train_seconds"], running or float("nan"))
    return state, info


def ensure_trained(
    specs: Iterable[TrainingSpec],
    store: Checkpoints,
    device: str | torch.device | None = None,
    progress: bool = True,
    datasets: dict | None = None,
    loader_workers: int | None = None,
    curves: CurveSettings | None = None,
) -> dict[str, Path]:
    """Train every distinct spec (by key) that has no intact checkpoint; ``{key: path}`` for all.

    Each missing spec is trained exactly once per call and saved atomically (fused specs in groups,
    :mod:`values_seg.engine.fused`; a member that fails is named in the error raised after the
    others of its group are saved); a corrupt
    checkpoint counts as missing. ``datasets``: optional ``{ComponentRef: instance}`` of already
    built datasets; datasets built here are added to it, so specs sharing one build it once.
    ``loader_workers``, ``curves``: see :func:`train` (the weights do not depend on them)."""
    out = {}
    todo = unique_specs(specs)
    missing = [s for s in todo.values() if not store.has(s)]
    if missing:
        log.info("training %d of %d distinct specs (%d found in %s)", len(missing), len(todo), len(todo) - len(missing), store.root)
    datasets = {} if datasets is None else datasets
    failed = {}
    for group in fused.job_groups(missing):
        if group[0].fused:  # one job (vectorised on the CPU); a member that fails fails alone
            errors = train_fused(group, store, device, progress, datasets, loader_workers, curves=curves)
            failed.update({k: e for k, e in errors.items() if e})
            continue
        _train_and_save(group[0], store, device, progress, datasets, loader_workers, curves)
    if failed:
        raise FloatingPointError(f"{len(failed)} fused training(s) failed (the others are saved): "
                                 + "; ".join(failed.values()))
    for key, spec in todo.items():
        out[key] = store.path(spec)
    return out


def train_fused(specs: list[TrainingSpec], store: Checkpoints, device=None, progress: bool = True,
                datasets: dict | None = None, loader_workers: int | None = None,
                curves: CurveSettings | None = None) -> dict[str, str | None]:
    """Train the fused ``specs`` that ``store`` lacks and save each; ``{key: None (saved) or the
    error of a member that failed alone}``: vectorised where the device allows it (the CPU,
    :func:`fused.vectorises`, :func:`fused.train_group`), elsewhere one by one with this module's loop."""
    if fused.vectorises(device):
        return fused.train_group(specs, store, device, progress, datasets, loader_workers, curves=curves)
    datasets = {} if datasets is None else datasets
    errors: dict[str, str | None] = {}
    for spec in fused.missing(specs, store, errors):
        try:
            _train_and_save(spec, store, device, progress, datasets, loader_workers, curves)
        except FloatingPointError as e:  # diverged: named as the vectorised loop names it
            errors[spec.key()] = f"FloatingPointError: {e}"
        except Exception:  # noqa: BLE001 - recorded as that member's failure; the others go on
            errors[spec.key()] = traceback.format_exc()
        else:
            errors[spec.key()] = None
    return errors


def _train_and_save(spec: TrainingSpec, store: Checkpoints, device, progress: bool, datasets: dict,
                    loader_workers: int | None, curves: CurveSettings | None) -> None:
    """Train ``spec`` with this module's loop (its dataset built once into ``datasets``) and save it."""
    if spec.dataset not in datasets:
        datasets[spec.dataset] = spec.dataset.create()
    # looked up as a module attribute on purpose (tests count trainings by patching it)
    state, info = train_with_info(spec, device=device, progress=progress, dataset=datasets[spec.dataset],
                                  loader_workers=loader_workers, curves=curves)
    store.save(spec, state, info.pop("arch"), **info)


def train_with_info(spec: TrainingSpec, device=None, progress: bool = True, dataset=None, max_cache_bytes: int = 4 << 30,
                    loader_workers: int | None = None, curves: CurveSettings | None = None):
    """Like :func:`train`, returning ``(state_dict, info)`` (info: arch, steps, final loss, time, curve)."""
    return _train(spec, device, progress, dataset, max_cache_bytes, loader_workers, curves)


def load_network(spec: TrainingSpec, store: Checkpoints, device: str | torch.device | None = None,
                 arch: dict | None = None) -> nn.Module:
    """The trained network of ``spec`` on ``device``, in eval mode.

    ``arch``: what the spec's dataset says of the network (:func:`~values_seg.engine.networks.arch_info`;
    default: what the checkpoint records). Before any weight is loaded, a checkpoint that does not
    fit the network the spec builds (another architecture recorded, other tensors or shapes, a
    non-finite weight) is set aside with one warning and :class:`~values_seg.engine.CorruptFileError`
    raised, so that :func:`ensure_trained` retrains it."""
    dev = resolve(device)
    payload = store.load(spec)
    recorded = payload.get("arch")
    if arch is not None and recorded != arch:
        raise store.reject(spec, f"it records the architecture {recorded}, spec {spec.describe()}'s data {arch}")
    net = build_network(spec, recorded if arch is None else arch)
    problem = _misfit(net.state_dict(), payload.get("state_dict"))
    if problem is None and (where := non_finite(payload["state_dict"])) is not None:
        problem = f"a weight is not finite, first in {where}"
    if problem is not None:
        raise store.reject(spec, f"it does not fit spec {spec.describe()}: {problem}")
    net.load_state_dict(payload["state_dict"])
    return net.to(dev).eval()


def _misfit(expected: dict[str, torch.Tensor], found) -> str | None:
    """How the state dict ``found`` differs from the network's own (``expected``) in tensor names or
    shapes; ``None`` where they agree."""
    if not isinstance(found, dict):
        return f"its weights are a {type(found).__name__}, not a state dict"
    missing, unexpected = [k for k in expected if k not in found], [k for k in found if k not in expected]
    if missing or unexpected:
        return (f"{len(missing)} of the network's tensors missing{f' (first {missing[0]!r})' if missing else ''}, "
                f"{len(unexpected)} unknown to it{f' (first {unexpected[0]!r})' if unexpected else ''}")
    for name, tensor in expected.items():
        other = found[name]
        if not torch.is_tensor(other):
            return f"{name!r} is a {type(other).__name__}, not a tensor"
        if other.shape != tensor.shape:
            return f"{name!r} has shape {tuple(other.shape)}, the network's {tuple(tensor.shape)}"
    return None
