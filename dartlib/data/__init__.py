"""Data: dataset sources, CIFAR-C corruptions, label-shift protocols (Sections 2 and 5, Appendix A)."""

from dartlib.data.corruptions import CORRUPTIONS, corrupt
from dartlib.data.protocols import (
    PROTOCOLS,
    batches,
    cached,
    class_balanced,
    dirichlet_stream,
    iid_order,
    long_tailed,
    online_imbalance,
)
from dartlib.data.sources import SOURCES, load
from dartlib.data.dataset import DataMissingError, Dataset

__all__ = [
    "CORRUPTIONS",
    "PROTOCOLS",
    "SOURCES",
    "DataMissingError",
    "Dataset",
    "batches",
    "cached",
    "class_balanced",
    "corrupt",
    "dirichlet_stream",
    "iid_order",
    "load",
    "long_tailed",
    "online_imbalance",
]
