"""The stored stack, ``patches/<stack>/``: its directory, stack.toml, series file and patch files."""
