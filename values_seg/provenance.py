"""Code digests: what computes a cached artefact, so that a change to it gives a new cache key.

A cached checkpoint, prediction or evaluation is keyed by the config that determines it *and* the
code that computes it: the modules of the components involved (a measure's plugin module, a
dataset's, a prediction model's head) and of the framework's stage (the engine's training loop,
the fused evaluation, the metrics), with the project-local modules they import. A module's
digest is the sha256 of its syntax tree without docstrings, so editing a comment or a docstring
does not invalidate caches, while any change to what the code does does.

Code that is not in a project module is keyed too: the installed versions of the libraries that
compute the numbers (:data:`NUMERIC_LIBRARIES`: an upgrade that changes a default recomputes) and
of a plugin's own distribution, whose top-level packages are all followed (a helper module in
another package of the same distribution counts); a component with no source file (registered
from a notebook cell, or ``exec``) is digested by its code objects (bytecode, constants, names,
defaults, and the sourceless functions and classes it refers to).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import importlib.metadata
import json
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

#: Top-level packages whose modules count as "the project's" when following imports (third-party
#: plugin packages are followed within their own top-level package).
PROJECT_PACKAGES = ("values_seg", "values_seg_plugins", "toy_data_generator")
#: Modules that key, store and verify results but never change a number: left out of the digests,
#: so that refining how files are checked does not retrain everything.
BOOKKEEPING = frozenset({"values_seg.provenance", "values_seg.checked_files", "values_seg.run_directory",
                         "values_seg.safe_paths", "values_seg.artifact", "values_seg.run_context", "values_seg.store",
                         "values_seg.runner.run_record"})

#: The framework modules of each cached stage (plus what they import from the project).
STAGE_MODULES = {
    "training": ("values_seg.engine.training", "values_seg.engine.augment", "values_seg.engine.losses",
                 "values_seg.engine.networks", "values_seg.data"),
    "prediction": ("values_seg.engine.inference", "values_seg.validation"),
    "data_check": ("values_seg.data",),
    "report": ("values_seg.report.build",),
    "figure": (),  # a figure's own plotting code only (values_seg.report.render.FigureInputs)
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
    skipped) and, with ``stage``, of the framework modules of that stage (:data:`STAGE_MODULES`),
    with the versions of the numeric libraries and of the objects' own distributions, and the
    code objects of those without a source file (see the module docstring)."""
    roots, extra, sourceless = [], set(), []
    for obj in objects:
        if obj is None:
            continue
        if isinstance(obj, str):
            roots.append(obj)
            continue
        obj = inspect.unwrap(getattr(obj, "func", obj))  # functools.partial, a decorator: its function
        module = module_of(obj)
        if module is not None and module.__name__ != "builtins":
            roots.append(module.__name__)
            top = module.__name__.split(".")[0]
            extra.update((top, *own_packages(top)))
        if _sourceless(obj, module):
            sourceless.append(object_digest(obj))
    if stage is not None:
        roots += STAGE_MODULES[stage]
    modules = modules_digest(tuple(sorted(set(roots))), tuple(sorted(extra)))
    versions = library_versions(tuple(sorted(extra - set(PROJECT_PACKAGES))))
    payload = json.dumps({"modules": modules, "versions": versions, "sourceless": sourceless}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


#: The installed distributions whose code computes the numbers of a stage: their versions key
#: every cached stage (a simulated numpy upgrade that changes ``quantile``'s default recomputes).
NUMERIC_LIBRARIES = ("torch", "numpy", "scipy", "scikit-learn", "pandas", "SimpleITK", "nibabel")


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=None)
def _distributions() -> dict[str, tuple[str, ...]]:
    """Top-level package -> the installed distributions that provide it."""
    return {top: tuple(sorted(set(dists))) for top, dists in importlib.metadata.packages_distributions().items()}


def own_packages(top: str) -> tuple[str, ...]:
    """The top-level packages of the distribution(s) that provide ``top`` (a plugin's helper
    modules in another package of its distribution are its code too); none for a package that no
    installed distribution provides, or a project package (followed already)."""
    if top in PROJECT_PACKAGES:  # no scan of the installed distributions (~0.6 s) for the built-ins
        return ()
    dists = set(_distributions().get(top, ()))
    return tuple(sorted(p for p, d in _distributions().items() if dists & set(d) and p.isidentifier()))


