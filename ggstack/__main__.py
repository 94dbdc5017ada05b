"""Allows ``python -m ggstack``."""

from ggstack.gcpause import paused

with paused():  # start-up builds thousands of objects, none of them garbage
    from ggstack.cli import main

main()
