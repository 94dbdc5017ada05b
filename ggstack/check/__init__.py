"""``ggstack check``: is each patch already in the base, by which commits, on what evidence. Two front ends of one
judgement: ``stack`` (a series, cumulatively, as its PRs stack) and ``commits`` (each alone, like ``git cherry``)."""
