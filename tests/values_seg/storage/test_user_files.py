"""A user's file in a run directory is never overwritten or deleted: values-seg replaces only a file
its marker records with the bytes still there; any other is moved aside with a one-line notice
(issue 32, item 8)."""

from __future__ import annotations

import pytest

from values_seg.storage import run_directory
from values_seg.storage.run_files import MARKER
from values_seg.storage.user_files import UserFileKept, is_kept


def _write(run, rel, text):
    return run_directory.write_owned(run, run / rel, text)


def test_a_file_values_seg_did_not_write_is_moved_aside_not_overwritten(tmp_path):
    run = run_directory.claim(tmp_path / "run", "study")
    (run / "tables").mkdir()
    (run / "tables" / "downstream_new.csv").write_text("the user's own table\n")
    with pytest.warns(UserFileKept, match=r"kept tables/downstream_new\.csv \(values-seg did not write it\) as "
                                          r"downstream_new\.user-1\.csv"):
        _write(run, "tables/downstream_new.csv", "values-seg's table\n")
    assert (run / "tables" / "downstream_new.user-1.csv").read_text() == "the user's own table\n"
    assert (run / "tables" / "downstream_new.csv").read_text() == "values-seg's table\n"


def test_values_seg_replaces_its_own_unchanged_file_without_a_word(tmp_path, recwarn):
    run = run_directory.claim(tmp_path / "run", "study")
    _write(run, "report.md", "first\n")  # recorded in run.json as it is written
    assert run_directory.intact(run, run / "report.md")
    _write(run, "report.md", "second\n")
    assert (run / "report.md").read_text() == "second\n"
    assert not [w for w in recwarn if issubclass(w.category, UserFileKept)]
    assert sorted(p.name for p in run.iterdir()) == sorted([MARKER, "report.md"])


def test_a_hand_edited_file_is_kept_each_time_under_a_new_name(tmp_path):
    run = run_directory.claim(tmp_path / "run", "study")
    for n, edit in enumerate(["my edit\n", "my second edit\n"], start=1):
        _write(run, "report.md", "values-seg's report\n")
        run_directory.record(run, [run / "report.md"])
        (run / "report.md").write_text(edit)  # the sha256 in run.json shows it changed
        with pytest.warns(UserFileKept, match="it changed after values-seg wrote it"):
            _write(run, "report.md", "values-seg's report\n")
        assert (run / f"report.user-{n}.md").read_text() == edit
    assert (run / "report.md").read_text() == "values-seg's report\n"
    assert is_kept(run / "report.user-2.md") and not is_kept(run / "report.md")


def test_a_stale_file_edited_since_is_left_in_place_not_deleted(tmp_path):
    run = run_directory.claim(tmp_path / "run", "study")
    ours, edited = _write(run, "a.csv", "x\n"), _write(run, "b.csv", "y\n")
    run_directory.record(run, [ours, edited])
    edited.write_text("the user's numbers\n")
    with pytest.warns(UserFileKept, match="left b.csv in place"):
        removed = run_directory.remove_written(run, [ours, edited])
    assert removed == [ours] and not ours.exists()
    assert edited.read_text() == "the user's numbers\n" and "b.csv" not in run_directory.written(run)


def test_outside_a_run_directory_nothing_is_moved(tmp_path, recwarn):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "code_digests.json").write_text("{}")
    run_directory.write_owned(cache, cache / "code_digests.json", '{"a": 1}')  # a cache folder: no marker
    assert sorted(p.name for p in cache.iterdir()) == ["code_digests.json"] and not recwarn
