"""The component registry, built on pluggy: the plugins' discovery and the default registry's
functions.

Where plugins come from, with an example: docs/design-rationale.md, "The registry"; the hooks:
:mod:`values_seg.hookspecs`.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import inspect
import threading
import traceback
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

import pluggy

from values_seg import hookspecs
from values_seg.storage.canonical import _freeze, jsonable, sha256_json
from values_seg.storage.input_files import read_files
from values_seg.params import Param, closest, params_of, validate

KINDS = tuple(hookspecs.HOOKS)
CALL_TIME_KINDS = {"measure"}  # the registered callable itself is the component
ENTRY_POINT_GROUP = "values_seg"

BUILTIN_PACKAGE = "values_seg_plugins"  # the folder plugins/


def builtin_modules(package: str = BUILTIN_PACKAGE) -> list[str]:
    """Every public module under ``plugins/`` (or its sub-package ``package``); each registers
    exactly like a third-party plugin.

    A name that starts with an underscore is private and not registered: a helper module
    (``_common.py``) or a whole helper package (``datasets/_lidc/``, not even imported here).
    """
    found = importlib.import_module(package)
    return sorted(_public_modules(found.__path__, f"{package}."))


def _public_modules(path: Iterable[str], prefix: str) -> Iterable[str]:
    import pkgutil

    for m in pkgutil.iter_modules(path, prefix):
        if m.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        if m.ispkg:
            yield from _public_modules(importlib.import_module(m.name).__path__, f"{m.name}.")
        else:
            yield m.name


class RegistryError(ValueError):
    """A plugin or component lookup problem; the message says what and how to fix it."""


def component(name: str | None = None, description: str | None = None, label: str | None = None,
              **meta: Any) -> Callable:
    """Attach a registry name, a one-line description, a display label and metadata to a component.

    ``label`` is the short name reports show (e.g. "MI"; default: the name). ``meta`` is
    kind-specific, e.g. a measure's ``uncertainty_types`` (C1 family -> "PU"/"AU"/"EU",
    :mod:`values_seg.families`). Classes may set the class attributes ``name`` and ``label``
    instead.
    """

    def mark(obj: Any) -> Any:
        obj.__values_seg_component__ = {"name": name, "description": description, "label": label, "meta": meta}
        return obj

    return mark


@dataclass(frozen=True)
class Component:
    """A registered component: what it is, where it came from and what it takes."""

    kind: str
    name: str
    description: str
    obj: Any
    source: str
    params: tuple[Param, ...] = ()  # what a config may set (engine-supplied arguments excluded)
    meta: dict = field(default_factory=dict)
    label: str = ""  # display label in reports; the name when not declared

    def normalise(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` validated, coerced to their declared types and completed with the defaults."""
        values = validate(f"{self.kind} {self.name!r}", self.params, dict(params))
        for p in self.params:
            if p.name not in values and not p.required:
                values[p.name] = p.default
        return values

    def create(self, **params: Any) -> Any:
        """An instance with validated parameters (the callable itself for a measure); arguments
        the engine supplies (a backbone's ``dims``, ...) pass through unchecked."""
        supplied = {k: params.pop(k) for k in hookspecs.SUPPLIED_ARGS.get(self.kind, ()) if k in params}
        values = {**validate(f"{self.kind} {self.name!r}", self.params, params), **supplied}
        if self.kind in CALL_TIME_KINDS:
            if not values:
                return self.obj
            bound = functools.partial(self.obj, **values)
            functools.update_wrapper(bound, self.obj)
            return bound
        return self.obj(**values)


def _describe(obj: Any) -> tuple[str | None, str, str | None, dict]:
    marked = getattr(obj, "__values_seg_component__", None) or {}
    name = marked.get("name") or getattr(obj, "name", None)
    if not isinstance(name, str):
        name = getattr(obj, "__name__", None)
    description = marked.get("description") or (inspect.getdoc(obj) or "").strip().split("\n")[0]
    label = marked.get("label") or getattr(obj, "label", None)
    return name, description, label if isinstance(label, str) and label else None, dict(marked.get("meta") or {})


def _source_of(plugin: Any, plugin_name: str) -> str:
    return getattr(plugin, "__name__", None) or plugin_name


