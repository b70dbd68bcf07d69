"""The runner's pre-flight step: the checks of an experiment that build objects, before any work.

:func:`values_seg.config.loading.load_config` checks the config's schema, names and value ranges; this
step builds what the run will build, so that an error shows before anything is trained or
written: every prediction model, measure, aggregation and task with its parameters (constructors
check their own value ranges; a task's and its stages' quantities must be registered), every
dataset (parameters and splits; nothing is loaded), and every backbone for each dataset's shape
on torch's meta device (no memory, no weights). Errors are :class:`~values_seg.config.loading.ConfigError`
naming the config key. An experiment is checked once per process.
"""

from __future__ import annotations

import weakref

from values_seg.config.checks import ConfigError
from values_seg.config.experiment import COMPONENT_LISTS, Experiment
from values_seg.runner import tracking

_checked: "weakref.WeakSet[Experiment]" = weakref.WeakSet()


def check(exp: Experiment) -> Experiment:
    """Run the pre-flight checks of ``exp`` once; returns it."""
    if exp in _checked:
        return exp
    _check_components(exp)
    _check_data_and_backbones(exp)
    tracking.trackers(exp)  # a tracker's missing package, named with its extra
    _checked.add(exp)
    return exp


def _check_components(exp: Experiment) -> None:
    """Build every component but datasets and backbones (checked against the data below)."""
    for key, kind in COMPONENT_LISTS.items():
        if kind in ("dataset", "backbone"):
            continue
        for ref in exp.refs(key):
            try:
                instance = ref.create()
                if kind == "task":
                    _check_consumes(ref.name, instance)
            except ValueError as e:
                raise ConfigError(f"config {key}: {e}") from e


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config {key}: {message}")


def _check_data_and_backbones(cfg: Experiment) -> None:
    """Build every dataset (parameters and splits checked; nothing is loaded) and every backbone
    for each dataset's shape on torch's meta device (no memory, no weights)."""
    import torch

    from values_seg.engine.specs import BACKBONE_ARGS

    models = [r.create() for r in cfg.refs("prediction_models")]
    trains = any(m.uses_backbone for m in models)
    fits = any(type(a.create()).fit is not _aggregation_base().fit for a in cfg.refs("aggregations"))
    for ref in cfg.refs("datasets"):
        where = f"datasets ({ref.label})"
        try:
            dataset = ref.create()
        except (ValueError, TypeError, FileNotFoundError) as e:
            raise ConfigError(f"config {where}: {e}") from e
        needed = ["test"] + (["train"] if trains else []) + (["val"] if fits or _fits_quantities(cfg) else [])
        for split in needed:
            try:
                n = len(dataset.case_ids(split))
            except (ValueError, KeyError) as e:
                raise ConfigError(f"config {where}: {e}") from e
            _check(n > 0, where, f"the split {split!r} has no cases")
        for b in cfg.refs("backbones") if trains else []:
            factory = b.component().obj
            args = dict(zip(BACKBONE_ARGS, (dataset.dims, dataset.in_channels, dataset.num_classes, 0.0)))
            try:
                with torch.device("meta"), _no_random_fills():
                    factory(**args, **b.kwargs)
            except Exception as e:  # noqa: BLE001 - a backbone that cannot be built for this data
                raise ConfigError(f"config backbones ({b.label}): cannot build it for dataset {ref.label!r} "
                                  f"({dataset.dims}D, {dataset.in_channels} channel(s), {dataset.num_classes} "
                                  f"classes): {type(e).__name__}: {e}") from e


def _no_random_fills():
    """A torch function mode in which random fills of meta tensors (weight initialisation) do
    nothing: a meta tensor holds no values, and torch runs such fills through Python
    decompositions that import ``torch._dynamo`` (~1.5 s of every run's validation)."""
    import torch
    from torch.overrides import TorchFunctionMode

    fills = {torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.bernoulli_, torch.Tensor.random_,
             torch.Tensor.exponential_, torch.Tensor.geometric_, torch.Tensor.log_normal_, torch.Tensor.cauchy_}

    class NoRandomFills(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in fills and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
                return args[0]
            return func(*args, **(kwargs or {}))

    return NoRandomFills()


def _aggregation_base():
    from values_seg.components.aggregation import Aggregation

    return Aggregation


def _check_consumes(name: str, task) -> None:
    """The task's (and its stages') quantities are registered; ``ValueError`` listing the known ones."""
    from values_seg.components.quantity import resolve
    from values_seg.components.stage import stages_of

    resolve(task.consumes, f"task {name!r}")
    for stage in stages_of({name: task}):
        resolve(stage.consumes, f"stage {stage.name!r} of task {name!r}")


def _fits_quantities(cfg: Experiment) -> bool:
    """Whether a quantity the tasks consume is fitted on the validation split (e.g. calibration)."""
    from values_seg.components.quantity import resolve
    from values_seg.components.stage import stages_of

    tasks = {t.label: t.create() for t in cfg.refs("tasks")}
    names = [q for t in [*tasks.values(), *stages_of(tasks)] for q in t.consumes]
    return any(q.fits() for q in resolve(names).values())
