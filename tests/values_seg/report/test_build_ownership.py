"""``values-seg report`` and ``compare`` write only into values-seg's own run directory, never through
a link, and show only what the current run wrote (issue 22, items 2, 3 and 5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from values_seg.storage import run_directory
from values_seg.cli import main
from values_seg.report import build_report, load_run
from values_seg.storage.run_files import MARKER
from values_seg.storage.atomic import RefusedWrite

from .conftest import write_montage


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("values-seg: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("command", [["report"], ["compare", "--vary", "measure"]])
def test_a_user_folder_with_a_file_called_run_json_is_refused(synthetic_run, tmp_path, capsys, command):
    mine = tmp_path / "mine"
    shutil.copytree(synthetic_run, mine)
    (mine / MARKER).write_text('{"just": "my notes"}')  # the name alone does not make it values-seg's
    (mine / "report.md").write_text("my own report\n")
    before = snapshot(mine)
    assert main([command[0], str(mine), *command[1:]]) == 2
    assert "run.json" in _one_line_error(capsys) and snapshot(mine) == before


@pytest.fixture()
def built_copy(built_report, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(built_report.parent, run)
    return run


def test_a_figure_linked_outside_is_not_followed(built_copy, tmp_path, capsys):
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"the user's picture")
    figure = next((built_copy / "figures").glob("fig3_*.png"))
    figure.unlink()
    figure.symlink_to(outside)
    before = snapshot(built_copy)
    assert main(["report", str(built_copy)]) == 2
    assert figure.name in _one_line_error(capsys)
    with pytest.raises(RefusedWrite, match="symbolic link"):
        build_report(built_copy)
    assert outside.read_bytes() == b"the user's picture" and figure.is_symlink()  # refused, not replaced
    assert snapshot(built_copy) == before


def test_tables_linked_to_an_outside_folder_are_neither_written_nor_deleted(built_copy, tmp_path, capsys):
    outside = tmp_path / "my_tables"
    shutil.move(built_copy / "tables", outside)  # the files values-seg recorded now live outside
    (outside / "mine.tex").write_text("the user's table")
    (built_copy / "tables").symlink_to(outside)
    before = snapshot(outside)
    assert main(["report", str(built_copy)]) == 2
    assert "tables" in _one_line_error(capsys)
    assert main(["compare", str(built_copy), "--vary", "measure"]) == 2
    capsys.readouterr()
    assert snapshot(outside) == before


def test_only_the_montages_this_run_wrote_are_shown(synthetic_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(synthetic_run, run)
    stale = run / "montages" / "toy_3b__unet__ssn__seed0.npz"  # a dropped model's, written by an earlier run
    write_montage(stale, "toy_3b", "ssn", 0, np.random.default_rng(0))
    foreign = run / "montages" / "someone_elses.npz"
    shutil.copyfile(stale, foreign)
    run_directory.record(run, [stale])
    from values_seg.runner.results import write_montages

    shutil.copytree(synthetic_run / "montages", tmp_path / "cache")
    sources = {p.stem: p for p in sorted((tmp_path / "cache").glob("*.npz"))}
    written = write_montages(run, sources)  # the current run's combinations only
    assert sorted(p.name for p in written) == sorted(p.name for p in (synthetic_run / "montages").glob("*.npz"))
    assert not stale.exists() and foreign.exists()  # ours removed, the other file left alone
    loaded = load_run(run)
    assert [p.name for p in loaded.montages] == sorted(p.name for p in written)
    assert any("someone_elses.npz" in n for n in loaded.notes)
    text = build_report(run).read_text()
    assert "ssn" not in "".join(line for line in text.splitlines() if "montage_" in line)
    assert not list((run / "figures").glob("montage_*ssn*"))
