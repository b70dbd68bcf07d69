"""Figure rendering: parallel workers draw the same bytes as one process, an unchanged figure is
kept, a changed input or a damaged file is redrawn, stale figures of ours go and others' stay."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from values_seg.storage import run_directory
from values_seg.report import build_report, render
from values_seg.storage.user_files import UserFileKept

KEEP = ("results.csv", "results.parquet", "cases.csv", "curves.parquet", "components.json", "config.yaml")


def _our_run(src: Path, dst: Path, with_montages: bool = False) -> Path:
    """A copy of the synthetic run in a directory values-seg claimed (so its files are recorded)."""
    run_directory.claim(dst, "run")
    for name in KEEP:
        if (src / name).exists():
            shutil.copyfile(src / name, dst / name)
    if with_montages:
        shutil.copytree(src / "montages", dst / "montages")
        run_directory.record(dst, sorted((dst / "montages").glob("*.npz")))  # as the runner records them
    return dst


def _figures(run: Path) -> dict[str, tuple[int, bytes]]:
    return {f.name: (f.stat().st_mtime_ns, f.read_bytes()) for f in sorted((run / "figures").glob("*.png"))}


def _drop_scenario(run: Path, scenario: str) -> None:
    for name in ("results.csv", "cases.csv"):
        df = pd.read_csv(run / name)
        df[df["scenario"] != scenario].to_csv(run / name, index=False)
    curves = pd.read_parquet(run / "curves.parquet")
    curves[curves["scenario"] != scenario].to_parquet(run / "curves.parquet", index=False)
    (run / "results.parquet").unlink()


def test_one_worker_and_several_draw_the_same_bytes(synthetic_run, tmp_path, monkeypatch):
    parallel = _our_run(synthetic_run, tmp_path / "parallel", with_montages=True)
    build_report(parallel)
    monkeypatch.setattr(render, "_workers", lambda: 1)
    serial = _our_run(synthetic_run, tmp_path / "serial", with_montages=True)
    build_report(serial)
    a, b = _figures(parallel), _figures(serial)
    assert len(a) >= 10 and a.keys() == b.keys()
    assert all(a[k][1] == b[k][1] for k in a)
    words = [(run / "report.md").read_text().replace("parallel", "serial").split() for run in (parallel, serial)]
    assert words[0] == words[1]  # the lines wrap at 100 columns, and the two paths differ in length


def test_unchanged_figures_are_kept_and_changed_ones_redrawn(synthetic_run, tmp_path):
    run = _our_run(synthetic_run, tmp_path / "run", with_montages=True)
    first_text = build_report(run).read_text()
    first = _figures(run)
    build_report(run)
    assert _figures(run) == first  # not one figure written again
    assert (run / "report.md").read_text() == first_text

    curves = pd.read_parquet(run / "curves.parquet")  # new risks on toy_3b only
    curves.loc[(curves["scenario"] == "toy_3b") & curves["curve"].str.contains("risk_coverage"), "risk"] *= 0.5
    curves.to_parquet(run / "curves.parquet", index=False)
    (run / "figures" / "reliability_toy_1.png").write_bytes(b"damaged")  # our file, changed since we wrote it
    with pytest.warns(UserFileKept, match="reliability_toy_1.png"):  # kept aside (issue 32, item 8), then drawn
        build_report(run)
    assert (run / "figures" / "reliability_toy_1.user-1.png").read_bytes() == b"damaged"
    now = _figures(run)
    changed = {k for k in first if now[k] != first[k]}
    assert changed == {"risk_coverage_toy_3b.png", "generalized_risk_coverage_toy_3b.png", "reliability_toy_1.png"}
    assert now["reliability_toy_1.png"][1] == first["reliability_toy_1.png"][1]  # drawn again, the same bytes


def test_stale_figures_of_ours_go_and_files_of_others_stay(synthetic_run, tmp_path):
    run = _our_run(synthetic_run, tmp_path / "run")
    build_report(run)
    assert (run / "figures" / "risk_coverage_toy_1.png").exists()
    mine = run / "figures" / "risk_coverage_my_own.png"  # a user's file under the report's names
    mine.write_bytes(b"keep me")
    _drop_scenario(run, "toy_1")
    build_report(run)
    assert not (run / "figures" / "risk_coverage_toy_1.png").exists()
    assert not (run / "figures" / "reliability_toy_1.png").exists()
    assert (run / "figures" / "risk_coverage_toy_3b.png").exists()
    assert mine.read_bytes() == b"keep me"
    assert "figures/risk_coverage_toy_1.png" not in run_directory.written(run)


def test_a_figure_drawn_twice_is_an_error(tmp_path):
    with render.Renderer(tmp_path, workers=1) as renderer:
        renderer.submit(_draw, tmp_path / "figures" / "a.png", tmp_path / "figures" / "a.png")
        with pytest.raises(ValueError, match="a.png is drawn twice"):
            renderer.submit(_draw, tmp_path / "figures" / "a.png", tmp_path / "figures" / "a.png")


def test_return_values_survive_the_index(tmp_path):
    out = tmp_path / "figures" / "a.png"
    with render.Renderer(tmp_path, workers=1) as renderer:
        assert renderer.submit(_draw, out, out).result() == (out, "patch")
    with render.Renderer(tmp_path, workers=1) as renderer:  # no record of the file (no run.json): drawn again
        assert renderer.submit(_draw, out, out).result() == (out, "patch") and renderer.rendered == 1
    with pytest.raises(TypeError, match="figures return None, a path"):
        render._encode(object(), tmp_path)


def _draw(out: Path) -> tuple[Path, str]:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"png")
    return out, "patch"


def _line(frame, out):
    """A stand-in plot of this module (its code is part of the key)."""
    return None


def test_a_figure_key_is_its_declared_inputs_key(tmp_path):
    from values_seg.storage.artifact import Inputs

    frame = pd.DataFrame({"risk": [0.1, float("nan"), 0.3], "scenario": ["a", "b", "c"]})
    out = tmp_path / "figure.png"
    declared = render.FigureInputs.of(_line, out, (frame,), {"out": out})
    assert isinstance(declared, Inputs) and declared.key() == render.Renderer(tmp_path).key(_line, out, (frame,), {"out": out})
    same = render.Renderer(tmp_path).key(_line, out, (frame.copy(),), {"out": out})  # another object, equal content
    assert same == declared.key()
    changed = frame.copy()
    changed.loc[2, "risk"] = 0.31
    renamed = frame.rename(columns={"risk": "loss"})
    other_file = tmp_path / "other.png"
    keys = {render.Renderer(tmp_path).key(_line, out, (changed,), {"out": out}),
            render.Renderer(tmp_path).key(_line, out, (renamed,), {"out": out}),
            render.Renderer(tmp_path).key(_line, other_file, (frame,), {"out": out})}
    assert declared.key() not in keys and len(keys) == 3
