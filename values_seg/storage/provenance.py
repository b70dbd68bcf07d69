"""Code digests: what computes a cached artefact, so that a change to it gives a new cache key, by
the one rule for every key, the stages' and the no-op rerun's (docs/caching.md, "One keying rule").
"""

from __future__ import annotations

import ast
import contextlib
import csv
import dis
import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import json
import marshal
import os
import platform
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Iterator

#: Top-level packages of the project itself, always followed as code.
PROJECT_PACKAGES = ("values_seg", "values_seg_plugins", "toy_data_generator")
#: Modules that key, store and verify results but never change a number: left out of the digests,
#: so that refining how files are checked does not retrain everything.
BOOKKEEPING = frozenset({"values_seg.storage.provenance", "values_seg.storage.atomic", "values_seg.storage.run_directory",
                         "values_seg.storage.artifact", "values_seg.components.run_context", "values_seg.storage.cache_store",
                         "values_seg.runner.run_record", "values_seg.storage.input_files", "values_seg.runtime.progress",
                         "values_seg.engine.costs"})

#: The framework modules of each cached stage (plus what they import).
STAGE_MODULES = {
    "training": ("values_seg.engine.training", "values_seg.engine.augment", "values_seg.engine.losses",
                 "values_seg.engine.networks", "values_seg.components.dataset"),
    "prediction": ("values_seg.engine.inference", "values_seg.numerics.validation"),
    "data_check": ("values_seg.components.dataset",),
    "report": ("values_seg.report.build",),
    "figure": (),  # a figure's own plotting code only (values_seg.report.render.FigureInputs)
    "evaluation": ("values_seg.evaluation.per_case", "values_seg.evaluation.combination", "values_seg.metrics",
                   "values_seg.components.measure", "values_seg.components.aggregation"),
    "scoring": ("values_seg.components.task", "values_seg.runner.run", "values_seg.runner.results",
                "values_seg.runner.statistics", "values_seg.statistics", "values_seg.metrics", "values_seg.config.sweep"),
}

