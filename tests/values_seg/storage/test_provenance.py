"""Code digests: code changes change them, docstrings and comments do not; code is followed into
helper packages on the path and into sourceless modules, never into a library, whose version the
digest holds, as it holds the machine's numerics; the digests kept in a file between runs are keyed
by the files' bytes; finding modules imports nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from values_seg.storage import provenance

ROOT = Path(__file__).parents[3]


@pytest.fixture()
def package(tmp_path, monkeypatch):
    """A fresh third-party package ``pkgdigest`` with two modules, on sys.path; caches cleared."""
    root = tmp_path / "pkgdigest"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    (root / "measure.py").write_text("from pkgdigest.helper import twice\n\ndef measure(x):\n    return twice(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    provenance.clear_caches()
    monkeypatch.setattr(provenance, "_known", {})
    monkeypatch.setattr(provenance, "_known_installed", {})
    monkeypatch.setattr(provenance, "_known_file", None)
    yield root
    provenance.clear_caches()


def _digest(*roots):
    provenance.clear_caches()
    return provenance.modules_digest(roots)


def test_code_changes_count_docstrings_and_comments_do_not(package):
    before = _digest("pkgdigest.measure")
    (package / "helper.py").write_text('"""Doubles."""\n# a comment\ndef twice(x):\n    """Twice x."""\n    return 2 * x\n')
    assert _digest("pkgdigest.measure") == before  # the imported helper's docstrings and comments
    (package / "helper.py").write_text("def twice(x):\n    return 3 * x\n")
    assert _digest("pkgdigest.measure") != before  # an imported module's code is part of the digest


def test_digests_kept_in_a_file_are_keyed_by_the_source(package, tmp_path):
    store = tmp_path / "code_digests.json"
    provenance.use_digest_file(store)
    first = _digest("pkgdigest.measure")
    provenance.save_digest_file()
    assert store.exists() and {"pkgdigest", "pkgdigest.helper", "pkgdigest.measure"} <= set(
        provenance._closure(("pkgdigest.measure",))[0])
    assert len(provenance._known) == 3  # the package's __init__, measure and helper
    provenance._known.clear()
    provenance.use_digest_file(store)  # a later run reads them back
    assert _digest("pkgdigest.measure") == first
    (package / "helper.py").write_text("def twice(x):\n    return x + x + 1\n")
    changed = _digest("pkgdigest.measure")
    assert changed != first  # new bytes, a new entry: the file never answers for changed code
    for value in provenance._known.values():  # the stored entries equal a fresh parse
        assert isinstance(value[0], str) and len(value[0]) == 64


def test_bookkeeping_modules_are_not_code(package):
    (package / "measure.py").write_text("import values_seg.storage.provenance\n\ndef measure(x):\n    return x\n")
    provenance.clear_caches()
    modules = provenance._closure(("pkgdigest.measure",))[0]
    assert "values_seg.storage.provenance" not in modules and "pkgdigest.measure" in modules


def test_finding_a_submodule_imports_no_package():
    code = textwrap.dedent("""
        import sys
        from values_seg.storage import provenance
        assert provenance._spec("values_seg.report.plots.montage") is not None
        assert provenance._spec("values_seg.report.no_such_module") is None
        print("values_seg.report" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _clear_caches():
    provenance.clear_caches()


@pytest.mark.parametrize("stage", sorted(set(provenance.STAGE_MODULES) - {"figure"}))
def test_a_library_upgrade_changes_every_stage_digest(stage, tmp_path, monkeypatch, upgraded):
    """A numpy upgrade (its installed metadata) gives every stage a new key (a figure's code is
    its own: its digest follows what that code imports)."""
    _clear_caches()
    before = provenance.code_digest(stage=stage)
    upgraded(tmp_path, "numpy")
    monkeypatch.syspath_prepend(str(tmp_path))
    _clear_caches()
    try:
        assert provenance.libraries(provenance.STAGE_MODULES[stage])["numpy"] == "99.0.0"
        assert provenance.code_digest(stage=stage) != before
    finally:
        monkeypatch.undo()
        _clear_caches()
    assert provenance.code_digest(stage=stage) == before  # and nothing else moved it


def test_an_upgrade_is_seen_whichever_metadata_reader_comes_first(tmp_path, upgraded):
    """With the ``importlib_metadata`` backport imported (MLflow imports it: its finder then
    answers first, and its ``files`` leave out files it does not find), an upgraded distribution
    is still found by the names its RECORD lists."""
    pytest.importorskip("importlib_metadata")
    upgraded(tmp_path, "numpy")
    code = textwrap.dedent(f"""
        import sys
        import importlib_metadata
        sys.path.insert(0, {str(tmp_path)!r})
        from values_seg.storage import provenance
        print(provenance.libraries(provenance.STAGE_MODULES["training"]).get("numpy"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "99.0.0"


def test_the_libraries_are_what_the_code_imports(tmp_path, monkeypatch, upgraded):
    """Not a fixed list: the lesion scale's connected components (cc3d) and the kernels' numba are
    keyed where the code imports them, and an upgrade of either through its installed metadata
    changes the evaluation's digest."""
    _clear_caches()
    found = provenance.libraries(provenance.STAGE_MODULES["evaluation"])
    assert {"numpy", "torch", "numba", "connected-components-3d", "scipy"} <= set(found)
    assert "matplotlib" not in found  # the report's library is not the evaluation's
    before = provenance.code_digest(stage="evaluation")
    upgraded(tmp_path, "connected-components-3d")
    monkeypatch.syspath_prepend(str(tmp_path))
    _clear_caches()
    assert provenance.code_digest(stage="evaluation") != before


def test_the_machines_numerics_are_in_every_digest(monkeypatch):
    """torch's scalar kernels instead of the CPU's vector ones (ATEN_CPU_CAPABILITY) compute other
    numbers: every digest changes with what selects the kernels."""
    _clear_caches()
    before = provenance.code_digest(stage="training")
    assert provenance.numerics()["machine"]
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    _clear_caches()
    assert provenance.numerics()["env"] == {"ATEN_CPU_CAPABILITY": "default"}
    assert provenance.code_digest(stage="training") != before
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    _clear_caches()
    assert provenance.code_digest(stage="training") == before


def test_a_helper_package_on_the_path_is_code(tmp_path, monkeypatch):
    """A plugin module whose maths lives in another top-level package on the path (no
    distribution): editing the helper changes the measure's digest."""
    (tmp_path / "helpermod").mkdir()
    (tmp_path / "helpermod" / "__init__.py").write_text("")
    (tmp_path / "helpermod" / "maths.py").write_text("def spread(x):\n    return x.std(axis=0)\n")
    (tmp_path / "plugmod.py").write_text("from helpermod.maths import spread\n\ndef measure(s):\n    return spread(s)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _clear_caches()
    before = provenance.code_digest("plugmod", stage="evaluation")
    (tmp_path / "helpermod" / "maths.py").write_text("def spread(x):\n    return x.var(axis=0)\n")
    _clear_caches()
    assert provenance.code_digest("plugmod", stage="evaluation") != before


def test_a_module_shipped_without_source_is_digested_by_its_bytecode(tmp_path, monkeypatch):
    """A plugin module shipped as a ``.pyc`` only (as vendors and Cython builds ship code): its
    bytecode is its code, and the modules it imports are followed from it."""
    import py_compile

    def ship(helper_factor: int) -> None:
        src = tmp_path / "src"
        src.mkdir(exist_ok=True)
        (src / "pycplug.py").write_text("import pychelper\n\ndef measure(s):\n    return pychelper.f(s)\n")
        py_compile.compile(str(src / "pycplug.py"), cfile=str(tmp_path / "pycplug.pyc"), doraise=True)
        (tmp_path / "pychelper.py").write_text(f"def f(s):\n    return s * {helper_factor}\n")

    ship(2)
    monkeypatch.syspath_prepend(str(tmp_path))
    _clear_caches()
    assert provenance._module_file("pycplug").endswith("pycplug.pyc")
    assert "pychelper" in provenance._closure(("pycplug",))[0]  # followed from the bytecode's imports
    before = provenance.code_digest("pycplug")
    (tmp_path / "src" / "pycplug.py").write_text("import pychelper\n\ndef measure(s):\n    return -pychelper.f(s)\n")
    py_compile.compile(str(tmp_path / "src" / "pycplug.py"), cfile=str(tmp_path / "pycplug.pyc"), doraise=True)
    _clear_caches()
    changed = provenance.code_digest("pycplug")
    assert changed != before
    ship(3)  # the helper it imports
    _clear_caches()
    assert provenance.code_digest("pycplug") != changed


@pytest.fixture()
def distribution(tmp_path, monkeypatch):
    """An installed third-party distribution ``thirdmeasure`` 1.0 with two top-level packages: the
    measure's ``thirdmeasure`` and the maths in ``helpermaths``."""
    (tmp_path / "helpermaths").mkdir()
    (tmp_path / "helpermaths" / "__init__.py").write_text("def spread(x):\n    return x.std(axis=0)\n")
    (tmp_path / "thirdmeasure").mkdir()
    (tmp_path / "thirdmeasure" / "__init__.py").write_text(
        "from helpermaths import spread\n\ndef measure(samples):\n    return spread(samples).sum(axis=0)\n")
    info = tmp_path / "thirdmeasure-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdmeasure\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("helpermaths\nthirdmeasure\n")
    (info / "entry_points.txt").write_text("[values_seg]\nthirdmeasure = thirdmeasure\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(provenance, "_known", {})
    monkeypatch.setattr(provenance, "_known_installed", {})
    monkeypatch.setattr(provenance, "_known_file", None)
    _clear_caches()
    yield tmp_path
    for name in ("thirdmeasure", "helpermaths"):
        sys.modules.pop(name, None)
    _clear_caches()


def test_a_helper_module_of_the_plugins_distribution_is_its_code(distribution):
    """Editing the helper (another top-level package of the plugin's installed distribution)
    changes the measure's digest."""
    import thirdmeasure

    before = provenance.code_digest(thirdmeasure.measure, stage="evaluation")
    (distribution / "helpermaths" / "__init__.py").write_text("def spread(x):\n    return x.var(axis=0)\n")
    _clear_caches()
    assert provenance.code_digest(thirdmeasure.measure, stage="evaluation") != before


def test_a_plugins_own_version_is_in_its_digest(distribution):
    import thirdmeasure

    before = provenance.code_digest(thirdmeasure.measure)
    text = (distribution / "thirdmeasure-1.0.dist-info" / "METADATA").read_text()
    (distribution / "thirdmeasure-1.0.dist-info" / "METADATA").write_text(text.replace("1.0", "1.1"))
    _clear_caches()
    assert provenance.code_digest(thirdmeasure.measure) != before


def _cell(source: str, name: str = "__main__"):
    """What a notebook cell defines: code with no source file (compiled from a string)."""
    namespace = {"__name__": name}
    exec(compile(textwrap.dedent(source), "<cell 1>", "exec"), namespace)
    return namespace


CELL = """
    import torch

    def helper(samples):
        return samples.std(dim=0)

    def measure(samples):
        return helper(samples).sum(dim=0) * {factor}

    class Aggregation:
        q = {factor}

        def __call__(self, umap):
            return float(umap.quantile(self.q))
"""


@pytest.mark.parametrize("module", ["__main__", "a_notebook_module_never_imported"])
def test_code_without_a_source_file_is_digested_by_its_code_objects(module):
    """A measure (and an aggregation class) registered from a notebook cell: its
    digest changes with its code and that of the cell's functions it calls, and is the same for
    the same code (so such a measure is still cached)."""
    first = _cell(CELL.format(factor=0.5), module)
    same = _cell(CELL.format(factor=0.5), module)
    other = _cell(CELL.format(factor=0.25), module)
    for name in ("measure", "Aggregation"):
        digest = provenance.code_digest(first[name], stage="evaluation")
        assert provenance.code_digest(same[name], stage="evaluation") == digest
        assert provenance.code_digest(other[name], stage="evaluation") != digest
    edited_helper = _cell(CELL.format(factor=0.5).replace("samples.std", "samples.var"), module)
    assert provenance.code_digest(edited_helper["measure"]) != provenance.code_digest(first["measure"])


def test_builtin_components_have_source_files():
    """The registered built-ins are keyed by their modules alone (no code-object digest needed)."""
    import inspect

    from values_seg import registry

    for c in registry.components():
        obj = inspect.unwrap(getattr(c.obj, "func", c.obj))
        assert not provenance._sourceless(obj, provenance.module_of(obj)), (c.kind, c.name)


def _key_makers(root: Path) -> dict[str, list[str]]:
    """Where code is digested into a key, and where a ``key()`` method hashes by hand, over the
    project's code: {module: [what]}."""
    import ast

    found: dict[str, list[str]] = {}
    for folder in ("values_seg", "plugins"):
        for path in sorted((root / folder).rglob("*.py")):
            if path.name == "provenance.py":
                continue  # the digests' own home
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    owner = getattr(getattr(node.func, "value", None), "id", None)
                    if name in ("code_digest", "object_digest") or (name == "code" and owner == "provenance"):
                        found.setdefault(rel, []).append(name)
                if isinstance(node, ast.FunctionDef) and node.name == "key":
                    calls = {getattr(c.func, "id", None) for c in ast.walk(node) if isinstance(c, ast.Call)}
                    if calls & {"sha256_json", "sha256"}:
                        found.setdefault(rel, []).append("key() by hand")
    return found


def test_one_key_rule_every_key_digests_code_in_one_way():
    """A stage's key is its declared inputs' (``Inputs.key``: fields, derived keys, code digest);
    the no-op rerun's digests the same modules with the same function (``provenance.code``, from
    the roots the stage keys recorded). No other place digests code or hashes a key by hand."""
    found = _key_makers(ROOT)
    assert found == {"values_seg/storage/artifact.py": ["key() by hand", "code_digest"],
                     "values_seg/runner/run_record.py": ["code"],
                     # a component reference's identity: an input that keys enter, not a key of outputs
                     "values_seg/registry.py": ["key() by hand"]}, found


def test_the_key_scan_finds_a_second_rule(tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "mine.py").write_text(
        "class Cached:\n    def key(self):\n        return sha256_json({'x': 1})\n")
    assert _key_makers(tmp_path) == {"plugins/mine.py": ["key() by hand"]}


def test_a_name_of_a_lazy_face_is_the_code_of_its_module_alone(tmp_path, monkeypatch):
    """``from face import Task`` of a package whose ``__init__`` hands names on lazily
    (``{"Task": "face.tasks"}``): editing ``face.tasks`` changes the importer's digest, editing
    another module of the face does not (a library upgrade there recomputes nothing that does not
    use it); ``import face`` itself may use every name."""
    (tmp_path / "face").mkdir()
    (tmp_path / "face" / "__init__.py").write_text(
        'import importlib\nfrom face.hooks import hookimpl\nFACE = {"Task": "face.tasks", "Page": "face.report"}\n\n'
        'def __getattr__(name):\n    return getattr(importlib.import_module(FACE[name]), name)\n')
    (tmp_path / "face" / "hooks.py").write_text("hookimpl = object()\n")
    (tmp_path / "face" / "tasks.py").write_text("class Task:\n    level = 1\n")
    (tmp_path / "face" / "report.py").write_text("class Page:\n    width = 1\n")
    (tmp_path / "usestask.py").write_text("from face import hookimpl, Task\n\nclass Mine(Task):\n    pass\n")
    (tmp_path / "usesall.py").write_text("import face\n\ndef page():\n    return face.Page\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def digests():
        _clear_caches()
        return provenance.code_digest("usestask"), provenance.code_digest("usesall")

    task, whole = digests()
    (tmp_path / "face" / "report.py").write_text("class Page:\n    width = 2\n")
    assert digests() == (task, digests()[1]) and digests()[1] != whole  # the report: not Task's user's code
    (tmp_path / "face" / "tasks.py").write_text("class Task:\n    level = 2\n")
    assert digests()[0] != task
    (tmp_path / "face" / "hooks.py").write_text("hookimpl = None\n")  # made on import: everyone's code
    changed = digests()
    (tmp_path / "face" / "hooks.py").write_text("hookimpl = object()\n")
    assert digests() != changed
