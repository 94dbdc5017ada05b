"""The cyclic garbage collector, paused where ggstack builds a great many objects that reference counts free: its walks
free nothing (sqlalchemy rel_1_4 onto main: a third of the CPU; start-up a tenth faster without them)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused(*, keep: bool = False) -> Iterator[None]:
    """``keep``: what exists at the end lives as long as the process (start-up's modules and classes):
    frozen out of sight (``gc.freeze``), not walked by the first collection after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        if was:
            gc.enable()
