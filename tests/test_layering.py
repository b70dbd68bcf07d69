"""The layering contract: the import-linter contracts of pyproject.toml (core below plugins,
the report below the runner, no cycles), every name of the core imported from its one home (no
module re-exports another's names), no task named outside its own plugin. CI runs the test suite
only, so the contracts are checked here.

The home rule replaces a 400-line cap (issue 38): the cap stood for modules with one job, but
splits made only to meet it left re-exports behind, so a name had two import paths and a module's
imports no longer said what it uses. A package's ``__init__`` is its public face and may gather
names; every other module imports a name from where it is defined and imports nothing it does
not use."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Names a core module offers on purpose though defined elsewhere, with the reason: remove an
#: entry when it goes (a stale entry fails below), never add one without a documented reason.
DOCUMENTED_REEXPORTS: dict = {}

#: Modules that name tasks today (string literals), with the item that removes the names: stage
#: names that are task names too (item 1/2), the separation study's inputs (item 2), the tasks
#: validate-nnunet picks by what the data supports (tasks to declare what they need). Remove an
#: entry when it goes (a stale entry fails below), never add one.
NAMES_TASKS = {
    "plugins/datasets/_nnunet_raw/support.py": "tasks declaring the data they need",
}


def test_the_import_contracts_hold():
    """``lint-imports`` with the project's configuration, on this checkout's code."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ""})
    assert run.returncode == 0, run.stdout[run.stdout.find("Broken contracts"):] or run.stdout + run.stderr


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("").parts
    parts = (("values_seg_plugins",) + rel[1:]) if rel[0] == "plugins" else rel
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def defined_names(source: str) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, also under
    ``if``/``try``), not those it imports."""
    names: set[str] = set()
    blocks = list(ast.parse(source).body)
    while blocks:
        node = blocks.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            blocks += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                       *(b for h in getattr(node, "handlers", []) for b in h.body)]
    return names


def unused_imports(source: str) -> set[str]:
    """Names ``source`` imports from the core (``from values_seg... import name``) and never uses:
    what it imports only for others to import from it (a re-export)."""
    tree = ast.parse(source)
    imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.level == 0 and (node.module or "").startswith("values_seg") for a in node.names}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {word for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             for word in n.value.replace("|", " ").replace("[", " ").replace("]", " ").split()}  # string annotations
    return imported - used


def imports_through(sources: dict[str, str], defined: dict[str, set[str]], packages: set[str]) -> set[tuple]:
    """(importing file, module, name) for each ``from <core module> import name`` in ``sources``
    (file -> source) where the module does not define ``name`` itself (a package ``__init__`` may
    gather names; a submodule imported by name is fine)."""
    found = set()
    for file, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in defined \
                    and node.module not in packages:
                found |= {(file, node.module, a.name) for a in node.names
                          if a.name not in defined[node.module] and f"{node.module}.{a.name}" not in defined}
    return found


def _sources(*roots: str) -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
            for root in roots for p in sorted((ROOT / root).rglob("*.py"))}


def test_every_core_name_is_imported_from_its_one_home():
    core = {path: source for path, source in _sources("values_seg").items()}
    defined = {_module(ROOT / path): defined_names(source) for path, source in core.items()}
    packages = {_module(ROOT / path) for path in core if path.endswith("__init__.py")}
    through = {t for t in imports_through(_sources("values_seg", "plugins", "tests", "benchmarks"), defined, packages)
               if t[1:] not in DOCUMENTED_REEXPORTS}
    assert not through, ("import these names from the module that defines them (no re-exports): "
                         + "; ".join(f"{f}: {m}.{n}" for f, m, n in sorted(through)))
    reexporting = {path: sorted(unused_imports(source)) for path, source in core.items()
                   if not path.endswith("__init__.py") and unused_imports(source)}
    assert not reexporting, f"these modules import names they do not use (re-exports): {reexporting}"
    stale = [k for k in DOCUMENTED_REEXPORTS if k[1] in defined.get(k[0], set()) or k[0] not in defined]
    assert not stale, f"remove these from DOCUMENTED_REEXPORTS: {stale}"


def test_the_home_rule_finds_a_re_export():
    """The scans see a name imported through a module that does not define it, and one imported unused."""
    defined = {"values_seg.a": {"f"}, "values_seg.b": {"g"}}
    sources = {"x.py": "from values_seg.b import f, g\nfrom values_seg.a import f\n"}
    assert imports_through(sources, defined, set()) == {("x.py", "values_seg.b", "f")}
    assert imports_through(sources, defined, {"values_seg.b"}) == set()
    assert unused_imports("from values_seg.a import f, g  # noqa: F401\nx: 'g' = 1\n") == {"f"}
    assert defined_names("if True:\n    def h(): pass\nK = 1\nfrom values_seg.a import f\n") == {"h", "K"}


def named_tasks(source: str, module: str, tasks: dict[str, str]) -> set[str]:
    """The task names (``tasks``: name -> its plugin module) that ``source`` holds as string
    literals, except in the task's own plugin module."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in tasks and tasks[node.value] != module}


def task_names_by_module() -> dict[str, set[str]]:
    """Per module of the core and of the plugins, the task names it holds (:func:`named_tasks`)."""
    from values_seg import registry

    tasks = {name: registry.get("task", name).obj.__module__ for name in registry.names("task")}
    found = {}
    for root, package in (("values_seg", "values_seg"), ("plugins", "values_seg_plugins")):
        for path in (ROOT / root).rglob("*.py"):
            rel = path.relative_to(ROOT)
            module = ".".join((package, *rel.with_suffix("").parts[1:]))
            names = named_tasks(path.read_text(encoding="utf-8"), module, tasks)
            if names:
                found[rel.as_posix()] = names
    return found


def test_no_task_is_named_outside_its_own_plugin():
    found = task_names_by_module()
    new = {p: sorted(n) for p, n in found.items() if p not in NAMES_TASKS}
    assert not new, f"these modules name tasks (a task declares what it needs; nothing else names it): {new}"
    stale = sorted(set(NAMES_TASKS) - set(found))
    assert not stale, f"these modules name no task now: remove them from NAMES_TASKS: {stale}"


def test_the_checks_look_at_this_checkout():
    """The contracts and the scans read this checkout's core and plugins, and a literal is found."""
    import values_seg
    import values_seg_plugins

    assert Path(values_seg.__file__).resolve().parent == ROOT / "values_seg"
    assert Path(values_seg_plugins.__file__).resolve().parent == ROOT / "plugins"
    tasks = {"ood_detection": "values_seg_plugins.tasks.ood_detection"}
    source = "ROWS = {'ood_detection': 1}  # ood_detection in a comment is prose\n"
    assert named_tasks(source, "values_seg.report.x", tasks) == {"ood_detection"}
    assert named_tasks(source, "values_seg_plugins.tasks.ood_detection", tasks) == set()
