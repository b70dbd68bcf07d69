"""Plugin discovery, component records, parameter validation and error messages."""

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from values_seg import registry
from values_seg.registry import Registry, RegistryError

THIRD_PARTY = '''
"""A third party's plugin: one measure and one aggregation."""
import torch
from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation


def foreground_variance(samples):
    """Variance of the foreground probability over the samples."""
    return samples[:, 1].var(dim=0, unbiased=False)


class TopK(Aggregation):
    """Mean of the k largest values."""
    name = "top_k"

    def __init__(self, k: int = 3):
        self.k = k

    def __call__(self, umap, prediction=None):
        return float(torch.as_tensor(umap).reshape(-1).topk(self.k).values.double().mean())


@hookimpl
def values_seg_measures():
    return [foreground_variance]


@hookimpl
def values_seg_aggregations():
    return [TopK]
'''


#: a third-party plugin package (with its dist-info: an installed distribution when on sys.path)
USERS_PLUGIN = Path(__file__).resolve().parents[1] / "outside_plugin"


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    (tmp_path / "acme_uncertainty.py").write_text(textwrap.dedent(THIRD_PARTY))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "acme_uncertainty"
    sys.modules.pop("acme_uncertainty", None)


def test_builtins_are_registered():
    assert {"predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"} <= set(
        registry.names("measure")
    )
    assert {"image", "patch", "threshold"} <= set(registry.names("aggregation"))
    assert registry.get("measure", "max_softmax").source.endswith("(built-in)")


def test_third_party_module_path_registers_and_is_usable(third_party):
    reg = Registry(entry_points=False)
    reg.load(third_party)
    assert "foreground_variance" in reg.names("measure")
    samples = torch.tensor([[[0.2, 0.6]], [[0.8, 0.4]]]).permute(0, 2, 1)  # [S=2, C=2, 1]: fg 0.8, 0.4
    samples = torch.stack([1 - samples[:, 1], samples[:, 1]], dim=1)
    m = reg.create("measure", "foreground_variance")
    assert torch.allclose(m(samples), samples[:, 1].var(0, unbiased=False))
    agg = reg.create("aggregation", "top_k", k=2)
    assert agg.fit([], []) is agg
    assert agg(torch.tensor([1.0, 5.0, 3.0, 2.0])) == pytest.approx(4.0)  # (5 + 3) / 2
    assert reg.get("aggregation", "top_k").description == "Mean of the k largest values."
    assert reg.get("aggregation", "top_k").source == third_party


def test_entry_point_discovery(tmp_path, monkeypatch, third_party):
    dist = tmp_path / "acme_uncertainty-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-uncertainty\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[values_seg]\nacme = {third_party}\n")
    monkeypatch.syspath_prepend(str(USERS_PLUGIN))  # a plugin the user installed, as the README says
    found = [ep for ep in importlib.metadata.entry_points(group="values_seg") if ep.dist.name == "acme-uncertainty"]
    assert [ep.value for ep in found] == [third_party]  # discovered on sys.path like any installed package
    # the user's own installed plugins stay out of this test (issue 32, item 13): only acme's entry point
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None, **kw: importlib.metadata.EntryPoints(found if group == "values_seg" else ()))
    reg = Registry(builtins=False)
    assert reg.names("measure") == ["foreground_variance"]
    assert reg.get("measure", "foreground_variance").source == "acme-uncertainty:acme (entry point)"


def test_duplicate_name_names_both_sources(third_party, tmp_path):
    (tmp_path / "acme_clash.py").write_text(
        "from values_seg import hookimpl, component\n"
        "@component(name='foreground_variance')\n"
        "def other(samples):\n    'x'\n    return samples[0, 0]\n"
        "@hookimpl\ndef values_seg_measures():\n    return [other]\n"
    )
    reg = Registry(entry_points=False)
    reg.load(third_party)
    with pytest.raises(RegistryError, match="acme_uncertainty.*acme_clash"):
        reg.load("acme_clash")
    # the failed plugin left nothing behind
    assert reg.get("measure", "foreground_variance").source == third_party
    sys.modules.pop("acme_clash", None)


def test_unknown_name_lists_valid_names_and_closest_match():
    with pytest.raises(RegistryError) as e:
        registry.create("measure", "mutual_informaton")
    message = str(e.value)
    assert "predictive_entropy" in message and "closest match: 'mutual_information'" in message


def test_unknown_kind_and_module():
    with pytest.raises(RegistryError, match="valid kinds"):
        registry.names("measures_x")
    with pytest.raises(RegistryError, match="cannot import plugin module"):
        registry.load("no_such_plugin_module_xyz")


