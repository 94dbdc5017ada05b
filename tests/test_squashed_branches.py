"""A PR branch upstream squash-merged after review is represented whole, member by member.

The classes found on real PR branches that live in the upstream repository (diffusers,
accelerate, peft): a branch that merged main into itself several times, whose later commits
rework or take out earlier commits' lines, with small follow-ups ("fix", "lint"), squash-merged
as it was (the branch's net change has the squash's patch-id) or adapted in review (the squash
has a line of its own, and lacks one the review took out); a commit made after the PR stays out.
And the converses: a branch upstream never took, and a follow-up whose replay is empty only
because the earlier commit it changes is not in the base.
"""

from __future__ import annotations

from test_check import LINES, OTHER, edited, text
from test_check_classes import stack_of, world  # noqa: F401  (the fixture)

from ggstack.check.stack import check_stack
from ggstack.model import Recommendation, Verdict


def _merge_main(world) -> None:  # noqa: F811
    world.git("checkout", "-q", "main")
    world.commit("upstream moves on", {f"up{len(world.git('log', '--oneline').splitlines())}.txt": "u\n"}, author=OTHER)
    world.git("checkout", "-q", "pr")
    world.git("merge", "-q", "--no-ff", "-m", "Merge branch 'main' into pr", "main")


FINAL = {
    "l2": ["line 2", "import limiter"],
    "l10": ["line 10", "limit = 25", "burst = 5"],
    "l30": "check(limit, burst)",
}


def _a_reviewed_branch(world) -> list[str]:  # noqa: F811
    """Five commits on a PR branch with two merges of main between them: a debug line added then
    taken out, a rename of an earlier commit's line, a one-line "fix"."""
    world.git("checkout", "-q", "-b", "pr", "main")
    a = world.commit("add rate limiter", {"f.txt": text(edited(LINES, l2=FINAL["l2"], l10=["line 10", "lim = 10"]))})
    _merge_main(world)
    b = world.commit(
        "debug the limiter",
        {"f.txt": text(edited(LINES, l2=FINAL["l2"], l10=["line 10", "lim = 10"], l20=["line 20", "print(lim)"]))},
    )
    c = world.commit(
        "per review: rename lim, add burst",
        {"f.txt": text(edited(LINES, l2=FINAL["l2"], l10=FINAL["l10"], l20=["line 20", "print(limit)"]))},
    )
    _merge_main(world)
    d = world.commit("fix", {"f.txt": text(edited(LINES, **FINAL, l20=["line 20", "print(limit)"]))})
    e = world.commit("lint", {"f.txt": text(edited(LINES, **FINAL))})
    world.git("checkout", "-q", "main")
    return [a, b, c, d, e]


def _import_branch(world):  # noqa: F811
    repo, stack = stack_of(world, "main..pr")
    return {o.name[:4]: o for o in check_stack(repo, stack, "main").outcomes}


def test_a_branch_that_merged_main_squashed_as_it_was_is_represented_whole(world) -> None:  # noqa: F811
    """Class (diffusers, peft): the branch's net change, against the main it last merged, has the
    squash's patch-id; alone, the early commits conflict or look partial."""
    members = _a_reviewed_branch(world)
    squash = world.commit("Add a rate limiter (#91)", {"f.txt": text(edited(LINES, **FINAL))}, author=OTHER)
    v = _import_branch(world)
    assert [o.source_commit for o in v.values()] == members
    for o in v.values():
        assert o.verdict is Verdict.REPRESENTED and o.represented_by == [squash], (o.name, o.evidence)
        assert o.recommendation is Recommendation.DO_NOT_OPEN and len(o.group) == 5


def test_a_branch_squashed_after_review_is_represented_whole_and_a_later_commit_stays_out(world) -> None:  # noqa: F811
    """Class (diffusers, accelerate): review adapted the squash (a comment of its own where the
    branch had a blank, a tuned value) and its message lists the branch's commits. Every line of
    the branch's net change is in the squash's tree or where it wrote its own way; a commit made on
    the branch after the PR, which upstream never took, stays needed."""
    members = _a_reviewed_branch(world)
    world.git("checkout", "-q", "pr")
    after = world.commit(
        "a tweak upstream never took", {"f.txt": text(edited(LINES, **FINAL, l35=["line 35", "tweak = True"]))}
    )
    world.git("checkout", "-q", "main")
    reviewed = {**FINAL, "l10": ["line 10", "limit = 25", "burst = 8  # reviewed"]}
    message = "Add a rate limiter (#92)\n\n* add rate limiter\n\n* debug the limiter\n\n* fix\n"
    squash = world.commit(message, {"f.txt": text(edited(LINES, **reviewed))}, author=OTHER)
    v = _import_branch(world)
    assert [o.source_commit for o in v.values()] == [*members, after]
    for name in ("0001", "0002", "0003", "0004", "0005"):
        assert v[name].verdict is Verdict.REPRESENTED and v[name].represented_by == [squash], (name, v[name].evidence)
    assert v["0006"].verdict is not Verdict.REPRESENTED and v["0006"].recommendation is not Recommendation.DO_NOT_OPEN


def test_a_branch_whose_lines_an_unrelated_rewrite_touched_is_not_represented(world) -> None:  # noqa: F811
    """The converse: upstream rewrote the same region for its own reasons (another limit, no burst);
    the branch's net change is not that commit's: its members stay needed."""
    _a_reviewed_branch(world)
    world.commit("rework limits", {"f.txt": text(edited(LINES, l10=["line 10", "rate = 3"]))}, author=OTHER)
    v = _import_branch(world)
    assert all(o.verdict is not Verdict.REPRESENTED for o in v.values()), {o.name: o.verdict for o in v.values()}


def test_a_follow_up_empty_only_because_its_earlier_commit_is_not_in_the_base_is_needed(world) -> None:  # noqa: F811
    """Class (diffusers' "clean up" commits): the second commit takes out a line the first added;
    the first conflicts with the base, so replaying the second onto a tip without it changes
    nothing. That is no evidence the base has it: its revert of the first's line is still needed."""
    world.git("checkout", "-q", "-b", "pr", "main")
    world.commit("add a limit and a note", {"f.txt": text(edited(LINES, l10="limit = 10", l20=["line 20", "note"]))})
    world.commit("clean up", {"f.txt": text(edited(LINES, l10="limit = 10"))})
    world.git("checkout", "-q", "main")
    world.commit("upstream retunes", {"f.txt": text(edited(LINES, l10="limit = 99"))}, author=OTHER)
    v = _import_branch(world)
    assert v["0001"].verdict is Verdict.CONFLICT
    assert v["0002"].verdict is not Verdict.REPRESENTED, v["0002"].evidence
    assert any("only because 0001" in e.detail for e in v["0002"].evidence)
