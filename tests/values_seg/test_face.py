"""The public face: every contract a plugin author needs, from ``values_seg`` itself, each name the
object its defining module holds, loaded on first use (importing values-seg loads no torch), and
the documentation's list the same as the code's."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import values_seg

ROOT = Path(__file__).resolve().parents[2]


def test_every_name_of_the_face_is_its_modules_object():
    for name, module in values_seg.FACE.items():
        assert getattr(values_seg, name) is getattr(importlib.import_module(module), name), name
    assert values_seg.hookimpl is importlib.import_module("values_seg.hookspecs").hookimpl


def test_importing_values_seg_loads_no_torch():
    code = "import sys, values_seg; from values_seg import hookimpl; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_architecture_page_lists_the_face():
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("### The public face"):text.index("### Layering")]
    listed = re.search(r"`from values_seg import ([^`]+)`", section.replace("\n", " ")).group(1)
    assert [n.strip() for n in listed.split(",")] == ["hookimpl", *values_seg.FACE]


def test_the_outside_plugin_takes_its_contracts_from_the_face():
    """A third party's modules import each contract from ``values_seg``, never from the core's packages."""
    for path in sorted((ROOT / "tests" / "outside_plugin" / "values_seg_example").glob("*.py")):
        for line in path.read_text().splitlines():
            for name in values_seg.FACE:
                if re.match(rf"from values_seg\.\S+ import .*\b{name}\b", line):
                    raise AssertionError(f"{path.name}: {line!r} (import {name} from values_seg)")
