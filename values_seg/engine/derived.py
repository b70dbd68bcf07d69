"""Derived predictions: a model whose samples are a transform of another model's cached samples,
fitted on that model's validation split (a post-hoc recalibration). Their key, the fit (cached
beside the samples it makes) and the transform of each case; the contract a model implements:
:class:`values_seg.components.derived_model.DerivedModel`, the prediction stage: :mod:`values_seg.engine.inference`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from values_seg.engine.predictions import WHAT, CaseSamples, PredictionCache
from values_seg.engine.specs import CODE, ENGINE_VERSION
from values_seg.storage import cache_store
from values_seg.storage.artifact import Inputs
from values_seg.storage.cache_store import CorruptFileError
from values_seg.storage.run_files import PREDICTIONS

log = logging.getLogger("values_seg.engine")

#: the name of the fit's record beside a derived model's samples (:meth:`PredictionCache.record`)
FIT = "fit"


@dataclass(frozen=True)
class DerivedInputs(Inputs):
    """A derived model's declared inputs, whose key names its fit and its samples: the model's name
    and cache identity (the fit's settings), the key of the samples it transforms (the wrapped
    model's: its trainings, parameters and code, :class:`~values_seg.engine.inference.PredictionInputs`);
    its code: the model's class. (The stored dtype and the data set are folders of the entry, as for
    every prediction: the fit reads the wrapped model's samples of that dtype and that data set.)"""

    stage = "prediction"
    version = ENGINE_VERSION
    folder = PREDICTIONS

    model: str
    params: Any
    wrapped: str
    model_class: Any = field(default=None, metadata=CODE)

    def code(self) -> tuple:
        return (self.model_class,)


def wrapped_model(model) -> Any:
    """The model whose samples ``model`` transforms (its ``wrapped`` attribute), ``None`` for a
    model that predicts from its networks."""
    return getattr(model, "wrapped", None)


def derived_key(model, wrapped_key: str) -> str:
    """The prediction key of a derived model whose wrapped model's samples have ``wrapped_key``."""
    return DerivedInputs(model.name, model.cache_identity(), wrapped_key, type(model)).key()


@dataclass(frozen=True)
class FitCases:
    """The validation cases a derived model is fitted on, each read when iterated: ``(case id, the
    wrapped model's samples [S, C, *spatial] float32, the raters [R, *spatial])``; ``len``: how many
    (a case the data set cannot load is left out, with a warning). ``num_classes`` and
    ``ignore_index`` are the data set's."""

    handles: Sequence[CaseSamples]
    dataset: Any
    num_classes: int
    ignore_index: int | None

    def __len__(self) -> int:
        return len(self.handles)

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor, np.ndarray]]:
        for handle in self.handles:
            try:
                case = self.dataset.load(handle.case_id)
            except ValueError as e:
                log.warning("validation case %s left out of the fit: %s", handle.case_id, e)
                continue
            yield handle.case_id, handle.load(), np.asarray(case.raters)


def fitted(model, cache: PredictionCache, key: str, dataset_key: str, cases: Callable[[], FitCases]) -> Any:
    """The fitted state of the derived model of prediction key ``key`` on this data set: read from
    its record where cached (verified), else ``model.fit(cases())`` recorded. Either way the state as
    its JSON reads back, so a fresh fit and a cached one transform alike."""
    path = cache.record(key, dataset_key, FIT)
    if cache_store.check(path, WHAT) is not None:
        try:
            return json.loads(cache_store.read_verified(path, WHAT))["fitted"]
        except CorruptFileError:
            pass  # set aside, with a warning: fitted again
    data = json.dumps({"model": model.name, "fitted": model.fit(cases())}, sort_keys=True, allow_nan=False)
    cache_store.write_verified(path, data.encode(), {"model": model.name, "prediction_key": key,
                                                    "dataset_key": dataset_key})
    return json.loads(data)["fitted"]
