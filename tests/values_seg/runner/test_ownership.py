"""``values-seg run`` writes only into its own run and cache directories, and a rerun leaves nothing
of what the current config no longer has (issue 22, items 2 and 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from values_seg.cli import main
from values_seg.run_files import MARKER

SMALL = {
    "name": "owner_tiny",
    "datasets": [{"name": "toy", "label": "toy_2", "params": {"scenario": "2", "dims": 2, "size": 32,
                                                               "train_cases": 8, "val_cases": 4}}],
    "backbones": [{"name": "unet", "params": {"base_width": 4}}],
    "recipe": {"epochs": 1},
    "prediction_models": ["deterministic", {"name": "ensemble", "params": {"members": 2}}],
    "measures": ["predictive_entropy"],
    "aggregations": ["image"],
    "tasks": ["segmentation"],
    "statistics": {"n_resamples": 0},
}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def config(tmp_path: Path, **changes) -> str:
    path = tmp_path / f"config_{len(list(tmp_path.glob('config_*')))}.yaml"
    path.write_text(yaml.safe_dump({**SMALL, **changes}))
    return str(path)


def run(tmp_path: Path, out: Path, *overrides: str, **changes) -> int:
    return main(["run", config(tmp_path, **changes), "--out", str(out), "--no-progress", *overrides])


def test_a_user_folder_with_a_file_called_run_json_is_refused(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / MARKER).write_text(json.dumps({"my": "settings"}))
    for name in ("report.md", "results.csv", "config.yaml"):
        (mine / name).write_text(f"the user's {name}\n")
    before = snapshot(mine)
    assert run(tmp_path, mine) == 2
    err = capsys.readouterr().err
    assert "run.json" in err and "not a values-seg run marker" in err and "Traceback" not in err
    assert snapshot(mine) == before


def test_a_cache_dir_holding_a_users_files_is_refused(tmp_path, capsys):
    mine = tmp_path / "my_folder"
    mine.mkdir()
    (mine / "code_digests.json").write_text('{"my": "digests"}')
    before = snapshot(mine)
    assert run(tmp_path, tmp_path / "run", f"cache_dir={mine}") == 2
    assert "values-seg cache marker" in capsys.readouterr().err
    assert snapshot(mine) == before and not (tmp_path / "run").exists()  # refused before anything was made


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """A run of two prediction models, then the same experiment rerun without the ensemble."""
    tmp = tmp_path_factory.mktemp("owner")
    out = tmp / "run"
    assert run(tmp, out) == 0
    first = sorted(p.name for p in (out / "montages").glob("*.npz"))
    first_report = (out / "report.md").read_text()
    assert run(tmp, out, prediction_models=["deterministic"]) == 0
    return out, first, first_report


def test_a_dropped_prediction_model_leaves_no_montage(two_models):
    out, first, first_report = two_models
    assert any("ensemble" in name for name in first) and "ensemble" in first_report  # it was there
    assert not [p.name for p in (out / "montages").glob("*ensemble*")]
    assert not [p.name for p in (out / "figures").glob("*ensemble*")]
    montages = (out / "report.md").read_text().split("## Uncertainty maps")[1]
    assert "montage_" in montages and "ensemble" not in montages.lower()


def test_another_experiment_into_the_same_directory_is_refused(two_models, tmp_path, capsys):
    out = two_models[0]
    before = snapshot(out)
    assert run(tmp_path, out, name="another") == 2
    err = capsys.readouterr().err
    assert "'owner_tiny'" in err and "--out" in err
    assert snapshot(out) == before