class Registry:
    """A set of plugins and the components they contribute, indexed by kind and name."""

    def __init__(self, builtins: bool | str = True, entry_points: bool = True):
        """``builtins``: register the built-in plugins (``True``), none, or only those of one
        sub-package (e.g. ``"values_seg_plugins.report_sections"``)."""
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._index: dict[str, dict[str, Component]] = {k: {} for k in KINDS}
        self._lock = threading.RLock()
        self._loaded = False
        self._builtins = builtins
        self._entry_points = entry_points

    @property
    def loaded(self) -> bool:
        """Whether the plugins have been discovered (any lookup or registration does that)."""
        return self._loaded

    # -- discovery -------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            if self._builtins:
                package = self._builtins if isinstance(self._builtins, str) else BUILTIN_PACKAGE
                for module in builtin_modules(package):
                    self.load(module, source=f"{module} (built-in)")
            if self._entry_points:
                for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                    dist = getattr(ep, "dist", None)
                    where = f"{dist.name if dist else '?'}:{ep.name} (entry point)"
                    self.register(ep.load(), source=where)

    def load(self, module_path: str, source: str | None = None) -> ModuleType:
        """Import ``module_path`` and register it as a plugin (idempotent)."""
        self._ensure_loaded()
        if not isinstance(module_path, str) or not all(part.isidentifier() for part in module_path.split(".")):
            raise RegistryError(f"plugin {module_path!r} is not a module path: give dotted Python names, "
                                "e.g. my_package.plugins (the module must be importable: installed or on PYTHONPATH)")
        try:
            module = importlib.import_module(module_path)
        except Exception as e:  # noqa: BLE001 - a syntax error or any error the module raises while importing
            raise RegistryError(f"cannot import plugin module {module_path!r}: {_import_failure(e)}") from e
        if not self._pm.is_registered(module):
            self.register(module, source=source or module_path)
        return module

    def register(self, plugin: Any, source: str | None = None) -> None:
        """Register a plugin object; its components must not clash with registered ones."""
        self._ensure_loaded()
        with self._lock:
            source = source or _source_of(plugin, repr(plugin))
            name = self._pm.register(plugin, name=source)
            if name is None:  # pluggy: already registered or blocked
                return
            try:
                new = self._collect(plugin, source)
                for kind, comps in new.items():
                    for c in comps:
                        other = self._index[kind].get(c.name)
                        if other is not None:
                            raise RegistryError(
                                f"duplicate {kind} name {c.name!r}: registered by {other.source} "
                                f"and again by {c.source}"
                            )
                    names = [c.name for c in comps]
                    dupes = {n for n in names if names.count(n) > 1}
                    if dupes:
                        raise RegistryError(f"duplicate {kind} name(s) {sorted(dupes)} within {source}")
            except Exception:
                self._pm.unregister(plugin)
                raise
            for kind, comps in new.items():
                for c in comps:
                    self._index[kind][c.name] = c

    def _collect(self, plugin: Any, source: str) -> dict[str, list[Component]]:
        found: dict[str, list[Component]] = {}
        for kind, hook_name in hookspecs.HOOKS.items():
            impls = [i for i in getattr(self._pm.hook, hook_name).get_hookimpls() if i.plugin is plugin]
            for impl in impls:
                items = impl.function()
                if items is None:
                    continue
                if not isinstance(items, (list, tuple)):
                    raise RegistryError(f"{source}: hook {hook_name} must return a list, got {type(items).__name__}")
                for obj in items:
                    found.setdefault(kind, []).append(self._make(kind, obj, source))
        return found

    @staticmethod
    def _make(kind: str, obj: Any, source: str) -> Component:
        if not callable(obj):
            raise RegistryError(f"{source}: a {kind} must be a function or class, got {obj!r}")
        name, description, label, meta = _describe(obj)
        if not name or not name.replace("_", "a").replace("-", "a").isalnum():
            raise RegistryError(f"{source}: {kind} {obj!r} has no usable name (got {name!r})")
        if kind == "aggregation":
            missing = [m for m in ("fit", "__call__") if not hasattr(obj, m)]
            if missing:
                raise RegistryError(f"{source}: aggregation {name!r} lacks {', '.join(missing)}")
            from values_seg.orientation import orientation

            try:
                orientation(obj, f"{source}: aggregation {name!r}")
            except ValueError as e:
                raise RegistryError(str(e)) from None
        if kind == "report_section" and not (isinstance(obj, type) and callable(getattr(obj, "build", None))):
            raise RegistryError(f"{source}: report section {name!r} must be a class with a build(ctx) method "
                                "(subclass values_seg.report.section.ReportSection)")
        if kind == "quantity":
            if not (isinstance(obj, type) and callable(getattr(obj, "check", None))):
                raise RegistryError(f"{source}: quantity {name!r} must subclass values_seg.components.quantity.Quantity")
            try:
                obj.check(source)
            except ValueError as e:
                raise RegistryError(str(e)) from None
        if kind == "measure" and "uncertainty_types" in meta:
            from values_seg.families import check_types

            try:
                meta["uncertainty_types"] = check_types(meta["uncertainty_types"], f"{source}: measure {name!r}")
            except ValueError as e:
                raise RegistryError(str(e)) from None
        supplied = hookspecs.SUPPLIED_ARGS.get(kind, ())
        params = tuple(p for p in params_of(obj, keyword_only=kind in CALL_TIME_KINDS) if p.name not in supplied)
        return Component(kind, name, description, obj, source, params, meta, label or name)

    def add_commands(self, **parsers: Any) -> None:
        """Let each plugin add its command-line subcommands (hook ``values_seg_cli``, its
        arguments by name); a name already taken is a :class:`RegistryError` naming the plugin."""
        self._ensure_loaded()
        for impl in self._pm.hook.values_seg_cli.get_hookimpls():
            try:
                impl.function(**{name: parsers[name] for name in impl.argnames})
            except argparse.ArgumentError as e:
                raise RegistryError(f"{impl.plugin_name}: cannot add its command-line subcommand: {e}") from None

    # -- lookup ----------------------------------------------------------------------
    def _kind(self, kind: str) -> dict[str, Component]:
        if kind not in self._index:
            hint = closest(kind.rstrip("s"), KINDS)
            raise RegistryError(
                f"unknown component kind {kind!r}; valid kinds: {', '.join(KINDS)}"
                + (f" (did you mean {hint!r}?)" if hint else "")
            )
        self._ensure_loaded()
        return self._index[kind]

    def names(self, kind: str) -> list[str]:
        return sorted(self._kind(kind))

    def get(self, kind: str, name: str) -> Component:
        comps = self._kind(kind)
        if name not in comps:
            hint = closest(name, comps)
            raise RegistryError(
                f"unknown {kind} {name!r}; available: {', '.join(sorted(comps)) or '(none)'}"
                + (f" (closest match: {hint!r})" if hint else "")
            )
        return comps[name]

    def create(self, kind: str, name: str, **params: Any) -> Any:
        return self.get(kind, name).create(**params)

    def components(self, kind: str | None = None) -> list[Component]:
        kinds: Iterable[str] = [kind] if kind else KINDS
        return [self._kind(k)[n] for k in kinds for n in sorted(self._kind(k))]


