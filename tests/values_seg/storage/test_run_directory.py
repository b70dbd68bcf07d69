"""Ownership of run and cache directories, and writes that never go through a link (issue 22, items 2-3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from values_seg.storage import atomic, run_directory
from values_seg.storage.run_files import MARKER
from values_seg.storage.atomic import RefusedWrite


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links not followed) with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def user_folder(tmp_path: Path, marker_text: str = "{}") -> Path:
    """A user's folder that happens to hold a file called run.json."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / MARKER).write_text(marker_text)
    for name in ("report.md", "results.csv", "config.yaml"):
        (d / name).write_text(f"the user's own {name}\n")
    return d


# ----------------------------------------------------------------------------- the marker


@pytest.mark.parametrize("text, why", [
    ("{}", "format"),
    ("not json at all", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"format": "values-seg run directory", "version": 1, "name": "x", "written": {}}), "id"),
    (json.dumps({"format": "values-seg run directory", "version": 99, "name": "x", "id": "0" * 32,
                 "written": {}}), "version 99"),
    (json.dumps({"values_seg": "0.1.0", "name": "x", "written": {"../../etc/passwd": "0"}}), "bad entry"),
])
def test_a_file_called_run_json_is_not_a_marker(tmp_path, text, why):
    d = user_folder(tmp_path, text)
    before = snapshot(d)
    with pytest.raises(RefusedWrite, match=why) as e:
        run_directory.claim(d, "x")
    assert "run.json" in str(e.value) and "--out" in str(e.value)
    with pytest.raises(RefusedWrite):
        run_directory.check(d)
    run_directory.record(d, [d / "report.md"])  # bookkeeping never rewrites a marker that is not ours
    run_directory.remember(d, "tables", "k")
    assert run_directory.remove_written(d, [d / "report.md"]) == []
    assert snapshot(d) == before


def test_claim_writes_a_versioned_marker_with_identity(tmp_path):
    d = run_directory.claim(tmp_path / "run", "study")
    data = run_directory.marker(d)
    assert data["format"] == run_directory.FORMAT and data["version"] == run_directory.VERSION
    assert data["name"] == "study" and len(data["id"]) == 32 and data["created"] and data["written"] == {}
    assert run_directory.claim(d, "study") == d and run_directory.marker(d)["id"] == data["id"]  # resumed


def test_another_experiment_is_refused_naming_the_existing_one(tmp_path):
    d = run_directory.claim(tmp_path / "run", "first")
    (d / "report.md").write_text("first's report")
    run_directory.record(d, [d / "report.md"])
    before = snapshot(d)
    with pytest.raises(RefusedWrite, match="experiment 'second'.*experiment 'first'.*--out"):
        run_directory.claim(d, "second")
    assert snapshot(d) == before


def test_an_earlier_values_seg_marker_is_migrated(tmp_path):
    d = tmp_path / "old"
    d.mkdir()
    (d / "results.csv").write_text("a\n1\n")
    (d / MARKER).write_text(json.dumps({"values_seg": "0.1.0", "name": "old", "keys": {"tables": "abc"},
                                        "written": {"results.csv": run_directory.sha256_file(d / "results.csv")}}))
    run_directory.claim(d, "old")
    data = json.loads((d / MARKER).read_text())
    assert data["format"] == run_directory.FORMAT and data["version"] == 1 and data["id"] and data["created"]
    assert run_directory.intact(d, d / "results.csv") and run_directory.remembered(d, "tables") == "abc"


def test_the_temporary_marker_is_removed_on_an_interrupt(tmp_path, monkeypatch):
    d = run_directory.claim(tmp_path / "run", "study")
    before = (d / MARKER).read_bytes()

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_directory.remember(d, "tables", "key")
    monkeypatch.undo()
    assert sorted(p.name for p in d.iterdir()) == [MARKER] and (d / MARKER).read_bytes() == before


# ----------------------------------------------------------------------------- the cache


def test_a_user_folder_is_not_a_cache(tmp_path):
    d = tmp_path / "my_folder"
    d.mkdir()
    (d / "code_digests.json").write_text('{"mine": true}')
    before = snapshot(d)
    with pytest.raises(RefusedWrite, match="values-seg did not write.*code_digests.json.*cache_dir"):
        run_directory.claim_cache(d, tmp_path / "run")
    (d / run_directory.CACHE_MARKER).write_text("{}")  # a file of the marker's name is not enough
    with pytest.raises(RefusedWrite, match="not a values-seg cache marker"):
        run_directory.claim_cache(d, tmp_path / "run")
    assert snapshot(d) == {**before, run_directory.CACHE_MARKER: b"{}"}


