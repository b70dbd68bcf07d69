"""The checks of a config: its nesting before it is loaded; then the values of the loaded config:
seeds, the run's own settings (device, workers, threads, evaluation), the ``ray`` section and the
``exclude`` rules. Each failure is a
:class:`ConfigError` naming the key and what is valid. Checks that build objects (datasets,
backbones, components) are the runner's pre-flight step (:mod:`values_seg.runner.preflight`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig

from values_seg.storage import run_files
from values_seg.params import MAX_INT, closest

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
