"""``values-seg run``: the job graph train -> predict/evaluate -> (active learning) -> score -> report.

Every stage is cached by a hash of exactly what determines it, so a rerun recomputes only what is missing
or changed and an interrupted run resumes (docs/caching.md). A stage's independent jobs go to the executor;
a failed job is recorded with its traceback, the jobs that depend on it are skipped, the rest goes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

import pandas as pd

from values_seg.storage import input_files, provenance, run_directory, run_files, run_lock
from values_seg.runner import support
from values_seg.config.loading import to_yaml
from values_seg.components.dataset import check_data
from values_seg.engine import Checkpoints, CorruptFileError, unique_specs
from values_seg.engine.curves import CurveSettings
from values_seg.config.experiment import Experiment
from values_seg.storage.failure_record import cause_of
from values_seg.storage.redaction import redact
from values_seg.components.run_context import RunContext
from values_seg.runner import declarations, run_record, tracking
from values_seg.components.quantity import resolve
from values_seg.evaluation.combination import evaluation_folder
from values_seg.evaluation.folder import failures, load_evaluation, reusable, set_aside, verify
from values_seg.runner.executor_factory import make_executor
from values_seg.runner.executors import Job
from values_seg.runner.scoring_inputs import ReportInputs, ScoringInputs, stages_digest
from values_seg.runtime.progress import counted, write
from values_seg.runner.jobs import evaluate_job, stage_job, train_group_job, train_job
from values_seg.engine.fused import job_groups, spread, vectorises
from values_seg.runner.results import (case_table, curve_table, quantity_table_files, quantity_tables, result_rows,
                                       table_files, write_failures, write_tables)
from values_seg.runner.costs import cost_rows, result_columns, write_costs
from values_seg.runner.statistics import Bootstrap
from values_seg.runner.summary import RunSummary
from values_seg.runner.training_curves import training_curve_table
from values_seg.components.stage import StageContext, stages_of
from values_seg.storage.cache_store import CacheStore
from values_seg.config.sweep import (describe_gap, excluded, expand, family_gaps, unique_training_specs, untyped_measures,
                              without_measures)
from values_seg.config.checks import preflight

log = logging.getLogger("values_seg.runner")


class Runner:
    """Runs one :class:`~values_seg.config.experiment.Experiment` into ``run_dir``; its jobs share one
    :class:`~values_seg.components.run_context.RunContext`. ``announce``: print the line naming the run
    directory once it is claimed (the command line's)."""

    def __init__(self, cfg: Experiment, run_dir: str | Path, executor: str | None = None,
                 progress: bool = True, announce: bool = False):
        self.cfg = cfg
        self.announce = announce
        self.run_dir = Path(run_dir)
        # absolute: jobs may run in other processes, on other machines
        self.cache_dir = run_directory.cache_dir(self.run_dir, cfg.cache_dir).absolute()
        self.executor = make_executor(executor or cfg.executor, cfg.workers, threads=cfg.threads,
                                      device=cfg.device, ray=dataclasses.asdict(cfg.ray))
        self.executor.progress = progress  # a parallel executor relays its jobs' case counts
        self.progress = progress
        self.context = RunContext(str(self.cache_dir), None if cfg.device == "auto" else cfg.device, cfg.threads,
                                  cfg.plugins, progress and not self.executor.parallel, cfg.loader_workers,
                                  CurveSettings(**dataclasses.asdict(cfg.learning_curves)))
        self.bootstrap = Bootstrap(**dataclasses.asdict(cfg.statistics))
        self.summary = RunSummary(self.run_dir)

    # -- progress -------------------------------------------------------------------------
    def status(self, message: str) -> None:
        """One line saying what the run is doing now (with progress on), above any bar."""
        if self.progress:
            write(message)

    def bar(self, items, total: int, name: str, unit: str):
        """``items`` with a progress bar whose clock moves every second, even between items."""
        return counted(items, total, f"{name:>9}", self.progress, unit, leave=True)

    # -- stages ---------------------------------------------------------------------------
    def stage(self, name: str, jobs: list[Job]) -> dict[str, object]:
        """Run the jobs of a stage; returns {job id: value} of the successful ones."""
        done: dict[str, object] = {}
        if not jobs:
            return done
        if self.executor.parallel:
            self.status(f"{name}: {len(jobs)} job(s) on {self.executor.name} workers; the bar counts finished jobs")
        outcomes = self.bar(self.executor.run(jobs), len(jobs), name, "job")
        try:
            for outcome in outcomes:
                if outcome.ok:
                    done[outcome.job.id] = outcome.value
                else:
                    self.fail(name, outcome.job.id, outcome.error)
        finally:  # interrupted too: end the bar's line before any message
            getattr(outcomes, "close", lambda: None)()
        return done

    def fail(self, stage: str, job: str, error: str, cause: str | None = None) -> None:
        """Record a failed (or skipped) job with its error (a traceback) and its cause in one line
        (:mod:`values_seg.storage.failure_record`; by default from the error); the run goes on and exits non-zero."""
        error = redact(error)  # no credentials in failures.csv (values_seg.storage.redaction)
        self.summary.failures.append({"stage": stage, "job": job, "cause": redact(cause) if cause else cause_of(error),
                                      "error": error})

    def train(self, specs, stage: str = "train") -> set[str]:
        """Train what the store lacks; returns the keys of the specs that are now available. Fused
        specs of one architecture train as one job (at least as many jobs as parallel workers)
        where the device vectorises them (the CPU); elsewhere each training is a job of its own."""
        store = Checkpoints.of(self.context.store)
        missing = list(unique_specs([s for s in specs if not store.has(s)]).values())
        if missing and not vectorises(self.context.device):
            groups = [[s] for s in missing]
        else:
            groups = spread(job_groups(missing), self.cfg.workers if self.executor.parallel else 1)
        jobs = [Job(g[0].key(), stage, train_job, (g[0], self.context)) if len(g) == 1 else
                Job(f"fused x{len(g)}: " + " ".join(s.key() for s in g), stage, train_group_job, (tuple(g), self.context))
                for g in groups]
        trained = set()
        for job_id, value in self.stage(stage, jobs).items():
            if not isinstance(value, dict):
                trained.add(job_id)
                continue
            for key, error in value.items():  # a fused group: a member that failed fails alone
                if error:
                    self.fail(stage, key, error)
                else:
                    trained.add(key)
        self.summary.trained += len(trained)
        available = {s.key() for s in specs if s not in missing or s.key() in trained}
        self._used(store.path(s) for s in specs if s.key() in available)
        return available

    def _used(self, paths) -> None:
        """Note the cache files the results come from, with their size and modification time (a
        no-op rerun checks each is there untouched since: :mod:`~values_seg.runner.run_record`)."""
        for path in map(Path, paths):
            if path.is_file():
                found = path.stat()
                self.summary.cache_files[path.relative_to(self.cache_dir).as_posix()] = [found.st_size,
                                                                                          found.st_mtime_ns]

    def run(self) -> RunSummary:
        start = time.time()
        trackers = preflight(self.cfg)  # what builds objects (trackers too), before anything is written
        run_directory.claim_all(self.run_dir, self.cfg.name, self.cache_dir)
        if self.announce:
            print(f"values-seg run {self.cfg.name}: writing to {self.run_dir}", flush=True)
        # one writer at a time: a second is refused here; the roots are this run's stage keys', the
        # reads the files its components read
        with run_lock.locked(self.run_dir), run_record.said(log) as warned, provenance.recording_roots() as roots, \
                input_files.recording() as reads:
            run_record.forget(self.run_dir)  # kept again below once this run has finished
            store = CacheStore(self.cache_dir)
            if (upgraded := store.upgrade()) is not None:  # an older layout's cache: recomputed once, said once
                logging.getLogger("values_seg.storage.cache_store").warning("%s", upgraded)  # not a warning a no-op rerun repeats
            provenance.use_digest_file(store.code_digests)
            run_directory.write_owned(self.run_dir, self.run_dir / run_files.CONFIG, to_yaml(self.cfg))
            declarations.write(self.cfg, self.run_dir)
            run_directory.record(self.run_dir, [self.run_dir / run_files.CONFIG, self.run_dir / run_files.COMPONENTS])
            with self.executor.open(self.cache_dir):  # e.g. Ray: connected, and its nodes see the cache
                self._stages()
            write_failures(self.run_dir, self.summary.failures)  # this run's, none: an earlier run's record goes
            self.summary.workers_started = self.executor.workers_started
            self.summary.seconds = time.time() - start
            self._report()
            tracking.log_sweep(trackers, self.cfg, self.run_dir, self.cache_dir)  # what is final; a failure warns
            if run_record.recordable(self.cfg, self.summary, reads):  # a rerun with nothing to do: without torch
                run_record.remember(self.run_dir, self.cfg.config, self.summary, warned, roots, reads)
            provenance.save_digest_file()  # with the digests the rerun key needs: the rerun parses nothing
        return self.summary

    def _stages(self) -> None:
        combos = expand(self.cfg)
        read = None if any(c.specs for c in combos) else ("val", "test", self.cfg.active_learning.pool_split)
        check_data([c.dataset for c in combos], self.cache_dir, self.progress, read)  # e.g. NaN voxels: before any work
        tasks = {t.label: t.create() for t in self.cfg.refs("tasks")}
        stages = {cls(): declaring for cls, declaring in stages_of(tasks).items()}
        consumed = [q for t in [*tasks.values(), *stages] for q in t.consumes]
        self.quantities = resolve(consumed)  # exactly what the tasks and stages read
        splits = sorted({split for stage in stages for split in stage.splits(self.cfg)})
        for measure in untyped_measures(self.cfg):
            log.warning("measure %r declares no uncertainty type: it is scored, but left out of type-filtered tasks "
                        "(e.g. active learning), the separation study and Figure 3's type averages; declare "
                        "uncertainty_types to include it", measure)
        self.summary.measure_gaps = family_gaps(self.cfg)
        for measure, models in self.summary.measure_gaps.items():
            log.warning("%s", describe_gap(measure, models))
        combos, self.summary.left_out = without_measures(combos, self.quantities)  # before any training
        for line in self.summary.left_out:
            log.warning("%s", line)
        self.summary.combinations = len(combos)
        specs = unique_training_specs(combos)
        self.summary.trainings = len(specs)
        self.status(f"planned: {len(combos)} combinations, {len(specs)} distinct trainings; checking the cache")

        available = self.train(specs)
        ready = [c for c in combos if all(s.key() in available for s in c.specs)]
        for c in combos:
            if c not in ready:
                self.fail("evaluate", c.name, "skipped: a training it needs failed")
        folders = self._evaluate(ready, list(self.quantities), splits)
        evaluated = [c for c in ready if c.name in folders]
        self.summary.evaluated = len(evaluated)
        for c in evaluated:  # measures/aggregations that failed and were dropped from a combination
            for what, (cause, error) in failures(folders[c.name]).items():
                self.fail("evaluate", f"{c.name} {what}", error, cause)

        stage_results = {}  # combination name -> {stage name: its result}
        for stage, declaring in stages.items():
            for name, result in stage.run(self._stage_context(stage, evaluated, folders), declaring).items():
                stage_results.setdefault(name, {})[stage.name] = result
        self._score(evaluated, folders, tasks, stage_results)

    def _stage_context(self, stage, combos, folders) -> StageContext:
        """What a stage may use of this run (:class:`values_seg.components.stage.StageContext`)."""
        def run_jobs(name: str, jobs: dict) -> dict:
            return self.stage(name, [Job(job_id, name, stage_job, (fn, self.context, tuple(args)))
                                     for job_id, (fn, args) in jobs.items()])

        def count_trainings(n: int) -> None:
            self.summary.trainings += n

        return StageContext(
            combinations=list(combos), folders=dict(folders), load=lambda c: load_evaluation(folders[c.name], c),
            config=self.cfg, train=self.train, map=run_jobs, fail=lambda job, error: self.fail(stage.name, job, error),
            count_trainings=count_trainings, cache_dir=self.cache_dir, device=self.context.device,
            threads=self.context.threads, progress=self.context.progress, run=self.context)

    def _evaluate(self, combos, quantities: list[str], splits: list[str]) -> dict[str, str]:
        """Evaluate every combination; an output that fails its integrity check is set aside and
        evaluated once more."""
        def jobs(todo):
            return [Job(c.name, "evaluate", evaluate_job, (c, self.context, self.cfg.evaluation, quantities, splits))
                    for c in todo]

        folders = {}  # evaluations the cache already holds complete: no job, no worker, no model loaded
        for c in combos:
            out = evaluation_folder(c, self.cache_dir, self.cfg.evaluation, quantities, splits)
            if reusable(out):
                folders[c.name] = str(out)
        reused = set(folders)
        folders.update(self.stage("evaluate", jobs([c for c in combos if c.name not in folders])))
        damaged = []
        for c in combos:
            if c.name in folders:
                try:
                    verify(folders[c.name])
                except CorruptFileError as e:
                    set_aside(Path(folders.pop(c.name)), str(e))
                    damaged.append(c)
        if damaged:
            folders.update(self.stage("evaluate", jobs(damaged)))
        self.summary.reused = sum(c.name in reused and c not in damaged and c.name in folders for c in combos)
        self._used(file for f in folders.values() for file in sorted(Path(f).rglob("*")))
        return folders

    # -- scoring and tables -----------------------------------------------------------------
    def _tables_key(self, combos, folders, task_objects, stage_results) -> str | None:
        """The key of the tables that scoring would write: the key of its declared
        :class:`ScoringInputs`; ``None`` (never reused) after a failure."""
        if self.summary.failures:
            return None
        evaluations = tuple((c.name, Path(folders[c.name]).name, stages_digest(stage_results.get(c.name)))
                            for c in combos)
        return ScoringInputs(evaluations, tuple(self.cfg.refs("tasks")), dataclasses.asdict(self.cfg.statistics),
                             dataclasses.asdict(self.cfg.rules)).key()

    def _score(self, combos, folders, task_objects, stage_results) -> None:
        """Score every task on every evaluation and write the tables, unless the run directory holds
        the tables of exactly these inputs, unchanged since written (a rerun with nothing to do)."""
        key = self._tables_key(combos, folders, task_objects, stage_results)
        if key is not None and run_directory.remembered(self.run_dir, TABLES_KEY) == key and tables_intact(self.run_dir):
            table = pd.read_parquet(self.run_dir / run_files.RESULTS_PARQUET)
            self.summary.rows = len(table)
            self.summary.unsupported = int((~table["supported"].astype(bool)).sum()) if "supported" in table else 0
            self.summary.tables_reused = True
            self.summary.gaps = {tuple(g[:-1]): g[-1] for g in json.loads(run_directory.remembered(self.run_dir, GAPS_KEY)
                                                                          or "[]")}
            return
        run_directory.remember(self.run_dir, TABLES_KEY, None)
        self._score_all(combos, folders, task_objects, stage_results)
        run_directory.remember(self.run_dir, GAPS_KEY, json.dumps([[*k, n] for k, n in self.summary.gaps.items()]))
        run_directory.remember(self.run_dir, TABLES_KEY, key)

    def _score_all(self, combos, folders, task_objects, stage_results) -> None:
        rows, cases, tables, montages, curves = [], [], {}, {}, []
        resamples = self.cfg.statistics.n_resamples
        self.status(f"scoring {len(task_objects)} task(s) on {len(combos)} evaluation(s)"
                    + (f", with {resamples} bootstrap resamples" if resamples else ""))
        for c in self.bar(combos, len(combos), "score", "combination"):
            try:
                result = load_evaluation(folders[c.name], c, stage_results.get(c.name))
            except Exception as e:  # noqa: BLE001
                self.fail("score", c.name, repr(e))
                continue
            for label, task in task_objects.items():
                try:
                    task_rows = task.score(result)
                except Exception:  # noqa: BLE001 - one failing task does not lose the others
                    import traceback

                    self.fail("score", f"{c.name} {label}", traceback.format_exc())
                    continue
                try:
                    task_rows = self.bootstrap.attach(task, result, task_rows)
                except Exception:  # noqa: BLE001 - the values stand without intervals
                    import traceback

                    self.fail("score", f"{c.name} {label} bootstrap", traceback.format_exc())
                try:  # whether the data support its rows: a failure loses this task's rows only
                    for r in support.mark(task, result, task_rows):
                        r["task"] = label
                    task_gaps = support.gaps(task, result, task_rows)
                except Exception:  # noqa: BLE001
                    import traceback

                    self.fail("score", f"{c.name} {label}", traceback.format_exc())
                    continue
                for gap in task_gaps:
                    self.summary.gaps[(label, *gap)] = self.summary.gaps.get((label, *gap), 0) + 1
                kept = [r for r in task_rows if not excluded(self.cfg.rules, task=label, measure=r.get("measure"),
                                                              aggregation=r.get("aggregation"), **c.context)]
                rows += result_rows(c, kept)
            try:
                cases.append(case_table(c, result))
                for file, table in quantity_tables(c, result, self.quantities).items():
                    tables.setdefault(file, []).append(table)
                curves.append(curve_table(c, result, task_objects))
                curves.append(training_curve_table(c, Checkpoints.of(self.context.store)))
            except Exception:  # noqa: BLE001
                import traceback

                self.fail("score", f"{c.name} tables", traceback.format_exc())
            montages[c.name.replace("/", "__")] = Path(folders[c.name]) / run_files.EVALUATION_MONTAGE
        self.summary.rows = len(rows)
        self.summary.unsupported = sum(not r["supported"] for r in rows)
        try:  # each combination's cost, read from the cache (bookkeeping: it changes no metric)
            costs = cost_rows(combos, self.cache_dir, self.cfg.evaluation)
        except Exception:  # noqa: BLE001 - the results stand without their costs
            import traceback

            self.fail("score", run_files.COSTS, traceback.format_exc())
            costs = []
        write_tables(self.run_dir, rows, cases, tables, montages, curves, per_combination=result_columns(costs))
        if costs:
            write_costs(self.run_dir, costs)
        else:  # none of an earlier run's left behind
            run_directory.remove_written(self.run_dir, [self.run_dir / run_files.COSTS])

    def _report(self) -> None:
        """Build the report, unless it exists for exactly these tables and failures (a rerun that
        changed nothing); ``values-seg report`` rebuilds it regardless. A report that fails is a
        failure of this run (``failures.csv``), which the next run that builds it removes."""
        digest_file = self.run_dir / run_files.FIGURES / run_files.REPORT_INPUTS
        digest = report_inputs_digest(self.run_dir)
        built = all((self.run_dir / name).exists() for name in (run_files.REPORT, run_files.REPORT_HTML))
        if built and digest_file.exists() and digest_file.read_text() == digest and all_intact(self.run_dir):
            return
        try:
            from values_seg.report import build_report

            self.status(f"report: drawing the figures and writing {run_files.REPORT}")
            build_report(self.run_dir)
            run_directory.write_owned(self.run_dir, digest_file, digest)
            run_directory.record(self.run_dir, [digest_file])
        except Exception:  # noqa: BLE001 - the tables are written; the report can be rebuilt
            import traceback

            self.fail("report", run_files.REPORT, traceback.format_exc())
            write_failures(self.run_dir, self.summary.failures)


TABLES_KEY = "tables"
GAPS_KEY = "gaps"  # the declared metrics without a value when the tables were written (RunSummary.gaps)


def tables_intact(run_dir: Path) -> bool:
    """Whether every table file values-seg wrote into ``run_dir`` is there with the bytes it wrote."""
    written = run_directory.written(run_dir)
    files, montages = table_files(), f"{run_files.MONTAGES}/"
    tables = [name for name in written if name in files or name.startswith(montages)]
    return run_files.RESULTS_PARQUET in tables and all(run_directory.intact(run_dir, run_dir / name) for name in tables)


def all_intact(run_dir: Path) -> bool:
    """Whether every file values-seg wrote into ``run_dir`` (its tables, the report and its
    figures) is there with the bytes it wrote: a deleted figure is drawn again."""
    return all(run_directory.intact(run_dir, run_dir / name) for name in run_directory.written(run_dir))


def report_inputs_digest(run_dir: Path) -> str:
    """The key of the report's declared inputs (:class:`ReportInputs`): the files it is built from
    and the sections it is built with (this process's registry: the run's plugins loaded)."""
    from values_seg.report.section import registered_sections

    names = (run_files.CONFIG, run_files.COMPONENTS, run_files.RESULTS_CSV, run_files.BOOTSTRAP, run_files.CASES,
             *quantity_table_files(), run_files.CURVES, run_files.COSTS, run_files.FAILURES)
    files = [run_dir / n for n in names] + sorted((run_dir / run_files.MONTAGES).glob("*.npz"))
    return ReportInputs.of(files, [type(s).__module__ for s in registered_sections()]).key()


def run_experiment(cfg: Experiment, run_dir: str | Path, executor: str | None = None, progress: bool = True,
                   announce: bool = False) -> RunSummary:
    """Run (or resume) an experiment into ``run_dir``; see :class:`Runner`."""
    return Runner(cfg, run_dir, executor, progress, announce).run()
