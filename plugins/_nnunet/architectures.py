"""Which classes an nnU-Net ``plans.json`` may name when the model folder is not trusted.

Why a plans file could run code, and what is allowed: docs/design-rationale.md, "nnU-Net", untrusted
plans.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import warnings
from pathlib import Path
from typing import Any

TRUST_HINT = "load it only if you trust the model folder: trust_checkpoint=True"


@functools.lru_cache(maxsize=1)
def shipped_network_classes() -> frozenset[str]:
    """``module.Class`` of every network class in ``dynamic_network_architectures.architectures``."""
    import torch
    import dynamic_network_architectures.architectures as package

    names = set()
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            with warnings.catch_warnings():  # deprecation chatter of the architectures' dependencies
                warnings.simplefilter("ignore")
                module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an architecture whose optional dependency is missing
            continue
        for attr, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, torch.nn.Module)
                    and obj.__module__.startswith(package.__name__ + ".")):
                names.add(f"{info.name}.{attr}")
    return frozenset(names)


@functools.lru_cache(maxsize=1)
def torch_building_blocks() -> frozenset[str]:
    """``torch.nn.X`` and ``torch.nn.modules.<module>.X`` for every module class of ``torch.nn.modules``."""
    import torch

    names = set()
    for attr in dir(torch.nn):
        obj = getattr(torch.nn, attr)
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and obj.__module__.startswith("torch.nn.modules."):
            names.update({f"torch.nn.{attr}", f"{obj.__module__}.{obj.__qualname__}"})
    return frozenset(names)


def check_plans(plans: Any, path: str | Path, trust: bool = False) -> None:
    """Refuse (``ValueError``, one line naming ``path`` and the key) ``plans`` not of the structure
    nnU-Net reads (an object whose ``configurations`` map names to objects, each inheriting from
    another one or none, without a cycle; an ``architecture`` an object), and, unless ``trust``,
    plans whose configurations name a network class or an imported keyword argument outside the
    allow-lists."""
    if not isinstance(plans, dict):
        raise ValueError(f"{path}: the top level must be a JSON object (nnU-Net's plans), got {_kind(plans)}")
    configurations = plans.get("configurations")
    if not isinstance(configurations, dict) or not configurations:
        raise ValueError(f"{path}: 'configurations' must map configuration names (e.g. '2d') to their settings, "
                         f"got {_kind(configurations)}")
    for name, configuration in configurations.items():
        if not isinstance(configuration, dict):
            raise ValueError(f"{path}: configurations.{name} must be an object of settings, got {_kind(configuration)}")
        seen, parent = [name], configuration.get("inherits_from")
        while parent is not None:  # nnU-Net resolves the chain recursively
            if not isinstance(parent, str) or parent not in configurations or parent in seen:
                problem = (f"a cycle ({' -> '.join(seen + [parent])})" if parent in seen
                           else f"not one of {', '.join(map(repr, configurations))}")
                raise ValueError(f"{path}: configurations.{seen[-1]}.inherits_from {parent!r} is {problem}")
            seen.append(parent)
            parent = configurations[parent].get("inherits_from") if isinstance(configurations[parent], dict) else None
        architecture = configuration.get("architecture")
        if architecture is None:  # an old-format or inheriting configuration: nnU-Net fills in its own classes
            continue
        where = f"{path}: configuration {name!r}"
        if not isinstance(architecture, dict):
            raise ValueError(f"{path}: configurations.{name}.architecture must be an object, got {_kind(architecture)}")
        if trust:
            continue
        network = architecture.get("network_class_name")
        if network not in shipped_network_classes():
            raise ValueError(
                f"{where} names the network class {network!r}, which is not an architecture nnU-Net ships "
                f"(dynamic_network_architectures.architectures); building it could run any code: {TRUST_HINT}")
        kwargs = architecture.get("arch_kwargs") or {}
        for key in architecture.get("_kw_requires_import") or ():
            value = kwargs.get(key) if isinstance(kwargs, dict) else None
            if value is not None and (not isinstance(value, str) or value not in torch_building_blocks()):
                raise ValueError(
                    f"{where}: arch_kwargs.{key} names {value!r}, which is not a torch.nn module class; "
                    f"nnU-Net would import and call it: {TRUST_HINT}")


def _kind(value: Any) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "nothing"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")
