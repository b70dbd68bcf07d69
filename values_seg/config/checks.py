"""Every check of a config, in one place: its nesting before it is loaded, its values once loaded,
its components against the registry (:func:`validate`, every load), and what builds objects
(:func:`preflight`, once per experiment, before any work). A failure is a :class:`ConfigError`
naming the key and what is valid."""

from __future__ import annotations

import logging
import re
import weakref
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from values_seg.components.settings import LESION_IOU_RULES
from values_seg.components.tracker import Tracker
from values_seg.config.experiment import COMPONENT_LISTS, Experiment
from values_seg.engine.specs import Recipe
from values_seg.params import MAX_INT, closest
from values_seg.registry import ComponentRef
from values_seg.storage import run_files

#: Upper bounds of the run's own settings: beyond them a value is absurd (it would run until killed).
MAX_RESAMPLES = 100_000
MAX_WORKERS = 1024


class ConfigError(ValueError):
    """An invalid experiment config; the message names the key and what is valid."""


#: The deepest nesting of mappings and lists a config may have (its sections and component
#: parameters need a few levels; omegaconf recurses per level, into a RecursionError at about 90).
MAX_DEPTH = 32


def check_nesting(yaml_text: Any, where: str, outer: int = 0) -> None:
    """Refuse YAML (a file's stream, or an override's value below its key's ``outer`` levels) whose
    mappings and lists nest deeper than :data:`MAX_DEPTH`, aliases counted as the nodes they
    repeat: before omegaconf reads it. From the parser's events (no recursion, nothing built)."""
    import yaml

    def refuse(deepest: int, mark: Any) -> None:
        line = f" (line {mark.line + 1})" if mark is not None and not isinstance(yaml_text, str) else ""
        _check(deepest <= MAX_DEPTH, where, f"nested deeper than {MAX_DEPTH} levels of mappings and lists{line}; "
                                            "a config needs a few")

    refuse(outer, None)
    open_nodes: list[list] = []  # per open mapping or list: its anchor, the deepest nesting below it
    height: dict[str, int] = {}  # per anchor: the levels of its node
    for event in yaml.parse(yaml_text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            open_nodes.append([event.anchor, 0])
            refuse(outer + len(open_nodes), event.start_mark)
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, below = open_nodes.pop()
            levels = below + 1
            if anchor is not None:
                height[anchor] = levels
        elif isinstance(event, yaml.AliasEvent):
            levels = height.get(event.anchor, 0)
            refuse(outer + len(open_nodes) + levels, event.start_mark)
        else:
            continue
        if open_nodes:
            open_nodes[-1][1] = max(open_nodes[-1][1], levels)


def check_seeds(seeds: list[int]) -> None:
    """At least one seed, each in [0, MAX_INT], none twice (a repeated seed would double its rows
    and pass for a second, identical seed: "± 0.00" over "2 seeds")."""
    _check(bool(seeds), "seeds", "give at least one seed")
    bad = [s for s in seeds if not 0 <= s <= MAX_INT]
    _check(not bad, "seeds", f"each seed must lie in [0, {MAX_INT}], got {bad[0] if bad else None}")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    _check(not repeated, "seeds", f"seed(s) {repeated} given more than once; give distinct seeds, e.g. "
                                  f"[{', '.join(str(i) for i in range(len(seeds)))}]")


#: The longest label of a config entry: the dataset, backbone and model labels together name a
#: combination's files (``montages/<dataset>__<backbone>__<model>__seed<n>.npz``), and a file name
#: has at most 255 bytes.
MAX_LABEL = 64


def check_labels(key: str, labels: Sequence[str]) -> None:
    """Every label of one config list (``key``) at most :data:`MAX_LABEL` characters."""
    for i, label in enumerate(labels):
        _check(len(label) <= MAX_LABEL, f"{key}.{i}.label",
               f"{label[:20]!r}... has {len(label)} characters; labels name the run's files: at most {MAX_LABEL}")


def check_statistics_seed(seed: int) -> None:
    _check(0 <= seed <= MAX_INT, "statistics.seed", f"must lie in [0, {MAX_INT}], got {seed}")


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config {key}: {message}")


def check_settings(cfg: DictConfig) -> None:
    """Value ranges of the run's own settings."""
    from values_seg.engine.device import resolve
    from values_seg.storage.atomic import RefusedWrite
    from values_seg.storage.run_directory import check_name

    try:
        check_name(cfg.name)
    except RefusedWrite as e:
        raise ConfigError(f"config name: {e}") from e
    if cfg.executor == "ray":  # jobs run on the cluster's nodes, not necessarily on this machine
        _validate_ray_device(cfg.device)
    else:
        try:
            resolve(cfg.device)
        except ValueError as e:
            raise ConfigError(f"config device: {e}; valid: auto, cpu, cuda, cuda:<index>, mps") from e
    _check(1 <= cfg.workers <= MAX_WORKERS, "workers", f"must lie in [1, {MAX_WORKERS}], got {cfg.workers}")
    _check(cfg.loader_workers is None or 0 <= cfg.loader_workers <= MAX_WORKERS, "loader_workers",
           f"must lie in [0, {MAX_WORKERS}] (or be left out: 0 on the CPU, up to 4 with a GPU), got {cfg.loader_workers}")
    _check(1 <= cfg.threads <= MAX_WORKERS, "threads", f"must lie in [1, {MAX_WORKERS}], got {cfg.threads}")
    ev = cfg.evaluation
    _check(1 <= ev.n_bins <= 10_000, "evaluation.n_bins", f"must lie in [1, 10000], got {ev.n_bins}")
    _check(0 <= ev.montage_cases <= 1000, "evaluation.montage_cases", f"must lie in [0, 1000], got {ev.montage_cases}")
    _check(ev.prediction_dtype in ("float16", "float32"), "evaluation.prediction_dtype",
           f"must be float16 or float32, got {ev.prediction_dtype!r}")
    lc = cfg.learning_curves
    _check(lc.dice_every >= 0, "learning_curves.dice_every", f"must be >= 0 (0: off), got {lc.dice_every}")
    _check(lc.dice_cases >= 0, "learning_curves.dice_cases", f"must be >= 0, got {lc.dice_cases}")
    _validate_ray(cfg)


def _validate_ray_device(device: str) -> None:
    import torch

    try:
        dev = torch.device(str(device)) if str(device).lower() != "auto" else None
    except RuntimeError as e:
        raise ConfigError(f"config device: unknown device {device!r} ({e}); valid: auto, cpu, cuda, mps") from e
    _check(dev is None or dev.type != "cuda" or dev.index is None, "device",
           f"{device!r}: with executor ray, Ray assigns each job its GPU; use 'cuda' (or 'auto')")


def _ray_quantity(value: Any, key: str) -> None:
    """Ray's rule for a resource request: >= 0, and a whole number above 1."""
    _check(isinstance(value, (int, float)) and value >= 0, key, f"must be a number >= 0, got {value!r}")
    _check(value <= 1 or float(value).is_integer(), key, f"Ray takes fractions only below 1; got {value}")


def _validate_ray(cfg: DictConfig) -> None:
    """The ``ray`` section: retries, resource requests per stage, and their agreement with ``device``."""
    ray = cfg.ray
    _check(ray.max_retries >= 0, "ray.max_retries", f"must be >= 0, got {ray.max_retries}")
    _check(ray.address is None or bool(str(ray.address).strip()), "ray.address",
           "give a cluster address (e.g. 'auto', 'head-node:6379', 'ray://head-node:10001') or null")
    cuda = str(cfg.device).startswith("cuda")
    for stage, request in ray.resources.items():
        where = f"ray.resources.{stage}"
        for key in ("num_cpus", "num_gpus"):
            if request[key] is not None:
                _ray_quantity(request[key], f"{where}.{key}")
        _check(not (cuda and request.num_gpus == 0), f"{where}.num_gpus",
               f"0, but device is {cfg.device!r}: its jobs would see no GPU (give 1, a fraction such as 0.5 to "
               f"share one, or null)")
        for name, value in request.custom.items():
            _check(name not in ("CPU", "GPU", "memory", "object_store_memory"), f"{where}.custom.{name}",
                   "a custom resource name; set CPUs and GPUs with num_cpus and num_gpus")
            _ray_quantity(value, f"{where}.custom.{name}")


#: The fields an ``exclude`` rule may match, and where their valid values come from.
RULE_FIELDS = ("dataset", "scenario", "backbone", "prediction_model", "family", "measure", "uncertainty_type",
               "aggregation", "task")


def check_rules(cfg: DictConfig, labels: Mapping[str, Sequence[str]]) -> None:
    """``rules.exclude``: every key a field of :data:`RULE_FIELDS`, every value one that exists
    (``labels``: config list -> the labels of its entries)."""
    from values_seg import registry
    from values_seg.families import FAMILIES, UNCERTAINTY_TYPES

    valid = {
        "dataset": set(registry.names("dataset")),
        "scenario": set(labels["datasets"]),
        "backbone": set(labels["backbones"]),
        "prediction_model": set(labels["prediction_models"]),
        "family": set(FAMILIES),
        "measure": set(labels["measures"]),
        "uncertainty_type": set(UNCERTAINTY_TYPES),
        "aggregation": set(labels["aggregations"]),
        "task": set(labels["tasks"]),
    }
    for i, rule in enumerate(cfg.rules.exclude):
        where = f"rules.exclude.{i}"
        if not isinstance(rule, DictConfig) or not len(rule):
            raise ConfigError(f"config {where}: a rule maps fields to values, e.g. {{aggregation: threshold}}")
        for key, value in rule.items():
            if key not in RULE_FIELDS:
                hint = closest(str(key), RULE_FIELDS)
                raise ConfigError(f"config {where}.{key}: unknown field; valid fields: {', '.join(RULE_FIELDS)}"
                                  + (f" (did you mean {hint!r}?)" if hint else ""))
            if key != "dataset" and str(value) not in valid[key]:  # a rule may name a dataset not in this run
                hint = closest(str(value), valid[key])
                raise ConfigError(f"config {where}.{key}: {value!r} is not one of this run's: "
                                  f"{', '.join(sorted(valid[key])) or '(none)'}" + (f" (did you mean {hint!r}?)" if hint else ""))
            if key == "dataset" and str(value) not in valid["dataset"]:
                hint = closest(str(value), valid["dataset"])
                raise ConfigError(f"config {where}.dataset: unknown dataset {value!r}; available: "
                                  f"{', '.join(sorted(valid['dataset']))}" + (f" (did you mean {hint!r}?)" if hint else ""))


#: ``${oc.env:NAME}`` (omegaconf's environment resolver) anywhere in a string value
ENV_INTERPOLATION = re.compile(r"\$\{\s*oc\.env\s*:")
#: Component parameters that name a path (data set roots and folders, model folders, weight files)
#: and the top-level ``cache_dir``: the only keys that may read an environment variable.
PATH_PARAM = re.compile(r"^(root|folder|.*_(folder|dir|path|root|csv))$")


def check_environment_values(raw: Any, where: str = "") -> None:
    """Refuse ``${oc.env:...}`` outside the keys that name paths: the config is written into
    ``config.yaml`` and the shareable reports resolved, and an environment value (a token, a
    password) has no place there."""
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            check_environment_values(value, f"{where}{key}.")
    elif isinstance(raw, (list, tuple)):
        for i, value in enumerate(raw):
            check_environment_values(value, f"{where}{i}.")
    elif isinstance(raw, str) and ENV_INTERPOLATION.search(raw):
        key = where.rstrip(".")
        parts = key.split(".")
        is_path = key == "cache_dir" or (len(parts) == 4 and parts[2] == "params" and PATH_PARAM.match(parts[3]))
        _check(is_path, key, f"{raw!r} reads an environment variable; values-seg writes the resolved config into "
                             f"{run_files.CONFIG} and the reports, so " "${oc.env:...} is allowed only in cache_dir and in "
                             "component parameters that name paths (root, folder, *_folder, *_dir, *_path, *_csv); a "
                             "tracker's credentials go in its own environment variables (docs/guides/tracking.md)")


_KINDS = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "a string"}


