"""The documentation site builds strictly (a broken link, anchor or API reference fails the build),
and the code cites its pages, not documents outside the repository."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=600)


def test_the_docs_site_builds_strictly(tmp_path):
    out = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for page in ["index.html", "getting-started/index.html", "architecture/index.html", "guides/add-component/index.html"]:
        assert (tmp_path / "site" / page).is_file(), page
    reference = (tmp_path / "site" / "reference" / "metrics" / "index.html").read_text()
    assert "crc_threshold" in reference and "ace_reference" in reference  # generated from the docstrings


@pytest.mark.parametrize("breakage", ["[a page that is not there](nowhere.md)",
                                      "[an anchor that is not there](concepts.md#no-such-heading)",
                                      "::: values_seg.no_such_module"])
def test_a_broken_link_or_reference_fails_the_build(tmp_path, breakage):
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "values_seg", copy / "values_seg", ignore=shutil.ignore_patterns("__pycache__"))
    page = copy / "docs" / "install.md"
    page.write_text(page.read_text() + f"\n{breakage}\n")
    out = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0, f"{breakage!r} built without an error"


def test_every_page_is_in_the_navigation():
    import yaml

    config = (ROOT / "mkdocs.yml").read_text()
    nav = yaml.safe_load(config.split("\nnav:\n", 1)[1].join(["nav:\n", ""]))["nav"]

    def pages(entry):
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from pages(value)
        else:
            for item in entry:
                yield from pages(item)

    assert set(pages(nav)) == {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}


def test_the_code_cites_the_docs_not_an_outside_design_document():
    citing = [str(p.relative_to(ROOT)) for folder in ["values_seg", "plugins", "benchmarks", "tests", "toy_data_generator"]
              for p in (ROOT / folder).rglob("*.py") if "DESIGN" + ".md" in p.read_text()]
    assert citing == [], f"cite docs/architecture.md instead: {citing}"
