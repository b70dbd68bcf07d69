"""What keeping the shared inputs unchanged costs a study's evaluation, on against off, in one session.

Every measure, aggregation, quantity and fit of a case shares its inputs (:mod:`values_seg.components.unchanged`):
torch's version counters of the samples, the shared statistics, the maps, the prediction and the
raters are read after each call, the caller's samples are cloned where the evaluation holds no
copy of its own, and each fit gets its own copy of the validation maps. On a finished run (default
``runs/toy_quick``, from ``values-seg run experiments/toy_quick.yaml``) every combination is
evaluated again from the run's cached checkpoints and predictions, alternately with those checks
(as shipped) and without them (patched out here), each into a fresh evaluation folder, in this
process. Prints the totals, best of ``--repeats``, the ratio on / off, and whether both sides
gave the same files.

    python benchmarks/bench_read_only_inputs.py [--run runs/toy_quick] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from pathlib import Path

from values_seg.evaluation import per_case
from values_seg.components import unchanged
from values_seg.config.loading import load_config
from values_seg.components.quantity import resolve
from values_seg.storage.run_files import CHECKPOINTS, CONFIG, EVALUATION_MANIFEST, PREDICTIONS
from values_seg.evaluation import validation_fit
from values_seg.config.sweep import expand

from _timing import evaluate_all


@contextlib.contextmanager
def unchecked():
    """The evaluation without the checks: nothing watched, no clone of the samples or the maps."""
    saved = (unchanged.Unchanged.add, per_case.private, validation_fit.copies)
    unchanged.Unchanged.add = lambda self, name, tensor: None
    per_case.private = lambda samples, given: samples
    validation_fit.copies = list
    try:
        yield
    finally:
        unchanged.Unchanged.add, per_case.private, validation_fit.copies = saved


def files(folder) -> dict:
    """An evaluation folder's files by sha256 and size (its manifest)."""
    return json.loads((Path(folder) / EVALUATION_MANIFEST).read_text())["files"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=Path("runs/toy_quick"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cfg = load_config(args.run / CONFIG)
    combos = expand(cfg)
    tasks = [t.create() for t in cfg.refs("tasks")]
    quantities = list(resolve([q for t in tasks for q in t.consumes]))
    eval_cfg = dict(cfg.evaluation)
    source = Path(cfg.cache_dir) if cfg.cache_dir else args.run / "cache"
    with tempfile.TemporaryDirectory(prefix="bench_read_only_") as tmp:
        cache = Path(tmp)
        for sub in (CHECKPOINTS, PREDICTIONS):  # the run's cached models and predictions, linked
            (cache / sub).symlink_to((source / sub).resolve(), target_is_directory=True)
        on, off, same = [], [], True
        for _ in range(args.repeats):
            (seconds, _), checked = evaluate_all(combos, cache, eval_cfg, quantities)
            on.append(seconds)
            checked_files = {n: files(f) for n, f in checked.items()}
            with unchecked():
                (seconds, _), plain = evaluate_all(combos, cache, eval_cfg, quantities)
            off.append(seconds)
            same &= checked_files == {n: files(f) for n, f in plain.items()}
    print(f"{len(combos)} combinations, quantities {quantities}")
    print(f"evaluation with the inputs kept unchanged (as shipped): {min(on):7.2f} s  (all: "
          f"{', '.join(f'{s:.2f}' for s in on)})")
    print(f"evaluation without the checks:                          {min(off):7.2f} s  (all: "
          f"{', '.join(f'{s:.2f}' for s in off)})")
    print(f"ratio on / off (best of {args.repeats}): {min(on) / min(off):.3f}; same files on both sides: {same}")


if __name__ == "__main__":
    main()
