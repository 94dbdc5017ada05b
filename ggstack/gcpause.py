"""The cyclic garbage collector, paused where ggstack builds a great many objects at once.

CPython's collector runs every few hundred allocations and, now and then, walks every
container the process holds. A check holds the lines of thousands of file versions and
their alignments (hundreds of MB of lists); each walk of them finds nothing to free, since
what a check drops is freed by its reference counts as it goes. On sqlalchemy's rel_1_4
onto main a third of the CPU was those walks; start-up (dozens of dataclasses and the
command table built) is a tenth faster without them. Paused, not off: the collector is back
on, as it was, when the block ends.

Start-up's objects (modules, classes, the command table) live as long as the process, and
each of them would be walked by the first collection after the pause, since all of them are
the young generation then: ``keep`` moves what the block made out of the collector's sight
(``gc.freeze``), as a process that is to live with them would.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused(*, keep: bool = False) -> Iterator[None]:
    """No cyclic collection inside the block (reference counting frees as always); with
    ``keep``, what exists when it ends is never walked again (only for what lives to the end)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        if was:
            gc.enable()
