"""A config is checked in one place: the loader raises only for what it cannot parse or what its
schema does not know; every other check, and every object a check builds, is in config/checks.py."""

from __future__ import annotations

import ast
from pathlib import Path

from values_seg.config.checks import preflight
from values_seg.config.loading import load_config

from tiny import tiny_config, toy

ROOT = Path(__file__).parents[3]


def _raisers(root: Path) -> dict[str, int]:
    """{module: how many ``raise ConfigError(...)``} over the core's code."""
    found: dict[str, int] = {}
    for path in sorted((root / "values_seg").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                    and getattr(node.exc.func, "id", None) == "ConfigError":
                key = path.relative_to(root).as_posix()
                found[key] = found.get(key, 0) + 1
    return found


def test_config_checks_live_in_one_module():
    raisers = _raisers(ROOT)
    assert set(raisers) <= {"values_seg/config/checks.py", "values_seg/config/loading.py"}, raisers
    assert raisers["values_seg/config/checks.py"] > raisers["values_seg/config/loading.py"]


def test_the_scan_finds_a_check_elsewhere(tmp_path):
    (tmp_path / "values_seg" / "runner").mkdir(parents=True)
    (tmp_path / "values_seg" / "runner" / "x.py").write_text("def f():\n    raise ConfigError('config x: no')\n")
    assert _raisers(tmp_path) == {"values_seg/runner/x.py": 1}


def test_trackers_are_built_once_by_the_preflight(tmp_path):
    unlabelled = {"name": "toy", "params": toy("1")["params"]}
    exp = load_config(base=tiny_config(name="t", device="cpu", datasets=[unlabelled], aggregations=[],
                                       tracking={"tensorboard": {"dir": str(tmp_path / "tb")}}))
    first = preflight(exp)
    assert [type(t).__name__ for t in first] == ["TensorBoardTracker"]
    assert preflight(exp) is first  # the runner's call gets the same trackers, checked once


def test_a_derived_model_needs_backbones_as_the_model_it_wraps():
    from values_seg.config.checks import _uses_backbone

    assert _uses_backbone("temperature_scaled", {"model": "ensemble", "model_params": {"members": 2}})
    assert not _uses_backbone("temperature_scaled", {"model": "nnunet", "model_params": {"model_folder": "x"}})
    assert not _uses_backbone("nnunet", {}) and _uses_backbone("deterministic", {})
