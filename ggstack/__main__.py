"""Allows ``python -m ggstack``."""

from ggstack.cli import main

main()
