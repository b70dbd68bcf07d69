"""The training and inference engine: specs -> checkpoints -> cached probability samples.

Contract (what the runner relies on)
------------------------------------

**Training specs** (:mod:`values_seg.engine.specs`). A :class:`TrainingSpec` is a frozen
dataclass holding everything that determines one set of weights and nothing else: the dataset
(``ComponentRef("dataset", name, params)``; a worker rebuilds it with ``spec.dataset.create()``),
the training cases (``train_split`` plus ``extra_cases``, ``(split, case_id)`` pairs whose
labels are added, e.g. the second active-learning cycle), the backbone (name + params), its
``dropout``, a prediction model's own output ``head`` (a
:class:`~values_seg.components.prediction_model.Head`, or ``None`` for the backbone's logits), the
:class:`Recipe` (optimizer, lr, weight decay, momentum, lr schedule, batch size, epochs, steps
per epoch, loss, augmentation) and the ``seed``. ``spec.key()`` is the sha256 of its canonical
JSON (with :data:`ENGINE_VERSION`). Component parameters are normalised on construction (types
coerced, defaults filled in), so equivalent specs are equal.

**Prediction models** (:class:`values_seg.components.prediction_model.PredictionModel`, registered with
the ``values_seg_prediction_models`` hook) derive their specs from a template:
``model.training_specs(base)``, where ``base`` is the plain softmax training of the experiment's
dataset, backbone, recipe and seed. ``deterministic`` and ``test_time_augmentation`` return
``[base]``; ``ensemble`` (members=5) returns ``base`` with seeds ``5 seed .. 5 seed + 4`` (its
own block per run seed; for seed 0 they are the deterministic specs of seeds 0..4, so they are
trained once); ``test_time_dropout`` returns
``base`` with ``dropout=p``; a model with its own head and loss one spec carrying its head. A model's ``family``
("deterministic", "bayesian", "augmentation", "variability") maps measures to uncertainty types.
``model.predict(networks, image)`` turns the trained networks (in spec order) and one image
``[in_channels, *spatial]`` into probability samples ``[S, C, *spatial]``.

**Backbones** (``values_seg_backbones`` hook): factories
``(dims, in_channels, num_classes, dropout=0.0, **params) -> nn.Module``; built-ins ``unet``
(nnU-Net's PlainConvUNet, 2D/3D) and ``hrnet`` (timm, 2D).

**Engine functions**

* :func:`resolve` (``device.resolve``): ``None``/``"auto"`` -> CUDA if available else CPU.
* :func:`train(spec, device=None, progress=True) <train>` -> state dict (CPU tensors). Seeds
  Python, NumPy and torch from ``spec.seed``; on the CPU the same spec gives identical weights
  (it trains with ``spec.threads`` CPU threads, recorded in its key, whatever process runs it).
  Multiple raters: a random rater per sample and step. tqdm bar with the running loss.
* :class:`Checkpoints(root) <Checkpoints>`: ``path(spec)``, ``has(spec)`` (verifies the
  sha256 sidecar; a corrupt or truncated file is reported through ``warnings`` and logging, set
  aside as ``*.corrupt`` and treated as missing), ``save(spec, state_dict, arch)`` (atomic),
  ``load(spec)`` (``torch.load(weights_only=True)``).
* :func:`ensure_trained(specs, store, device=None, progress=True) <ensure_trained>` ->
  ``{key: path}``: trains each distinct missing spec exactly once.
* Fused training (:mod:`values_seg.engine.fused`): specs with ``fused=True`` (the runner's
  ``fuse_training``, default) that share backbone, recipe and head train as one vectorised job
  (``ensure_trained`` groups them; :func:`training.train_fused` returns each member's error or
  ``None``) on the CPU, and one by one on a GPU (:func:`fused.vectorises`); a member's weights are
  bit-identical whatever else trains in its group.
* Learning curves (:mod:`values_seg.engine.curves`): both loops record each training's mean loss
  per epoch and, per :class:`~values_seg.engine.curves.CurveSettings` (``curves=`` of
  ``train``/``ensure_trained``/``fused.train_group``), its validation Dice every few epochs in the
  sidecar's ``curve``; measured in eval mode drawing no random numbers, so the weights are
  bit-identical with it on or off (not part of the key).
* :func:`load_network(spec, store, device) <load_network>`: the trained network, eval mode.
* :class:`PredictionCache(root, dtype="float16") <PredictionCache>`: per-case samples keyed by
  (prediction key, dtype, dataset key, split, case id), ``.npy`` + sha256 sidecar, atomic,
  corruption detected -> re-predicted.
* :func:`predict_split(model, specs, store, dataset, split, cache, device=None, progress=True)
  <predict_split>` -> list of :class:`CaseSamples` handles (``case_id``, ``split``, ``path``,
  ``load()`` -> float32 ``[S, C, *spatial]``), predicting and caching only missing cases. Samples
  are validated before caching (finite, >= 0, sum to 1 over C within 1e-3; ``ValueError`` naming
  the case). Inference randomness is seeded per case from :func:`stream_key` (model, parameters,
  the trainings' seeds and components, dataset; no code digest), so re-predicting a case, also
  after a change to the code that leaves the maths alone, reproduces it (on the same device).
* :func:`prediction_key(model, specs) <prediction_key>`: sha256 of model name, params, spec keys,
  threads and code digest.

Usage
-----
::

    from values_seg import registry
    from values_seg.engine import (Checkpoints, PredictionCache, Recipe, TrainingSpec,
                                   dataset_ref, ensure_trained, predict_split)

    data = dataset_ref("toy", {"scenario": "1", "dims": 2, "size": 32})
    base = TrainingSpec.create(data, "unet", backbone_params={"base_width": 8},
                               recipe=Recipe(epochs=150), seed=0)
    store, cache = Checkpoints("runs/x/checkpoints"), PredictionCache("runs/x/predictions")

    models = {n: registry.create("prediction_model", n) for n in ("deterministic", "ensemble")}
    specs = {n: m.training_specs(base) for n, m in models.items()}
    ensure_trained([s for ss in specs.values() for s in ss], store)   # 5 trainings, not 6

    for name, model in models.items():
        for handle in predict_split(model, specs[name], store, data, "test", cache):
            samples = handle.load()            # torch.float32 [S, C, *spatial], one case in memory
"""