def omegaconf_message(error: Exception) -> str:
    """One line for an OmegaConf error: the key, the value given and what is valid (OmegaConf's own
    message goes on about its node and reference types)."""
    key = getattr(error, "full_key", None) or ""
    msg = str(getattr(error, "msg", None) or error).strip().split("\n")[0]
    where = f"{key}: " if key else ""
    if m := re.match(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", msg):
        kind = _KINDS.get(m.group(2), m.group(2))
        return f"{where}{m.group(1)!r} is not {kind}; valid: {kind}"
    if "is not a ListConfig" in msg:
        return f"{where}must be a list; valid: a list in brackets, e.g. {key or 'seeds'}=[0,1]"
    if m := re.match(r"Cannot convert '\w+' to string: '(.*)'", msg):
        return f"{where}{m.group(1)} is not a string; valid: a string"
    if m := re.match(r"Merge error: (\w+) is not a subclass of (\w+)\. value: (.*)", msg):
        return f"{where}{m.group(3)!r} is not a section; valid: a mapping of its keys (key.sub=value sets one)"
    return f"{where}{msg}"


# -- against the registry (every load) ---------------------------------------------------
def _refs(cfg: DictConfig, key: str) -> list[ComponentRef]:
    kind = COMPONENT_LISTS[key]
    return [ComponentRef(kind, e.name, OmegaConf.to_container(e.params, resolve=True), e.label or "")
            for e in cfg[key]]


def validate(cfg: DictConfig) -> dict[str, list[ComponentRef]]:
    """Check components and parameters against the registry; raise :class:`ConfigError`. Returns
    the component references of each config list (resolved here, once)."""
    from values_seg import registry

    for module in cfg.plugins:
        already = sorted({c.source for c in registry.components() if getattr(c.obj, "__module__", None) == module})
        if already and already != [module]:  # e.g. installed: registered once, by its entry point
            logging.getLogger("values_seg.config.checks").warning(
                "plugin %s is registered once, by %s; listing it under plugins: too adds nothing", module, already[0])
        try:
            registry.load(module)
        except ValueError as e:
            raise ConfigError(f"config plugins: {e}") from e
    if cfg.executor not in ("local", "processes", "ray"):
        raise ConfigError(f"config executor: {cfg.executor!r} is not one of local, processes, ray")
    check_seeds(list(cfg.seeds))
    optional = {"aggregations"}
    if cfg.prediction_models and not any(_uses_backbone(e.name, dict(e.params or {})) for e in cfg.prediction_models):
        optional.add("backbones")  # only models trained outside values-seg (or derived from them)
    components: dict[str, list[ComponentRef]] = {}
    for key, kind in COMPONENT_LISTS.items():
        entries = cfg[key]
        if not entries and key not in optional:
            raise ConfigError(f"config {key}: list at least one {kind} (available: {', '.join(registry.names(kind))})")
        try:
            references = components[key] = _refs(cfg, key)
        except ValueError as e:
            raise ConfigError(f"config {key}: {e}") from e
        names = [r.label for r in references]
        check_labels(key, names)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"config {key}: duplicate label(s) {dupes}; give each entry a distinct 'label'")
        for ref in references:
            try:
                registry.get(kind, ref.name)
            except ValueError as e:
                raise ConfigError(f"config {key}: {e}") from e
    if not 0 < cfg.active_learning.query_fraction <= 1:
        raise ConfigError("config active_learning.query_fraction must lie in (0, 1]")
    if not 0 < cfg.evaluation.ndsc_r < 1:
        raise ConfigError(f"config evaluation.ndsc_r must lie in (0, 1), got {cfg.evaluation.ndsc_r}")
    if cfg.evaluation.lesion_connectivity not in ("face", "edge", "vertex") or not 0 <= cfg.evaluation.lesion_iou < 1:
        raise ConfigError(f"config evaluation.lesion_connectivity must be face, edge or vertex and lesion_iou lie in "
                          f"[0, 1), got {cfg.evaluation.lesion_connectivity!r}, {cfg.evaluation.lesion_iou}")
    if cfg.evaluation.lesion_iou_rule not in LESION_IOU_RULES:
        raise ConfigError(f"config evaluation.lesion_iou_rule must be one of {', '.join(LESION_IOU_RULES)} (IoU > or ≥ "
                          f"lesion_iou is a TP), got {cfg.evaluation.lesion_iou_rule!r}")
    if cfg.statistics.n_resamples < 0 or cfg.statistics.n_resamples == 1 or cfg.statistics.n_resamples > MAX_RESAMPLES:
        raise ConfigError(f"config statistics.n_resamples must be 0 (no intervals) or in [2, {MAX_RESAMPLES}], "
                          f"got {cfg.statistics.n_resamples}")
    check_statistics_seed(cfg.statistics.seed)
    if not 0 < cfg.statistics.level < 1:
        raise ConfigError(f"config statistics.level must lie in (0, 1), e.g. 0.95, got {cfg.statistics.level}")
    check_settings(cfg)  # the device first: the recipe's precision is resolved for it
    try:
        recipe(cfg)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"config recipe: {e}") from e
    check_rules(cfg, {key: [r.label for r in references] for key, references in components.items()})
    return components


