"""The no-op rerun and the stages' keys follow one rule: a rerun says "(unchanged)" only where a
fresh run gives the same results. Each input a result follows from is edited the way a user would
(a helper on the path, a helper of an installed plugin distribution, a module shipped without
source, a library upgrade through its installed metadata, the machine's kernels, weights at the
same path, a data file, a deleted figure) and the command is run again through the CLI."""

from __future__ import annotations

import importlib.util
import py_compile
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location("rerun_world", Path(__file__).with_name("rerun_world.py"))
world_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(world_module)
edit, run, unchanged, write_weights = world_module.edit, world_module.run, world_module.unchanged, world_module.write_weights

pytestmark = pytest.mark.slow

BASE = "runs/base"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The world with a finished run in ``runs/base``, recorded for the no-op rerun."""
    root = world_module.write_world(tmp_path_factory.mktemp("world"))
    first = run(root, BASE)
    assert not unchanged(first) and "1 distinct trainings (1 run now)" in first.stdout, first.stdout + first.stderr
    return root


@pytest.fixture
def copy(world, tmp_path):
    """A copy of the world whose run is recorded there (a rerun in another folder goes the full way
    once: the config's relative paths name other files there)."""
    root = tmp_path / "world"
    shutil.copytree(world, root, symlinks=True)
    full = run(root, BASE)
    assert "1 distinct trainings (0 run now), 1 evaluations (0 run now)" in full.stdout, full.stdout
    assert unchanged(run(root, BASE))
    return root


def results(root: Path, out: str = BASE) -> bytes:
    return (root / out / "results.csv").read_bytes()


def cases(root: Path, out: str = BASE) -> pd.DataFrame:
    return pd.read_csv(root / out / "cases.csv")


def test_a_helper_package_on_the_path_is_the_plugins_code(copy):
    """The config's plugin module computes with a helper package on the path (no distribution):
    editing the helper recomputes the evaluation."""
    before = cases(copy)
    edit(copy / "path" / "acme_helpers" / "maths.py", "** 1", "** 2")
    again = run(copy, BASE)
    assert not unchanged(again) and "1 evaluations (1 run now)" in again.stdout, again.stdout
    assert not cases(copy).equals(before)


def test_a_helper_package_of_an_installed_plugin_distribution_is_its_code(copy):
    """An installed plugin (an entry point) whose maths lives in a second top-level package of its
    distribution, same version: editing the maths recomputes the evaluation."""
    edit(copy / "site" / "acmeplug_maths" / "__init__.py", "** 1", "** 3")
    again = run(copy, BASE)
    assert not unchanged(again) and "1 evaluations (1 run now)" in again.stdout, again.stdout


def test_a_plugin_module_shipped_without_source_is_digested(copy):
    """The plugin module as a ``.pyc`` only (as vendors and Cython builds ship code): a new build
    of it recomputes what it computes."""
    source = copy / "acme_plugin_source.py"
    (copy / "path" / "acme_plugin.py").rename(source)

    def build() -> None:
        py_compile.compile(str(source), cfile=str(copy / "path" / "acme_plugin.pyc"), doraise=True)

    build()
    first = run(copy, BASE)
    assert not unchanged(first), first.stdout  # another module file: the full way, once
    assert unchanged(run(copy, BASE))
    edit(source, "return weighted_entropy(stats.mean)", "return weighted_entropy(stats.mean) + stats.mean[0]")
    build()
    again = run(copy, BASE)
    assert not unchanged(again) and "1 evaluations (1 run now)" in again.stdout, again.stdout


def test_a_library_upgrade_through_its_installed_metadata_recomputes_what_it_computes(copy, upgraded):
    """connected-components-3d (the lesions' labelling, imported by the evaluation's metrics) is
    keyed though no fixed list names it: an upgrade recomputes the evaluations, not the trainings."""
    upgraded(copy / "site", "connected-components-3d")
    again = run(copy, BASE)
    assert not unchanged(again), again.stdout
    assert "1 distinct trainings (0 run now), 1 evaluations (1 run now)" in again.stdout, again.stdout


def test_the_machines_kernels_are_keyed(copy):
    """torch's scalar kernels (``ATEN_CPU_CAPABILITY=default``) compute other numbers than the CPU's
    vector ones: neither the rerun nor the cache takes one for the other."""
    again = run(copy, BASE, ATEN_CPU_CAPABILITY="default")
    assert not unchanged(again) and "1 distinct trainings (1 run now)" in again.stdout, again.stdout
    assert unchanged(run(copy, BASE, ATEN_CPU_CAPABILITY="default"))
    assert unchanged(run(copy, BASE)) is False  # back on the vector kernels: its own cache, the full way


def test_weights_named_by_a_path_are_keyed_by_their_bytes(copy):
    """Other weights at the same path train again: the backbone's ``init`` is keyed by content."""
    write_weights(copy / "weights.pt", seed=1)
    again = run(copy, BASE)
    assert not unchanged(again) and "1 distinct trainings (1 run now)" in again.stdout, again.stdout


def test_a_deleted_figure_and_table_are_written_again(copy):
    """A figure and a table of a finished run deleted: the rerun draws them again, report.md's
    links all resolve, and the next rerun has nothing to do."""
    run_dir = copy / BASE
    figure = next((run_dir / "figures").glob("*.png"))
    table = next((run_dir / "tables").glob("*.tex"))
    figure.unlink()
    table.unlink()
    again = run(copy, BASE)
    assert again.returncode == 0, again.stderr
    assert figure.exists() and table.exists()
    report = (run_dir / "report.md").read_text()
    import re

    for link in re.findall(r"\]\(((?:figures|tables)/[^)]+)\)", report):
        assert (run_dir / link).exists(), link
    assert unchanged(run(copy, BASE))


@pytest.mark.parametrize("wrapped", [False, True], ids=["nnunet", "temperature_scaled_nnunet"])
def test_an_nnunet_model_retrained_in_place_is_predicted_again(tmp_path, wrapped):
    """New weights in the same model folder (``nnUNetv2_train`` run again) on a data set that reads
    no files: the prediction key holds the checkpoint's bytes, and so does the rerun's record; also
    where the folder is a parameter of a model another wraps (a derived model's ``model_params``)."""
    import subprocess
    import sys

    import yaml

    from values_seg_plugins._nnunet.testing import make_model_folder

    folder = make_model_folder(tmp_path / "model", dims=2, folds=(0,), seed=0)
    config = {"name": "nnunet_tiny", "device": "cpu", "statistics": {"n_resamples": 10},
              "datasets": [{"name": "toy", "label": "toy_2", "params": {"scenario": "2", "dims": 2, "size": 32,
                                                                         "train_cases": 8, "val_cases": 4}}],
              "prediction_models": [{"name": "nnunet", "params": {"model_folder": str(folder)}}],
              "measures": ["predictive_entropy"], "aggregations": [{"name": "patch", "params": {"size": 5}}],
              "tasks": ["segmentation", "failure_detection"]}
    if wrapped:
        config["prediction_models"] = [{"name": "temperature_scaled", "label": "nnunet_ts", "params": {
            "model": "nnunet", "model_params": {"model_folder": str(folder)}}}]
    (tmp_path / "nnunet.yaml").write_text(yaml.safe_dump(config))

    def rerun() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "values_seg.cli", "run", "nnunet.yaml", "--out", "out",
                               "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=900)

    assert not unchanged(rerun())
    assert unchanged(rerun())
    retrained = make_model_folder(tmp_path / "retrained", dims=2, folds=(0,), seed=5)
    shutil.copyfile(retrained / "fold_0" / "checkpoint_final.pth", folder / "fold_0" / "checkpoint_final.pth")
    again = rerun()
    assert not unchanged(again) and "1 evaluations (1 run now)" in again.stdout, again.stdout


EDITS = {
    "config value": lambda root: edit(root / "tiny.yaml", "epochs: 1", "epochs: 2"),
    "plugin source": lambda root: edit(root / "path" / "acme_plugin.py", "return weighted_entropy(stats.mean)",
                                       "return weighted_entropy(stats.mean) * 2 - stats.mean[1]"),
    "helper source": lambda root: edit(root / "path" / "acme_helpers" / "maths.py", "1e-12", "1e-3"),
    "library version": lambda root: (edit(root / "site" / "acmelib" / "__init__.py", "SCALE = 1.0", "SCALE = 0.5"),
                                     (root / "site" / "acmelib-1.0.dist-info").rename(root / "site" / "acmelib-1.1.dist-info"),
                                     edit(root / "site" / "acmelib-1.1.dist-info" / "METADATA", "Version: 1.0",
                                          "Version: 1.1")),
    "data file": lambda root: _shift_one_image(root / "data"),
    "weights file": lambda root: write_weights(root / "weights.pt", seed=7),
}


def _shift_one_image(folder: Path) -> None:
    import json

    import numpy as np

    case_id = json.loads((folder / "splits.json").read_text())["test"][0]
    with np.load(folder / f"{case_id}.npz") as f:
        content = dict(f)
    content["image"] = content["image"] + 0.25
    np.savez(folder / f"{case_id}.npz", **content)


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=st.permutations(sorted(EDITS)))
def test_unchanged_only_where_a_fresh_run_gives_the_same_results(world, tmp_path_factory, edits):
    """After each edit in a random order, and once with no edit: the rerun's results equal those of
    a fresh run (its own run directory and cache) byte for byte, and the rerun says "(unchanged)"
    only with no edit."""
    root = tmp_path_factory.mktemp("property") / "world"
    shutil.copytree(world, root, symlinks=True)
    assert unchanged(run(root, BASE))  # the full way here once (other paths), then recorded
    for step, name in enumerate([None, *edits]):
        if name is not None:
            EDITS[name](root)
        again = run(root, BASE)
        fresh = f"runs/fresh{step}"
        assert not unchanged(run(root, fresh))
        assert results(root) == results(root, fresh), name
        assert cases(root).equals(cases(root, fresh)), name
        assert unchanged(again) == (name is None), (name, again.stdout)
