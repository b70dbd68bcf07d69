"""``values-seg report`` and ``compare`` keep a user's files in the run directory: one values-seg did
not write at a path it writes, and a hand edit of its own (``tables/*.tex``, ``report.md``), are
moved aside with a one-line notice, never overwritten; a rebuild after that is quiet (issue 32,
item 8)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from values_seg.storage import run_directory
from values_seg.cli import main


def kept_files(run: Path) -> dict[str, bytes]:
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in sorted(run.rglob("*.user-*"))}


def notices(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("values-seg: warning: kept ")]


@pytest.fixture()
def built_copy(built_report, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(built_report.parent, run)
    return run


def test_report_keeps_a_users_figure_and_hand_edits(built_copy, capsys):
    run = built_copy
    figure = run / "figures" / "reliability_toy_1.png"  # a path the report writes, holding the user's own file
    run_directory.forget(run, [figure])
    figure.write_bytes(b"the user's own picture")
    table, report = run / "tables" / "downstream_toy_1.tex", run / "report.md"
    assert run_directory.intact(run, table) and run_directory.intact(run, report)
    table.write_text(table.read_text() + "% my note for the paper\n")  # hand edits of values-seg's files
    report.write_text("# my own notes\n")
    edits = {"figures/reliability_toy_1.user-1.png": figure.read_bytes(),
             "tables/downstream_toy_1.user-1.tex": table.read_bytes(), "report.user-1.md": report.read_bytes()}

    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert kept_files(run) == edits  # the user's bytes, under names that say whose they are
    assert sorted(notices(err)) == sorted([
        "values-seg: warning: kept figures/reliability_toy_1.png (values-seg did not write it) as "
        "reliability_toy_1.user-1.png; values-seg writes its own reliability_toy_1.png in its place",
        "values-seg: warning: kept report.md (it changed after values-seg wrote it) as report.user-1.md; "
        "values-seg writes its own report.md in its place",
        "values-seg: warning: kept tables/downstream_toy_1.tex (it changed after values-seg wrote it) as "
        "downstream_toy_1.user-1.tex; values-seg writes its own downstream_toy_1.tex in its place"])
    for path in (figure, table, report):  # values-seg's own files are back, recorded
        assert run_directory.intact(run, path)
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert "my own notes" not in report.read_text() and "my note for the paper" not in table.read_text()

    assert main(["report", str(run)]) == 0  # a rebuild: quiet, and the kept files stay as they are
    assert not notices(capsys.readouterr().err) and kept_files(run) == edits
    assert not any(name in run_directory.written(run) for name in edits)


def test_compare_keeps_a_users_csv_and_replaces_its_own(synthetic_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(synthetic_run, run)
    (run / "comparisons").mkdir()
    mine = run / "comparisons" / "measure.csv"
    mine.write_text("my,own\n1,2\n")
    assert main(["compare", str(run), "--vary", "measure"]) == 0
    assert len(notices(capsys.readouterr().err)) == 1
    assert kept_files(run) == {"comparisons/measure.user-1.csv": b"my,own\n1,2\n"}
    assert run_directory.intact(run, mine)  # values-seg's comparison, recorded as written
    assert main(["compare", str(run), "--vary", "measure"]) == 0  # its own file: replaced without a word
    assert not notices(capsys.readouterr().err) and kept_files(run) == {"comparisons/measure.user-1.csv": b"my,own\n1,2\n"}
