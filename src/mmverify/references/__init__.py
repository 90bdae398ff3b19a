"""Reference sets (ESC-50, OpenMIC-2018-style, GTZAN folders) indexed into embedding matrices."""

from .index import LAYOUTS, ReferenceEmbedder, ReferenceFile, ReferenceIndex, scan

__all__ = ["LAYOUTS", "ReferenceEmbedder", "ReferenceFile", "ReferenceIndex", "scan"]