# -- references to configured components -------------------------------------------------


@dataclass(frozen=True)
class ComponentRef:
    """A configured component, from the experiment config through the sweep to the training spec.

    ``kind`` and registry ``name``; ``params`` as given (a mapping or sorted pairs), normalised on
    construction when the component is registered (coerced to the declared types, defaults filled
    in), so equivalent references are equal and hash alike; ``label`` names it in results (two
    entries of one component with different parameters need different labels; default: the
    name). The label is not part of its identity: :meth:`key` and equality ignore it.
    """

    kind: str
    name: str
    params: Any = ()
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        params = dict(self.params)
        try:
            comp = _default.get(self.kind, self.name)
        except RegistryError:  # not registered (yet): keep what was given
            comp = None
        if comp is not None:
            params = comp.normalise(params)
        object.__setattr__(self, "params", _freeze(params))
        object.__setattr__(self, "label", str(self.label or self.name))

    @property
    def kwargs(self) -> dict:
        """The parameters as keyword arguments (lists for sequences)."""
        return {k: jsonable(v) if isinstance(v, tuple) else v for k, v in self.params}

    def to_dict(self) -> dict:
        """``{"name", "params"}``: the identity, as JSON."""
        return {"name": self.name, "params": {k: jsonable(v) for k, v in self.params}}

    def files(self) -> dict[str, str]:
        """The content digests of the files its parameters name (declared ``InputPath()``):
        part of its key, so other bytes at the same path are never taken for these."""
        try:
            comp = _default.get(self.kind, self.name)
        except RegistryError:
            return {}
        return read_files(comp.params, dict(self.params))

    def identity(self) -> dict:
        """What keys it: :meth:`to_dict` and, where its parameters name files, their contents."""
        files = self.files()
        return {"kind": self.kind, **self.to_dict(), **({"files": files} if files else {})}

    def key(self) -> str:
        return sha256_json(self.identity())

    def component(self) -> Component:
        return _default.get(self.kind, self.name)

    def create(self, **extra: Any) -> Any:
        """An instance (a measure: the callable) with these parameters."""
        return _default.create(self.kind, self.name, **self.kwargs, **extra)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.label}={self.name}({args})" if self.label != self.name else f"{self.name}({args})"


_default = Registry()


def default() -> Registry:
    return _default


def names(kind: str) -> list[str]:
    """Sorted names of the registered components of ``kind``."""
    return _default.names(kind)


def get(kind: str, name: str) -> Component:
    """The :class:`Component` record (description, source, parameters, metadata)."""
    return _default.get(kind, name)


def create(kind: str, name: str, **params: Any) -> Any:
    """An instance of component ``name`` of ``kind`` with validated parameters."""
    return _default.create(kind, name, **params)


def components(kind: str | None = None) -> list[Component]:
    return _default.components(kind)


def _import_failure(error: Exception) -> str:
    """One line for an error raised while importing a plugin: its type, message and where."""
    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg} ({error.filename}, line {error.lineno})"
    frame = ([None] + traceback.extract_tb(error.__traceback__))[-1]
    where = f" ({frame.filename}, line {frame.lineno})" if frame and not isinstance(error, ImportError) else ""
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}{where}"


def load(module_path: str) -> ModuleType:
    """Import a plugin module by path and register it."""
    return _default.load(module_path)


def register(plugin: Any, source: str | None = None) -> None:
    return _default.register(plugin, source)
