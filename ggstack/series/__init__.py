"""The stored stack, ``patches/<stack>/``: ``store`` reads and writes the directory whole;
``config`` is its ``stack.toml`` (``branchnames``: the branches it names), ``seriesfile``
its ``series``, ``patchfile`` one ``.patch`` (``mailheaders``: its From and Subject);
``order`` renumbers the series after a move or removal."""
