"""``ggstack check``: is each patch already in the base — by which commits, on what evidence.

Two front ends of one judgement: ``stack.check_stack`` (a stored series, cumulatively, as its
PRs would be stacked) and ``commits.check_commits`` (commits each on their own, like ``git
cherry``). The modules, in the order a candidate meets them: ``history`` (the base range, read
once), ``containment``, ``attribution`` and ``own`` (which lines are there, who brought them,
which are the fork's own), ``signals`` (each signal as facts and evidence), ``groups`` (runs of
patches the base has together), ``rules`` (the verdict table, and the tests folded onto it),
``remaining`` (the diff a partial patch still adds).
"""
