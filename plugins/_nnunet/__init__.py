"""nnU-Net v2 integration, shared by the ``nnunet`` prediction model and the ``nnunet_raw`` dataset.

* :class:`NnUNetModel` (``values_seg_plugins._nnunet.model``): a trained nnU-Net v2 model folder as a
  sampler of softmax probabilities, one sample per fold (a fold ensemble) and, optionally, per
  test-time mirror, ``[S, C, *spatial]`` with ``S = folds × mirrors``. The ``nnunet`` C1 plugin
  (``plugins/prediction_models/nnunet.py``) wraps it.
* :func:`export_dataset` / :func:`export_command` (``values_seg_plugins._nnunet.export``): write any
  values-seg dataset in nnU-Net's raw format, to train nnU-Net on it.
* ``values_seg_plugins._nnunet.testing``: a tiny model folder from hand-made plans and random weights.

nnU-Net itself is imported lazily: importing this package is cheap.
"""

from values_seg_plugins._nnunet.export import ExportError, export_command, export_dataset, majority_vote
from values_seg_plugins._nnunet.model import NnUNetModel, NnUNetModelError, available_folds, mirror_combinations

__all__ = [
    "NnUNetModel",
    "NnUNetModelError",
    "available_folds",
    "mirror_combinations",
    "export_dataset",
    "export_command",
    "ExportError",
    "majority_vote",
]
