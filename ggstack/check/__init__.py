"""``ggstack check``: is each patch already in the base — by which commits, on what evidence.

Two front ends of one judgement: ``stack`` (a stored series, cumulatively, as
its PRs would be stacked) and ``commits`` (commits each on their own, like
``git cherry``). The modules, in the order a candidate meets them: ``history``
(the base range, read once), ``containment`` and ``attribution`` (which lines
are there, and who brought them), ``signals`` (each signal as facts and
evidence), ``groups`` (runs of patches the base has together), ``rules`` (the
verdict table), ``remaining`` (the diff a partial patch still adds).
"""

from ggstack.check.commits import commits
from ggstack.check.stack import stack

__all__ = ["commits", "stack"]