#: The environment variables that select the numeric kernels (torch's CPU capability, numba's
#: target, MKL's and OpenBLAS's code paths): part of every key, as the CPU's vector ISA is.
NUMERICS_ENV = ("ATEN_CPU_CAPABILITY", "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
#: The CPU flags that decide which vector kernels torch, numpy, numba and oneDNN pick.
VECTOR_FLAGS = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                          "avx512cd", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile",
                          "amx_int8", "asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "fphp"})


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


#: Digests of module files by the sha256 of their bytes (and the Python version, whose AST or
#: bytecode they come from), and the installed distributions by a signature of their metadata,
#: kept between runs in a file (:func:`use_digest_file`): parsing every module and reading every
#: distribution's metadata again would cost a rerun that has nothing to do a second.
_known: dict[str, list] = {}
_known_installed: dict[str, dict] = {}
_known_file: Path | None = None
_known_changed = False


def use_digest_file(path: str | Path) -> None:
    """Keep the digests in ``path`` (read now, written by :func:`save_digest_file`)."""
    global _known_file
    _known_file = Path(path)
    read_digest_file(_known_file)


def read_digest_file(path: str | Path) -> None:
    """Know the digests a run kept in ``path`` (keyed by the files' bytes and the metadata's
    signature: a changed file is parsed again), without writing to it; a missing or unreadable
    file is ignored."""
    try:
        data = json.loads(Path(path).read_text())
        files, installed = data.get("files", {}), data.get("installed", {})
        _known.update({k: v for k, v in files.items() if isinstance(v, list) and len(v) == 2})
        _known_installed.update({k: v for k, v in installed.items() if isinstance(v, dict)})
    except (OSError, ValueError, AttributeError):
        pass


def save_digest_file() -> None:
    global _known_changed
    if _known_file is None or not _known_changed:
        return
    from values_seg.storage.run_directory import write_owned

    # in the cache folder values-seg claimed (runner), replaced atomically, never through a link;
    # only the current signature of the installed distributions is kept
    current = _installed_signature(tuple(sys.path))
    installed = {k: v for k, v in _known_installed.items() if k == current}
    write_owned(_known_file.parent, _known_file, json.dumps({"files": _known, "installed": installed}, sort_keys=True))
    _known_changed = False


# ----------------------------------------------------------------------------- one module's file


@functools.lru_cache(maxsize=None)
def _file_digest(path: str) -> tuple[str, tuple[tuple[str, str, int, bool], ...]]:
    """(digest of the code of one module file, its imports as (module, name, level, on import)
    quadruples: ``import a.b`` -> ("a.b", "", 0, True); ``from .m import f`` inside a function ->
    ("m", "f", 1, False)). A source file is digested by its syntax tree without docstrings, a
    sourceless one (``.pyc``) by its bytecode, an extension module by its bytes. A package's
    ``__init__`` that names its own submodules in strings (a lazy face, PEP 562) imports them."""
    global _known_changed
    source = Path(path).read_bytes()
    content = hashlib.sha256(source + f"|{path}|python{sys.version_info[:2]}|v3".encode()).hexdigest()
    if content in _known:  # the imports as the file keeps them: lists, unpacked like tuples
        return _known[content][0], _known[content][1]
    if path.endswith(".py"):
        digest, imports = _parse_digest(source, path)
        if Path(path).name == "__init__.py":
            imports += _named_submodules(source, path)
    elif path.endswith(".pyc"):
        digest, imports = _bytecode_digest(source)
    else:  # an extension module: its imports are its own business, its bytes are its code
        digest, imports = hashlib.sha256(source).hexdigest(), ()
    _known[content] = [digest, [list(i) for i in imports]]
    _known_changed = True
    return digest, imports


def _parse_digest(source: bytes, path: str) -> tuple[str, tuple[tuple[str, str, int, bool], ...]]:
    tree = ast.parse(source.decode("utf-8"), filename=path)
    imports: list[tuple[str, str, int, bool]] = []
    todo = [(node, True) for node in tree.body]
    while todo:
        node, on_import = todo.pop()
        if isinstance(node, ast.Import):
            imports += [(a.name, "", 0, on_import) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [(node.module or "", a.name, node.level, on_import) for a in node.names]
        inside = on_import and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        todo += [(child, inside) for child in ast.iter_child_nodes(node)]
    digest = hashlib.sha256(ast.dump(_strip_docstrings(tree), include_attributes=False).encode()).hexdigest()
    return digest, tuple(sorted(imports))


def _named_submodules(source: bytes, path: str) -> tuple[tuple[str, str, int, bool], ...]:
    """The submodules of a package that its ``__init__`` names in strings (``"pkg.sub"``), as
    imports made when a name is first asked for: ``(sub, "=name", 0, False)`` where a dict maps the
    name to it (a lazy face, ``{"Task": "pkg.tasks"}``: ``from pkg import Task`` imports that one
    alone), ``(sub, "", 0, False)`` for any other mention."""
    package = Path(path).parent.name

    def submodule(node) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and f".{package}." in f".{node.value}" \
            and all(part.isidentifier() for part in node.value.split("."))

    tree = ast.parse(source.decode("utf-8"), filename=path)
    named, mapped = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if submodule(value) and isinstance(key, ast.Constant) and isinstance(key.value, str):
                    named.add((value.value, f"={key.value}", 0, False))
                    mapped.add(id(value))
    named |= {(node.value, "", 0, False) for node in ast.walk(tree) if submodule(node) and id(node) not in mapped}
    return tuple(sorted(named))


def _lazy_face(package: str) -> dict[str, str]:
    """``{name: submodule}`` of a package's lazy face (see :func:`_named_submodules`); ``{}`` for others."""
    path = _module_file(package) if _is_package(package) else None
    if path is None or not path.endswith("__init__.py"):
        return {}
    return {name[1:]: target for target, name, _, _ in _file_digest(path)[1] if name.startswith("=")}


def _bytecode_digest(data: bytes) -> tuple[str, tuple[tuple[str, str, int, bool], ...]]:
    """A ``.pyc``: the sha256 of its marshalled code (the 16-byte header with the source's time
    left out), its imports read from the bytecode's ``IMPORT_NAME`` instructions."""
    code = marshal.loads(data[16:])
    imports: list[tuple[str, str, int, bool]] = []
    todo = [code]
    while todo:
        current = todo.pop()
        consts: list = []
        for ins in dis.get_instructions(current):
            if ins.opname == "LOAD_CONST":
                consts = (consts + [ins.argval])[-2:]
            elif ins.opname == "IMPORT_NAME":
                level, names = consts if len(consts) == 2 else (0, None)
                names = names if isinstance(names, tuple) else ()
                level = level if isinstance(level, int) else 0
                on_import = current is code
                imports += [(ins.argval, n, level, on_import) for n in names] or [(ins.argval, "", level, on_import)]
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return hashlib.sha256(data[16:]).hexdigest(), tuple(sorted(imports))


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


def _is_package(module: str) -> bool:
    spec = _spec(module)
    return bool(spec and spec.submodule_search_locations)


_CODE_SUFFIXES = (".py", ".pyc", *importlib.machinery.EXTENSION_SUFFIXES)


def _module_file(module: str) -> str | None:
    """The file a module's code is in: its source, or (shipped without one) its bytecode or
    extension module; ``None`` for a namespace package or a module that is not there."""
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None) if loaded else None
    if path is None:
        spec = _spec(module)
        path = spec.origin if spec is not None and spec.has_location else None
    return path if path and path.endswith(_CODE_SUFFIXES) and Path(path).is_file() else None


# ----------------------------------------------------------------------------- installed libraries


def _installed_signature(path: tuple[str, ...]) -> str:
    """A digest of every distribution's metadata files on ``path`` (names, sizes, modification
    times): it changes whenever a distribution is installed, removed, upgraded or edited, and
    with the way :func:`_installed` reads them (``v2``: top-level names from ``RECORD``)."""
    h = hashlib.sha256(b"v2")
    for entry in path:
        try:
            found = sorted(e.name for e in os.scandir(entry or ".") if e.name.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
        for name in found:
            h.update(f"{entry}/{name}".encode())
            for meta in ("METADATA", "PKG-INFO", "top_level.txt", "RECORD", "entry_points.txt", "direct_url.json"):
                try:
                    st = os.stat(os.path.join(entry or ".", name, meta))
                except OSError:
                    continue
                h.update(f"|{meta}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _installed(path: tuple[str, ...]) -> dict:
    """``{"tops": {top-level name: [distribution, ...]}, "versions": {distribution: version},
    "code": [distribution, ...]}`` of the distributions on ``path``; "code" are those whose files
    are followed as code: a plugin's own (an entry point in the group ``values_seg``) and those
    installed in editable mode (their files change without their version)."""
    global _known_changed
    signature = _installed_signature(path)
    if signature in _known_installed:
        return _known_installed[signature]
    tops: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    code: set[str] = set()
    for dist in importlib.metadata.distributions(path=list(path)):
        name = dist.metadata["Name"]
        if not name or name in versions:  # the first on the path is the one imported
            continue
        versions[name] = dist.version
        provided = (dist.read_text("top_level.txt") or "").split() or _recorded_tops(dist)
        for top in dict.fromkeys(t for t in provided if t and t.isidentifier()):
            tops.setdefault(top, []).append(name)
        if any(ep.group == "values_seg" for ep in dist.entry_points) or _editable(dist):
            code.add(name)
    data = {"tops": tops, "versions": versions, "code": sorted(code)}
    _known_installed[signature] = data
    _known_changed = True
    return data


def _recorded_tops(dist) -> list[str]:
    """The top-level names of the files a distribution's ``RECORD`` lists, read as written (the
    ``importlib_metadata`` backport's ``files``, which another library may put first on
    ``sys.meta_path``, leaves out files it does not find)."""
    record = dist.read_text("RECORD")
    if record is None:
        return [_top_of_file(str(f)) for f in dist.files or ()]
    return [_top_of_file(row[0]) for row in csv.reader(record.splitlines()) if row]


def _top_of_file(path: str) -> str:
    first = path.split("/")[0]
    if first.endswith((".dist-info", ".egg-info", ".data")) or first in ("..", "__pycache__"):
        return ""
    return first.split(".")[0] if "/" not in path else first


def _editable(dist) -> bool:
    try:
        return bool(json.loads(dist.read_text("direct_url.json") or "{}").get("dir_info", {}).get("editable"))
    except ValueError:
        return False


def _top_kind(top: str) -> str:
    """``"stdlib"``, ``"code"`` (followed: the project, a plugin's own distribution, an editable
    install, or code on the path that no distribution provides) or ``"library"`` (an installed
    distribution's, keyed by its version)."""
    if top in PROJECT_PACKAGES:
        return "code"
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or not top:
        return "stdlib"
    installed = _installed(tuple(sys.path))
    dists = installed["tops"].get(top)
    if not dists or set(dists) & set(installed["code"]):
        return "code"
    return "library"


# ----------------------------------------------------------------------------- the closure


def _imports(module: str, imports, on_import_only: bool = False) -> list[tuple[str, bool]]:
    """The absolute names a module's imports refer to, each with whether only its import-time code
    counts (a parent package's): ``from pkg import sub`` is the submodule ``pkg.sub`` where it is
    code and exists (not the whole package); ``from pkg import name`` from a package with a lazy
    face is the name's submodule (if the face has it) and ``pkg`` as it is imported; else ``pkg``; ``on_import_only``: those made when the
    module is imported (not inside its functions)."""
    out = []
    package = module if _is_package(module) else module.rpartition(".")[0]
    for target, name, level, on_import in imports:
        if on_import_only and not on_import:
            continue
        try:
            base = importlib.util.resolve_name("." * level + target, package) if level else target
        except ImportError:  # a relative import beyond the top: it fails when run, it computes nothing
            continue
        if name.startswith("="):  # a lazy face's entry of this package itself
            out.append((base, False))
        elif name and name != "*" and _top_kind(base.split(".")[0]) == "code" and _spec(f"{base}.{name}") is not None:
            out.append((f"{base}.{name}", False))
        elif name and name != "*" and _top_kind(base.split(".")[0]) == "code" and _lazy_face(base):
            face = _lazy_face(base)  # a name of the face: its module; any other is made on import
            out += [(face[name], False)] if name in face else []
            out.append((base, True))
        else:
            out.append((base, False))
    return out


@functools.lru_cache(maxsize=None)
def _closure(roots: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the code modules of ``roots`` and of everything they import, followed through code and
    never into a library; the top-level names of the libraries and absent modules they import)."""
    seen: dict[str, str] = {}
    parents: set[str] = set()  # packages imported only as the parents of their submodules
    outside: set[str] = set()
    todo = [(root, False) for root in roots]
    while todo:
        name, as_parent = todo.pop()
        top = name.split(".")[0]
        if name in BOOKKEEPING or (name in seen and (as_parent or name not in parents)):
            continue
        kind = _top_kind(top)
        if kind == "library":
            outside.add(top)
            continue
        if kind != "code":
            continue
        path = _module_file(name)
        if path is None:
            if _spec(name) is None:  # not there: whether it appears decides what the code does
                outside.add(name)
            continue
        seen[name] = path
        if as_parent:  # its __init__ runs, its functions need not
            parents.add(name)
        else:
            parents.discard(name)
        todo += [(name.rsplit(".", i)[0], True) for i in range(1, name.count(".") + 1)]
        todo += _imports(name, _file_digest(path)[1], on_import_only=as_parent)
    return tuple(sorted(seen)), tuple(sorted(outside))


@functools.lru_cache(maxsize=None)
def modules_digest(roots: tuple[str, ...]) -> str:
    """sha256 over the code of ``roots`` and of every code module they import."""
    h = hashlib.sha256()
    for name in _closure(tuple(sorted(set(roots))))[0]:
        h.update(name.encode())
        h.update(_file_digest(_module_file(name))[0].encode())
    return h.hexdigest()


def libraries(roots: tuple[str, ...]) -> dict[str, str | None]:
    """The versions of the installed distributions the code of ``roots`` imports (its libraries
    and the distributions of its code, a plugin's own), ``None`` for a module that is absent."""
    modules, outside = _closure(tuple(sorted(set(roots))))
    installed = _installed(tuple(sys.path))
    out: dict[str, str | None] = {}
    for top in {m.split(".")[0] for m in modules} | {o.split(".")[0] for o in outside}:
        for dist in installed["tops"].get(top, ()):
            if top not in PROJECT_PACKAGES:
                out[dist] = installed["versions"].get(dist)
    out.update({f"absent:{name}": None for name in outside if name.split(".")[0] not in installed["tops"]})
    return dict(sorted(out.items()))


@functools.lru_cache(maxsize=None)
def numerics() -> dict[str, Any]:
    """What selects the numeric kernels on this machine: its architecture, the CPU's vector
    flags (:data:`VECTOR_FLAGS`) and the environment that overrides them (:data:`NUMERICS_ENV`)."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = set(line.partition(":")[2].split()) & VECTOR_FLAGS
                    break
    except OSError:
        flags = {platform.processor()}
    return {"machine": platform.machine(), "cpu": sorted(flags),
            "env": {k: os.environ[k] for k in NUMERICS_ENV if k in os.environ}}


def package_modules(top: str) -> list[str]:
    """Every module of the package (or module) ``top``, found without importing it."""
    spec = _spec(top)
    if spec is None:
        return []
    out = [top]
    for root in spec.submodule_search_locations or ():
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d.isidentifier())  # not __pycache__, not data folders
            prefix = ".".join((top, *Path(folder).relative_to(root).parts))
            for name in files:
                stem = name.partition(".")[0]
                if name.endswith(_CODE_SUFFIXES) and stem.isidentifier():
                    out.append(prefix if stem == "__init__" else f"{prefix}.{stem}")
    return sorted(set(out))


def code(roots: Iterable[str]) -> dict[str, Any]:
    """Everything code that computes from ``roots`` depends on: the digest of its modules, the
    versions of the libraries it imports, Python's and the machine's numerics."""
    roots = tuple(sorted(set(roots)))
    return {"modules": modules_digest(roots), "libraries": libraries(roots), "python": sys.version,
            "numerics": numerics()}


# ----------------------------------------------------------------------------- a stage's code


#: The root sets being recorded (:func:`recording_roots`): each code digest adds its roots to all.
_recording: list[set[str]] = []


@contextlib.contextmanager
def recording_roots() -> Iterator[set[str]]:
    """The root modules of every code digest taken inside the block: a run's own, so that its
    no-op rerun record covers the code of every stage it keyed and nothing an earlier run of the
    same process loaded."""
    roots: set[str] = set()
    _recording.append(roots)
    try:
        yield roots
    finally:
        _recording.remove(roots)


def module_of(obj: Any) -> ModuleType | None:
    return inspect.getmodule(obj if isinstance(obj, (type, ModuleType)) or callable(obj) else type(obj))


def code_digest(*objects: Any, stage: str | None = None) -> str:
    """The digest of the code that defines ``objects`` (components, heads, classes, module names;
    ``None`` is skipped) and, with ``stage``, of the framework modules of that stage
    (:data:`STAGE_MODULES`): :func:`code` of their modules, and the code objects of those without
    a module file (a notebook cell's)."""
    roots, sourceless = [], []
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
        if _sourceless(obj, module):
            sourceless.append(object_digest(obj))
    if stage is not None:
        roots += STAGE_MODULES[stage]
    for recorded in _recording:
        recorded.update(roots)
    payload = json.dumps({**code(roots), "sourceless": sourceless}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _sourceless(obj: Any, module: ModuleType | None) -> bool:
    """Whether ``obj``'s code is not (all) in its module's file: defined in a notebook cell, by
    ``exec``, or in a module without a file."""
    path = _module_file(module.__name__) if module is not None else None
    if path is None:
        return isinstance(obj, type) or callable(obj)
    if not path.endswith(".py"):  # bytecode or an extension: digested as the module's file
        return False
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


def clear_caches() -> None:
    """Forget what this process has found (for a caller that changed files or ``sys.path``)."""
    for cached in (_file_digest, _spec, _installed, _closure, modules_digest, numerics):
        cached.cache_clear()
    _known_installed.clear()  # the distributions found: a changed path is looked at again
