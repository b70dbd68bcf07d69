"""Report sections as plugins: the hook, the registry kind, and a core that names no task."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from values_seg import hookimpl, registry
from values_seg.registry import Registry, RegistryError
from values_seg.report import build_report
from values_seg.report.section import ReportSection

CORE = Path(registry.__file__).parent / "report"
BUILT_IN = ("recommendation", "run_summary", "downstream_tables", "separation_study", "paper_comparison",
            "component_analysis", "risk_coverage", "paired_comparisons", "ranking_stability", "reliability",
            "montages")
TASKS = ("ambiguity", "ood_detection", "failure_detection", "calibration", "separation")


def test_built_in_sections_are_registered_in_report_order():
    names = registry.names("report_section")
    assert set(BUILT_IN) <= set(names)
    ordered = sorted((registry.get("report_section", n).obj for n in BUILT_IN), key=lambda s: s.order)
    assert [s.name for s in ordered] == list(BUILT_IN)
    assert registry.get("report_section", "risk_coverage").source.endswith("(built-in)")


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.relative_to(CORE).as_posix())
def test_the_report_core_names_no_task_and_stays_short(path):
    text = path.read_text(encoding="utf-8")
    named = [t for t in TASKS if re.search(rf"\b{t}\b", text)]
    assert not named, f"{path.name} names the task(s) {named}"
    assert len(text.splitlines()) <= 400


def test_the_report_core_holds_no_task_data():
    assert not [p for p in CORE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]


def test_a_section_must_be_a_class_with_build():
    def dice_overview(ctx):
        """A function, not a section class."""

    class NotASection:
        @hookimpl
        def values_seg_report_sections(self):
            return [dice_overview]

    with pytest.raises(RegistryError, match="report section .* must be a class with a build"):
        Registry(builtins=False, entry_points=False).register(NotASection(), source="bad")


class _Failing(ReportSection):
    """A section that raises."""

    name = "failing"
    what = "the failing section"
    order = 25  # between the run summary (20) and the downstream tables (30)

    def build(self, ctx):
        ctx.add("## Failing")
        raise RuntimeError("boom")


class _Plugin:
    @hookimpl
    def values_seg_report_sections(self):
        return [_Failing]


def test_a_registered_section_joins_in_its_order_and_its_error_stays_local(synthetic_run, tmp_path):
    run = shutil.copytree(synthetic_run, tmp_path / "run")
    plugin = _Plugin()
    registry.register(plugin, source="test plugin")
    try:
        text = build_report(run).read_text(encoding="utf-8")
    finally:
        registry.default()._pm.unregister(plugin)
        registry.default()._index["report_section"].pop("failing", None)
    assert "> **Warning:** could not build the failing section: RuntimeError: boom" in text
    assert text.index("## Downstream tasks") > text.index("## Failing") > text.index("## Run summary")
    assert "## Separation study" in text  # the other sections are built


def test_a_report_on_its_own_imports_no_model_code(synthetic_run, tmp_path):
    """``values-seg report`` in a fresh process registers the built-in sections (and the installed
    plugins, left out here), not every built-in component: no torch, no data set or model plugin is imported (they
    cost a report more than its figures)."""
    import subprocess
    import sys

    run = shutil.copytree(synthetic_run, tmp_path / "run")
    # without the user's installed plugins (issue 32, item 13: one of them may well import torch)
    code = ("import importlib.metadata as m; m.entry_points = lambda **kw: m.EntryPoints(()); "
            "import sys; from values_seg.report import build_report; build_report(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('values_seg_plugins.datasets', "
            "'values_seg_plugins.prediction_models', 'values_seg_plugins.measures'))))")
    users_plugin = Path(__file__).resolve().parents[2] / "outside_plugin"  # installed: its dist-info on the path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(users_plugin), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, check=True,
                         env=env).stdout
    assert out.strip().splitlines()[-1] == "[]"
    assert "## Separation study" in (run / "report.md").read_text(encoding="utf-8")
