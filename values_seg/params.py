"""Typed component parameters: read from a signature, validated and coerced on ``create``.

The supported annotations, ``InputPath`` and ``Range`` bounds: docs/design-rationale.md,
"Typed parameters".
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

REQUIRED = inspect.Parameter.empty

#: The largest magnitude of any ``int`` parameter (a C int: seeds, sizes and counts beyond it are
#: absurd, and NumPy and torch refuse many of them anyway).
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a numeric parameter: ``Annotated[int, Range(1, 1000)]``."""

    low: float | None = None
    high: float | None = None

    def check(self, where: str, value: Any) -> None:
        """Raise ``ValueError`` naming ``where`` if ``value`` (a number) lies outside."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"{where} must lie in {self.describe()}, got {value!r}")

    def describe(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"[{low}, {high}]"


@dataclass(frozen=True)
class InputPath:
    """A parameter that names a file or folder the component reads: ``Annotated[str, InputPath()]``.

    ``keyed_by``: how its content enters the cache keys: ``"content"``, its bytes, digested by the
    framework (:mod:`values_seg.storage.input_files`); or the component's own content key that covers it
    (``"fingerprint"``: a data set's, ``"cache_identity"``: a prediction model's)."""

    keyed_by: Literal["content", "fingerprint", "cache_identity"] = "content"


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any = Any
    default: Any = REQUIRED
    bounds: Range | None = None
    reads: InputPath | None = None  # the file or folder it names is read, keyed by its content

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> str:
        text = f"{self.name}: {type_name(self.annotation)}"
        if self.bounds is not None:
            text += f" in {self.bounds.describe()}"
        return text if self.required else f"{text} = {self.default!r}"


def _split_annotated(hint: Any) -> tuple[Any, Range | None, InputPath | None]:
    """``Annotated[T, Range(...), InputPath()]`` -> ``(T, Range, InputPath)``; any other hint ->
    ``(hint, None, None)``."""
    if get_origin(hint) is not Annotated:
        return hint, None, None
    base, *extras = get_args(hint)
    return (base, next((e for e in extras if isinstance(e, Range)), None),
            next((e for e in extras if isinstance(e, InputPath)), None))


def type_name(annotation: Any) -> str:
    if annotation is Any or annotation is REQUIRED:
        return "any"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def params_of(obj: Any, keyword_only: bool = False) -> tuple[Param, ...]:
    """The parameters of a factory (or, with ``keyword_only``, of a call-time callable)."""
    target = obj.__init__ if isinstance(obj, type) else obj
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # builtins without a signature
        return ()
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to unchecked
        hints = {}
    result = []
    for i, p in enumerate(signature.parameters.values()):
        if isinstance(obj, type) and i == 0 and p.name == "self":
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if keyword_only and p.kind is not p.KEYWORD_ONLY:
            continue
        annotation, bounds, reads = _split_annotated(hints.get(p.name, Any))
        result.append(Param(p.name, annotation, p.default, bounds, reads))
    return tuple(result)


def closest(name: str, candidates: typing.Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.5)
    return matches[0] if matches else None


def validate(owner: str, params: tuple[Param, ...], given: dict[str, Any]) -> dict[str, Any]:
    """Check names, fill nothing (defaults stay the factory's), coerce and type-check values."""
    by_name = {p.name: p for p in params}
    unknown = [k for k in given if k not in by_name]
    if unknown:
        valid = ", ".join(by_name) or "(none)"
        hint = closest(unknown[0], by_name)
        raise ValueError(
            f"{owner}: unknown parameter {unknown[0]!r}; valid parameters: {valid}"
            + (f" (did you mean {hint!r}?)" if hint else "")
        )
    missing = [p.name for p in params if p.required and p.name not in given]
    if missing:
        raise ValueError(f"{owner}: missing required parameter(s): {', '.join(missing)}")
    values = {}
    for k, v in given.items():
        where = f"{owner}: parameter {k!r}"
        values[k] = coerce(where, by_name[k].annotation, v)
        if by_name[k].bounds is not None:
            by_name[k].bounds.check(where, values[k])
        _check_magnitude(where, values[k])
    return values


def coerce(where: str, annotation: Any, value: Any) -> Any:
    """Return ``value`` converted to ``annotation`` or raise ``ValueError`` saying why."""
    if annotation is Any or annotation is REQUIRED:
        return value
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = get_args(annotation)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in options:
                return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce(where, option, value)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0] if errors else f"{where}: got {value!r}")
    if origin is Literal:
        choices = get_args(annotation)
        for choice in choices:
            if value == choice or str(choice) == str(value):  # YAML may read scenario 1 as an int
                return choice
        raise ValueError(f"{where} must be one of {list(choices)}, got {value!r}")
    if origin in (list, tuple, typing.Sequence) or annotation in (list, tuple):
        if isinstance(value, str):
            value = [v.strip() for v in value.strip("[]()").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) and not hasattr(value, "__iter__"):
            raise ValueError(f"{where} must be a list, got {value!r}")
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        items = [coerce(where, args[0], v) if args else v for v in value]
        return tuple(items) if (origin is tuple or annotation is tuple) else items
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ValueError(f"{where} must be a bool, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise ValueError(f"{where} must be an int, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ValueError(f"{where} must be an int, got {value!r}")
    if annotation is float:
        if isinstance(value, bool):
            raise ValueError(f"{where} must be a float, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValueError(f"{where} must be a float, got {value!r}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{where} must be a str, got {value!r}")
    return value


def _check_magnitude(where: str, value: Any) -> None:
    """A ``ValueError`` for an int (or an int in a list) beyond :data:`MAX_INT` in magnitude."""
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_magnitude(where, item)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ValueError(f"{where} must lie in [-{MAX_INT}, {MAX_INT}], got {value}")
