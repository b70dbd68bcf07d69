"""The tiny experiment config of the tests has one home, ``tests/helpers/tiny.py``: a test module takes
it with ``tiny_config(**changes)``, and never writes its own copy again."""

from __future__ import annotations

import ast
from pathlib import Path

from tiny import tiny_config, toy

TESTS = Path(__file__).parent
HOME = Path("helpers/tiny.py")


def _keys(node: ast.AST) -> dict[str, ast.AST]:
    """The string keys of a dict literal (``{...}``) or of a ``dict(...)`` call, with their values."""
    if isinstance(node, ast.Dict):
        return {k.value: v for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {k.arg: k.value for k in node.keywords if k.arg}
    return {}


def _constant(node: ast.AST | None):
    return node.value if isinstance(node, ast.Constant) else None


def _is_toy(entry: ast.AST) -> bool:
    """A toy data set: ``{"name": "toy", ...}`` or the home's ``toy(...)``."""
    if isinstance(entry, ast.Call) and isinstance(entry.func, ast.Name) and entry.func.id == "toy":
        return True
    return _constant(_keys(entry).get("name")) == "toy"


def _is_tiny_unet(entry: ast.AST) -> bool:
    """The tiny U-Net: ``{"name": "unet", "params": {"base_width": 4}}``."""
    keys = _keys(entry)
    return _constant(keys.get("name")) == "unet" and _constant(_keys(keys.get("params")).get("base_width")) == 4


def _is_tiny_config(node: ast.AST) -> bool:
    """A whole tiny config: a recipe, the tiny U-Net and the toy data (a config of other data or of
    another network, e.g. the paper's recipe on a full-size U-Net, is no copy)."""
    keys = _keys(node)
    datasets, backbones = keys.get("datasets"), keys.get("backbones")
    return ("recipe" in keys and isinstance(datasets, ast.List) and any(_is_toy(e) for e in datasets.elts)
            and isinstance(backbones, ast.List) and any(_is_tiny_unet(e) for e in backbones.elts))


def copies(root: Path) -> list[str]:
    """``path:line`` of every tiny config written out in a test module under ``root`` (anywhere in
    it: at module level, in a function, in a return), the home's own excepted."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root) == HOME:
            continue
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{path.relative_to(root).as_posix()}:{node.lineno}" for node in ast.walk(tree)
                  if _is_tiny_config(node)]
    return found


def test_no_test_module_writes_its_own_tiny_config():
    assert copies(TESTS) == [], "take the tiny config from tests/helpers/tiny.py: tiny_config(**changes)"


def test_the_scan_finds_a_copy_anywhere_in_a_module_and_not_in_the_home(tmp_path):
    (tmp_path / "helpers").mkdir()
    (tmp_path / HOME).write_text((TESTS / HOME).read_text())
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "test_copy.py").write_text(
        'TINY = {"name": "t", "datasets": [{"name": "toy", "params": {"scenario": "1"}}],\n'
        '        "backbones": [{"name": "unet", "params": {"base_width": 4}}], "recipe": {"epochs": 1}}\n'
        "\n"
        "def tiny(**changes):\n"
        '    return dict(datasets=[toy("2")], backbones=[{"name": "unet", "params": {"base_width": 4}}],\n'
        '                recipe={"epochs": 2}, **changes)\n'
        "\n"
        'OTHER = {"datasets": [{"name": "squares"}], "backbones": [{"name": "unet", "params": {"base_width": 4}}],\n'
        '         "recipe": {"epochs": 1}}\n'
        'PAPER = {"datasets": [{"name": "toy"}], "backbones": ["unet"], "recipe": {"epochs": 15}}\n'
        'CHANGED = tiny_config(name="mine", recipe={"epochs": 3})\n')
    assert copies(tmp_path) == ["deep/test_copy.py:1", "deep/test_copy.py:5"]


def test_a_change_replaces_the_base_s_value_whole_in_a_fresh_copy():
    base = tiny_config()
    assert base["recipe"] == {"epochs": 1} and base["datasets"] == [toy("2")]
    assert tiny_config(recipe={"batch_size": 4})["recipe"] == {"batch_size": 4}  # no deep merge
    assert tiny_config(device="cpu") == {**base, "device": "cpu"}
    base["datasets"][0]["params"]["size"] = 64
    assert tiny_config()["datasets"][0]["params"]["size"] == 32
    assert toy("3b", train_cases=12, pool_iid=4)["params"] == {"scenario": "3b", "dims": 2, "size": 32,
                                                              "train_cases": 12, "val_cases": 4, "pool_iid": 4}
