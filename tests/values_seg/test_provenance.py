"""Code digests: code changes change them, docstrings and comments do not; the digests kept in a
file between runs are keyed by the source's bytes; finding modules imports nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from values_seg import provenance


@pytest.fixture()
def package(tmp_path, monkeypatch):
    """A fresh third-party package ``pkgdigest`` with two modules, on sys.path; caches cleared."""
    root = tmp_path / "pkgdigest"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    (root / "measure.py").write_text("from pkgdigest.helper import twice\n\ndef measure(x):\n    return twice(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for cached in (provenance._file_digest, provenance._spec, provenance.modules_digest):
        cached.cache_clear()
    monkeypatch.setattr(provenance, "_known", {})
    monkeypatch.setattr(provenance, "_known_file", None)
    yield root
    for cached in (provenance._file_digest, provenance._spec, provenance.modules_digest):
        cached.cache_clear()


def _digest(*roots):
    for cached in (provenance._file_digest, provenance._spec, provenance.modules_digest):
        cached.cache_clear()
    return provenance.modules_digest(roots, ("pkgdigest",))


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
    assert store.exists() and len(provenance._known) == 2  # measure and helper
    provenance._known.clear()
    provenance.use_digest_file(store)  # a later run reads them back
    assert _digest("pkgdigest.measure") == first
    (package / "helper.py").write_text("def twice(x):\n    return x + x + 1\n")
    changed = _digest("pkgdigest.measure")
    assert changed != first  # new bytes, a new entry: the file never answers for changed code
    for value in provenance._known.values():  # the stored entries equal a fresh parse
        assert isinstance(value[0], str) and len(value[0]) == 64


def test_bookkeeping_modules_are_not_code(package):
    (package / "measure.py").write_text("import values_seg.provenance\n\ndef measure(x):\n    return x\n")
    for cached in (provenance._file_digest, provenance._spec, provenance.modules_digest):
        cached.cache_clear()
    assert provenance._closure(["pkgdigest.measure"], ("pkgdigest", "values_seg")) == ["pkgdigest.measure"]


def test_finding_a_submodule_imports_no_package():
    code = textwrap.dedent("""
        import sys
        from values_seg import provenance
        assert provenance._spec("values_seg.report.plots.montage") is not None
        assert provenance._spec("values_seg.report.no_such_module") is None
        print("values_seg.report" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _clear_caches():
    for name in ("_file_digest", "_spec", "modules_digest", "library_versions", "_distributions"):
        cached = getattr(provenance, name, None)
        if cached is not None:
            cached.cache_clear()


@pytest.mark.parametrize("stage", sorted(provenance.STAGE_MODULES))
def test_a_library_upgrade_changes_every_stage_digest(stage, monkeypatch):
    """Issue 32 item 5: a numpy upgrade (its installed version string) gives every stage a new key."""
    import importlib.metadata

    _clear_caches()
    before = provenance.code_digest(stage=stage)
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda d: "99.0.0" if d == "numpy" else real(d))
    _clear_caches()
    try:
        assert provenance.code_digest(stage=stage) != before
    finally:
        monkeypatch.undo()
        _clear_caches()
    assert provenance.code_digest(stage=stage) == before  # and nothing else moved it


@pytest.fixture()
def distribution(tmp_path, monkeypatch):
    """An installed third-party distribution ``thirdmeasure`` 1.0 with two top-level packages: the
    measure's ``thirdmeasure`` and the maths in ``helpermaths`` (issue 32 item 6)."""
    (tmp_path / "helpermaths").mkdir()
    (tmp_path / "helpermaths" / "__init__.py").write_text("def spread(x):\n    return x.std(axis=0)\n")
    (tmp_path / "thirdmeasure").mkdir()
    (tmp_path / "thirdmeasure" / "__init__.py").write_text(
        "from helpermaths import spread\n\ndef measure(samples):\n    return spread(samples).sum(axis=0)\n")
    info = tmp_path / "thirdmeasure-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdmeasure\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("helpermaths\nthirdmeasure\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(provenance, "_known", {})
    monkeypatch.setattr(provenance, "_known_file", None)
    _clear_caches()
    yield tmp_path
    for name in ("thirdmeasure", "helpermaths"):
        sys.modules.pop(name, None)
    _clear_caches()


def test_a_helper_module_of_the_plugins_distribution_is_its_code(distribution):
    """Issue 32 item 6: editing the helper (another top-level package of the same distribution)
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
    """Issue 32 item 7: a measure (and an aggregation class) registered from a notebook cell: its
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
