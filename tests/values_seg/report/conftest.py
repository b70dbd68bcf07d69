"""A small synthetic run directory in the runner's layout (docs/architecture.md, "Results").

2 scenarios (toy_1: i.i.d. only, with ambiguity; toy_3b: i.i.d. + OoD), 2 prediction models
(test-time dropout: PE=PU, EE=AU, MI=EU; SSN: PE=PU, EE=EU, MI=AU), 3 measures, 2 aggregations,
2 seeds. Generic metric values are pseudo-random; NCC and AUROC follow the constructed cases
of the separation tests (see SEP_* below).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from values_seg.storage import run_directory

DATASET = "toy"
SCENARIOS = ("toy_1", "toy_3b")
MODELS = {"test_time_dropout": "bayesian", "ssn": "variability"}
TYPES = {
    "test_time_dropout": {"predictive_entropy": "PU", "expected_entropy": "AU", "mutual_information": "EU"},
    "ssn": {"predictive_entropy": "PU", "expected_entropy": "EU", "mutual_information": "AU"},
}
MEASURES = ("predictive_entropy", "expected_entropy", "mutual_information")
AGGREGATIONS = ("patch", "threshold")
SEEDS = (0, 1)
BACKBONE = "unet"
NAME = "synthetic-study"

#: NCC (i.i.d.) per model and measure; seeds add at most ±0.01.
#: TTD: AU 0.86 > EU 0.47 (Q1 yes), EU lowest (Q2 no).  SSN: AU 0.60 < EU 0.90 (Q1 no), EU not lowest (Q2 yes).
SEP_NCC = {
    "test_time_dropout": {"predictive_entropy": 0.80, "expected_entropy": 0.86, "mutual_information": 0.47},
    "ssn": {"predictive_entropy": 0.95, "expected_entropy": 0.90, "mutual_information": 0.60},
}
#: OoD AUROC on toy_3b per model, measure, aggregation.
#: TTD: EU (MI) > 0.5 everywhere (Q3 yes) and above AU (EE) everywhere (Q4 no).
#: SSN: EU (EE) 0.70 / 0.45 (Q3 partial); EU − AU (MI) = +0.10 / −0.25 (Q4 partial).
SEP_AUROC = {
    "test_time_dropout": {"predictive_entropy": (0.80, 0.70), "expected_entropy": (0.60, 0.55),
                          "mutual_information": (0.90, 0.85)},
    "ssn": {"predictive_entropy": (0.75, 0.65), "mutual_information": (0.60, 0.70), "expected_entropy": (0.70, 0.45)},
}
EXPECTED_ANSWERS = {
    ("toy_1", "test_time_dropout"): {"Q1": "yes", "Q2": "no", "Q3": "n/a", "Q4": "n/a"},
    ("toy_1", "ssn"): {"Q1": "no", "Q2": "yes", "Q3": "n/a", "Q4": "n/a"},
    ("toy_3b", "test_time_dropout"): {"Q1": "yes", "Q2": "no", "Q3": "yes", "Q4": "no"},
    ("toy_3b", "ssn"): {"Q1": "no", "Q2": "yes", "Q3": "partial", "Q4": "partial"},
}

BASE = {"dice": 0.80, "ged": 0.30, "ace": 0.20, "aurc": 0.25, "eaurc": 0.06, "auprc": 0.7,
        "fpr_at_95_tpr": 0.5, "improvement": 0.01}
MODEL_OFF = {"test_time_dropout": 0.0, "ssn": -0.03}
MEASURE_OFF = {"predictive_entropy": -0.02, "expected_entropy": 0.01, "mutual_information": 0.03}
AGG_OFF = {"patch": 0.0, "threshold": 0.015}


def _splits(scenario: str) -> tuple[str, ...]:
    return ("iid",) if scenario == "toy_1" else ("iid", "ood")


def synthetic_results(rng: np.random.Generator) -> pd.DataFrame:
    rows = []

    def add(scenario, seed, model, task, metric, split, value, measure="", aggregation="", versus=""):
        utype = TYPES[model].get(measure, "") if measure else ""
        rows.append(dict(dataset=DATASET, scenario=scenario, seed=seed, backbone=BACKBONE, prediction_model=model,
                         family=MODELS[model], measure=measure, versus=versus, uncertainty_type=utype,
                         aggregation=aggregation, task=task, metric=metric, split=split, value=float(value)))

    def noise(scale=0.02):
        return rng.uniform(-scale, scale)

    for scenario in SCENARIOS:
        for seed in SEEDS:
            for model in MODELS:
                for split in _splits(scenario):
                    ood = 0.1 if split == "ood" else 0.0
                    add(scenario, seed, model, "segmentation", "dice", split, BASE["dice"] + MODEL_OFF[model] - ood + noise())
                    add(scenario, seed, model, "ambiguity", "ged", split, BASE["ged"] - MODEL_OFF[model] + ood + noise())
                    for m in MEASURES:
                        add(scenario, seed, model, "ambiguity", "ncc", split,
                            SEP_NCC[model][m] - 2 * ood + noise(0.01), measure=m)
                        add(scenario, seed, model, "calibration", "ace", split,
                            BASE["ace"] + MEASURE_OFF[m] + MODEL_OFF[model] + ood + noise(), measure=m)
                        for a in AGGREGATIONS:
                            for metric in ("aurc", "eaurc"):
                                add(scenario, seed, model, "failure_detection", metric, split,
                                    BASE[metric] + MEASURE_OFF[m] + AGG_OFF[a] + MODEL_OFF[model] + ood + noise(),
                                    measure=m, aggregation=a)
                # separation: NCC difference of the AU and EU measure (same numbers as the ncc rows)
                by_type = {t: m for m, t in TYPES[model].items()}
                if scenario == "toy_1":
                    ncc = {r["measure"]: r["value"] for r in rows if r["scenario"] == scenario and r["seed"] == seed
                           and r["prediction_model"] == model and r["metric"] == "ncc" and r["split"] == "iid"}
                    add(scenario, seed, model, "separation", "ncc_au_minus_eu", "iid",
                        ncc[by_type["AU"]] - ncc[by_type["EU"]], measure=by_type["AU"], versus=by_type["EU"])
                if scenario == "toy_3b":
                    for m in MEASURES:
                        for k, a in enumerate(AGGREGATIONS):
                            auroc = SEP_AUROC[model][m][k] + noise(0.01)
                            add(scenario, seed, model, "ood_detection", "auroc", "all", auroc, measure=m, aggregation=a)
                            for metric in ("auprc", "fpr_at_95_tpr"):
                                add(scenario, seed, model, "ood_detection", metric, "all",
                                    BASE[metric] + MEASURE_OFF[m] + noise(), measure=m, aggregation=a)
                            if TYPES[model][m] in ("PU", "EU"):
                                add(scenario, seed, model, "active_learning", "improvement", "ood",
                                    BASE["improvement"] + MEASURE_OFF[m] / 2 + noise(), measure=m, aggregation=a)
                    au = {r["aggregation"]: r["value"] for r in rows if r["scenario"] == scenario
                          and r["seed"] == seed and r["prediction_model"] == model and r["metric"] == "auroc"
                          and r["measure"] == by_type["AU"]}
                    eu = {r["aggregation"]: r["value"] for r in rows if r["scenario"] == scenario
                          and r["seed"] == seed and r["prediction_model"] == model and r["metric"] == "auroc"
                          and r["measure"] == by_type["EU"]}
                    for a in AGGREGATIONS:
                        add(scenario, seed, model, "separation", "auroc_eu_minus_au", "all", eu[a] - au[a],
                            measure=by_type["AU"], versus=by_type["EU"], aggregation=a)
    return pd.DataFrame(rows)


def synthetic_cases(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for scenario in SCENARIOS:
        for seed in SEEDS:
            for model in MODELS:
                for c in range(14):
                    split = "pool" if c >= 12 else "test"
                    ood = scenario == "toy_3b" and 6 <= c < 12
                    dice = float(np.clip(rng.uniform(0.55, 0.95) - (0.15 if ood else 0.0), 0, 1))
                    for m in MEASURES:
                        quality = {"predictive_entropy": 0.8, "expected_entropy": 0.5, "mutual_information": 0.3}[m]
                        for a in AGGREGATIONS:
                            score = quality * (1 - dice) + (1 - quality) * rng.uniform(0, 0.5)
                            rows.append(dict(
                                dataset=DATASET, scenario=scenario, seed=seed, backbone=BACKBONE,
                                prediction_model=model, family=MODELS[model], case_id=f"case_{c:02d}", split=split,
                                ood=ood, shift="cube" if ood else "none", dice=dice, ged=0.3,
                                predicted_fraction=0.1, measure=m, uncertainty_type=TYPES[model][m], aggregation=a,
                                score=score, ncc=SEP_NCC[model][m]))
    return pd.DataFrame(rows)


def synthetic_calibration(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    centres = (np.arange(20) + 0.5) / 20
    for scenario in SCENARIOS:
        for seed in SEEDS:
            for model in MODELS:
                for m in MEASURES:
                    for subset in _splits(scenario):
                        bias = 0.05 if subset == "iid" else 0.15
                        for b, centre in enumerate(centres):
                            count = 0 if centre < 0.3 else int(rng.integers(50, 500))
                            acc = float(np.clip(centre - bias * (1 - centre) * 2, 0, 1))
                            rows.append(dict(dataset=DATASET, scenario=scenario, seed=seed, backbone=BACKBONE,
                                             prediction_model=model, measure=m, uncertainty_type=TYPES[model][m],
                                             subset=subset, bin=b, count=float(count),
                                             confidence_sum=count * centre, correct_sum=count * acc))
    return pd.DataFrame(rows)


CONTEXT = ["dataset", "scenario", "seed", "backbone", "prediction_model"]


def synthetic_curves(cases: pd.DataFrame, calibration: pd.DataFrame) -> pd.DataFrame:
    """``curves.parquet`` as the runner writes it from the built-in tasks: failure detection's curves of
    the synthetic test cases (the task's own :func:`curve_rows`) and calibration's reliability bins."""
    from values_seg import metrics
    from values_seg_plugins.tasks.failure_detection import CURVE_COLUMNS, curve_rows

    frames = []
    test = cases[cases["split"] == "test"]
    for key, g in test.groupby(CONTEXT + ["measure", "aggregation"], sort=True):
        for subset, flag in (("iid", False), ("ood", True)):
            part = g[g["ood"] == flag]
            if part.empty:
                continue
            risks, confidences = 1.0 - part["dice"].to_numpy(float), -part["score"].to_numpy(float)
            rows = curve_rows("uncertainty", key[-2], key[-1], subset, risks, confidences)
            if key[-2:] == (MEASURES[0], AGGREGATIONS[0]):
                rows += curve_rows("oracle", "", "", subset, risks, -risks)
            frame = pd.DataFrame(rows, columns=CURVE_COLUMNS)
            frame[CONTEXT] = list(key[:-2])
            frame["uncertainty_type"] = frame["measure"].map(TYPES[key[4]]).fillna("")
            frames.append(frame)
    for key, g in calibration.groupby(CONTEXT + ["measure", "subset"], sort=True):
        bins = metrics.CalibrationBins(g["count"].to_numpy(np.int64), g["confidence_sum"].to_numpy(float),
                                       g["correct_sum"].to_numpy(float))
        frames.append(g.rename(columns={"subset": "split"}).assign(curve="reliability",
                                                                   area=metrics.ace_from_bins(bins)))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "task", np.where(out["curve"] == "reliability", "calibration", "failure_detection"))
    return out


def write_montage(path: Path, scenario: str, model: str, seed: int, rng: np.random.Generator, n: int = 4,
                  size: int = 32) -> None:
    yy, xx = np.mgrid[:size, :size]
    images, raters, preds, maps = [], [], [], {m: [] for m in MEASURES}
    for i in range(n):
        cy, cx = size / 2 + rng.uniform(-3, 3), size / 2 + rng.uniform(-3, 3)
        dist = np.hypot(yy - cy, xx - cx)
        images.append((dist < 9).astype(np.float32) + rng.normal(0, 0.2, (size, size)).astype(np.float32))
        raters.append(np.stack([(dist < r).astype(np.uint8) for r in (7, 9, 11)]))
        preds.append((dist < 9).astype(np.uint8))
        for k, m in enumerate(MEASURES):
            maps[m].append((np.exp(-((dist - 9) ** 2) / (2 + 3 * k)) * (0.7 - 0.2 * k)).astype(np.float32))
    arrays = dict(image=np.stack(images), raters=np.stack(raters), prediction=np.stack(preds),
                  case_ids=np.array([f"case_{i:02d}" for i in range(n)]),
                  ood=np.array([i >= n // 2 for i in range(n)]),
                  meta=np.array(json.dumps(dict(dataset=DATASET, scenario=scenario, backbone=BACKBONE,
                                                prediction_model=model, seed=seed, family=MODELS[model]))))
    for m in MEASURES:
        arrays[f"map__{m}"] = np.stack(maps[m])
    np.savez_compressed(path, **arrays)


TASKS = ("segmentation", "ood_detection", "failure_detection", "active_learning", "calibration", "ambiguity",
         "separation")


def write_declarations(run_dir: Path) -> None:
    """``components.json`` as the runner writes it, from the built-ins' own declarations."""
    from values_seg.config.loading import load_config
    from values_seg.runner import declarations

    cfg = load_config(base={"name": NAME, "datasets": [{"name": "toy", "label": s} for s in SCENARIOS],
                            "backbones": [BACKBONE], "prediction_models": list(MODELS), "measures": list(MEASURES),
                            "aggregations": list(AGGREGATIONS), "tasks": list(TASKS)})
    declarations.write(cfg, run_dir)


def claim(run_dir: Path, name: str) -> Path:
    """``run_dir`` as a values-seg run directory (claimed unless it already is one)."""
    if not (run_dir / run_directory.MARKER).exists():
        run_directory.claim(run_dir, name)
    return run_dir


def write_synthetic_run(run_dir: Path) -> Path:
    """Write the synthetic run directory and return it."""
    rng = np.random.default_rng(1234)
    claim(run_dir, NAME)
    (run_dir / "config.yaml").write_text(f"name: {NAME}\ndescription: synthetic run for the report tests\n"
                                         f"seeds: [0, 1]\n")
    write_declarations(run_dir)
    results = synthetic_results(rng)
    results.to_csv(run_dir / "results.csv", index=False)
    results.to_parquet(run_dir / "results.parquet", index=False)
    cases, calibration = synthetic_cases(rng), synthetic_calibration(rng)
    cases.to_csv(run_dir / "cases.csv", index=False)
    synthetic_curves(cases, calibration).to_parquet(run_dir / "curves.parquet", index=False)
    (run_dir / "montages").mkdir(exist_ok=True)
    for seed in (0, 1):
        write_montage(run_dir / "montages" / f"toy_3b__unet__test_time_dropout__seed{seed}.npz", "toy_3b",
                      "test_time_dropout", seed, rng)
    run_directory.record(run_dir, sorted((run_dir / "montages").glob("*.npz")))  # as the runner does
    pd.DataFrame([{"job": "train/ensemble/seed1", "stage": "train", "error": "RuntimeError: out of memory"}]).to_csv(
        run_dir / "failures.csv", index=False)
    return run_dir


@pytest.fixture(scope="session")
def synthetic_run(built_once) -> Path:
    """A pristine synthetic run directory (do not modify; copy it first)."""
    return built_once("report-synthetic-run", lambda folder: write_synthetic_run(folder / "run"))


def _built_report(folder: Path) -> Path:
    from values_seg.report import build_report

    return build_report(write_synthetic_run(folder / "run"))


@pytest.fixture(scope="session")
def built_report(built_once) -> Path:
    """A synthetic run directory with its report built (report.md path; do not modify)."""
    return built_once("report-built", _built_report)


@pytest.fixture()
def spec(synthetic_run):
    """The synthetic run's :class:`values_seg.report.spec.ReportSpec`."""
    from values_seg.report.spec import ReportSpec

    return ReportSpec.load(synthetic_run)


@pytest.fixture()
def results_frame(synthetic_run) -> pd.DataFrame:
    """The synthetic results as the report reads them (normalised)."""
    from values_seg.report import load_run

    return load_run(synthetic_run).results


@pytest.fixture()
def expected_answers() -> dict:
    return EXPECTED_ANSWERS


# ----------------------------------------------------------------------------- runs with bootstrap distributions

STATS = {"n_resamples": 400, "level": 0.95, "seed": 7}


def write_stats_run(run_dir: Path, results: pd.DataFrame, samples: np.ndarray, tasks=TASKS) -> Path:
    """A run directory as the runner writes it with the statistics on: ``results`` (one row per
    seed, with ``ci_low``/``ci_high``) and their bootstrap distributions ``samples`` ``[rows, B]``
    (NaN rows: none stored) in bootstrap.parquet; components.json from the built-ins' declarations."""
    from values_seg.config.loading import load_config
    from values_seg.runner import declarations

    claim(run_dir, "stats")
    (run_dir / "config.yaml").write_text(f"name: stats\nstatistics: {{n_resamples: {samples.shape[1]}, "
                                         f"level: {STATS['level']}, seed: {STATS['seed']}}}\n")
    datasets = sorted(set(zip(results["dataset"], results["scenario"])))
    cfg = load_config(base={"name": "stats", "datasets": [{"name": "toy", "label": s} for _, s in datasets],
                            "backbones": ["unet"], "prediction_models": sorted(set(results["prediction_model"])),
                            "measures": sorted(set(results["measure"].dropna()) - {"", "samples"}) or ["predictive_entropy"],
                            "aggregations": sorted(set(results["aggregation"].dropna()) - {""}) or ["patch"],
                            "tasks": list(tasks)})
    declarations.write(cfg, run_dir)
    results.to_csv(run_dir / "results.csv", index=False)
    keep = ~np.isnan(samples).all(axis=1)
    stored = results[keep].copy()
    stored["samples"] = [s.astype(np.float32) for s in samples[keep]]
    stored.to_parquet(run_dir / "bootstrap.parquet", index=False)
    return run_dir


@pytest.fixture(scope="session")
def stats_run(built_once) -> Path:
    """The synthetic run with bootstrap distributions for every result row (B = 400): each row's
    value plus a per-(scenario, seed) resample effect shared by all its methods and a small noise of
    its own (so paired differences are much tighter than the intervals), with the matching
    percentile intervals in results.csv."""
    return built_once("report-stats-run", _stats_run)


def _stats_run(folder: Path) -> Path:
    run = write_synthetic_run(folder / "run")
    results = pd.read_csv(run / "results.csv")
    rng = np.random.default_rng(99)
    shared = {key: rng.normal(0, 0.02, STATS["n_resamples"]) for key in set(zip(results["scenario"], results["seed"]))}
    samples = np.stack([v + shared[(s, seed)] + rng.normal(0, 0.004, STATS["n_resamples"])
                        for v, s, seed in zip(results["value"], results["scenario"], results["seed"])])
    results["ci_low"], results["ci_high"] = np.percentile(samples, [2.5, 97.5], axis=1)
    (run / "config.yaml").write_text(f"name: {NAME}\nseeds: [0, 1]\nstatistics: {{n_resamples: {STATS['n_resamples']}, "
                                     f"level: 0.95, seed: {STATS['seed']}}}\n")
    results.to_csv(run / "results.csv", index=False)
    results.to_parquet(run / "results.parquet", index=False)
    stored = results.copy()
    stored["samples"] = [s.astype(np.float32) for s in samples]
    stored.to_parquet(run / "bootstrap.parquet", index=False)
    return run
