"""The stored stack, ``patches/<stack>/``: ``store`` (the directory), ``config`` (stack.toml),
``branchnames``, ``seriesfile``, ``patchfile``, ``mailheaders``, ``order`` (renumbering)."""
