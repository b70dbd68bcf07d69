"""``values-seg validate-nnunet``: a trained nnU-Net's uncertainty on the user's own data, no code.

What it checks, picks, writes and runs: docs/design-rationale.md,
"A data set in nnU-Net's raw layout"; the user's guide: docs/guides/own-data.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from values_seg.storage import run_directory, run_lock
from values_seg.storage.run_files import CONFIG, REPORT, SKIPPED_CASES

MIN_IID_FOR_TEST_VALIDATION = 2
#: the splits a validate-nnunet run reads (the model is trained: its training cases are not read)
EVALUATED = ("val", "test")


def add_parser(sub) -> None:
    """Register ``validate-nnunet`` on the ``values-seg`` sub-command parsers."""
    p = sub.add_parser("validate-nnunet", help="validate a trained nnU-Net's uncertainty on your own data set "
                                               "(nnU-Net raw layout)")
    p.add_argument("--model-folder", required=True, metavar="DIR",
                   help="nnUNet_results/DatasetXXX_Name/nnUNetTrainer__nnUNetPlans__<configuration>")
    p.add_argument("--dataset", required=True, metavar="DIR", help="nnUNet_raw/DatasetXXX_Name (dataset.json, imagesTr, ...)")
    p.add_argument("--ood-dataset", metavar="DIR", help="a second raw data set: its labelled cases are OoD test cases")
    p.add_argument("--out", metavar="DIR", help="run directory (default: runs/validate_<data set name>)")
    p.add_argument("--cases-csv", metavar="CSV", help="case_id,split[,ood,shift]: test (i.i.d./OoD) and pool cases")
    p.add_argument("--preprocessed-folder", metavar="DIR", help="nnUNet_preprocessed/DatasetXXX_Name (its splits_final.json)")
    p.add_argument("--fold", type=int, default=0, help="fold of splits_final.json for train/val (default 0)")
    p.add_argument("--folds", default="auto", help="model folds to use as samples: auto (every trained fold), all, or 0,1,2")
    p.add_argument("--checkpoint", default="checkpoint_final.pth")
    p.add_argument("--no-mirroring", action="store_true", help="folds only; default: folds × test-time mirrors")
    p.add_argument("--val-source", choices=["auto", "train", "test"], default="auto",
                   help="where validation cases (Platt scaling, thresholds) come from (default auto: i.i.d. test "
                        "cases when there are at least 2)")
    p.add_argument("--save-maps", nargs="*", metavar="MEASURE",
                   help="write uncertainty maps as NIfTI (all measures, or those named)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, mps")
    p.add_argument("--config-only", action="store_true", help=f"write OUT/{CONFIG} and stop")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=validate_command)


# -- checks -------------------------------------------------------------------------------
def check_model_fits_data(model_folder: str | Path, dataset) -> None:
    """The model's ``dataset.json`` must declare the data set's channels and labels."""
    from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError, parse_labels

    path = Path(model_folder) / "dataset.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise LayoutError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(data, dict):
        raise LayoutError(f"{path}: the top level must be a JSON object")
    channels = data.get("channel_names", data.get("modality", {}))
    if not isinstance(channels, dict):
        raise LayoutError(f"{path}: 'channel_names' must be a mapping like {{\"0\": \"CT\"}}")
    if len(channels) != dataset.in_channels:
        raise LayoutError(f"{path}: the model takes {len(channels)} channel(s), the data set "
                          f"{dataset.raw.info.path} has {dataset.in_channels}")
    names, ignore, regions = parse_labels(path, data.get("labels", {}), data.get("regions_class_order"))
    if regions:
        raise LayoutError(f"{path}: the model was trained region-based (sigmoid outputs); values-seg needs softmax "
                          "class probabilities")
    if (len(names), ignore) != (dataset.num_classes, dataset.ignore_index):
        raise LayoutError(f"{path}: the model predicts {len(names)} classes {list(names)} (ignore {ignore}), the data "
                          f"set {dataset.raw.info.path} has {dataset.num_classes} {list(dataset.class_names)} "
                          f"(ignore {dataset.ignore_index})")


def check_all_labels(dataset, progress: bool = True) -> int:
    """Read every image and label file of the evaluated cases once; one error listing every file
    with non-finite image values or undeclared labels. Returns the number of files."""
    return dataset.check_files(EVALUATED, progress)


# -- the experiment -----------------------------------------------------------------------
def _defaults_only(kind: str) -> list[str]:
    from values_seg import registry

    return [c.name for c in registry.components(kind) if all(not p.required for p in c.params)]


def _learned(aggregation: str) -> bool:
    """Whether an aggregation fits a model on the validation cases' scores or risks (its ``fit_needs``)."""
    from values_seg import registry

    return bool(getattr(registry.get("aggregation", aggregation).obj, "fit_needs", ()))


def experiment(name: str, dataset_params: dict, model_params: dict, tasks, device: str, seed: int) -> dict:
    """The config (a plain dict) that ``validate-nnunet`` runs."""
    from values_seg.config.sweep import uncertainty_type

    family = "bayesian"  # the nnunet model's family: the measures that stand for something under it
    measures = [m for m in _defaults_only("measure") if uncertainty_type(m, family)[0]]
    return {
        "name": name,
        "description": f"values-seg validate-nnunet: {model_params['model_folder']} on {dataset_params['folder']}",
        "seeds": [seed],
        "device": device,
        "executor": "local",
        "workers": 1,
        "datasets": [{"name": "nnunet_raw", "label": name.removeprefix("validate_"), "params": dataset_params}],
        "backbones": [],  # the nnunet model was trained by nnU-Net
        "prediction_models": [{"name": "nnunet", "params": model_params}],
        "measures": measures,
        # the learned ones (learned_risk, gmm_meta: fitted on enough validation cases) only on request
        "aggregations": [a for a in _defaults_only("aggregation") if not _learned(a)],
        "tasks": list(tasks),
    }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "data"


