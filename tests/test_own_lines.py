"""A patch is represented only when all of it is: the fork's own lines are never outweighed.

The classes found on real forks: an adapted pick (``cherry-pick -x X`` plus lines of the fork's
own, in X's file or in a new file) whose X is in the base; the same pick cut down by ``refresh``
to its own lines; a patch whose only "present" lines are ones it removes, which the base took
out for its own reasons. Each as the smallest history that has it.
"""

from __future__ import annotations

from test_check import LINES, OTHER, edited, judge, kinds, on, rule, text
from test_check_classes import stack_of, world  # noqa: F401  (the fixture)

from ggstack.check.stack import check_stack
from ggstack.model import Recommendation, Verdict

OWN = "fork_tuning = 7  # the fork's own"


def _upstream_fix(world) -> str:  # noqa: F811
    """X: upstream's fix on main, changing line 5."""
    return world.commit("fix the guard", {"f.txt": text(edited(LINES, l5="guard = True"))}, author=OTHER)


def _adapted(world, x: str, files: dict) -> str:  # noqa: F811
    """The fork's pick of X (on X's parent), with lines of its own, and git's -x line."""
    world.git("checkout", "-q", "-b", "fork-work", f"{x}^")
    sha = world.commit(f"fix the guard\n\n(cherry picked from commit {x})", files)
    world.git("checkout", "-q", "main")
    return sha


def test_an_adapted_pick_of_a_base_commit_is_partial_its_remaining_diff_the_fork_lines(world) -> None:  # noqa: F811
    """Class (a fork's carry patches checked onto the upstream they were picked from): X is an
    ancestor of the base, the pick carries a line of the fork's own where the base never
    touched. Not "represented — do not open" on X's name: partial, by X, the PR the own line."""
    x = _upstream_fix(world)
    world.commit("unrelated upstream work", {"other.txt": "other, changed\n"}, author=OTHER)
    f = _adapted(world, x, {"f.txt": text(edited(LINES, l5="guard = True", l30=OWN))})
    o = judge(world, f)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert rule(o) == "adapted pick" and x in o.represented_by
    assert o.recommendation is Recommendation.OPEN_PR
    added = [line for line in (o.remaining_diff or "").splitlines() if line.startswith("+") and "+++" not in line]
    assert added == [f"+{OWN}"]
    assert o.text is not None and o.text.own_lines and "fork_tuning" in o.text.own_lines[0]


def test_an_adapted_pick_with_a_new_file_of_the_fork_is_partial(world) -> None:  # noqa: F811
    x = _upstream_fix(world)
    f = _adapted(world, x, {"f.txt": text(edited(LINES, l5="guard = True")), "fork_local.py": f"{OWN}\n"})
    o = judge(world, f)
    assert o.verdict is Verdict.PARTIAL and x in o.represented_by, o.evidence
    assert "fork_local.py" in (o.remaining_diff or "") and "guard = True" not in (o.remaining_diff or "")
    assert any("fork's own" in e.detail for e in kinds(o)["content"])


def test_a_pick_cut_down_to_its_own_lines_is_never_represented_by_its_pick(world) -> None:  # noqa: F811
    """Class (``refresh`` after a conflict left only the fork's own hunk, its Cherry-picked-from
    still naming X): the identity names X, but none of the patch is in the base."""
    x = _upstream_fix(world)
    world.commit("upstream changes the guard again", {"f.txt": text(edited(LINES, l5="guard = 2"))}, author=OTHER)
    f = _adapted(world, x, {"f.txt": text(edited(LINES, l30=OWN))})
    repo, stack = stack_of(world, f)
    (o,) = check_stack(repo, stack, "main").outcomes
    assert stack.patches[0].provenance.cherry_picked_from == x
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert o.recommendation is Recommendation.OPEN_PR
    assert x in o.represented_by and o.represented_fraction == 0.0
    assert f"+{OWN}" in (o.remaining_diff or "")
    assert o.text is not None and len(o.text.own_lines) == 1


def test_an_exact_pick_the_base_changed_since_stays_represented(world) -> None:  # noqa: F811
    """The control: an exact pick whose line the base changed later has no line of the fork's own."""
    x = _upstream_fix(world)
    world.commit("upstream changes the guard again", {"f.txt": text(edited(LINES, l5="guard = 2"))}, author=OTHER)
    f = _adapted(world, x, {"f.txt": text(edited(LINES, l5="guard = True"))})
    o = judge(world, f)
    assert o.verdict is Verdict.REPRESENTED and x in o.represented_by, o.evidence
    assert o.text is not None and o.text.own_lines == []


def test_lines_it_only_removes_taken_out_by_an_unrelated_commit_earn_no_partial(world) -> None:  # noqa: F811
    """Class (the converse trap): upstream gutted a file for its own reasons; the patch's removed
    lines are gone, its added ones are not there. A removal alone, by a commit with no tie to the
    patch, is no evidence: needed, not partial."""
    c = on(world, "fork", "replace the old limits", {"f.txt": text(edited(LINES, l12=None, l13=None, l30=OWN))})
    world.commit(
        "drop the legacy section", {"f.txt": text(edited(LINES, l10=None, l11=None, l12=None, l13=None, l14=None))}
    )
    o = judge(world, c)
    assert o.verdict in (Verdict.UNIQUE, Verdict.CONFLICT), o.evidence
    assert rule(o) == "needed"
    assert "only lines it removes" in kinds(o)["rule"][0].detail
