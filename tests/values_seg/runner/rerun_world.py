"""A small world of a user's code, installed libraries and files for the tests of the no-op rerun:
every kind of input a result follows from, each editable by a test.

- ``path/`` (on ``PYTHONPATH``, no distribution): the config's plugin module ``acme_plugin`` (a
  measure, a data set read from files, a backbone initialised from a weights file) and its helper
  package ``acme_helpers``;
- ``site/`` (installed distributions): the library ``acmelib`` 1.0, which the helper computes
  with, and the plugin distribution ``acmeplug`` 1.0 (an entry point) with its helper package
  ``acmeplug_maths``;
- ``data/`` (the data set's files), ``weights.pt`` (the backbone's initial weights) and
  ``tiny.yaml``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import yaml

PLUGIN = '''
"""A user's plugin module: a measure, a data set read from files, a backbone from a weights file."""
import json
from pathlib import Path
from typing import Annotated

import numpy as np
import torch

from values_seg import component, hookimpl
from values_seg.components.dataset import Case, Dataset, check_fingerprint, files_fingerprint
from values_seg.components.measure import measure
from values_seg.params import InputPath

from acme_helpers.maths import weighted_entropy


@measure({"deterministic": "PU"}, label="Acme")
def acme_entropy(stats):
    """Entropy of the mean prediction, weighted by the helper."""
    return weighted_entropy(stats.mean)


class AcmeFolder(Dataset):
    """Cases read from ``root/<case>.npz``; ``root/splits.json`` names them per split."""

    name = "acme_folder"

    def __init__(self, root: Annotated[str, InputPath("fingerprint")], fingerprint: str | None = None):
        self.root = Path(root)
        self.split_ids = json.loads((self.root / "splits.json").read_text())
        files = [self.root / "splits.json"] + sorted(self.root.glob("*.npz"))
        self.current = files_fingerprint(*files)
        check_fingerprint(f"dataset acme_folder {root}", fingerprint, self.current)

    def fingerprint(self):
        return self.current

    def case_ids(self, split):
        self.check_split(split)
        return list(self.split_ids[split])

    def load(self, case_id):
        with np.load(self.root / f"{case_id}.npz") as f:
            return Case(case_id, f["image"], f["raters"], json.loads(str(f["meta"])))


@component(name="acme_unet")
def acme_unet(dims: int, in_channels: int, num_classes: int, dropout: float = 0.0,
              init: Annotated[str | None, InputPath()] = None):
    """The built-in unet of width 4, its initial weights read from ``init``."""
    from values_seg import registry

    net = registry.create("backbone", "unet", dims=dims, in_channels=in_channels, num_classes=num_classes,
                          dropout=dropout, base_width=4)
    if init:
        net.load_state_dict(torch.load(init, weights_only=True))
    return net


@hookimpl
def values_seg_measures():
    return [acme_entropy]


@hookimpl
def values_seg_datasets():
    return [AcmeFolder]


@hookimpl
def values_seg_backbones():
    return [acme_unet]
'''

HELPER = '''
import acmelib


def weighted_entropy(mean):
    p = mean.clamp_min(1e-12)
    return -(p * p.log()).sum(dim=0) ** {power} * acmelib.SCALE
'''

DISTRIBUTION_PLUGIN = '''
"""An installed plugin distribution: its measure's maths lives in another package of the distribution."""
from values_seg import hookimpl
from values_seg.components.measure import measure

from acmeplug_maths import margin


@measure({"deterministic": "PU"}, label="Margin")
def acme_margin(stats):
    """One minus the margin between the two classes."""
    return margin(stats.mean)


@hookimpl
def values_seg_measures():
    return [acme_margin]
'''

DISTRIBUTION_MATHS = '''
def margin(mean):
    return 1 - (mean[1] - mean[0]).abs() ** {power}
