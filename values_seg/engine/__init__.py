"""The training and inference engine: training specs -> checkpoints -> cached probability samples.

The public names are imported from their submodules on first use, so importing the engine does not
import torch. The contract the runner relies on, with an example: docs/design-rationale.md,
"Engine".
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
