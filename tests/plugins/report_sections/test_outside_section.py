"""An outside package (``tests/outside_section``, entry-point group ``values_seg``) adds a report
section with a figure; it is listed by ``values-seg plugins`` and reaches ``report.md`` and
``report.html`` with no file of values-seg edited, and leaves with the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

OUTSIDE = Path(__file__).resolve().parents[2] / "outside_section"


def _cli(*args: str, cwd: Path, with_plugin: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if with_plugin:
        env["PYTHONPATH"] = str(OUTSIDE)
    return subprocess.run([sys.executable, "-m", "values_seg.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_listed_as_a_report_section(tmp_path):
    out = _cli("plugins", "--kind", "report_section", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "  dice_overview " in out.stdout and "values-seg-section-example:dice_overview (entry point)" in out.stdout
    assert "  risk_coverage " in out.stdout  # the built-ins beside it


def test_its_section_and_figure_reach_the_report(synthetic_run, tmp_path):
    run = shutil.copytree(synthetic_run, tmp_path / "run")
    out = _cli("report", str(run), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = (run / "report.md").read_text(encoding="utf-8")
    assert "## Dice overview" in text and "![Dice overview](figures/dice_overview.png)" in text
    assert text.index("## Downstream tasks") < text.index("## Dice overview") < text.index("## Separation study")
    assert (run / "figures" / "dice_overview.png").read_bytes()[:4] == b"\x89PNG"
    page = (run / "report.html").read_text(encoding="utf-8")  # and the page, from the same declaration
    assert '<h2 id="dice-overview">Dice overview</h2>' in page and '<a class="h2" href="#dice-overview">' in page
    section = page[page.index('id="dice-overview"'):page.index('id="separation-study')]
    assert section.count('alt="Dice overview"') == 1 and 'src="data:image/png;base64,' in section

    out = _cli("report", str(run), cwd=tmp_path, with_plugin=False)  # the package is gone: so is its section
    assert out.returncode == 0, out.stderr
    assert "Dice overview" not in (run / "report.md").read_text(encoding="utf-8")
    assert "Dice overview" not in (run / "report.html").read_text(encoding="utf-8")
    assert not (run / "figures" / "dice_overview.png").exists()  # its stale figure removed
