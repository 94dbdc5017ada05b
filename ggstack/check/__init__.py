"""``ggstack check``: is each patch already in the base — by which commits, on what evidence.

Two front ends of one judgement: ``stack`` (a stored series, cumulatively, as its PRs would be
stacked) and ``commits`` (commits each on their own, like ``git cherry``). A candidate meets
``history``, ``containment``, ``attribution``, ``own``, ``signals``, ``groups``, ``rules``.
"""
