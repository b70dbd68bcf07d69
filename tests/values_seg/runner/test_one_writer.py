"""Two ``values-seg run`` of one experiment into one ``--out``: while the first writes, the second is
refused in one line and exits non-zero, having written nothing (issue 32, item 9). The first is a
real run in a forked process, paused in its stages until the test lets it go (no clock)."""

from __future__ import annotations

import multiprocessing
import os

import yaml

from values_seg.cli import main
from values_seg.runner.run import Runner

from .test_ownership import config, snapshot

FORK = multiprocessing.get_context("fork")


def _paused_run(argv: list[str], channel) -> None:
    def paused(self) -> None:  # the run holds its directory: say so, wait for the go
        channel.send(os.getpid())
        channel.recv()

    Runner._stages = paused
    Runner._report = lambda self: None
    raise SystemExit(main(argv))


def test_a_second_run_into_the_same_out_is_refused_and_writes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    cfg = config(tmp_path)
    channel, theirs = FORK.Pipe()
    first = FORK.Process(target=_paused_run,
                         args=(["run", cfg, "--out", str(out), "--no-progress", "seeds=[0]"], theirs))
    first.start()
    try:
        _second_run_is_refused(out, cfg, first, channel, theirs, monkeypatch, capsys)
    finally:  # a test that failed midway leaves no paused run behind
        if first.is_alive():
            first.kill()
            first.join()


def _second_run_is_refused(out, cfg, first, channel, theirs, monkeypatch, capsys) -> None:
    theirs.close()  # a first run that dies before it says so ends the wait with EOFError
    pid = channel.recv()
    before = snapshot(out)

    entered = []
    monkeypatch.setattr(Runner, "_stages", lambda self: entered.append(list(self.cfg.seeds)))
    monkeypatch.setattr(Runner, "_report", lambda self: None)
    assert main(["run", cfg, "--out", str(out), "--no-progress", "seeds=[1]"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"values-seg: error: {out} is being written by another values-seg command (pid {pid}")
    assert not any("Traceback" in line for line in err)
    assert entered == [] and snapshot(out) == before  # nothing of the second run's was written

    channel.send("go")
    first.join()
    assert first.exitcode == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["seeds"] == [0]
    assert main(["run", cfg, "--out", str(out), "--no-progress", "seeds=[1]"]) == 0  # the lock ended with the first
    assert entered == [[1]] and yaml.safe_load((out / "config.yaml").read_text())["seeds"] == [1]
