"""Model backends: lazy loading from hub ids or local paths, offline by default, batched, cached.

Capabilities (see :mod:`.protocols`) are what tasks ask for; backends (see :mod:`.catalog`) are
concrete models that provide them.  Importing this package imports no ML framework.
"""