def recipe(cfg: DictConfig) -> Recipe:
    """The engine :class:`Recipe` of a config (preset first, then the fields that are set), its
    ``precision`` resolved for the config's device (unset or ``auto``: bf16 on CUDA, else fp32);
    an experiment's is its ``recipe``."""
    from values_seg.engine.precision import resolve as resolve_precision

    settings = {k: (tuple(v) if isinstance(v, list) else v)
                for k, v in OmegaConf.to_container(cfg.recipe).items() if v is not None}
    preset = settings.pop("preset", None)
    try:
        settings["precision"] = resolve_precision(settings.get("precision"), cfg.device)
    except ValueError as e:
        raise ConfigError(f"config recipe.precision: {e}") from e
    return Recipe.preset(preset, **settings) if preset else Recipe(**settings)


# -- what builds objects (once per experiment, before any work) -----------------------------
#: The trackers of each experiment checked in this process (built once, by its pre-flight).
_checked: "weakref.WeakKeyDictionary[Experiment, list[Tracker]]" = weakref.WeakKeyDictionary()


def preflight(exp: Experiment) -> list[Tracker]:
    """The checks of ``exp`` that build objects, before any work, run once per experiment: every
    prediction model, measure, aggregation and task with its parameters, every dataset (parameters
    and splits; nothing is loaded), every backbone for each dataset's shape on torch's meta device
    (no memory, no weights), every tracker (its package installed). Returns the trackers."""
    if exp not in _checked:
        _check_components(exp)
        _check_data_and_backbones(exp)
        _checked[exp] = _trackers(exp)
    return _checked[exp]


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