def _model_params(args: argparse.Namespace) -> dict:
    from values_seg_plugins._nnunet.model import parse_folds

    folds = parse_folds(args.folds)
    return {"model_folder": str(Path(args.model_folder).expanduser().resolve()),
            "folds": "auto" if folds is None else folds, "checkpoint": args.checkpoint,
            "mirroring": not args.no_mirroring}


def _dataset_params(args: argparse.Namespace) -> dict:
    """The ``nnunet_raw`` parameters, with the fingerprint of the files as they are now."""
    from values_seg_plugins.datasets._nnunet_raw.layout import data_fingerprint
    from values_seg_plugins.datasets._nnunet_raw.splits import splits_file

    params = {"folder": str(Path(args.dataset).expanduser().resolve()), "seed": args.seed}
    for key, value in (("ood_folder", args.ood_dataset), ("cases_csv", args.cases_csv),
                       ("preprocessed_folder", args.preprocessed_folder)):
        if value is not None:
            params[key] = str(Path(value).expanduser().resolve())
    extra = [params["cases_csv"]] if "cases_csv" in params else []
    if "preprocessed_folder" in params:
        params["fold"] = args.fold
        extra.append(splits_file(params["preprocessed_folder"]))
    params["fingerprint"] = data_fingerprint(params["folder"], params.get("ood_folder"), extra)
    return params


def _write_skipped(out: Path, skipped: dict) -> None:
    import pandas as pd

    frame = pd.DataFrame(sorted(skipped.items()), columns=["case", "reason"])
    run_directory.write_owned(out, out / SKIPPED_CASES, lambda tmp: frame.to_csv(tmp, index=False))
    run_directory.record(out, [out / SKIPPED_CASES])
    print(f"values-seg: warning: {len(skipped)} case(s) skipped, see {out / SKIPPED_CASES}", file=sys.stderr)


def validate_command(args: argparse.Namespace) -> int:
    from values_seg import registry
    from values_seg.config.loading import load_config, to_yaml
    from values_seg_plugins.datasets._nnunet_raw import support

    progress = not args.no_progress
    model_params = _model_params(args)
    model = registry.create("prediction_model", "nnunet", **model_params)  # clear errors for a bad folder
    params = _dataset_params(args)
    dataset = registry.create("dataset", "nnunet_raw", **params)
    check_model_fits_data(model.model_folder, dataset)
    facts = support.facts(dataset)
    val_source = args.val_source
    if val_source == "auto":
        val_source = "test" if facts.iid_test >= MIN_IID_FOR_TEST_VALIDATION else "train"
        if val_source == "train":
            print("values-seg: warning: fewer than 2 labelled i.i.d. test cases; Platt scaling and thresholds are "
                  "fitted on training cases the nnU-Net has seen (calibration will look better than it is)",
                  file=sys.stderr)
    if val_source != "train":
        params["val_source"] = val_source
        dataset = registry.create("dataset", "nnunet_raw", **params)
        facts = support.facts(dataset)
    checked = check_all_labels(dataset, progress)
    chosen = support.supported_tasks(facts, model.family, retrainable=False)
    print(f"{dataset!r}: {checked} label files of the evaluated cases fit {dataset.raw.info.path.name}; validation "
          f"cases from {val_source}")
    print("tasks:\n" + chosen.describe())

    name = f"validate_{_slug(dataset.raw.info.name)}"
    cfg = load_config(base=experiment(name, params, model_params, chosen.tasks, args.device, args.seed))
    maps = None
    if args.save_maps is not None:
        from values_seg_plugins.datasets._nnunet_raw.maps import check_measures

        maps = check_measures(cfg, args.save_maps)
    out = Path(args.out) if args.out else Path("runs") / name
    run_directory.claim(out, cfg.name)  # values-seg's own folder before anything is written into it
    with run_lock.locked(out):  # one writer at a time, the maps included
        if dataset.skipped:
            _write_skipped(out, dataset.skipped)
        if args.config_only:
            run_directory.write_owned(out, out / CONFIG, to_yaml(cfg))
            run_directory.record(out, [out / CONFIG])
            print(f"config: {out / CONFIG} (run it with: values-seg run {out / CONFIG} --out {out})")
            return 0
        return _run(cfg, out, maps, progress)


def _run(cfg, out: Path, maps, progress: bool) -> int:
    from values_seg.runner import run_experiment

    print(f"values-seg validate-nnunet: writing to {out}", flush=True)
    summary = run_experiment(cfg, out, progress=progress)
    print(summary.describe())
    if maps is not None and summary.evaluated:
        from values_seg_plugins.datasets._nnunet_raw.maps import save_maps

        index = save_maps(cfg, out, maps, device=cfg.device, progress=progress)
        print(f"uncertainty maps: {index.parent} (index: {index})")
    if (out / REPORT).exists():
        print(f"report: {out / REPORT}")
    print(f"config: {out / CONFIG} (edit it and rerun: values-seg run {out / CONFIG} --out {out})")
    return 0 if summary.ok else 1
