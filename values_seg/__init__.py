"""values-seg: systematic validation of uncertainty estimation for semantic segmentation.

Components C0-C3 (backbone, prediction model, uncertainty measure, aggregation), datasets and
downstream tasks are pluggy plugins; see :mod:`values_seg.registry` and
:mod:`values_seg.hookspecs`. Reference: Kahl, Lüth et al., "ValUES", ICLR 2024.
"""

# pyarrow before torch: with torch loaded first, pyarrow's parquet reader can crash sporadically
# (apache/arrow#2637, pytorch/pytorch#22447; seen here as a segfault in read_parquet under load).
import pyarrow.parquet  # noqa: F401  (import order only)

from values_seg.hookspecs import hookimpl
from values_seg.registry import component

__version__ = "0.1.0"
__all__ = ["hookimpl", "component", "__version__"]
