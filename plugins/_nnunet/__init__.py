"""nnU-Net v2 integration, shared by the ``nnunet`` prediction model and the ``nnunet_raw`` dataset:
a model folder as a sampler (:mod:`.model`), the export to nnU-Net's raw format (:mod:`.export`) and
a tiny test model folder (:mod:`.testing`). nnU-Net itself is imported lazily: importing this
package is cheap. Details: docs/design-rationale.md, "nnU-Net".
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
