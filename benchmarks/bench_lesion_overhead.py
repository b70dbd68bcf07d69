"""What the lesion quantities cost a quick study's evaluation, with against without, in one session.

On a finished run (default ``runs/toy_lesions_quick``, from ``values-seg run
experiments/toy_lesions_quick.yaml``; or a run of ``experiments/toy_quick.yaml``, which has no lesion
task), every combination is evaluated again from the run's cached checkpoints and predictions,
alternately without the lesion quantities (exactly the quantities the config's other tasks consume)
and with them (plus those the lesion tasks consume: ``lesions``, every predicted lesion matched and
scored by every lesion-scale aggregation and measure, and the volume quantities), each side into a
fresh evaluation folder (after one untimed warm-up pass), in this process with the config's threads.
The config's own image aggregations (lesion-based ones included) are computed on both sides: they
are the study's, not the lesion quantities'. Then every task (the config's, and the lesion tasks it
lacks) scores the "with" evaluation as the runner does, bootstrap included, the lesion tasks'
scoring timed apart. Prints the times (best of ``--repeats``; wall and this process's CPU time, the
latter robust where other work shares the cores) and, last, the evaluation's ratio with / without
in CPU time (the issue-35 goal: at most 1.3).

    python benchmarks/bench_lesion_overhead.py [--run runs/toy_lesions_quick] [--repeats 3]
    python benchmarks/bench_lesion_overhead.py --run runs/toy_quick --work /tmp/bench_lesion_quick
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
from pathlib import Path

from values_seg import registry
from values_seg.config.loading import load_config
from values_seg.components.quantity import resolve
from values_seg.storage.run_files import CHECKPOINTS, CONFIG, PREDICTIONS
from values_seg.runner.statistics import Bootstrap
from values_seg.config.sweep import expand

from _timing import evaluate_all, score_all

#: the tasks of the lesion scale (issue 35); what they consume are the lesion quantities
TASKS = ("lesion_detection", "lesion_retention", "volume_uncertainty")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=Path("runs/toy_lesions_quick"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, help="a working cache kept between invocations (its predictions "
                        "reused; default: a temporary one)")
    args = parser.parse_args()
    cfg = load_config(args.run / CONFIG)
    combos = expand(cfg)
    eval_cfg = cfg.evaluation  # typed, with the run's threads
    tasks = {t.label: t.create() for t in cfg.refs("tasks")}
    tasks.update({name: registry.create("task", name) for name in TASKS
                  if name not in {t.name for t in tasks.values()}})
    off = list(resolve([q for t in tasks.values() if t.name not in TASKS for q in t.consumes]))
    on = list(resolve(off + [q for t in tasks.values() if t.name in TASKS for q in t.consumes]))
    source = Path(cfg.cache_dir or args.run / "cache")
    with tempfile.TemporaryDirectory(prefix="bench_lesion_") as tmp:
        cache = args.work or Path(tmp)
        for folder in (CHECKPOINTS, PREDICTIONS):
            if not (cache / folder).exists():
                shutil.copytree(source / folder, cache / folder)
        (warm, _), _ = evaluate_all(combos, cache, eval_cfg, on)  # untimed: imports, caches, missing predictions
        times = {"without": [], "with": []}
        cpu = {"without": [], "with": []}
        for _ in range(args.repeats):
            for side, quantities in (("without", off), ("with", on)):
                (seconds, cpu_seconds), folders = evaluate_all(combos, cache, eval_cfg, quantities)
                times[side].append(round(seconds, 2))
                cpu[side].append(round(cpu_seconds, 2))
        scoring = score_all(combos, folders, tasks, Bootstrap(**dataclasses.asdict(cfg.statistics)))
    off_s, on_s = min(times["without"]), min(times["with"])
    off_cpu, on_cpu = min(cpu["without"]), min(cpu["with"])
    others = sum(s for label, s in scoring.items() if tasks[label].name not in TASKS)
    ours = sum(s for label, s in scoring.items() if tasks[label].name in TASKS)
    print(f"{len(combos)} combinations of {args.run}; warm-up {warm:.1f} s; evaluation best of {args.repeats} "
          f"(all runs: {times})")
    print(f"quantities without: {', '.join(off)}")
    print(f"quantities with:    {', '.join(on)}")
    print(f"scoring, the other tasks:               {others:7.2f} s")
    print(f"scoring, the lesion tasks:              {ours:7.2f} s")
    print(f"evaluation + scoring, with / without:   {(on_s + others + ours) / (off_s + others):.3f}")
    print(f"evaluation CPU seconds (all runs: {cpu})")
    print(f"evaluation without the lesion quantities: {off_s:6.2f} s, with them: {on_s:6.2f} s; wall with / without = "
          f"{on_s / off_s:.3f}")
    print(f"evaluation CPU without: {off_cpu:6.2f} s, with: {on_cpu:6.2f} s; evaluation with / without (CPU time, "
          f"robust on shared cores) = {on_cpu / off_cpu:.3f}")


if __name__ == "__main__":
    main()
