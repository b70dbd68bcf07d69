"""A user's data set in nnU-Net v2's raw layout (the ``nnunet_raw`` dataset plugin) and the
``values-seg validate-nnunet`` command that validates a trained nnU-Net's uncertainty on it.

Importing this package is cheap (SimpleITK, pandas and nnU-Net are imported where used). Its
modules, one per concern: docs/design-rationale.md, "A data set in nnU-Net's raw layout".
"""

from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError

__all__ = ["LayoutError"]
