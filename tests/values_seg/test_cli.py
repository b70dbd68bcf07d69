"""What the user sees when things go wrong: one clear line and an exit status, never a traceback;
finished work kept, no temporary file left behind (faults injected into the real writers)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
import yaml

from values_seg.cli import main

from tiny import tiny_config, toy

TINY = tiny_config(datasets=[toy("1")], device="cpu", aggregations=[{"name": "patch", "params": {"size": 5}}],
                   tasks=["segmentation", "failure_detection"], statistics={"n_resamples": 10})


def _config(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


def _temporary_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".tmp" in p.name]


def _fail_writing_results(monkeypatch, fault: BaseException) -> None:
    """``results.parquet`` fails half-written (bytes already in the temporary file), as a full disk
    or Ctrl-C would leave it; every other parquet write is untouched."""
    original = pd.DataFrame.to_parquet

    def to_parquet(self, path=None, *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and "results.parquet" in os.fspath(path):
            Path(path).write_bytes(b"PAR1 half a table")
            raise fault
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", to_parquet)


@pytest.mark.parametrize("fault, status, message", [
    (OSError(errno.ENOSPC, "No space left on device"), 1, "values-seg: error: no space left on the device"),
    (OSError(errno.EROFS, "Read-only file system", "results.parquet"), 1,
     "values-seg: error: cannot write results.parquet: the file system is read-only"),
    (PermissionError(errno.EACCES, "Permission denied", "results.parquet"), 1,
     "values-seg: error: permission denied: results.parquet"),
    (KeyboardInterrupt(), 130, "values-seg: interrupted; finished work (checkpoints, predictions, evaluations) is kept"),
])
def test_a_fault_while_writing_is_one_line_keeps_finished_work_and_leaves_no_temporary_file(
        tmp_path, monkeypatch, capsys, fault, status, message):
    _fail_writing_results(monkeypatch, fault)
    run_dir = tmp_path / "run"
    assert main(["run", str(_config(tmp_path)), "--out", str(run_dir), "--no-progress"]) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err
    assert "Traceback" not in err[0]
    assert _temporary_files(run_dir) == []
    assert list((run_dir / "cache" / "checkpoints").glob("*.pt"))  # the training is kept
    assert list((run_dir / "cache" / "evaluations").glob("*/done.json"))  # and the evaluation


def test_a_read_only_output_folder_is_one_line(tmp_path, monkeypatch, capsys):
    """What ``--out`` on a read-only mount raises (``mkdir`` of the run directory)."""
    original = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self.name == "ro_run":
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert main(["run", str(_config(tmp_path)), "--out", str(tmp_path / "ro_run"), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"values-seg: error: cannot write {tmp_path / 'ro_run'}: the file system is read-only; "
                   "write elsewhere (values-seg run: --out, cache_dir)"]


def _nested(levels: int, inner: str = "") -> str:
    return "[" * levels + inner + "]" * levels


@pytest.mark.parametrize("where, extra, overrides", [
    ("file", f"description: {_nested(300)}\n", []),
    ("component parameters", "", [f"datasets.0.params.extra={_nested(300)}"]),
    ("aliases", f"x: &x {_nested(31)}\ny: &y {_nested(31, '*x')}\nz: {_nested(31, '*y')}\n", []),
])
def test_a_config_nested_too_deep_is_one_line_before_any_work(tmp_path, capsys, where, extra, overrides):
    """Mappings and lists nested a few hundred levels deep (or as deep through aliases) ended in a
    RecursionError of some 400 lines from omegaconf; now one line naming the file or override,
    exit 2, nothing written."""
    config = _config(tmp_path)
    config.write_text(config.read_text() + extra)
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out), "--no-progress", *overrides]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nested deeper than 32 levels of mappings and lists" in err[0], err[:3]
    assert (f"config {config}" if not overrides else "config override datasets.0.params.extra") in err[0]
    assert not out.exists()


def test_storage_messages_say_what_to_do():
    from values_seg.cli import storage_message

    full = storage_message(OSError(errno.ENOSPC, "No space left on device"))
    assert "free some space" in full and "run the same command again" in full
    assert storage_message(OSError(errno.EDQUOT, "Disk quota exceeded", "/x")).startswith("no space left")
    assert storage_message(OSError(errno.EIO, "Input/output error", "/x/y")) == "Input/output error: /x/y"
    assert storage_message(OSError(errno.EIO, "Input/output error")) == "Input/output error"
    assert storage_message(OSError("the disk went away")) == "the disk went away"
    assert storage_message(FileExistsError(errno.EEXIST, "File exists", "/x")) == (
        "/x already exists; move or remove it, then run the same command again")


def test_an_upgrade_whose_aside_folder_exists_names_it_and_what_to_do(tmp_path, capsys):
    """A cache of an older layout is set aside as <kind>.layout-v<N>; where that folder exists the
    run ended in "...: (no path)". Now one line naming the folder and what to do, exit 1, and the
    cache as it was (nothing set aside)."""
    from values_seg.storage import run_directory
    from values_seg.storage.run_files import CACHE_MARKER

    cache = tmp_path / "cache"
    run_directory.claim_cache(cache, tmp_path / "other_run")
    marker = json.loads((cache / CACHE_MARKER).read_text())
    del marker["layout"]  # as values-seg wrote caches before layouts were recorded
    (cache / CACHE_MARKER).write_text(json.dumps(marker))
    (cache / "checkpoints").mkdir()
    (cache / "checkpoints" / "old.pt").write_bytes(b"weights")
    (cache / "checkpoints.layout-v1").mkdir()
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    assert main(["run", str(_config(tmp_path, cache_dir=str(cache))), "--out", str(tmp_path / "run"),
                 "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"values-seg: error: cannot set aside the cache's checkpoints of layout v1 ({cache / 'checkpoints'}): "
                   f"{cache / 'checkpoints.layout-v1'} already exists; move or remove it, then run the same command "
                   "again"]
    after = sorted(p.relative_to(cache) for p in cache.rglob("*") if p.name != ".layout.lock")  # the upgrade's lock
    assert after == before
    assert json.loads((cache / CACHE_MARKER).read_text()) == marker


def test_a_full_disk_stops_the_run_instead_of_failing_every_job(tmp_path, monkeypatch, capsys):
    """A storage fault inside a job is the disk's, not the job's: the run stops with one line
    (before, every training was recorded as a failed job and the run went on)."""
    from values_seg.storage import cache_store

    def full(*args, **kwargs):  # the checkpoint (and any other cached file) cannot be written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_store, "write_verified", full)
    run_dir = tmp_path / "run"
    assert main(["run", str(_config(tmp_path)), "--out", str(run_dir), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("values-seg: error: no space left on the device"), err
    assert not (run_dir / "failures.csv").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_process_executor_raises_a_storage_fault_and_records_other_errors(tmp_path):
    from values_seg.runner.executors import Job, ProcessExecutor

    failing = [Job("missing", "t", Path.write_bytes, (tmp_path / "no" / "such" / "dir", b"x"))]
    outcomes = list(ProcessExecutor(1).run(failing))
    assert not outcomes[0].ok and "FileNotFoundError" in outcomes[0].error
    with pytest.raises(OSError) as raised:
        list(ProcessExecutor(1).run([Job("full", "t", Path.write_bytes, (Path("/dev/full"), b"x"))]))
    assert raised.value.errno == errno.ENOSPC


def test_ctrl_c_stops_the_process_executor_promptly(tmp_path, wait_until):
    """Ctrl-C in the parent cancels the queued jobs and interrupts the running ones (which would
    otherwise run to their end, and the queued ones after them). Each job notes its pid when it
    starts; Ctrl-C comes once two run, whatever the machine's load, to the main thread (where a
    terminal's Ctrl-C lands and Python acts on it)."""
    from values_seg.runner.executors import Job, ProcessExecutor

    def job(i: int) -> Job:  # a stdlib function, importable in a spawned worker; call() kills its child
        script = f"echo $$ > {tmp_path / f'{i}.started'}.tmp && mv {tmp_path / f'{i}.started'}.tmp " \
                 f"{tmp_path / f'{i}.started'} && exec sleep 3600"
        return Job(str(i), "t", subprocess.call, (["sh", "-c", script],))

    def started() -> list[int]:
        return [int(p.read_text()) for p in sorted(tmp_path.glob("*.started"))]

    def ctrl_c_once_two_run() -> None:
        wait_until(lambda: len(started()) >= 2, "two jobs running")
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=ctrl_c_once_two_run, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            list(ProcessExecutor(2).run([job(i) for i in range(4)]))
        running = started()
        assert sorted(p.name for p in tmp_path.glob("*.started")) == ["0.started", "1.started"]  # none queued ran
        wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in running),
                   "the running jobs interrupted (they sleep an hour)")
    finally:
        for pid in started():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_nnunet_export_offers_overwrite(tmp_path, capsys):
    args = ["data", "nnunet-export", "toy", "scenario=1", "size=32", "train_cases=2", "val_cases=1",
            "--out", str(tmp_path), "--dataset-id", "7", "--name", "T"]
    assert main(args) == 0
    stale = tmp_path / "Dataset007_T" / "stale.txt"
    stale.write_text("from before")
    capsys.readouterr()
    assert main(args) == 2
    assert "give --overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0
    assert not stale.exists() and (tmp_path / "Dataset007_T" / "dataset.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "processes"])
def test_sigint_during_training_is_one_line_exit_130_and_resumes(tmp_path, executor, wait_until):
    # one by one: a fused group writes its members' checkpoints together, and the first checkpoint
    # is then the end of training (fused groups resume: tests/values_seg/engine/test_fused.py)
    config = _config(tmp_path, recipe={"epochs": 400}, executor=executor, fuse_training=False,
                     prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 3}}])
    cmd = [sys.executable, "-m", "values_seg.cli", "run", str(config), "--out", "run", "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    checkpoints = tmp_path / "run" / "cache" / "checkpoints"
    wait_until(lambda: list(checkpoints.glob("*.pt")) or proc.poll() is not None, "one training finished")
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=600)  # a hang guard
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["values-seg: interrupted; finished work (checkpoints, predictions, "
                                        "evaluations) is kept: run the same command again to resume"]
    assert _temporary_files(tmp_path / "run") == []
    kept = {p: p.stat().st_mtime_ns for p in checkpoints.glob("*.pt")}
    assert kept
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in kept.items())  # finished trainings were reused
    assert len(list(checkpoints.glob("*.pt"))) > len(kept)  # Ctrl-C stopped the run before its end


