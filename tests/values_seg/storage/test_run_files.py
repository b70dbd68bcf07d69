"""values_seg.storage.run_files names every file of a run directory once: no module of values_seg/ or plugins/
spells one of those names itself (a new literal fails here), and the core names no quantity's table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from values_seg import hookimpl, registry
from values_seg.storage import run_directory, run_files
from values_seg.components.quantity import Quantity
from values_seg.runner import results, run

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("values_seg", "plugins")

#: Literals of those names that stay, each with its reason: (path relative to the repository, literal).
ALLOWED: dict[tuple[str, str], str] = {
    ("values_seg/storage/run_files.py", "*"): "the one module that names them",
    ("plugins/report_sections/montages.py", "montages"):
        "the section's own name (``name = 'montages'``), not the folder",
    ("plugins/datasets/_lidc/prepare.py", "failures.csv"):
        "the LIDC preparation's list of failed scans, in the prepared data folder, not a run directory",
    ("values_seg/runner/run.py", "tables"): "TABLES_KEY, the name of a key remembered in run.json, not the folder",
}


def _names() -> dict[str, str]:
    """Every name the module defines: constant -> file or folder name."""
    return {k: v for k, v in vars(run_files).items() if k.isupper() and isinstance(v, str)}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (module, class, function) and of attribute docstrings."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            is_doc = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str)
            if is_doc and (i == 0 or isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))):
                out.add(id(stmt.value))
    return out


def _patterns(names) -> dict[str, re.Pattern]:
    """A file name (it has a dot) is found anywhere in a string, as a whole name (messages too); a
    folder name only as the whole string or a path's first part (``"figures"``, ``"figures/x.png"``)."""
    out = {}
    for name in names:
        if "." in name:
            out[name] = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])")
        else:
            out[name] = re.compile(rf"^{re.escape(name)}(/|$)")
    return out


def literals(path: Path, patterns: dict[str, re.Pattern]) -> list[tuple[int, str]]:
    """(line, name) for each string literal in ``path`` (not a docstring) that spells one of the names."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found += [(node.lineno, name) for name, pattern in patterns.items() if pattern.search(node.value)]
    return found


def offending(root: Path = ROOT) -> list[str]:
    patterns = _patterns(set(_names().values()))
    out = []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if (rel, "*") in ALLOWED:
                continue
            out += [f"{rel}:{line}: {name!r}" for line, name in sorted(literals(path, patterns)) if (rel, name) not in ALLOWED]
    return out


def test_no_module_spells_a_run_file_name():
    found = offending()
    assert not found, ("run-directory file names spelled outside values_seg/storage/run_files.py (use its constants):\n"
                       + "\n".join(found))


def test_the_check_finds_a_new_literal(tmp_path):
    """The scan is not vacuous: a module that writes ``results.csv`` or ``figures/x.png`` itself is found."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "values_seg").mkdir()
    (tmp_path / "plugins" / "mine.py").write_text(
        '"""Docstrings may mention results.csv."""\n'
        'def f(run_dir):\n'
        '    """So may this one: figures/."""\n'
        '    return run_dir / "results.csv", run_dir / "figures/x.png", f"no `{run_dir}/report.md`"\n')
    assert sorted(offending(tmp_path)) == ["plugins/mine.py:4: 'figures'", "plugins/mine.py:4: 'report.md'",
                                           "plugins/mine.py:4: 'results.csv'"]


def test_every_allowed_literal_is_still_there():
    """An allowlist entry whose literal is gone is removed (the list stays short and true)."""
    patterns = _patterns(set(_names().values()))
    for (rel, name), reason in ALLOWED.items():
        if name != "*":
            assert (ROOT / rel).exists() and name in {n for _, n in literals(ROOT / rel, patterns)}, (rel, name, reason)


