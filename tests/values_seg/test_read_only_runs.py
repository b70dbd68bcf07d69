"""Read-only commands work on a run they cannot write: ``compare`` prints every comparison and
says in one line which files it could not save; a rerun with nothing to do says what the run
said; ``plugins`` reads no run. ``report`` must write: it refuses in one line. Nothing in the run
directory changes.

How the run is made read-only: CI runs as root, whom permissions do not stop (``chmod -R a-w``
changes nothing for root), so the tests make the file system refuse instead, as a read-only mount
does: every call that would write, create, rename or delete under the run directory fails with
``EROFS`` (:func:`read_only`), at the operating-system calls values-seg's writers go through
(``os.open`` for writing, ``open`` in a writing mode, ``mkdir``, ``replace``, ``rename``, ``link``,
``unlink``, ``rmdir``); opening for reading and ``flock`` work, as they do on a read-only mount.
Where the machine allows it, :func:`test_a_real_read_only_run` checks the same on a real one: a
read-only bind mount in a private mount namespace (root), or ``chmod -R a-w`` (anyone else).
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from values_seg.cli import main

from tiny import tiny_config, toy

TINY = tiny_config(name="ro", datasets=[toy("1", train_cases=4)], device="cpu", executor="local",
                   aggregations=["image", {"name": "patch", "params": {"size": 5}}],
                   tasks=["segmentation", "failure_detection"],
                   statistics={"n_resamples": 10})
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """(config, run directory) of a finished tiny run (do not modify: copy it)."""
    work = tmp_path_factory.mktemp("read_only")
    config = work / "ro.yaml"
    config.write_text(yaml.safe_dump(TINY))
    assert main(["run", str(config), "--out", str(work / "run"), "--no-progress"]) == 0
    return config, work / "run"


@pytest.fixture()
def run(finished, tmp_path) -> Path:
    shutil.copytree(finished[1], tmp_path / "run", symlinks=True)
    return tmp_path / "run"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def read_only(monkeypatch, folder: Path) -> None:
    """Every write under ``folder`` fails as on a read-only file system (``EROFS``); see the module docstring."""
    root = os.path.realpath(folder)

    def inside(path) -> bool:
        if isinstance(path, int):  # a file descriptor: opened by a call below, already refused
            return False
        real = os.path.realpath(os.fsdecode(path))
        return real == root or real.startswith(root + os.sep)

    def refuse(path):
        raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))

    def guard(name: str, paths=lambda args: args[:1]):
        original = getattr(os, name)

        def call(*args, **kwargs):
            for path in paths(args):
                if inside(path):
                    refuse(path)
            return original(*args, **kwargs)

        monkeypatch.setattr(os, name, call)

    os_open = os.open

    def guarded_open(path, flags, *args, **kwargs):
        if flags & WRITING and inside(path):
            refuse(path)
        return os_open(path, flags, *args, **kwargs)

    file_open = builtins.open

    def guarded_file_open(file, mode="r", *args, **kwargs):
        if any(m in mode for m in "wax+") and not isinstance(file, int) and inside(file):
            refuse(file)
        return file_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    monkeypatch.setattr(builtins, "open", guarded_file_open)
    monkeypatch.setattr(io, "open", guarded_file_open)  # pathlib's
    for name in ("mkdir", "rmdir", "unlink", "remove"):
        guard(name)
    for name in ("replace", "rename", "link", "symlink"):
        guard(name, paths=lambda args: args[:2])


def test_compare_prints_every_comparison_of_a_read_only_run_and_names_what_it_could_not_save(run, tmp_path,
                                                                                              monkeypatch, capsys):
    writable = tmp_path / "writable"
    shutil.copytree(run, writable, symlinks=True)
    assert main(["compare", str(writable), "--vary", "aggregation"]) == 0
    expected = capsys.readouterr().out
    expected = expected[:expected.index("\nevery pair:")]

    before = snapshot(run)
    read_only(monkeypatch, run)
    assert main(["compare", str(run), "--vary", "aggregation"]) == 1
    out, err = capsys.readouterr()
    assert out.replace(str(run), str(writable)).rstrip() == expected.rstrip()  # every comparison, as on a writable run
    assert "Which aggregation?" in out
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("values-seg compare: could not save comparisons/aggregation.csv, "
                          "comparisons/aggregation_wins.csv")
    assert f"in {run} (Read-only file system); the result above is complete" in err
    monkeypatch.undo()
    assert snapshot(run) == before


def test_report_of_a_read_only_run_is_refused_in_one_line(run, monkeypatch, capsys):
    before = snapshot(run)
    read_only(monkeypatch, run)
    assert main(["report", str(run)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"values-seg report: cannot write {run}") and "(Read-only file system)" in err
    assert f"copy {run} where you may write and run values-seg report there" in err
    monkeypatch.undo()
    assert snapshot(run) == before


def test_a_rerun_with_nothing_to_do_and_plugins_work_on_a_read_only_run(finished, run, monkeypatch, capsys):
    config, _ = finished
    before = snapshot(run)
    read_only(monkeypatch, run)
    assert main(["run", str(config), "--out", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "(unchanged)" in out and f"report: {run / 'report.md'}" in out
    monkeypatch.chdir(run)
    assert main(["plugins", "--kind", "aggregation"]) == 0
    assert "patch" in capsys.readouterr().out
    monkeypatch.undo()
    assert snapshot(run) == before


def _read_only_shell(run: Path) -> str | None:
    """A shell line that runs a command with ``run`` really read-only, or ``None`` where this machine
    cannot make it so: as root a read-only bind mount in a private mount namespace, else ``chmod``."""
    if os.geteuid() != 0:
        return f"chmod -R a-w '{run}' && "
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount --bind '{run}' '{run}' && "
                            f"mount -o remount,bind,ro '{run}' && ! touch '{run}/probe'"], capture_output=True)
    return None if probe.returncode else f"mount --bind '{run}' '{run}' && mount -o remount,bind,ro '{run}' && "


def test_a_real_read_only_run(run):
    """The same on a real read-only run, where the machine can make one (see the module docstring)."""
    prefix = _read_only_shell(run)
    if prefix is None:
        pytest.skip("this machine can neither mount read-only (root without unshare and mount) nor chmod (not root)")
    before = snapshot(run)
    cli = f"'{sys.executable}' -m values_seg.cli"
    script = (f"{prefix}{cli} compare '{run}' --vary aggregation > compare.out 2> compare.err; echo $? > compare.rc; "
              f"{cli} report '{run}' 2> report.err; echo $? > report.rc")
    command = ["sh", "-c", script] if os.geteuid() != 0 else ["unshare", "--mount", "sh", "-c", script]
    try:
        subprocess.run(command, cwd=run.parent, check=True, timeout=300)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(run)], check=True)
    folder = run.parent
    assert (folder / "compare.rc").read_text().strip() == "1"
    assert "Which aggregation?" in (folder / "compare.out").read_text()
    err = (folder / "compare.err").read_text()
    assert err.count("\n") == 1, err
    assert err.startswith("values-seg compare: could not save comparisons/aggregation.csv"), err
    assert (folder / "report.rc").read_text().strip() == "1"
    err = (folder / "report.err").read_text()
    assert err.count("\n") == 1 and err.startswith(f"values-seg report: cannot write {run}"), err
    assert snapshot(run) == before
