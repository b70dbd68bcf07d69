"""What the console says, said once and first: the --out refusal before any other line, OmegaConf's
errors as the key, the value and what is valid, a plugin given both as an entry point and under
``plugins:`` named once with a note, the measures a model family leaves out named once."""

import importlib.metadata
import logging
import textwrap
from pathlib import Path

import pytest
import yaml

from values_seg import registry
from values_seg.cli import main
from values_seg.config.checks import ConfigError
from values_seg.config.loading import load_config
from values_seg.runner.summary import RunSummary

TINY = {"name": "tiny", "datasets": [{"name": "toy", "params": {"dims": 2, "size": 32, "train_cases": 4,
                                                                 "val_cases": 2}}],
        "backbones": ["unet"], "prediction_models": ["deterministic"], "measures": ["predictive_entropy"],
        "tasks": ["segmentation"]}


def test_the_out_refusal_comes_before_any_other_line(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["run", str(config), "--out", str(mine), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no "writing to mine" before the refusal
    assert err.strip().splitlines() == [err.strip()] and "refusing to write into" in err and "notes.txt" in err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("override, message", [
    ("recipe.epochs=abc", "config recipe.epochs: 'abc' is not an integer; valid: an integer"),
    ("statistics.level=high", "config statistics.level: 'high' is not a number; valid: a number"),
    ("seeds=[0,x]", "config seeds[1]: 'x' is not an integer; valid: an integer"),
    ("seeds=3", "config seeds: must be a list; valid: a list in brackets, e.g. seeds=[0,1]"),
    ("name=[1]", "config name: [1] is not a string; valid: a string"),
])
def test_omegaconf_errors_name_the_key_the_value_and_what_is_valid(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(base=TINY, overrides=[override])
    assert str(e.value) == message


ACME = '''
import torch
from values_seg import component, hookimpl

@component(uncertainty_types={"deterministic": "PU"})
def acme_variance(samples: torch.Tensor) -> torch.Tensor:
    """Variance of the samples' probabilities."""
    return samples.var(dim=0, unbiased=False).sum(dim=0)

@hookimpl
def values_seg_measures():
    return [acme_variance]
'''


def test_a_plugin_given_as_an_entry_point_and_under_plugins_is_named_once_with_a_note(tmp_path, monkeypatch, caplog):
    (tmp_path / "acme_twice.py").write_text(textwrap.dedent(ACME))
    dist = tmp_path / "acme_twice-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-twice\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[values_seg]\nacme = acme_twice\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [ep for ep in importlib.metadata.entry_points(group="values_seg") if ep.dist.name == "acme-twice"]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None, **kw: importlib.metadata.EntryPoints(found if group == "values_seg" else ()))
    monkeypatch.setattr(registry, "_default", registry.Registry())
    monkeypatch.delitem(__import__("sys").modules, "acme_twice", raising=False)
    with caplog.at_level(logging.WARNING):
        experiment = load_config(base={**TINY, "plugins": ["acme_twice"], "measures": ["acme_variance"]})
    notes = [r.getMessage() for r in caplog.records if "acme_twice" in r.getMessage()]
    assert notes == ["plugin acme_twice is registered once, by acme-twice:acme (entry point); listing it under "
                     "plugins: too adds nothing"]
    assert registry.get("measure", "acme_variance").source == "acme-twice:acme (entry point)"
    assert [m.name for m in experiment.refs("measures")] == ["acme_variance"]


def test_a_plugin_only_under_plugins_gets_no_note(tmp_path, monkeypatch, caplog):
    (tmp_path / "acme_once.py").write_text(textwrap.dedent(ACME))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_default", registry.Registry(entry_points=False))
    with caplog.at_level(logging.WARNING):
        load_config(base={**TINY, "plugins": ["acme_once"], "measures": ["acme_variance"]})
    assert not [r for r in caplog.records if "acme_once" in r.getMessage()]


def test_the_summary_names_each_gap_once_in_short():
    gaps = {"max_softmax": {"ensemble": "bayesian"}, "mutual_information": {"deterministic": "deterministic"}}
    text = RunSummary(Path("runs/x"), measure_gaps=gaps).describe()
    assert "produces no rows" not in text  # the full notice is the runner's, at the start
    assert text.count("max_softmax") == 1 and text.count("mutual_information") == 1