'''

CONFIG = {
    "name": "tiny",
    "plugins": ["acme_plugin"],
    "datasets": [{"name": "acme_folder", "label": "files", "params": {"root": "data"}}],
    "backbones": [{"name": "acme_unet", "params": {"init": "weights.pt"}}],
    "recipe": {"epochs": 1},
    "device": "cpu",
    "prediction_models": ["deterministic"],
    "measures": ["acme_entropy", "acme_margin"],
    "aggregations": [{"name": "patch", "params": {"size": 5}}],
    "tasks": ["segmentation", "failure_detection"],
    "statistics": {"n_resamples": 10},
}


def _distribution(site: Path, name: str, version: str, tops: list[str], entry_point: bool = False) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("".join(f"{t}\n" for t in tops))
    if entry_point:
        (info / "entry_points.txt").write_text(f"[values_seg]\n{name} = {name}\n")


def write_world(root: Path) -> Path:
    """Write the world into ``root``; returns ``root``."""
    (root / "path" / "acme_helpers").mkdir(parents=True)
    (root / "path" / "acme_plugin.py").write_text(PLUGIN)
    (root / "path" / "acme_helpers" / "__init__.py").write_text("")
    (root / "path" / "acme_helpers" / "maths.py").write_text(HELPER.format(power=1))
    site = root / "site"
    (site / "acmelib").mkdir(parents=True)
    (site / "acmelib" / "__init__.py").write_text("SCALE = 1.0\n")
    _distribution(site, "acmelib", "1.0", ["acmelib"])
    (site / "acmeplug").mkdir()
    (site / "acmeplug" / "__init__.py").write_text(DISTRIBUTION_PLUGIN)
    (site / "acmeplug_maths").mkdir()
    (site / "acmeplug_maths" / "__init__.py").write_text(DISTRIBUTION_MATHS.format(power=1))
    _distribution(site, "acmeplug", "1.0", ["acmeplug", "acmeplug_maths"], entry_point=True)
    write_data(root / "data")
    write_weights(root / "weights.pt", seed=0)
    (root / "tiny.yaml").write_text(yaml.safe_dump(CONFIG))
    return root


def write_data(folder: Path) -> None:
    """A few cases of toy scenario 2 (shifted test cases) as files."""
    from values_seg import registry

    toy = registry.create("dataset", "toy", scenario="2", dims=2, size=32, train_cases=8, val_cases=4)
    folder.mkdir(parents=True)
    test = toy.case_ids("test")
    iid = [c for c in test if not toy.load(c).meta["ood"]][:4]
    ood = [c for c in test if toy.load(c).meta["ood"]][:4]
    splits = {"train": toy.case_ids("train"), "val": toy.case_ids("val"), "test": iid + ood}
    for ids in splits.values():
        for case_id in ids:
            case = toy.load(case_id)
            np.savez(folder / f"{case_id}.npz", image=case.image, raters=case.raters, meta=json.dumps(case.meta))
    (folder / "splits.json").write_text(json.dumps(splits))


def write_weights(path: Path, seed: int) -> None:
    import torch

    from values_seg import registry

    torch.manual_seed(seed)
    net = registry.create("backbone", "unet", dims=2, in_channels=1, num_classes=2, base_width=4)
    torch.save(net.state_dict(), path)


def env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a command in the world: its code dir and site on the path, first."""
    path = os.pathsep.join([str(root / "path"), str(root / "site"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}


def run(root: Path, out: str, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    """``values-seg run tiny.yaml --out OUT`` in the world, as a user types it."""
    command = [sys.executable, "-m", "values_seg.cli", "run", "tiny.yaml", "--out", out, "--no-progress", *args]
    return subprocess.run(command, cwd=root, env=env(root, **extra_env), capture_output=True, text=True, timeout=900)


def unchanged(result: subprocess.CompletedProcess) -> bool:
    """Whether a run said its results are unchanged (the no-op rerun, or the full way that found
    every stage and table as it was)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return "(unchanged)" in result.stdout


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def dedent(text: str) -> str:
    return textwrap.dedent(text)
