"""ggstack: a fork's carry patches as a reviewable series, replayed onto a moving base. One package a pipeline stage:
``series``, ``replay``, ``check``, ``testing``, ``pr`` (through a ``forge``), ``report``, ``sync``; ``model`` holds the
vocabulary they pass around; ``git`` is the one module that runs git."""

__version__ = "0.1.0"