def test_a_cache_is_claimed_new_empty_or_ours(tmp_path):
    new = run_directory.claim_cache(tmp_path / "new", tmp_path / "run")
    marker = json.loads((new / run_directory.CACHE_MARKER).read_text())
    assert marker["format"] == run_directory.CACHE_FORMAT and marker["id"]
    (new / "checkpoints").mkdir()
    assert run_directory.claim_cache(new, tmp_path / "other_run") == new  # shared between runs
    run = run_directory.claim(tmp_path / "run", "study")
    (run / "cache" / "checkpoints").mkdir(parents=True)  # an earlier values-seg's default cache: adopted
    run_directory.claim_cache(run / "cache", run)
    assert (run / "cache" / run_directory.CACHE_MARKER).exists()


def test_the_run_directory_is_not_its_own_cache_and_a_cache_inside_it_works(tmp_path):
    """Issue 32, item 11: cache_dir set to --out was refused as "files values-seg did not write",
    naming the cache marker values-seg had just created and left behind (so the same command kept
    failing); a cache inside a new --out failed the same way. Now the first is refused before
    anything is written, naming cache_dir, and the second is claimed, again and again."""
    run = tmp_path / "run"
    for _ in range(2):
        with pytest.raises(RefusedWrite, match=r"cache_dir .*run is the run directory \(--out\) itself"):
            run_directory.claim_all(run, "study", run)
        assert not run.exists()
    for _ in range(2):  # the same command again: accepted
        run_directory.claim_all(run, "study", run / "my_cache")
        assert run_directory.marker(run)["name"] == "study"
        assert (run / "my_cache" / run_directory.CACHE_MARKER).is_file()


def test_a_cache_with_a_link_inside_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = run_directory.claim_cache(tmp_path / "cache", tmp_path / "run")
    (cache / "checkpoints").symlink_to(outside)
    with pytest.raises(RefusedWrite, match="symbolic links.*checkpoints"):
        run_directory.claim_cache(cache, tmp_path / "run")


# ----------------------------------------------------------------------------- links


@pytest.fixture()
def linked(tmp_path):
    """A run directory with a figure linked to a file outside and tables/ linked to a folder outside."""
    run = run_directory.claim(tmp_path / "run", "study")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.png").write_bytes(b"the user's picture")
    (outside / "summary.csv").write_text("the user's table")
    (run / "figures").mkdir()
    (run / "figures" / "fig3_x.png").symlink_to(outside / "precious.png")
    (run / "tables").symlink_to(outside)
    return run, outside


def test_safe_path_refuses_links_and_the_outside(linked, tmp_path):
    run, outside = linked
    for path in (run / "figures" / "fig3_x.png", run / "tables" / "summary.csv", run / "tables",
                 tmp_path / "elsewhere.csv", run / ".." / "elsewhere.csv"):
        with pytest.raises(RefusedWrite):
            run_directory.safe_path(run, path)
    assert run_directory.safe_path(run, run / "figures" / "new.png") == run / "figures" / "new.png"
    assert atomic.links(run) == [run / "figures" / "fig3_x.png", run / "tables"]


def test_no_write_or_delete_goes_through_a_link(linked):
    run, outside = linked
    before = snapshot(outside)
    # as if values-seg had written these files before the user put the links there
    data = json.loads((run / MARKER).read_text())
    data["written"].update({"figures/fig3_x.png": "0" * 64, "tables/summary.csv": "0" * 64})
    (run / MARKER).write_text(json.dumps(data))
    with pytest.raises(RefusedWrite, match="symbolic link"):
        run_directory.write_owned(run, run / "figures" / "fig3_x.png", "drawn")
    with pytest.raises(RefusedWrite, match="symbolic link"):
        run_directory.write_owned(run, run / "tables" / "summary.csv", "new table")
    with pytest.raises(RefusedWrite, match="symbolic link"):
        run_directory.remove_written(run, [run / "tables" / "summary.csv"])
    with pytest.raises(RefusedWrite, match="symbolic links.*fig3_x.png"):
        run_directory.check(run)
    assert snapshot(outside) == before
    assert (run / "figures" / "fig3_x.png").is_symlink() and (run / "tables").is_symlink()  # refused, not replaced


def test_an_atomic_write_leaves_no_temporary_file_on_failure(tmp_path):
    run = run_directory.claim(tmp_path / "run", "study")

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_directory.write_owned(run, run / "results.csv", broken)
    assert sorted(p.name for p in run.iterdir()) == [MARKER]
