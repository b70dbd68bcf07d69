"""values-seg: systematic validation of uncertainty estimation for semantic segmentation.

Components C0-C3 (backbone, prediction model, uncertainty measure, aggregation), datasets and
downstream tasks are pluggy plugins; see :mod:`values_seg.registry` and
:mod:`values_seg.hookspecs`. Reference: Kahl, Lüth et al., "ValUES", ICLR 2024.
"""

from values_seg.hookspecs import hookimpl
from values_seg.registry import component

__version__ = "0.1.0"
__all__ = ["hookimpl", "component", "__version__"]
