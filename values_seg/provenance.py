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
import importlib.machinery
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

#: Top-level packages whose modules count as "the project's" when following imports (third-party
#: plugin packages are followed within their own top-level package).
PROJECT_PACKAGES = ("values_seg", "values_seg_plugins", "toy_data_generator")
#: Modules that key, store and verify results but never change a number: left out of the digests,
#: so that refining how files are checked does not retrain everything.
BOOKKEEPING = frozenset({"values_seg.provenance", "values_seg.checked_files", "values_seg.run_directory",
                         "values_seg.safe_paths", "values_seg.artifact", "values_seg.run_context"})

#: The framework modules of each cached stage (plus what they import from the project).
STAGE_MODULES = {
    "training": ("values_seg.engine.training", "values_seg.engine.augment", "values_seg.engine.losses",
                 "values_seg.engine.networks", "values_seg.data"),
    "prediction": ("values_seg.engine.inference", "values_seg.validation"),
    "evaluation": ("values_seg.evaluation", "values_seg.runner.evaluate", "values_seg.metrics",
                   "values_seg.measure", "values_seg.aggregation"),
    "scoring": ("values_seg.task", "values_seg.runner.run", "values_seg.runner.results",
                "values_seg.runner.statistics", "values_seg.statistics", "values_seg.metrics", "values_seg.sweep"),
}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


#: Digests of source files by the sha256 of their bytes (and the Python version, whose AST they
#: come from), kept between runs in a file (:func:`use_digest_file`): parsing every module again
#: would cost a rerun that has nothing to do a second.
_known: dict[str, list] = {}
_known_file: Path | None = None
_known_changed = False


def use_digest_file(path: str | Path) -> None:
    """Keep the source files' digests in ``path`` (read now, written by :func:`save_digest_file`)."""
    global _known_file
    _known_file = Path(path)
    read_digest_file(_known_file)


def read_digest_file(path: str | Path) -> None:
    """Know the source digests a run kept in ``path`` (keyed by the sources' bytes: a changed file
    is parsed again), without writing to it; a missing or unreadable file is ignored."""
    try:
        data = json.loads(Path(path).read_text())
        _known.update({k: v for k, v in data.items() if isinstance(v, list) and len(v) == 2})
    except (OSError, ValueError, AttributeError):
        pass


def save_digest_file() -> None:
    global _known_changed
    if _known_file is None or not _known_changed:
        return
    from values_seg.run_directory import write_text

    # in the cache folder values-seg claimed (runner), replaced atomically, never through a link
    write_text(_known_file.parent, _known_file, json.dumps(_known, sort_keys=True))
    _known_changed = False


@functools.lru_cache(maxsize=None)
def _file_digest(path: str) -> tuple[str, tuple[tuple[str, str, int], ...]]:
    """(digest of the code of one source file, its imports as (module, name, level) triples:
    ``import a.b`` -> ("a.b", "", 0); ``from .m import f`` -> ("m", "f", 1))."""
    global _known_changed
    source = Path(path).read_bytes()
    content = hashlib.sha256(source + f"|python{sys.version_info[:2]}".encode()).hexdigest()
    if content in _known:
        digest, imports = _known[content]
        return digest, tuple(tuple(i) for i in imports)
    digest, imports = _parse_digest(source, path)
    _known[content] = [digest, [list(i) for i in imports]]
    _known_changed = True
    return digest, imports


def _parse_digest(source: bytes, path: str) -> tuple[str, tuple[tuple[str, str, int], ...]]:
    tree = ast.parse(source.decode("utf-8"), filename=path)
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


@functools.lru_cache(maxsize=None)
def _spec(module: str):
    """The module's spec, found without importing anything (``importlib.util.find_spec`` imports
    the parent packages of a dotted name)."""
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__spec__", None) is not None:
        return loaded.__spec__
    parent = module.rpartition(".")[0]
    try:
        if not parent:
            return importlib.util.find_spec(module)
        parent_spec = _spec(parent)
        if parent_spec is None or not parent_spec.submodule_search_locations:
            return None
        return importlib.machinery.PathFinder.find_spec(module, list(parent_spec.submodule_search_locations))
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
        if name in seen or name.split(".")[0] not in packages or name in BOOKKEEPING:
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