from values_seg.storage.cache_store import CorruptFileError, CorruptFileWarning

#: name -> the module that defines it: imported on first use (:func:`__getattr__`), so that
#: importing the engine (e.g. for :class:`Recipe` in the config) does not import torch
_HOMES = {
    "values_seg.engine.predictions": ("CaseSamples", "PredictionCache"),
    "values_seg.engine.device": ("resolve",),
    "values_seg.engine.inference": ("predict_case", "predict_split", "prediction_key", "stream_key", "validate_samples"),
    "values_seg.engine.networks": ("arch_info", "build_network", "enable_dropout"),
    "values_seg.engine.specs": ("ENGINE_VERSION", "RECIPE_PRESETS", "Recipe", "TrainingSpec", "backbone_ref",
                                "dataset_ref", "unique_specs"),
    "values_seg.engine.checkpoints": ("Checkpoints",),
    "values_seg.engine.training": ("ensure_trained", "load_network", "train", "train_with_info"),
    "values_seg.engine.training_setup": ("seed_everything",),
    "values_seg.registry": ("ComponentRef",),
}
_SUBMODULES = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str):
    """The engine's public names, each from its submodule when first asked for (PEP 562)."""
    import importlib
    import importlib.util

    if name not in _SUBMODULES:  # a submodule (values_seg.engine.training), as an attribute
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_SUBMODULES[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "ENGINE_VERSION",
    "RECIPE_PRESETS",
    "CaseSamples",
    "Checkpoints",
    "ComponentRef",
    "CorruptFileError",
    "CorruptFileWarning",
    "PredictionCache",
    "Recipe",
    "TrainingSpec",
    "arch_info",
    "backbone_ref",
    "build_network",
    "dataset_ref",
    "enable_dropout",
    "ensure_trained",
    "load_network",
    "predict_case",
    "predict_split",
    "prediction_key",
    "stream_key",
    "resolve",
    "seed_everything",
    "train",
    "train_with_info",
    "unique_specs",
    "validate_samples",
]
