"""Reference sets (ESC-50, OpenMIC-2018-style, GTZAN folders) indexed into embedding matrices."""

from .index import ReferenceEmbedder, ReferenceIndex
from .layouts import LAYOUTS, ReferenceFile, scan

__all__ = ["LAYOUTS", "ReferenceEmbedder", "ReferenceFile", "ReferenceIndex", "scan"]