def test_every_name_is_documented_and_unique():
    names = _names()
    assert len(set(names.values())) == len(names), "two constants name the same file"
    text = (ROOT / "values_seg" / "storage" / "run_files.py").read_text()
    tree = ast.parse(text)
    documented = {stmt.targets[0].id for stmt, nxt in zip(tree.body, tree.body[1:])
                  if isinstance(stmt, ast.Assign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)}
    assert set(names) <= documented, f"names without a docstring: {sorted(set(names) - documented)}"


def test_quantity_tables_come_from_the_declarations():
    """The runner's list of tables and the report's inputs follow the registered quantities'
    declared tables (the calibration bins' CSV is declared by its quantity, not named by the core)."""
    declared = sorted({c.obj.table for c in registry.components("quantity") if c.obj.table})
    assert declared, "no built-in quantity declares a table"
    assert results.quantity_table_files() == declared
    assert set(declared) <= set(results.table_files())
    assert set(declared).isdisjoint(_names().values())


def test_report_inputs_digest_follows_a_declared_table(tmp_path):
    """A change to a quantity's declared table changes the report's input digest (the report is rebuilt)."""
    table = results.quantity_table_files()[0]
    before = run.report_inputs_digest(tmp_path)
    (tmp_path / table).write_text("measure,bin\nx,0\n")
    assert run.report_inputs_digest(tmp_path) != before


class _Outside(Quantity):
    """A third party's per-measure quantity with a run-directory table of its own."""

    name = "outside_spread"
    per_measure = True
    table = "outside_spread.csv"


class _OutsidePlugin:
    @staticmethod
    @hookimpl
    def values_seg_quantities():
        return [_Outside]


@pytest.fixture
def outside_quantity(monkeypatch):
    """The default registry with the built-ins and a third party's quantity that declares a table."""
    fresh = registry.Registry(entry_points=False)
    fresh.register(_OutsidePlugin(), source="tests")
    monkeypatch.setattr(registry, "_default", fresh)
    return _Outside.table


def test_a_damaged_outside_table_is_not_reused(tmp_path, outside_quantity):
    """A table that an outside quantity declares is one of the run's tables: changed after it was
    written, the run's tables are not intact (a no-op rerun writes them again instead of keeping it)."""
    run_directory.claim(tmp_path, "t")
    for name in (run_files.RESULTS_PARQUET, outside_quantity):
        (tmp_path / name).write_text("measure,value\na,1\n")
    run_directory.record(tmp_path, [tmp_path / run_files.RESULTS_PARQUET, tmp_path / outside_quantity])
    assert run.tables_intact(tmp_path)
    (tmp_path / outside_quantity).write_text("measure,value\na,2\n")
    assert not run.tables_intact(tmp_path)


def test_an_outside_table_is_a_report_input(tmp_path, outside_quantity):
    """The report is rebuilt when an outside quantity's table changes (it is one of its inputs)."""
    before = run.report_inputs_digest(tmp_path)
    (tmp_path / outside_quantity).write_text("measure,value\na,1\n")
    assert run.report_inputs_digest(tmp_path) != before


SECTION = """
from values_seg import hookimpl
from values_seg.report.section import ReportSection


class Spread(ReportSection):
    name = "outside_spread_section"

    def render(self, ctx):
        return ["## Spread", "{text}"]


@hookimpl
def values_seg_report_sections():
    return [Spread]
"""


def test_a_report_sections_code_is_a_report_input(tmp_path, monkeypatch):
    """The report is rebuilt when the code of a section it is built with changes (a plugin's, or a
    built-in's): the tables are the same, the report is not."""
    from values_seg.storage import provenance

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "outside_report_section.py").write_text(SECTION.format(text="one"))
    fresh = registry.Registry()
    monkeypatch.setattr(registry, "_default", fresh)
    fresh.load("outside_report_section")
    provenance.clear_caches()
    before = run.report_inputs_digest(tmp_path)
    (tmp_path / "outside_report_section.py").write_text(SECTION.format(text="two"))
    provenance.clear_caches()
    assert run.report_inputs_digest(tmp_path) != before


@pytest.mark.parametrize("name", sorted(set(_names().values())))
def test_names_are_plain(name):
    assert "/" not in name and name.strip() == name and name
