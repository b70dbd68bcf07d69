"""Proof by an outside package: a plugin of every kind, registered through the entry-point group
``values_seg`` by a package values-seg has never seen (``tests/outside_plugin``), goes through a
sweep into the results, the report's tables and plots, and LaTeX, with no file of the project
edited. Its prediction model brings a head and a loss the engine has never seen (a Dirichlet)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

OUTSIDE = Path(__file__).resolve().parent / "outside_plugin"
PACKAGE = OUTSIDE / "values_seg_example"
COMPONENTS = {  # kind -> (name, display label)
    "backbone": ("tiny_cnn", "tiny_cnn"),
    "prediction_model": ("evidential", "EDL"),
    "measure": ("foreground_variance", "FV"),
    "aggregation": ("above_quantile", "AboveQ"),
    "dataset": ("squares", "squares"),
    "task": ("risk_correlation", "Risk corr."),
    "quantity": ("sample_dice", "sample_dice"),
    "report_section": ("sample_agreement_figure", "Sample agreement"),
}
CONFIG = {
    "name": "outside",
    "datasets": [{"name": "squares", "params": {"size": 20, "cases": 12}}],
    "backbones": [{"name": "tiny_cnn", "params": {"width": 6}}],
    "recipe": {"epochs": 4, "batch_size": 4, "lr": 3e-3},
    "prediction_models": ["deterministic", {"name": "evidential", "params": {"num_samples": 6, "annealing_epochs": 2}}],
    "measures": ["predictive_entropy", "expected_entropy", "mutual_information", "foreground_variance"],
    "aggregations": ["image", {"name": "above_quantile", "params": {"q": 0.8}}],
    "tasks": ["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "separation",
              "risk_correlation", "sample_agreement", "case_count"],
    "evaluation": {"montage_cases": 1},
}


def _cli(*args: str, cwd: Path, with_plugin: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if with_plugin:
        env["PYTHONPATH"] = str(OUTSIDE)
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-m", "values_seg.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_modules_are_short():
    lines = {p.stem: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert lines["measure"] <= 15 and lines["aggregation"] <= 30 and lines["evidential"] <= 80, lines


def test_listed_by_values_seg_plugins(tmp_path):
    out = _cli("plugins", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for kind, (name, _) in COMPONENTS.items():
        assert f"  {name} " in out.stdout, f"{kind} {name} not listed"
    assert "values-seg-example:evidential (entry point)" in out.stdout
    assert _cli("plugins", cwd=tmp_path, with_plugin=False).stdout.count("evidential") == 0


@pytest.fixture(scope="module")
def outside_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("outside")
    (work / "outside.yaml").write_text(yaml.safe_dump(CONFIG))
    out = _cli("run", "outside.yaml", "--out", "run", "--no-progress", cwd=work)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return work / "run"


def test_every_component_reaches_the_results(outside_run):
    results = pd.read_csv(outside_run / "results.csv")
    assert set(results["dataset"]) == {"squares"} and set(results["backbone"]) == {"tiny_cnn"}
    assert {"deterministic", "evidential"} <= set(results["prediction_model"])
    assert "foreground_variance" in set(results["measure"]) and "above_quantile" in set(results["aggregation"])
    spearman = results[(results["task"] == "risk_correlation") & (results["metric"] == "spearman")]
    assert not spearman.empty and spearman["value"].between(-1, 1).all()
    # a task without a bootstrap has no interval; the built-ins beside it have theirs
    assert spearman["ci_low"].isna().all()
    assert results.loc[results["task"] == "failure_detection", "ci_low"].notna().all()
    # the plain-function measure declared its types: it is typed and joins the separation study as EU
    fv = results[(results["measure"] == "foreground_variance") & (results["prediction_model"] == "evidential")]
    assert set(fv["uncertainty_type"]) == {"EU"}
    assert "foreground_variance" in set(results.loc[results["task"] == "separation", "versus"])


def test_every_component_reaches_the_report(outside_run):
    report = " ".join((outside_run / "report.md").read_text().split())  # report.md wraps at 100 columns
    for kind, (_, label) in COMPONENTS.items():
        if kind not in ("backbone", "dataset", "quantity"):  # one backbone is not a table column; the dataset names a section
            assert label in report, f"{kind} label {label!r} missing from the report"
    assert "Spearman ρ" in report and "squares" in report
    assert (outside_run / "figures" / "fig3_risk_correlation_spearman.png").stat().st_size > 5000
    tex = next((outside_run / "tables").glob("downstream_*.tex")).read_text()
    assert "EDL" in tex and "Spearman" in tex and "AboveQ" in tex


def _section(report: str, heading: str) -> str:
    """The text of ``report``'s section ``heading`` up to the next section."""
    text = report[report.index(heading):]
    end = text.find("\n## ", len(heading))
    return text if end < 0 else text[:end]


