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
