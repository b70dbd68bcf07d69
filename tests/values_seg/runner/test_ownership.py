"""``values-seg run`` writes only into its own run and cache directories, and a rerun leaves nothing
of what the current config no longer has (issue 22, items 2 and 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from values_seg.cli import main
from values_seg.storage.run_files import MARKER

from tiny import tiny_config

SMALL = tiny_config(name="owner_tiny",
                    prediction_models=["deterministic", {"name": "ensemble", "params": {"members": 2}}],
                    statistics={"n_resamples": 0})


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


def _refused(tmp_path, capsys, out: Path, *overrides: str) -> str:
    """The one line a refused ``values-seg run`` printed (exit 2)."""
    assert run(tmp_path, out, *overrides) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("values-seg: error: "), err[:3]
    return err[0]


@pytest.mark.parametrize("inside", ["", "inner", "checkpoints", "checkpoints/deeper"])
def test_a_run_directory_in_a_cache_is_refused_before_anything_is_written(tmp_path, capsys, inside):
    """--out inside another run's cache (or in its checkpoints/) started a full retrain there and
    left files in the cache; now it, and the cache itself, are refused in one line, nothing made."""
    from values_seg.storage import run_directory

    cache = run_directory.claim_cache(tmp_path / "runs" / "earlier" / "cache", tmp_path / "runs" / "earlier")
    (cache / "checkpoints").mkdir()
    before = snapshot(cache), sorted(p.relative_to(cache) for p in cache.rglob("*"))
    out = cache / inside if inside else cache
    line = _refused(tmp_path, capsys, out)
    where = "is a values-seg cache" if not inside else f"lies inside the values-seg cache {cache.resolve()}"
    assert line == (f"values-seg: error: refusing to write a run into {out}: it {where} (its values-seg-cache.json); "
                    "a run directory cannot be in a cache: choose --out outside it")
    assert (snapshot(cache), sorted(p.relative_to(cache) for p in cache.rglob("*"))) == before


def test_a_cache_inside_another_run_or_cache_is_refused_before_anything_is_written(tmp_path, capsys):
    from values_seg.storage import run_directory

    other = run_directory.claim(tmp_path / "other_run", "other_experiment")
    cache = run_directory.claim_cache(tmp_path / "shared", tmp_path / "somewhere")
    out = tmp_path / "run"
    line = _refused(tmp_path, capsys, out, f"cache_dir={other / 'my_cache'}")
    assert f"cache_dir {other / 'my_cache'} lies inside the run directory {other.resolve()} (experiment " \
           "'other_experiment'), which this run does not own" in line
    line = _refused(tmp_path, capsys, out, f"cache_dir={cache / 'predictions'}")
    assert f"cache_dir {cache / 'predictions'} lies inside the values-seg cache {cache.resolve()}" in line
    assert not out.exists() and sorted(p.name for p in other.iterdir()) == [MARKER]
    assert sorted(p.name for p in cache.iterdir()) == ["values-seg-cache.json"]


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
