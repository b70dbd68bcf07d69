"""A user's data set in nnU-Net v2's raw layout (the ``nnunet_raw`` dataset plugin) and the
``values-seg validate-nnunet`` command that validates a trained nnU-Net's uncertainty on it.

* :mod:`.dataset_json` — ``dataset.json``: channels, labels (regions, ignore), file ending.
* :mod:`.layout` — the files: cases, channels, the raters convention, header geometry checks.
* :mod:`.reading` — pixel data, label values checked against ``dataset.json``.
* :mod:`.geometry` — spacing/origin/direction kept per case, written back with SimpleITK.
* :mod:`.declarations`, :mod:`.splits`, :mod:`.plan` — the cases CSV, nnU-Net's splits, who is where.
* :mod:`.support` — which tasks a data set supports.
* :mod:`.maps` — uncertainty maps as NIfTI in each case's geometry.
* :mod:`.validate` — the ``validate-nnunet`` command.
* :mod:`.testing` — a small multi-rater data set written in the raw layout (tests, examples).

Importing this package is cheap (SimpleITK, pandas and nnU-Net are imported where used).
"""

from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError

__all__ = ["LayoutError"]
