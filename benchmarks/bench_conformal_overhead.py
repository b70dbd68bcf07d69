"""What the conformal task adds to a study's evaluation, on against off, in one session.

On a finished run of a config that has the task (default ``runs/toy_conformal_quick``, from
``values-seg run experiments/toy_conformal_quick.yaml``), every combination is evaluated again from
the run's cached checkpoints and predictions, alternately without the task (the quantities the
other tasks consume) and with it (plus ``conformal_sets``: its validation pass and records), each
side into a fresh evaluation folder, in this process with the config's threads. Then every task
scores each evaluation (as the runner does, bootstrap included), the conformal task's scoring timed
apart. Prints the totals, best of ``--repeats``, and the ratios on / off.

    python benchmarks/bench_conformal_overhead.py [--run runs/toy_conformal_quick] [--repeats 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
from pathlib import Path

from values_seg.config.loading import load_config
from values_seg.components.quantity import resolve
from values_seg.storage.run_files import CHECKPOINTS, CONFIG, PREDICTIONS
from values_seg.runner.statistics import Bootstrap
from values_seg.config.sweep import expand

from _timing import evaluate_all, score_all

TASK = "conformal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=Path("runs/toy_conformal_quick"))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    cfg = load_config(args.run / CONFIG)
    combos = expand(cfg)
    eval_cfg = cfg.evaluation  # typed, with the run's threads
    tasks = {t.label: t.create() for t in cfg.refs("tasks")}
    on = list(resolve([q for t in tasks.values() for q in t.consumes]))
    off = list(resolve([q for label, t in tasks.items() if t.name != TASK for q in t.consumes]))
    source = Path(cfg.cache_dir or args.run / "cache")
    with tempfile.TemporaryDirectory(prefix="bench_conformal_") as tmp:
        cache = Path(tmp)
        for folder in (CHECKPOINTS, PREDICTIONS):
            shutil.copytree(source / folder, cache / folder)
        times = {"off": [], "on": []}
        for _ in range(args.repeats):
            for side, quantities in (("off", off), ("on", on)):
                (seconds, _), folders = evaluate_all(combos, cache, eval_cfg, quantities)
                times[side].append(seconds)
        scoring = score_all(combos, folders, tasks, Bootstrap(**dataclasses.asdict(cfg.statistics)))
    off_s, on_s = min(times["off"]), min(times["on"])
    others = sum(s for label, s in scoring.items() if tasks[label].name != TASK)
    ours = sum(s for label, s in scoring.items() if tasks[label].name == TASK)
    print(f"{len(combos)} combinations of {args.run}; evaluation best of {args.repeats} (all runs: {times})")
    print(f"evaluation without the conformal task: {off_s:7.1f} s")
    print(f"evaluation with it:                    {on_s:7.1f} s   on / off = {on_s / off_s:.3f}")
    print(f"scoring, the other tasks:              {others:7.1f} s")
    print(f"scoring, the conformal task:           {ours:7.1f} s")
    print(f"evaluation + scoring, on / off:        {(on_s + others + ours) / (off_s + others):.3f}")


if __name__ == "__main__":
    main()