@functools.lru_cache(maxsize=None)
def library_versions(packages: tuple[str, ...] = ()) -> dict[str, dict[str, str | None]]:
    """``{"libraries": {distribution: version}, "plugins": {distribution: version}}``: the
    numeric libraries' installed versions and those of the distributions providing ``packages``."""
    plugins = sorted({d for p in packages for d in _distributions().get(p, ())}) if packages else []
    return {"libraries": {d: _version(d) for d in NUMERIC_LIBRARIES},
            "plugins": {d: _version(d) for d in plugins}}


def _sourceless(obj: Any, module: ModuleType | None) -> bool:
    """Whether ``obj``'s code is not (all) in its module's source file: defined in a notebook
    cell, by ``exec``, or in a module without a file."""
    path = _source_file(module.__name__) if module is not None else None
    if path is None:
        return isinstance(obj, type) or callable(obj)
    files = {f.co_filename for f in _functions(obj)}
    return any(Path(f).resolve() != Path(path).resolve() for f in files if f)


def _functions(obj: Any) -> list[types.CodeType]:
    """The code objects ``obj`` defines itself: a function's, or the methods' of a class (not the
    wrappers of decorators, nor the methods ``dataclasses`` generates)."""
    if isinstance(obj, types.FunctionType):
        return [inspect.unwrap(obj).__code__]
    if isinstance(obj, type):
        out = []
        generated = set(vars(obj)) if "__dataclass_fields__" in vars(obj) else set()
        for name, value in vars(obj).items():
            value = getattr(value, "__func__", value)  # staticmethod, classmethod
            for f in (value, *(getattr(value, a, None) for a in ("fget", "fset", "fdel"))):
                if isinstance(f, types.FunctionType):
                    code = inspect.unwrap(f).__code__
                    if not (name in generated and code.co_filename == "<string>" and name.startswith("__")):
                        out.append(code)
        return out
    return _functions(type(obj)) if callable(obj) else []


def object_digest(obj: Any) -> str:
    """sha256 of the code objects of a function or class (bytecode, constants, names, defaults)
    and of the functions and classes without a source file it refers to through its globals."""
    h, seen = hashlib.sha256(), set()
    _hash_object(obj, h, seen)
    return h.hexdigest()


def _hash_object(obj: Any, h, seen: set) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        h.update(b"function")
        _hash_code(obj.__code__, h)
        h.update(_literal(obj.__defaults__).encode() + _literal(obj.__kwdefaults__).encode())
        for cell in obj.__closure__ or ():
            try:
                _hash_value(cell.cell_contents, h, seen)
            except ValueError:  # an empty cell
                h.update(b"<empty>")
        for name in _names(obj.__code__):  # the notebook's other functions and classes it calls
            value = obj.__globals__.get(name)
            if isinstance(value, (types.FunctionType, type)) and _sourceless(value, module_of(value)):
                h.update(name.encode())
                _hash_object(value, h, seen)
    elif isinstance(obj, type):
        h.update(f"class {obj.__qualname__}({[b.__qualname__ for b in obj.__bases__]})".encode())
        for base in obj.__bases__:
            if base is not object and _sourceless(base, module_of(base)):
                _hash_object(base, h, seen)
        for name, value in sorted(vars(obj).items()):
            h.update(name.encode())
            _hash_value(getattr(value, "__func__", value), h, seen)
    elif callable(obj):
        _hash_object(type(obj), h, seen)


def _hash_value(value: Any, h, seen: set) -> None:
    if isinstance(value, (types.FunctionType, type)):
        _hash_object(value, h, seen)
    elif isinstance(value, property):
        for f in (value.fget, value.fset, value.fdel):
            _hash_value(f, h, seen)
    else:
        h.update(_literal(value).encode())


def _hash_code(code: types.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, code.co_argcount,
                   code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(const, h)
        else:
            h.update(_literal(const).encode())


def _names(code: types.CodeType) -> list[str]:
    """The global names ``code`` and its nested code objects refer to."""
    out = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out += _names(const)
    return out


def _literal(value: Any) -> str:
    """A stable text of a constant (sets sorted, no memory addresses): its type for other objects."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({', '.join(map(_literal, value))})"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}({sorted(map(_literal, value))})"
    if isinstance(value, dict):
        return f"dict({sorted((_literal(k), _literal(v)) for k, v in value.items())})"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"
