"""Where a study's first run spends its time: a phase table (start-up, training, prediction +
fused evaluation, scoring, report, the rest) as CPU-seconds (the whole process tree: the run and
every worker it starts) and wall seconds, plus the number of worker processes started.

    python benchmarks/bench_phases.py [--config experiments/toy_quick.yaml] [--code DIR] [--keep RUN] [overrides ...]

``--code DIR`` runs another checkout's values-seg (e.g. a worktree of main), so that two versions
can be timed alternately on the same machine. Linux only (it reads ``/proc``).

The phases are told apart by wrapping the runner's own steps (``Runner.stage`` by stage name,
``Runner._score``, ``Runner._report``); "start-up" is the interpreter's start to the first of them
(imports, config, pre-flight). The CPU of a phase is the growth, between its edges, of the CPU
time of this process, of its live descendants and of the children already reaped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from 3 (state) on


def descendants(root: int) -> dict[int, float]:
    """{pid: CPU seconds (its own plus its reaped children's)} of every live descendant of ``root``."""
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (f := _stat(int(entry))) is not None:
            parent[int(entry)] = int(f[1])
            cpu[int(entry)] = sum(int(x) for x in f[11:15]) / TICK  # utime stime cutime cstime
    out, frontier = {}, [root]
    while frontier:
        p = frontier.pop()
        for child, pp in parent.items():
            if pp == p and child not in out:
                out[child] = cpu[child]
                frontier.append(child)
    return out


class TreeClock:
    """CPU seconds of this process tree so far: this process (with the children it has reaped)
    plus every live descendant (with the children each has reaped); counts the descendants seen."""

    def __init__(self):
        self.seen: set[int] = set()
        self.stop = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self.stop.wait(0.05):
            self.seen.update(descendants(os.getpid()))

    def cpu(self) -> float:
        live = descendants(os.getpid())
        self.seen.update(live)
        return sum(int(x) for x in _stat(os.getpid())[11:15]) / TICK + sum(live.values())


def child(config: str, out: str, overrides: list[str]) -> None:
    """Run the study in this process with the runner's steps timed; print the table as JSON."""
    started = time.time() - (time.monotonic() - _process_start_monotonic())
    clock = TreeClock()
    from values_seg.runner import run as run_module

    edges: list[tuple[str, float, float, float]] = []  # (phase, wall start, wall end, cpu) appended at each end
    state = {"phase": "start-up", "wall": started, "cpu": 0.0}

    def switch(phase: str) -> None:
        now, cpu = time.time(), clock.cpu()
        edges.append((state["phase"], state["wall"], now, cpu - state["cpu"]))
        state.update(phase=phase, wall=now, cpu=cpu)

    def timed(method, phase_of):
        def wrapper(self, *args, **kwargs):
            outer = state["phase"]
            phase = phase_of(*args)
            switch(phase)
            try:
                return method(self, *args, **kwargs)
            finally:
                switch(outer if outer != "start-up" else "the rest")
        return wrapper

    names = {"train": "training", "evaluate": "prediction + evaluation"}
    runner = run_module.Runner
    runner.stage = timed(runner.stage, lambda name, *a: names.get(name, name))
    runner._score = timed(runner._score, lambda *a: "scoring")
    runner._report = timed(runner._report, lambda *a: "report")
    from values_seg.cli import main

    try:
        main(["run", config, "--out", out, "--no-progress", *overrides])
    except SystemExit as e:
        if e.code:
            raise
    switch("end")
    table: dict[str, list[float]] = {}
    for phase, start, end, cpu in edges:
        wall_cpu = table.setdefault(phase, [0.0, 0.0])
        wall_cpu[0] += end - start
        wall_cpu[1] += cpu
    print(json.dumps({"phases": table, "workers": len(clock.seen)}))


def _process_start_monotonic() -> float:
    start_ticks = int(_stat(os.getpid())[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.monotonic() - (uptime - start_ticks / TICK)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="experiments/toy_quick.yaml")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose values-seg runs")
    parser.add_argument("--keep", type=Path, help="run directory to write and keep (default: a temporary one)")
    parser.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.child:
        return child(args.config, args.child, args.overrides)
    code = args.code.resolve()
    with tempfile.TemporaryDirectory(prefix="bench_phases_") as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(code / ".shim"), str(code)))}
        out = args.keep.resolve() if args.keep else Path(tmp) / "run"
        done = subprocess.run([sys.executable, __file__, "--config", args.config, "--child", str(out),
                               *args.overrides], cwd=code, env=env, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'phase':<26}{'wall s':>9}{'CPU s':>9}    ({code})")
    total = [0.0, 0.0]
    for phase, (wall, cpu) in result["phases"].items():
        total = [total[0] + wall, total[1] + cpu]
        print(f"{phase:<26}{wall:9.1f}{cpu:9.1f}")
    print(f"{'total':<26}{total[0]:9.1f}{total[1]:9.1f}")
    print(f"worker processes started: {result['workers']}")


if __name__ == "__main__":
    main()