def test_an_outside_task_and_its_own_section_reach_the_tables_and_the_report(outside_run):
    """The package's quantity (``sample_dice``), the task that consumes it (``sample_agreement``) and
    that task's own report section: its rows are a column of the LaTeX downstream table and a
    section of report.md with a table (the numbers of results.csv) and a figure. (results.csv and
    ``values-seg compare``: :func:`test_an_outside_quantity_and_its_task_reach_results_and_compare`.)"""
    results = pd.read_csv(outside_run / "results.csv")
    rows = results[(results["task"] == "sample_agreement") & (results["metric"] == "sample_dice")]
    tex = "\n".join(p.read_text() for p in (outside_run / "tables").glob("downstream_*.tex"))
    assert "Sample agreement" in tex and "Sample Dice" in tex
    section = _section((outside_run / "report.md").read_text(), "## Sample agreement")
    assert "![Sample agreement](figures/sample_agreement.png)" in section
    means = rows.groupby(["prediction_model", "split"])["value"].mean()
    assert f"| EDL | {means[('evidential', 'iid')]:.3f} | {means[('evidential', 'ood')]:.3f} |" in section
    assert (outside_run / "figures" / "sample_agreement.png").read_bytes()[:4] == b"\x89PNG"
    page = (outside_run / "report.html").read_text()  # the page has the section too: its table and figure
    start = page.index('<h2 id="sample-agreement">Sample agreement</h2>')
    section = page[start:page.index("<h2 ", start + 1)]
    assert f"{means[('evidential', 'iid')]:.3f}" in section and f"{means[('evidential', 'ood')]:.3f}" in section
    assert 'alt="Sample agreement"' in section and 'src="data:image/png;base64,' in section


def test_the_report_rebuilds_without_the_plugin(outside_run, tmp_path):
    (outside_run / "report.md").unlink()
    out = _cli("report", str(outside_run), cwd=tmp_path, with_plugin=False)
    assert out.returncode == 0, out.stderr
    report = " ".join((outside_run / "report.md").read_text().split())  # report.md wraps at 100 columns
    assert "EDL" in report and "Spearman ρ" in report
    assert "## Sample agreement" not in report and not (outside_run / "figures" / "sample_agreement.png").exists()


def test_an_outside_quantity_and_its_task_reach_results_and_compare(outside_run, tmp_path):
    """The outside package's per-case quantity is computed in the fused pass (a column of cases.csv)
    only because its task consumes it; the task's rows reach results.csv and ``values-seg compare``."""
    cases = pd.read_csv(outside_run / "cases.csv")
    test = cases[cases["split"] == "test"]
    assert test["sample_dice"].between(0, 1).all()
    deterministic = test[test["prediction_model"] == "deterministic"]
    assert (deterministic["sample_dice"] == 1).all()  # one sample agrees with itself
    results = pd.read_csv(outside_run / "results.csv")
    rows = results[(results["task"] == "sample_agreement") & (results["metric"] == "sample_dice")]
    assert set(rows["split"]) == {"iid", "ood"} and rows["ci_low"].notna().all()
    assert set(rows["prediction_model"]) == {"deterministic", "evidential"}
    out = _cli("compare", str(outside_run), "--vary", "prediction_model", "--task", "sample_agreement", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    wins = (outside_run / "comparisons" / "prediction_model_sample_agreement_wins.csv").read_text()
    assert "sample_dice" in wins, out.stdout


def test_an_outside_stage_runs_for_the_task_that_declares_it(outside_run):
    """The outside task ``case_count`` declares its own stage, which runs jobs on the run's executor
    through the narrow stage context; its result reaches the task and results.csv."""
    results = pd.read_csv(outside_run / "results.csv")
    rows = results[results["task"] == "case_count"]
    assert set(rows["prediction_model"]) == {"deterministic", "evidential"}
    assert (rows["value"] == CONFIG["datasets"][0]["params"]["cases"]).all()  # every test case was scored
