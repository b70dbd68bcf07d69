"""Make pylidc 0.2.3 (its last release) work on current numpy, setuptools and Python: use
:func:`import_pylidc` instead of ``import pylidc``.

The four fixes: docs/design-rationale.md, "LIDC-IDRI"; in short: docs/guides/lidc.md.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import sys
import types
import warnings
from contextlib import contextmanager
from pathlib import Path

#: the pylidc release this module was written for
PYLIDC_VERSION = "0.2.3"
#: environment variable naming the DICOM folder for pylidc's own image loading
DICOM_ROOT_ENV = "VALUES_SEG_LIDC_DICOM_ROOT"
#: pylidc's modules that use numpy's removed aliases
_NUMPY_USERS = ("pylidc.Annotation", "pylidc.Contour", "pylidc.Scan", "pylidc.utils",
                "pylidc.annotation_distance_metrics")

_dicom_root: Path | None = None


class _NumpyWithAliases(types.ModuleType):
    """numpy, plus the aliases ``int``, ``float`` and ``bool`` removed in numpy 1.24."""

    _aliases = {"int": builtins.int, "float": builtins.float, "bool": builtins.bool}

    def __init__(self):
        import numpy

        super().__init__("numpy")
        self._numpy = numpy

    def __getattr__(self, name: str):
        if name in self._aliases:
            return self._aliases[name]
        return getattr(self._numpy, name)


def _resource_filename(package: str, resource: str) -> str:
    """``pkg_resources.resource_filename`` for a resource beside a package's ``__init__``."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"pylidc_compat: cannot locate package {package!r}")
    return str(Path(next(iter(spec.submodule_search_locations))) / resource)


@contextmanager
def _import_shims():
    """Stand-ins for ``pkg_resources`` and ``scipy.ndimage.morphology`` while pylidc imports."""
    saved = {name: sys.modules.get(name) for name in ("pkg_resources", "scipy.ndimage.morphology")}
    stand_in = types.ModuleType("pkg_resources")
    stand_in.resource_filename = _resource_filename
    sys.modules["pkg_resources"] = stand_in
    try:
        import scipy.ndimage

        try:
            importlib.import_module("scipy.ndimage.morphology")
        except ImportError:
            sys.modules["scipy.ndimage.morphology"] = scipy.ndimage
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQLAlchemy 2's MovedIn20Warning, scipy's deprecations
            yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _configured_dicom_root() -> str:
    """Replacement of pylidc's ``~/.pylidcrc`` lookup: never reads or writes the home folder."""
    root = _dicom_root or os.environ.get(DICOM_ROOT_ENV)
    if not root:
        raise RuntimeError("pylidc needs the LIDC-IDRI DICOM folder for images: call "
                           "values_seg_plugins.datasets._lidc.pylidc_compat.set_dicom_root(PATH) or set "
                           f"{DICOM_ROOT_ENV} (~/.pylidcrc is not used)")
    return str(root)


def _patch(pylidc) -> None:
    numpy_view = _NumpyWithAliases()
    for name in _NUMPY_USERS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "np"):
            module.np = numpy_view
    sys.modules["pylidc.Scan"]._get_dicom_file_path_from_config_file = _configured_dicom_root
    pylidc._values_seg_compat = True


def import_pylidc():
    """The pylidc package, made to work on current numpy / setuptools / Python (see module doc)."""
    pylidc = sys.modules.get("pylidc")
    if pylidc is not None and getattr(pylidc, "_values_seg_compat", False):
        return pylidc
    if pylidc is None:
        if importlib.util.find_spec("pylidc") is None:
            raise ImportError("pylidc is not installed; install the LIDC extra: pip install 'values-seg[lidc]'")
        with _import_shims():
            pylidc = importlib.import_module("pylidc")
    if getattr(pylidc, "__version__", None) != PYLIDC_VERSION:
        warnings.warn(f"pylidc_compat was written for pylidc {PYLIDC_VERSION}, found {pylidc.__version__}")
    _patch(pylidc)
    return pylidc


def set_dicom_root(path: str | Path | None) -> None:
    """The folder pylidc's own image loading (``Scan.load_all_dicom_images``) searches."""
    global _dicom_root
    _dicom_root = Path(path) if path is not None else None
