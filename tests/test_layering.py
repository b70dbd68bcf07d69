"""The layering contract: the import-linter contracts of pyproject.toml (core below plugins,
the report below the runner, no cycles), no module of the core over 400 lines, no task named
outside its own plugin. CI runs the test suite only, so the contracts are checked here."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400

#: Modules over the limit today, each with the item of issue 23 that splits it: remove an entry
#: when its module is split (a stale entry fails below), never add one.
OVER_LIMIT: dict[str, str] = {}

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


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_core_module_is_over_400_lines():
    sizes = {p.relative_to(ROOT).as_posix(): _lines(p) for p in (ROOT / "values_seg").rglob("*.py")}
    over = {p: n for p, n in sizes.items() if n > MAX_LINES and p not in OVER_LIMIT}
    assert not over, f"split these modules (at most {MAX_LINES} lines each): {over}"
    stale = {p: sizes.get(p, 0) for p in OVER_LIMIT if sizes.get(p, 0) <= MAX_LINES}
    assert not stale, f"these modules are within the limit now: remove them from OVER_LIMIT: {stale}"


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
