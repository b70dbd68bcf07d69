"""The name of every file and folder of a run directory, each named once, here
(docs/design-rationale.md, "The names of a run directory's files").
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- the run directory

MARKER = "run.json"
"""The marker that makes a folder values-seg's, with every file it wrote (:mod:`values_seg.storage.run_directory`)."""
CONFIG = "config.yaml"
"""The experiment config as resolved; written by the runner (and ``validate-nnunet``), read by the report."""
COMPONENTS = "components.json"
"""The components' declarations (labels, metrics, families); written by the runner, read by the report's spec."""
RESULTS_CSV = "results.csv"
"""The tidy results table, one row per metric value; written by the runner, read by report and compare."""
RESULTS_PARQUET = "results.parquet"
"""The results table as Parquet (same rows); written by the runner, read where ``results.csv`` is unusable."""
BOOTSTRAP = "bootstrap.parquet"
"""The bootstrap distributions behind every interval; written by the runner's statistics, read by the report."""
CASES = "cases.csv"
"""The per-case records (Dice, scores, per-case quantities); written by the runner, read by the report."""
CURVES = "curves.parquet"
"""The points of the tasks' curves (risk-coverage, reliability, ...); written by the runner, drawn by the report."""
COSTS = "costs.csv"
"""Each combination's training and inference cost, read from the cache's sidecars (:mod:`values_seg.runner.costs`); by the runner."""
FAILURES = "failures.csv"
"""Each failed job of the last run: stage, name, one-line cause, traceback (none when all succeeded); by the runner."""
REPORT = "report.md"
"""The report; written by :func:`values_seg.report.build_report` (``values-seg run`` and ``values-seg report``)."""
REPORT_HTML = "report.html"
"""The report as one self-contained page (interactive tables, embedded figures); written beside ``report.md``."""
LOCK = ".values-seg.lock"
"""The lock a command holds while it writes the run directory, one writer at a time (:mod:`values_seg.storage.run_lock`)."""
SKIPPED_CASES = "skipped_cases.csv"
"""The cases of the user's data that ``validate-nnunet`` skipped, and why; written by it."""
UNCERTAINTY_MAPS = "uncertainty_maps"
"""The uncertainty maps as NIfTI, per combination and case (``validate-nnunet --save-maps``)."""
MAPS_INDEX = "index.csv"
"""In ``uncertainty_maps/``: one row per case with its folder, input images and maps (``validate-nnunet``)."""

# ----------------------------------------------------------------------------- its folders

FIGURES = "figures"
"""The report's figures (PNG), drawn by the report sections."""
TABLES = "tables"
"""The report's tables (LaTeX and CSV), written by the report sections."""
MONTAGES = "montages"
"""A ``<combination>.npz`` of example uncertainty maps per combination; written by the runner, drawn by the report."""
COMPARISONS = "comparisons"
"""The CSV files of ``values-seg compare`` (paired comparisons and wins)."""
CACHE = "cache"
"""The default cache folder (checkpoints, predictions, evaluations); the config's ``cache_dir`` overrides it."""

# ----------------------------------------------------------------------------- in figures/

REPORT_INPUTS = ".inputs.sha256"
"""In ``figures/``: the digest of the files the report was built from; the runner skips an unchanged report."""
RENDER_INDEX = "render.json"
"""In ``figures/``: each figure's key and return value, so an unchanged figure is not drawn again (report.render)."""

# ----------------------------------------------------------------------------- in the cache folder

CACHE_MARKER = "values-seg-cache.json"
"""The marker that makes a cache folder values-seg's (:mod:`values_seg.storage.run_directory`)."""
CODE_DIGESTS = "code_digests.json"
"""The source files' code digests kept between runs (:mod:`values_seg.storage.provenance`)."""
CHECKPOINTS = "checkpoints"
"""The trained weights, one folder per training key (:class:`values_seg.engine.Checkpoints`)."""
PREDICTIONS = "predictions"
"""The probability samples of every case, per prediction key (:class:`values_seg.engine.PredictionCache`)."""
EVALUATIONS = "evaluations"
"""One folder per evaluation key with the files below (:mod:`values_seg.evaluation.combination`)."""
DATA_CHECKS = "data_checks"
"""A record per passed check of a dataset's files, so unchanged files are not read again (:func:`values_seg.components.dataset.check_data`)."""

# ----------------------------------------------------------------------------- in an evaluation folder

EVALUATION_MANIFEST = "done.json"
"""An evaluation folder's manifest (every file's sha256 and size), written last (:mod:`values_seg.evaluation.folder`)."""
EVALUATION_FITTED = "fitted.json"
"""The evaluation's live measures, quantities, fitted states and failures (:mod:`values_seg.evaluation.combination`)."""
EVALUATION_CASES = "cases.parquet"
"""The evaluation's per-case rows (:mod:`values_seg.evaluation.combination`), the source of ``cases.csv``."""
EVALUATION_SCORES = "scores.parquet"
"""The aggregated uncertainty score of every (case, measure, aggregation) (:mod:`values_seg.evaluation.combination`)."""
EVALUATION_PER_MEASURE = "per_measure.parquet"
"""The per-(case, measure) quantities (:mod:`values_seg.evaluation.combination`)."""
EVALUATION_MONTAGE = "montage.npz"
"""The combination's example maps (:mod:`values_seg.evaluation.combination`), copied to ``montages/<combination>.npz``."""