def test_report_path_noop_summary_and_one_corruption_notice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _config(tmp_path)
    assert main(["run", "tiny.yaml", "--out", "runs/tiny", "--no-progress"]) == 0
    report = (tmp_path / "runs" / "tiny" / "report.md").read_text()
    assert "Rebuild with `values-seg report runs/tiny`." in report  # typed from where the run was started
    assert main(["report", "runs/tiny"]) == 0  # and that command works from here

    capsys.readouterr()
    assert main(["run", "tiny.yaml", "--out", "runs/tiny", "--no-progress"]) == 0  # nothing to do
    summary = capsys.readouterr().out
    rows = len(pd.read_csv(tmp_path / "runs" / "tiny" / "results.csv"))
    assert f"1 distinct trainings (0 run now), 1 evaluations (0 run now), {rows} result rows (unchanged)" in summary

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(tmp_path / "runs" / "tiny")]) == 0
    report = (tmp_path / "runs" / "tiny" / "report.md").read_text()
    assert f"Rebuild with `values-seg report {tmp_path / 'runs' / 'tiny'}`." in " ".join(report.split())  # wrapped
    # a rebuild replaces the report's own files (the paired comparisons' CSVs were set aside as a user's)
    assert not list((tmp_path / "runs" / "tiny").rglob("*.user-*"))

    checkpoint = next((tmp_path / "runs" / "tiny" / "cache" / "checkpoints").glob("*.pt"))
    with open(checkpoint, "ab") as f:
        f.write(b"damage")
    again = subprocess.run([sys.executable, "-m", "values_seg.cli", "run", "tiny.yaml", "--out", "runs/tiny",
                            "--no-progress", "evaluation.montage_cases=1"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    notices = [line for line in again.stderr.splitlines() if "corrupt" in line]
    assert len(notices) == 1 and notices[0].startswith("values-seg: warning: corrupt checkpoint"), again.stderr
    assert "1 distinct trainings (1 run now)" in again.stdout


def test_the_phases_around_training_and_evaluation_are_announced(tmp_path, capsys):
    assert main(["run", str(_config(tmp_path)), "--out", str(tmp_path / "run"), "--executor", "local"]) == 0
    err = capsys.readouterr().err
    for phase in ("planned: 1 combinations, 1 distinct trainings", "scoring 2 task(s) on 1 evaluation(s), with 10 "
                  "bootstrap resamples", "report: drawing the figures and writing report.md"):
        assert phase in err, err
    assert "score: 100%" in err  # scoring has its bar


def test_a_bar_keeps_its_clock_moving_while_an_item_takes_long(wait_until):
    import io
    import re

    from tqdm import tqdm

    from values_seg.runtime.progress import TickingBar

    out = io.StringIO()
    redrawn = re.compile(r"\[\d\d:(0[1-9]|[1-5]\d)<\?")  # a later clock than the first draw's [00:00<?

    def slow():  # the item is under way until the bar has been redrawn with a moving clock
        wait_until(lambda: redrawn.search(out.getvalue()), "the bar redrawn while the item was under way")
        yield 1

    assert list(TickingBar(tqdm(slow(), total=1, file=out, mininterval=0), every=0.5)) == [1]
    assert redrawn.search(out.getvalue())
    assert "[00:00<?" in out.getvalue()  # the first draw, before the item began


@pytest.mark.parametrize("source, plugin, message", [
    (None, "../evil", r"config plugins: plugin '../evil' is not a module path"),
    ("def broken(:\n", "i32_syntax_error_plugin",
     r"config plugins: cannot import plugin module 'i32_syntax_error_plugin': SyntaxError: .*"
     r"i32_syntax_error_plugin.py, line 1\)"),
    ("import os\nraise RuntimeError('no licence server')\n", "i32_raising_plugin",
     r"config plugins: cannot import plugin module 'i32_raising_plugin': RuntimeError: no licence server "
     r"\(.*i32_raising_plugin.py, line 2\)"),
])
def test_a_plugin_that_cannot_be_imported_is_one_line(tmp_path, monkeypatch, capsys, source, plugin, message):
    """Issue 32, item 4: a relative path, a syntax error or an error raised at import gave a 24-36
    line traceback with exit 1; now one ``config plugins:`` line, exit 2, before any work."""
    import re

    if source is not None:
        (tmp_path / f"{plugin}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    assert main(["run", str(_config(tmp_path)), "--out", str(out), "--no-progress", f"plugins=['{plugin}']"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not out.exists()


def test_a_closed_output_pipe_stops_with_one_line_not_a_storage_error():
    """Issue 32, item 11: ``values-seg run ... | head -1`` ended with "Broken pipe: (no path)" and exit
    1, as if the disk had failed. A reader that is gone (here: the pipe's read end closed before
    values-seg writes) stops the command with one line saying so and 128 + SIGPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "values_seg.cli", "plugins"], stdout=write,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    finally:
        os.close(write)
    assert done.returncode == 141, done.stderr
    assert done.stderr.strip().splitlines() == ["values-seg: stopped: the output was closed (broken pipe); "
                                                "finished work is kept"]


def test_the_evaluation_names_its_combination_and_counts_cases(tmp_path, capsys):
    """Issue 32, item 12: a slow measure showed ``evaluate: 0/1`` (jobs) for a minute. With the
    local executor the evaluation has its own bar: the combination, the split, its cases counted
    (the bar's clock moves while one case takes long: test_a_bar_keeps_its_clock_moving...)."""
    import re

    from values_seg import registry

    n = len(registry.create("dataset", "toy", **TINY["datasets"][0]["params"]).case_ids("test"))
    assert main(["run", str(_config(tmp_path)), "--out", str(tmp_path / "run"), "--executor", "local"]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"evaluate toy_1/unet/deterministic/seed0 test: +\d+%\|[^|]*\| \d+/{n} \[", err), err