def _uses_backbone(name: str, params: dict, depth: int = 0) -> bool:
    """Whether a configured prediction model trains on the config's backbones, before it is built: its
    class's ``uses_backbone``, a derived model's that of the model its parameters name
    (:attr:`values_seg.components.derived_model.DerivedModel.wrapping_params`); unknown names: no."""
    from values_seg import registry

    if name not in registry.names("prediction_model"):
        return False  # reported as unknown below
    cls = registry.get("prediction_model", name).obj
    wrapping = getattr(cls, "wrapping_params", ())
    inner = params.get(wrapping[0]) if wrapping else None
    if isinstance(inner, str) and depth < 8:
        inner_params = params.get(wrapping[1]) if len(wrapping) > 1 else None
        return _uses_backbone(inner, dict(inner_params or {}), depth + 1)
    return bool(cls.uses_backbone)


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


def _trackers(cfg: Experiment) -> list[Tracker]:
    """The trackers the config's ``tracking`` section names, checked (package installed) before any
    work; a :class:`ConfigError` naming the extra to install otherwise."""
    from values_seg import registry

    out = []
    for name, params in (cfg.tracking or {}).items():
        try:
            tracker = registry.create("tracker", str(name), **dict(params or {}))
        except (ValueError, TypeError) as e:
            raise ConfigError(f"config tracking.{name}: {e}") from None
        try:
            tracker.check()
        except ImportError as e:
            raise ConfigError(f"config tracking.{name}: needs {e.name or 'its package'}; install it with "
                              f"pip install '{tracker.extra}'") from None
        out.append(tracker)
    return out