def test_parameters_are_validated_and_coerced():
    assert registry.create("aggregation", "patch", size="7").size == 7  # CLI override strings
    with pytest.raises(ValueError, match="must be an int"):
        registry.create("aggregation", "patch", size=2.5)
    with pytest.raises(ValueError, match=r"one of \['sum', 'mean'\]"):
        registry.create("aggregation", "image", reduction="median")
    with pytest.raises(ValueError, match="unknown parameter 'sise'.*did you mean 'size'"):
        registry.create("aggregation", "patch", sise=3)
    assert registry.create("aggregation", "foreground_mean", empty_value="none").empty_value is None
    params = {p.name: p for p in registry.get("aggregation", "image").params}
    assert params["reduction"].default == "sum"


def test_plugin_output_is_validated(tmp_path, monkeypatch):
    (tmp_path / "acme_bad.py").write_text(
        "from values_seg import hookimpl\n@hookimpl\ndef values_seg_measures():\n    return ['not callable']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry(builtins=False, entry_points=False)
    with pytest.raises(RegistryError, match="acme_bad: a measure must be a function or class"):
        reg.load("acme_bad")
    sys.modules.pop("acme_bad", None)


def test_cli_lists_components(capsys):
    from values_seg.cli import main

    assert main(["plugins", "--kind", "aggregation"]) == 0
    out = capsys.readouterr().out
    assert "patch" in out and "size: int = 10" in out and "(built-in)" in out
    assert main(["plugins", "--kind", "nonsense"]) == 2
    assert "valid kinds" in capsys.readouterr().err


def test_display_labels_are_declared_by_the_components():
    assert registry.get("measure", "mutual_information").label == "MI"
    assert registry.get("prediction_model", "test_time_dropout").label == "TTD"
    assert registry.get("aggregation", "threshold").label == "Thresh"
    assert registry.get("task", "ood_detection").label == "OoD-D"


def test_component_ref_normalises_and_ignores_its_label():
    from values_seg.registry import ComponentRef

    a = ComponentRef("aggregation", "patch", {"size": "10"}, label="patch10")
    b = ComponentRef("aggregation", "patch", {})
    assert a == b and a.key() == b.key() and hash(a) == hash(b)  # size 10 is the default
    assert a.label == "patch10" and b.label == "patch" and a.kwargs == {"size": 10}
    with pytest.raises(ValueError, match="unknown parameter 'sise'"):
        ComponentRef("aggregation", "patch", {"sise": 3})


def test_untyped_measures_are_named_up_front():
    import types

    from values_seg import hookimpl
    from values_seg.config.loading import load_config
    from values_seg.config.sweep import untyped_measures

    def untyped_spread(samples):
        """Max minus min of the foreground probability over the samples."""
        return samples[:, 1].amax(0) - samples[:, 1].amin(0)

    registry.register(types.SimpleNamespace(values_seg_measures=hookimpl(lambda: [untyped_spread]),
                                            __name__="untyped_plugin"), source="untyped_plugin")
    cfg = load_config(base={"datasets": ["toy"], "backbones": ["unet"], "prediction_models": ["ensemble"],
                            "measures": ["mutual_information", "untyped_spread"], "tasks": ["segmentation"]})
    assert untyped_measures(cfg) == ["untyped_spread"]


def test_an_aggregation_declares_its_orientation_and_a_wrong_one_is_a_clear_error(tmp_path, monkeypatch):
    from values_seg.orientation import HIGHER_IS_UNCERTAIN, LOWER_IS_UNCERTAIN, orientation

    assert orientation(registry.get("aggregation", "gearys_c").obj) == LOWER_IS_UNCERTAIN
    assert orientation(registry.get("aggregation", "morans_i").obj) == HIGHER_IS_UNCERTAIN

    def plain(umap):  # a third party's function: the usual orientation unless it declares one
        """Mean of the map."""
        return float(umap.mean())

    assert orientation(plain) == HIGHER_IS_UNCERTAIN
    (tmp_path / "acme_sideways.py").write_text(
        "from values_seg import hookimpl\n"
        "def sideways(umap):\n    '''Mean of the map.'''\n    return float(umap.mean())\n"
        "sideways.fit = lambda maps, predictions: sideways\n"
        "sideways.orientation = 'sideways'\n"
        "@hookimpl\ndef values_seg_aggregations():\n    return [sideways]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry(builtins=False, entry_points=False)
    with pytest.raises(RegistryError, match="acme_sideways: aggregation 'sideways': orientation must be one of "
                                            "'higher_is_uncertain', 'lower_is_uncertain', got 'sideways'"):
        reg.load("acme_sideways")
    sys.modules.pop("acme_sideways", None)
