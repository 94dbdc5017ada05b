"""ggstack: a fork's carry patches as a reviewable series, replayed onto a moving base.

The package is organised by the stages of the pipeline: ``series``
(load/save the stored stack), ``replay`` (apply), ``check`` (check),
``testing`` (test), ``pr`` (pr, through a ``forge``), ``report`` and ``sync`` (sync).
``model`` holds the vocabulary they pass around, ``git`` is the one module
that runs git.
"""

__version__ = "0.1.0"
