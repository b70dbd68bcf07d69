"""Code digests: what computes a cached artefact, so that a change to it gives a new cache key.

A cached checkpoint, prediction or evaluation is keyed by the config that determines it *and* the
code that computes it: the modules of the components involved (a measure's plugin module, a
dataset's, a prediction model's head) and of the framework's stage (the engine's training loop,
the fused evaluation, the metrics), with the project-local modules they import. A module's
digest is the sha256 of its syntax tree without docstrings, so editing a comment or a docstring
does not invalidate caches, while any change to what the code does does.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

#: Top-level packages whose modules count as "the project's" when following imports (third-party
#: plugin packages are followed within their own top-level package).
PROJECT_PACKAGES = ("values_seg", "values_seg_plugins", "toy_data_generator")

#: The framework modules of each cached stage (plus what they import from the project).
STAGE_MODULES = {
    "training": ("values_seg.engine.training", "values_seg.engine.augment", "values_seg.engine.losses",
                 "values_seg.engine.networks", "values_seg.data"),
    "prediction": ("values_seg.engine.inference", "values_seg.validation"),
    "evaluation": ("values_seg.evaluation", "values_seg.runner.evaluate", "values_seg.metrics",
                   "values_seg.measure", "values_seg.aggregation"),
}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


@functools.lru_cache(maxsize=None)
def _file_digest(path: str) -> tuple[str, tuple[tuple[str, str, int], ...]]:
    """(digest of the code of one source file, its imports as (module, name, level) triples:
    ``import a.b`` -> ("a.b", "", 0); ``from .m import f`` -> ("m", "f", 1))."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    imports: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(a.name, "", 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [(node.module or "", a.name, node.level) for a in node.names]
    digest = hashlib.sha256(ast.dump(_strip_docstrings(tree), include_attributes=False).encode()).hexdigest()
    return digest, tuple(imports)


def _imported_modules(module: str, imports, packages: tuple[str, ...]) -> list[str]:
    """The modules within ``packages`` a module's imports refer to: ``from pkg import sub`` is the
    submodule ``pkg.sub`` where one exists (not the whole package), else ``pkg``."""
    out = []
    package = module if _is_package(module) else module.rpartition(".")[0]
    for target, name, level in imports:
        base = importlib.util.resolve_name("." * level + target, package) if level else target
        if base.split(".")[0] not in packages:
            continue
        if name and name != "*" and _spec(f"{base}.{name}") is not None:
            out.append(f"{base}.{name}")
        else:
            out.append(base)
    return out


def _is_package(module: str) -> bool:
    spec = _spec(module)
    return bool(spec and spec.submodule_search_locations)


def _spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None


def _source_file(module: str) -> str | None:
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None) if loaded else None
    if path is None:
        spec = _spec(module)
        path = spec.origin if spec is not None else None
    return path if path and path.endswith(".py") and Path(path).exists() else None


def _closure(roots: Iterable[str], packages: tuple[str, ...]) -> list[str]:
    """The modules in ``roots`` and every module they import (recursively) within ``packages``."""
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] not in packages:
            continue
        path = _source_file(name)
        if path is None:
            continue
        seen[name] = path
        todo += _imported_modules(name, _file_digest(path)[1], packages)
    return sorted(seen)


@functools.lru_cache(maxsize=None)
def modules_digest(roots: tuple[str, ...], extra_packages: tuple[str, ...] = ()) -> str:
    """sha256 over the code of ``roots`` and the project-local modules they import."""
    packages = PROJECT_PACKAGES + tuple(p for p in extra_packages if p not in PROJECT_PACKAGES)
    h = hashlib.sha256()
    for name in _closure(roots, packages):
        h.update(name.encode())
        h.update(_file_digest(_source_file(name))[0].encode())
    return h.hexdigest()


def module_of(obj: Any) -> ModuleType | None:
    return inspect.getmodule(obj if isinstance(obj, (type, ModuleType)) or callable(obj) else type(obj))


def code_digest(*objects: Any, stage: str | None = None) -> str:
    """The digest of the code that defines ``objects`` (components, heads, classes; ``None`` is
    skipped) and, with ``stage``, of the framework modules of that stage (:data:`STAGE_MODULES`)."""
    roots, extra = [], []
    for obj in objects:
        if obj is None:
            continue
        if isinstance(obj, str):
            roots.append(obj)
            continue
        module = module_of(getattr(obj, "func", obj))  # functools.partial: its function
        if module is not None:
            roots.append(module.__name__)
            extra.append(module.__name__.split(".")[0])
    if stage is not None:
        roots += STAGE_MODULES[stage]
    return modules_digest(tuple(sorted(set(roots))), tuple(sorted(set(extra))))
