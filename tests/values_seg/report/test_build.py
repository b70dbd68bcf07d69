"""build_report end to end on the synthetic run: files, content, robustness to missing inputs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from values_seg.storage import run_directory
from values_seg.report import build_report

PNG = b"\x89PNG\r\n\x1a\n"


def _copy(src: Path, dst: Path, scenario: str | None = None, metrics=None) -> Path:
    """Copy the run; keep only ``scenario``'s / ``metrics``' results (fewer figures, faster)."""
    shutil.copytree(src, dst)
    if scenario or metrics:
        results = pd.read_csv(dst / "results.csv")
        if scenario:
            results = results[results["scenario"] == scenario]
        if metrics:
            results = results[results["metric"].isin(metrics)]
        results.to_csv(dst / "results.csv", index=False)
        results.to_parquet(dst / "results.parquet", index=False)
    return dst


def test_report_files(built_report):
    run = built_report.parent
    text = built_report.read_text(encoding="utf-8")
    assert built_report.name == "report.md"
    assert text.startswith("# synthetic-study: values-seg report")
    assert "Warning" not in text and "could not" not in text
    for section in ("## Run summary", "## Downstream tasks", "## Separation study", "## Components",
                    "## Failure detection", "## Calibration", "## Uncertainty maps"):
        assert section in text
    assert "| train/ensemble/seed1 | train | `RuntimeError: out of memory` |" in text  # the cause, as it is
    assert "### toy_1" in text and "### toy_3b" in text
    figures = sorted(p.name for p in (run / "figures").glob("*.png"))
    assert figures == sorted([
        "fig3_ood_detection_auroc.png", "fig3_active_learning_improvement.png",
        "fig3_failure_detection_aurc.png", "fig3_calibration_ace.png", "fig3_ambiguity_ncc.png",
        "separation_measures.png", "risk_coverage_toy_1.png", "risk_coverage_toy_3b.png",
        "generalized_risk_coverage_toy_1.png", "generalized_risk_coverage_toy_3b.png",
        "reliability_toy_1.png", "reliability_toy_3b.png",
        "montage_toy_3b__unet__test_time_dropout__seed0.png",  # first seed only
        "aggregation_verdict.png",  # two aggregations: which one?
    ])
    for name in figures:
        data = (run / "figures" / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5000
    # every embedded figure exists, every figure is embedded with a caption
    embedded = re.findall(r"!\[[^\]]*\]\(([^)]+)\)\n\n\*[^*]+\*", text)
    assert sorted(Path(e).name for e in embedded) == figures
    for name in ("downstream_toy_1.tex", "downstream_toy_3b.tex", "separation.tex", "separation_summary.tex"):
        tex = (run / "tables" / name).read_text(encoding="utf-8")
        assert r"\begin{tabular}" in tex and r"\toprule" in tex and r"\end{tabular}" in tex
    assert r"$\uparrow$" in (run / "tables" / "downstream_toy_3b.tex").read_text(encoding="utf-8")
    assert (run / "tables" / "summary.csv").stat().st_size > 0


def test_missing_optional_files(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path / "run", scenario="toy_1")
    for name in ("cases.csv", "curves.parquet", "failures.csv", "config.yaml"):
        (run / name).unlink()
    shutil.rmtree(run / "montages")
    text = build_report(run).read_text(encoding="utf-8")
    assert text.startswith("# run: values-seg report")
    assert "Warning" not in text
    assert "No `curves.parquet`: the sections that draw the tasks' curves skipped." in text
    assert "## Failure detection" not in text and "## Calibration" not in text  # sections without their curves
    assert "Skipped: no montages" in text and "No failed jobs recorded" in text
    assert (run / "tables" / "downstream_toy_1.tex").exists()


def test_empty_and_malformed_optional_files(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path / "run", scenario="toy_1", metrics=["dice", "aurc"])
    for f in (run / "montages").glob("*.npz"):
        f.unlink()
    (run / "cases.csv").write_text("")
    pd.DataFrame({c: pd.Series(dtype=object) for c in ("scenario", "prediction_model", "task", "curve")}).to_parquet(
        run / "curves.parquet")
    (run / "failures.csv").write_text("job,stage,error\n")
    (run / "montages" / "broken.npz").write_bytes(b"not a zip")
    run_directory.record(run, [run / "montages" / "broken.npz"])  # a montage of ours that broke
    text = build_report(run).read_text(encoding="utf-8")
    assert "`cases.csv` is empty" in text and "`curves.parquet` has no rows" in text
    assert "could not draw montage `broken.npz`" in text  # reported, the rest still built
    assert (run / "figures" / "fig3_failure_detection_aurc.png").exists()


def test_run_summary_names_measures_without_rows(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path / "run", scenario="toy_1", metrics=["dice", "aurc"])
    assert "without rows under some" not in build_report(run).read_text(encoding="utf-8")
    components = json.loads((run / "components.json").read_text())
    ee = next(m for m in components["components"]["measure"] if m["label"] == "expected_entropy")
    ee["uncertainty_types"] = {"bayesian": "AU"}  # declares no type for the SSN's family
    (run / "components.json").write_text(json.dumps(components))
    results = pd.read_csv(run / "results.csv")
    results = results[~((results["prediction_model"] == "ssn") & (results["measure"] == "expected_entropy"))]
    results.to_csv(run / "results.csv", index=False)
    results.to_parquet(run / "results.parquet", index=False)
    summary = build_report(run).read_text(encoding="utf-8").split("## Run summary")[1].split("\n## ")[0]
    summary = " ".join(summary.split())  # report.md wraps at 100 columns
    assert ("**Measures without rows under some prediction models**: EE: none under SSN (it declares an "
            "uncertainty type only for bayesian)") in summary


def test_a_declared_metric_note_is_shown_with_the_runs_range(stats_run, tmp_path):
    from values_seg import registry

    run = _copy(stats_run, tmp_path / "run", scenario="toy_1", metrics=["dice", "aurc", "eaurc"])
    results = pd.read_csv(run / "results.csv")
    eaurc = results["metric"] == "eaurc"
    results.loc[eaurc.idxmax(), ["value", "ci_low"]] = [-0.0123, -0.02]  # one row below 0
    results.to_csv(run / "results.csv", index=False)
    results.to_parquet(run / "results.parquet", index=False)
    text = build_report(run).read_text(encoding="utf-8")
    note = next(m.note for m in registry.create("task", "failure_detection").metrics if m.name == "eaurc")
    assert "by at most ½ · w · (mean risk − lowest risk)" in note  # the declaration states the bound
    low = results.loc[eaurc, "ci_low"]
    assert (f"**E-AURC.** {note} In this run (× 100): lowest value -1.23, 1 of {int(eaurc.sum())} values below 0, "
            f"lowest interval bound {100 * low.min():.2f} ({int((low < 0).sum())} below 0).") in " ".join(text.split())
    flat = " ".join(text.split())  # report.md wraps at 100 columns
    assert flat.index(note) < flat.index("### toy_1")  # beside the downstream tables


def test_no_results(tmp_path):
    run = run_directory.claim(tmp_path / "run", "run")
    text = build_report(run).read_text(encoding="utf-8")
    assert "No results were found" in text and "Warning" not in text
    with pytest.raises(FileNotFoundError):
        build_report(tmp_path / "missing")


def test_parquet_only_and_deterministic(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path / "run", scenario="toy_3b", metrics=["dice", "aurc", "eaurc", "auroc"])
    (run / "results.csv").unlink()
    for name in ("cases.csv", "curves.parquet"):
        (run / name).unlink()
    shutil.rmtree(run / "montages")
    first = build_report(run).read_text(encoding="utf-8")
    tex = (run / "tables" / "downstream_toy_3b.tex").read_text(encoding="utf-8")
    assert "### toy_3b" in first
    second = build_report(run).read_text(encoding="utf-8")
    assert first == second and tex == (run / "tables" / "downstream_toy_3b.tex").read_text(encoding="utf-8")


def test_report_with_bootstrap_distributions(stats_run, tmp_path):
    run = _copy(stats_run, tmp_path / "run", scenario="toy_3b")
    for name in ("cases.csv", "curves.parquet"):
        (run / name).unlink()
    shutil.rmtree(run / "montages")
    text = build_report(run).read_text(encoding="utf-8")
    assert "Warning" not in text and "could not" not in text
    for section in ("## Paired comparisons", "### Varying the aggregation (C3)", "### Varying the uncertainty measure (C2)",
                    "### Varying the prediction model (C1)", "## Ranking stability", "### Kendall's τ"):
        assert section in text, section
    flat = " ".join(text.split())  # report.md wraps at 100 columns
    assert "95 % confidence interval [low, high]" in flat and "with several seeds, seeds resampled too" in flat
    assert re.search(r"\| \d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\] \|", text)  # value [low, high] cells
    assert (run / "figures" / "ranks_toy_3b.png").stat().st_size > 5000
    for vary in ("aggregation", "measure", "prediction_model"):
        assert not pd.read_csv(run / "comparisons" / f"{vary}.csv").empty
    assert not pd.read_csv(run / "tables" / "rank_histograms.csv").empty
    tex = (run / "tables" / "downstream_toy_3b.tex").read_text(encoding="utf-8")
    assert r"\,[" in tex and "bootstrap confidence interval" in tex
    summary = pd.read_csv(run / "tables" / "summary.csv")
    assert summary[["ci_low", "ci_high"]].notna().all().all()


def test_report_without_distributions_says_so(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path / "run", scenario="toy_1", metrics=["dice", "aurc"])
    text = build_report(run).read_text(encoding="utf-8")
    assert "No `bootstrap.parquet`" in text and "Skipped: no bootstrap distributions" in text
    assert "mean ± sample standard deviation" in text
