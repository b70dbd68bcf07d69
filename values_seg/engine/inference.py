"""Prediction: trained networks + a prediction model -> cached probability samples per case."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from values_seg.storage.artifact import Inputs
from values_seg.engine import derived
from values_seg.engine.costs import InferenceMeter
from values_seg.engine.predictions import CaseSamples, PredictionCache
from values_seg.engine.device import fixed_threads, resolve
from values_seg.engine.precision import autocast
from values_seg.engine.specs import CODE, ENGINE_VERSION, TrainingSpec
from values_seg.registry import ComponentRef
from values_seg.storage.canonical import sha256_json
from values_seg.storage.run_files import PREDICTIONS
from values_seg.engine.networks import arch_info
from values_seg.engine.checkpoints import Checkpoints
from values_seg.storage.cache_store import CorruptFileError
from values_seg.numerics.validation import check_probabilities
from values_seg.runtime.progress import counted

log = logging.getLogger("values_seg.engine")


#: The derivation of inference random streams (:func:`stream_key`); part of the prediction key, so
#: that samples drawn under another derivation are never reused. Bump only to change the draws.
SEEDING = 2


@dataclass(frozen=True)
class PredictionInputs(Inputs):
    """A prediction's declared inputs (:mod:`values_seg.storage.artifact`), whose key names its samples:
    the model's name and cache identity, its trainings' keys (in order), the CPU threads it
    predicts with and the seeding scheme (:data:`SEEDING`); its code: the model's class. (The
    stored dtype is a folder of the entry, :class:`values_seg.engine.PredictionCache`.)"""

    stage = "prediction"
    version = ENGINE_VERSION
    folder = PREDICTIONS

    model: str
    params: Any
    specs: tuple[str, ...]
    threads: int
    seeding: int
    model_class: Any = field(default=None, metadata=CODE)

    def code(self) -> tuple:
        return (self.model_class,)


def prediction_key(model, specs: Sequence[TrainingSpec], threads: int = 1) -> str:
    """sha256 of the model's name, its ``cache_identity()`` (default: its parameters), its spec
    keys (in order), the CPU threads it predicts with, the seeding scheme and the digest of its
    code and the engine's inference code: the key of its declared inputs
    (:class:`values_seg.engine.inference.PredictionInputs`). (The cache's dtype is part of the cache's paths.)
    A derived model's (:mod:`values_seg.engine.derived`): from its wrapped model's key."""
    wrapped = derived.wrapped_model(model)
    if wrapped is not None:
        return derived.derived_key(model, prediction_key(wrapped, specs, threads))
    return PredictionInputs(model.name, model.cache_identity(), tuple(s.key() for s in specs), int(threads), SEEDING,
                            type(model)).key()


def stream_key(model, specs: Sequence[TrainingSpec], dataset_key: str) -> str:
    """What determines a model's inference randomness, and nothing else: the model's name and
    ``cache_identity()``, each training's :meth:`~TrainingSpec.stream_identity` (its experiment
    seed and member, dataset, backbone, recipe and head with their parameters) and the dataset.
    No code digest and no thread count: a refactor recomputes the samples with the same draws."""
    return sha256_json({"model": model.name, "params": model.cache_identity(),
                        "trainings": [s.stream_identity() for s in specs], "dataset": dataset_key})


def validate_samples(samples, case_id: str, num_classes: int | None = None, spatial: tuple[int, ...] | None = None,
                     num_samples: int | None = None) -> None:
    """Raise ``ValueError`` naming the case unless ``samples`` are ``[S, C, *spatial]``
    probabilities: finite, non-negative, summing to 1 over C within 1e-3 (docs/architecture.md), of the
    expected number of classes, spatial shape and samples where those are given."""
    where = f"case {case_id!r}"
    t = torch.as_tensor(samples)
    if not t.is_floating_point():
        raise ValueError(f"{where}: samples must be floating point, got {t.dtype}")
    if t.ndim < 3:
        raise ValueError(f"{where}: samples must be [S, C, *spatial], got shape {tuple(t.shape)}")
    if num_classes is not None and t.shape[1] != num_classes:
        raise ValueError(f"{where}: samples have {t.shape[1]} classes, expected {num_classes} (shape {tuple(t.shape)})")
    if spatial is not None and tuple(t.shape[2:]) != tuple(spatial):
        raise ValueError(f"{where}: samples' spatial shape {tuple(t.shape[2:])} differs from the image's {tuple(spatial)}")
    if num_samples is not None and t.shape[0] != num_samples:
        raise ValueError(f"{where}: {t.shape[0]} samples, expected {num_samples}")
    check_probabilities(t, where, spatial_dims=(t.ndim - 2,))  # finite, >= 0, sums to 1 within 1e-3


def case_seed(stream: str, case_id: str) -> int:
    """The seed of a case's inference randomness (dropout, noise, sampling), from the
    :func:`stream_key` of its model and the case id."""
    return int.from_bytes(hashlib.sha256(f"{stream}/{case_id}".encode()).digest()[:8], "little") >> 1


def _fork_rng(device: torch.device):
    """Leave the caller's RNG state untouched by a case's seeded inference."""
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    return torch.random.fork_rng(devices=devices)


def predict_case(model, networks, case, device: torch.device, stream: str, num_classes: int,
                 precision: str = "fp32") -> torch.Tensor:
    """The validated float32 CPU samples of one case (seeded by :func:`stream_key` and case id),
    computed in ``precision`` (the trainings' :attr:`Recipe.precision`; all samples of a case in
    one batch where the model batches them, one transfer back to the CPU)."""
    with _fork_rng(device), torch.inference_mode(), autocast(precision, device):
        seed = case_seed(stream, case.case_id)
        torch.default_generator.manual_seed(seed)  # (torch.manual_seed also seeds lazily every backend: slow)
        if device.type == "cuda":
            with torch.cuda.device(device):
                torch.cuda.manual_seed(seed)
        samples = model.predict_case(networks, case, device)
    if not isinstance(samples, torch.Tensor):
        raise TypeError(f"{model.name}.predict returned {type(samples).__name__}, expected a torch.Tensor")
    samples = samples.detach().float().cpu()
    validate_samples(samples, case.case_id, num_classes, tuple(case.image.shape[1:]), model.num_samples_predicted)
    return samples


def _dataset_and_key(dataset, specs: Sequence[TrainingSpec], dataset_key: str | None):
    """(instance, cache key, the ComponentRef the instance was built from if known)."""
    if isinstance(dataset, ComponentRef):
        return dataset.create(), dataset_key or dataset.key(), dataset
    if dataset_key is not None:
        return dataset, dataset_key, None
    refs = {s.dataset for s in specs}
    if len(refs) == 1:
        ref = next(iter(refs))
        return dataset, ref.key(), ref
    raise ValueError("predict_split: pass dataset as a ComponentRef (engine.dataset_ref(name, params)) or give dataset_key")


def predict_split(
    model,
    specs: Sequence[TrainingSpec],
    store: Checkpoints,
    dataset,
    split: str,
    cache: PredictionCache,
    device: str | torch.device | None = None,
    progress: bool = True,
    dataset_key: str | None = None,
    threads: int = 1,
    failed: dict[str, str] | None = None,
    networks: dict | None = None,
) -> list[CaseSamples]:
    """Predict and cache every case of ``split`` that is not cached yet; lazy handles for all.

    ``specs``: ``model.training_specs(base)``; their networks are loaded once (training first
    whatever is missing or corrupt, normally nothing since the runner calls ``ensure_trained``; a
    checkpoint that does not fit its spec's network is set aside and trained again:
    :func:`~values_seg.engine.load_network`).
    ``dataset``: a :class:`ComponentRef` (its key keys the cache) or a built instance (then the
    key is ``dataset_key``, or the specs' common dataset's). Handles come in ``case_ids(split)``
    order; each loads its samples only when asked, so one case is in memory at a time.
    ``threads``: the CPU threads inference runs with (part of the cache key: CPU results depend on it).
    ``failed``: given, a case that cannot be loaded or predicted (a ``ValueError``: unusable data,
    invalid samples) is recorded there (case id -> error) and left out, and the others go on.
    ``networks``: given, the loaded networks by (spec key, device), kept there for the next split
    of the same evaluation (each checkpoint is then read and hash-checked once).
    A derived model's samples are made from its wrapped model's (:func:`_predict_derived`).
    """
    from values_seg.engine.training import ensure_trained, load_network

    dev = resolve(device)
    specs = list(specs)
    ds, dkey, ref = _dataset_and_key(dataset, specs, dataset_key)
    ds.check_split(split)
    pkey = prediction_key(model, specs, threads)
    if derived.wrapped_model(model) is not None:
        again = dict(device=dev, progress=progress, dataset_key=dkey, threads=threads, networks=networks)
        return _predict_derived(model, specs, store, dataset, ds, dkey, split, cache, pkey, failed, again)
    stream = stream_key(model, specs, dkey)
    ids = list(ds.case_ids(split))
    missing = [cid for cid in ids if not cache.has(pkey, dkey, split, cid)]
    if missing:
        log.info("predicting %d of %d cases of %s/%s with %s", len(missing), len(ids), split, dkey[:8], model.describe())
        cache.describe(pkey, {"model": model.name, "params": model.params(), "family": model.family,
                              "specs": [s.to_dict() for s in specs], "spec_keys": [s.key() for s in specs]})
        loaded = {} if networks is None else networks
        if any((s.key(), str(dev)) not in loaded for s in specs):
            datasets = {ref: ds} if ref is not None else {}
            ensure_trained(specs, store, device=dev, progress=progress, datasets=datasets)
            for s in specs:
                if (s.key(), str(dev)) in loaded:
                    continue
                arch = arch_info(ds) if s.dataset == ref else None  # what its own dataset says, where known
                try:
                    loaded[s.key(), str(dev)] = load_network(s, store, dev, arch)
                except CorruptFileError:  # set aside, with a warning saying why: trained again, once
                    ensure_trained([s], store, device=dev, progress=progress, datasets=datasets)
                    loaded[s.key(), str(dev)] = load_network(s, store, dev, arch)
        nets = [loaded[s.key(), str(dev)] for s in specs]
        precision = specs[0].recipe.precision if specs else "fp32"
        meter = InferenceMeter(nets, dev)  # each case's cost, kept in its sidecar (never in a key)
        try:
            for cid in counted(missing, len(missing), f"predict {model.name} {split}", progress):
                try:
                    case = ds.load(cid)
                    with fixed_threads(threads):
                        with meter.case():
                            samples = predict_case(model, nets, case, dev, stream, ds.num_classes, precision)
                except ValueError as e:
                    _leave_out(failed, cid, split, e)
                    continue
                cache.save(pkey, dkey, split, cid, samples, {"model": model.name, "prediction_key": pkey, "dataset_key": dkey,
                                                             **meter.record()})
        finally:
            del nets
    return [cache.handle(pkey, dkey, split, cid) for cid in ids if cid not in (failed or {})]


def _predict_derived(model, specs, store, dataset, ds, dkey: str, split: str, cache: PredictionCache, pkey: str,
                     failed: dict[str, str] | None, again: dict) -> list[CaseSamples]:
    """:func:`predict_split` of a derived model (:mod:`values_seg.engine.derived`): its wrapped model's
    samples of the split (predicted where missing, with the same trainings), its fit on the wrapped
    model's validation samples (cached beside its own), and each missing case transformed, validated
    and cached. A case the wrapped model leaves out is left out here too."""
    wrapped = derived.wrapped_model(model)
    ids = list(ds.case_ids(split))
    missing = [cid for cid in ids if not cache.has(pkey, dkey, split, cid)]
    if missing:
        def cases() -> derived.FitCases:
            handles = predict_split(wrapped, specs, store, dataset, "val", cache, failed={}, **again)
            return derived.FitCases(handles, ds, ds.num_classes, ds.ignore_index)

        state = derived.fitted(model, cache, pkey, dkey, cases)
        left_out: dict[str, str] = {}
        given = {h.case_id: h for h in predict_split(wrapped, specs, store, dataset, split, cache,
                                                        failed=None if failed is None else left_out, **again)}
        cache.describe(pkey, {"model": model.name, "params": model.params(), "family": model.family,
                              "wrapped": prediction_key(wrapped, specs, again["threads"]), "fitted": state})
        for cid in counted(missing, len(missing), f"predict {model.name} {split}", again["progress"]):
            try:
                if cid in left_out:
                    raise ValueError(f"left out by {wrapped.name}: {left_out[cid]}")
                base = given[cid].load()
                with fixed_threads(again["threads"]):
                    samples = model.transform(base, state)
                if not isinstance(samples, torch.Tensor):
                    raise TypeError(f"{model.name}.transform returned {type(samples).__name__}, expected a torch.Tensor")
                samples = samples.detach().float().cpu()
                validate_samples(samples, cid, ds.num_classes, tuple(base.shape[2:]), model.num_samples_predicted)
            except ValueError as e:
                _leave_out(failed, cid, split, e)
                continue
            cache.save(pkey, dkey, split, cid, samples, {"model": model.name, "prediction_key": pkey, "dataset_key": dkey})
    return [cache.handle(pkey, dkey, split, cid) for cid in ids if cid not in (failed or {})]


def _leave_out(failed: dict[str, str] | None, case_id: str, split: str, error: ValueError) -> None:
    """A case whose prediction failed: re-raised where no case may be left out (``failed`` is None),
    else noted in ``failed`` with a warning."""
    if failed is None:
        raise error
    failed[case_id] = f"{type(error).__name__}: {error}"
    log.warning("case %s of %s left out: %s", case_id, split, error)
