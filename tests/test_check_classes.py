"""``ggstack check`` on the shapes real history has: each class of error found
on real repositories (release-branch backports, squash-merged fork branches)
as the smallest history that reproduces it, and a test per rule of the
verdict table.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import test_check
from gitrepo import GitRepo
from test_check import LINES, OTHER, edited, judge, kinds, on, rule, text

from ggstack import git, importing
from ggstack.check import groups
from ggstack.check.commits import check_commits
from ggstack.check.rules import RULES, fold_table, markdown_table
from ggstack.check.signals import Candidate
from ggstack.check.stack import check_stack
from ggstack.model import Recommendation, Signal, Verdict
from ggstack.series import store

world = test_check.world  # the fixture, shared with test_check

FUNC = [
    "def area(w, h):",
    "    return w * h",
    "",
    "def perimeter(w, h):",
    "    return 2 * (w + h)",
    "",
]


def stack_of(world: GitRepo, *commits: str):
    repo = git.Repository(str(world.path))
    patches = world.path / "patches"
    if not (patches / "s").exists():
        store.init(str(patches), "s", "owner/repo", "main")
    stack = importing.commits(repo, store.load(str(patches), "s"), list(commits)).stack
    store.save(stack)
    return repo, store.load(str(patches), "s")


def stack_verdicts(world: GitRepo, *commits: str):
    repo, stack = stack_of(world, *commits)
    return {o.name[:4]: o for o in check_stack(repo, stack, "main").outcomes}


# -- a fork's branch that upstream squash-merged ------------------------------------------------


def _three_on_a_branch(world: GitRepo) -> list[str]:
    """A branch of three commits on one file: each changes what the one before added."""
    world.git("checkout", "-q", "-b", "feature", "main")
    a = world.commit("add rate limiter", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 10"]))})
    b = world.commit("tune the limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 25", "burst = 5"]))})
    c = world.commit(
        "use the limiter",
        {"f.txt": text(edited(LINES, l10=["line 10", "limit = 25", "burst = 5"], l30="check(limit, burst)"))},
    )
    world.git("checkout", "-q", "main")
    return [a, b, c]


def test_a_squash_of_a_branch_whose_review_fix_put_a_file_back_is_represented(world: GitRepo) -> None:
    """Class (pydantic's PRs): the first commit fixes a typo in two files, a review suggestion puts
    one file back as it was; the squash touches one file only. The run's combined change is the
    squash's, though the squash does not touch every file the run does."""
    world.commit("a second file", {"g.txt": text(LINES)}, author=OTHER)
    world.git("checkout", "-q", "-b", "feature", "main")
    first = world.commit(
        "docs: fix duplicate words",
        {"f.txt": text(edited(LINES, l10="the typo fixed")), "g.txt": text(edited(LINES, l3="the the fixed"))},
    )
    suggestion = world.commit("Apply suggestion from @reviewer", {"g.txt": text(LINES)})
    world.git("checkout", "-q", "main")
    world.commit("upstream works meanwhile", {"up.txt": "t\n"}, author=OTHER)
    world.git("merge", "-q", "--squash", "feature")
    world.git("commit", "-q", "-m", "Fix docstring typo (#13239)")
    squash = world.sha("HEAD")
    world.commit("upstream moves on", {"up.txt": "u\n"}, author=OTHER)
    v = stack_verdicts(world, first, suggestion)
    for name in ("0001", "0002"):
        o = v[name]
        assert o.verdict is Verdict.REPRESENTED, (name, o.evidence)
        assert o.represented_by == [squash] and rule(o) == "series"
        assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_squash_merged_branch_is_represented_by_its_squash_commit_member_by_member(world: GitRepo) -> None:
    other = on(world, "fork", "unrelated fork work", {"other.txt": "fork only\n"})
    members = _three_on_a_branch(world)
    world.commit("upstream moves on", {"up.txt": "u\n"}, author=OTHER)
    world.git("merge", "-q", "--squash", "feature")
    world.git("commit", "-q", "-m", "Rate limiter (#4242)")
    squash = world.sha("HEAD")
    world.commit("upstream moves on again", {"up.txt": "v\n"}, author=OTHER)
    v = stack_verdicts(world, other, *members)
    assert v["0001"].verdict is Verdict.UNIQUE
    for name in ("0002", "0003", "0004"):
        o = v[name]
        assert o.verdict is Verdict.REPRESENTED, (name, o.evidence)
        assert o.represented_by == [squash]
        assert o.recommendation is Recommendation.DO_NOT_OPEN
        assert rule(o) == "series"
        assert o.group == [v["0002"].name, v["0003"].name, v["0004"].name]
        group = kinds(o)["group"][0]
        assert group.detail.startswith(f"{v['0002'].name}–{v['0004'].name} together are in the base as {squash[:10]}")
        assert "patch-id" in group.detail
    # Alone, the first member conflicts: the squash changed its line again.
    assert v["0002"].applied.value == "conflict"


def test_a_branch_folded_into_a_bigger_commit_is_represented_by_it(world: GitRepo) -> None:
    members = _three_on_a_branch(world)
    world.commit("upstream moves on", {"up.txt": "u\n"}, author=OTHER)
    folded = world.commit(
        "Lifecycle rework (#77)",
        {
            "f.txt": text(
                edited(LINES, l1="LINE ONE", l10=["line 10", "limit = 25", "burst = 5"], l30="check(limit, burst)")
            ),
            "lifecycle.py": "def start():\n    return 1\n",
        },
        author=OTHER,
    )
    v = stack_verdicts(world, *members)
    for o in v.values():
        assert o.verdict is Verdict.REPRESENTED, (o.name, o.evidence)
        assert folded in o.represented_by
        assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_run_is_not_represented_when_only_part_of_it_is_there(world: GitRepo) -> None:
    members = _three_on_a_branch(world)
    world.commit(
        "only the first two, squashed", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 25", "burst = 5"]))}
    )
    v = stack_verdicts(world, *members)
    assert v["0001"].verdict is Verdict.REPRESENTED and v["0002"].verdict is Verdict.REPRESENTED
    assert v["0003"].verdict is Verdict.UNIQUE and v["0003"].recommendation is Recommendation.OPEN_PR


def _a_pr_that_reworks_itself(world: GitRepo) -> list[str]:
    """A PR branch whose commits rework each other's lines, then one commit upstream never took."""
    world.git("checkout", "-q", "-b", "pr", "main")
    a = world.commit(
        "add rate limiter",
        {"f.txt": text(edited(LINES, l2=["line 2", "import limiter"], l10=["line 10", "limit = 10"]))},
    )
    b = world.commit(
        "Add burst to the limiter",
        {"f.txt": text(edited(LINES, l2=["line 2", "import limiter"], l10=["line 10", "limit = 25", "burst = 5"]))},
    )
    c = world.commit(
        "use the limiter",
        {
            "f.txt": text(
                edited(
                    LINES,
                    l2=["line 2", "import limiter"],
                    l10=["line 10", "limit = 25", "burst = 5"],
                    l30="check(limit, burst)",
                )
            )
        },
    )
    world.git("checkout", "-q", "main")
    return [a, b, c]


SQUASHED = {
    "l2": ["line 2", "import limiter"],
    "l10": ["line 10", "limit = 25", "burst = 5"],
    "l30": "check(limit, burst)",
    "l36": ["line 36", "# reviewed: keep the burst small"],  # review adapted the squash: no patch-id of the run
}


def test_a_squash_that_names_the_pr_is_it_though_the_base_changed_its_lines_since(world: GitRepo) -> None:
    """Class: a squash-merged PR whose commits rework each other's lines, adapted in review and
    edited upstream since (neither its patch-id nor its lines at the tip match): the squash's
    title is a member's (with the code quotes merge titles get), and its own tree has the
    run's combined change. Every member is represented by it; a commit after the PR that
    upstream never took stays needed."""
    members = _a_pr_that_reworks_itself(world)
    world.git("checkout", "-q", "pr")
    never = world.commit(
        "a tweak upstream never took",
        {"f.txt": text(edited(LINES, **{**SQUASHED, "l36": "line 36", "l20": ["line 20", "tweak = True"]}))},
    )
    world.git("checkout", "-q", "main")
    world.commit("upstream moves on", {"up.txt": "u\n"}, author=OTHER)
    squash = world.commit("Add `burst` to the limiter (#77)", {"f.txt": text(edited(LINES, **SQUASHED))}, author=OTHER)
    since = world.commit(
        "strict checks", {"f.txt": text(edited(LINES, **{**SQUASHED, "l30": "check(limit, burst, strict=True)"}))}
    )
    v = stack_verdicts(world, *members, never)
    for name in ("0001", "0002", "0003"):
        o = v[name]
        assert o.verdict is Verdict.REPRESENTED, (name, [e.detail for e in o.evidence])
        assert o.represented_by == [squash]
        assert o.recommendation is Recommendation.DO_NOT_OPEN
        group = kinds(o)["group"][0]
        assert f"as {squash[:10]}" in group.detail and f"since modified by {since[:10]}" in group.detail
    assert v["0004"].verdict is not Verdict.REPRESENTED, [e.detail for e in v["0004"].evidence]
    assert v["0004"].recommendation is not Recommendation.DO_NOT_OPEN


def test_a_squash_of_a_pr_that_merged_main_in_is_found_across_main_s_commits(world: GitRepo) -> None:
    """A PR branch that merged main into itself is imported as git rebase replays it: main's
    commit sits between the PR's own. git finds that one; the PR's own are the squash's."""
    world.git("checkout", "-q", "-b", "pr", "main")
    a = world.commit(
        "add rate limiter",
        {"f.txt": text(edited(LINES, l2=["line 2", "import limiter"], l10=["line 10", "limit = 10"]))},
    )
    world.git("checkout", "-q", "main")
    up = world.commit("upstream moves on", {"up.txt": "u\n"}, author=OTHER)
    world.git("checkout", "-q", "pr")
    world.git("merge", "-q", "--no-ff", "-m", "Merge branch 'main' into pr", "main")
    b = world.commit(
        "Add burst to the limiter",
        {"f.txt": text(edited(LINES, l2=["line 2", "import limiter"], l10=["line 10", "limit = 25", "burst = 5"]))},
    )
    world.git("checkout", "-q", "main")
    squash = world.commit(
        "Add burst to the limiter (#78)",
        {"f.txt": text(edited(LINES, l2=["line 2", "import limiter"], l10=["line 10", "limit = 25", "burst = 5"]))},
        author=OTHER,
    )
    repo = git.Repository(str(world.path))
    store.init(str(world.path / "patches"), "s", "owner/repo", "main")
    # --keep-merged: the stack holds main's commit between the PR's own, as a series imported so does.
    imported = importing.commits(repo, store.load(str(world.path / "patches"), "s"), [f"{up}~1..{b}"], keep_merged=True)
    store.save(imported.stack)
    v = {o.name[:4]: o for o in check_stack(repo, store.load(str(world.path / "patches"), "s"), "main").outcomes}
    assert [o.source_commit for o in v.values()] == [a, up, b]
    for o in v.values():
        assert o.verdict is Verdict.REPRESENTED, (o.name, [e.detail for e in o.evidence])
    assert v["0001"].represented_by == [squash] and v["0003"].represented_by == [squash]
    assert v["0002"].represented_by == [up]


# -- release-branch picks: spurious partials, moved code, modified and reverted picks ------------


def test_a_handful_of_common_lines_is_not_a_partial(world: GitRepo) -> None:
    """Class: spurious partials. A removal of a line the base never had, and
    lines that carry no information, are no evidence the base took anything."""
    world.git("checkout", "-q", "-b", "release", "main")
    world.commit("release work", {"other.txt": "release\n"})
    world.git("checkout", "-q", "main")
    world.commit("main only", {"f.txt": text(edited(LINES, l5=["line 5", "legacy_call()"]))})
    c = world.commit(
        "replace the legacy call",
        {"f.txt": text(edited(LINES, l20=["line 20", "}", "", "new_call(strict=True)"]))},
    )
    o = judge(world, c, base="release")
    assert o.verdict is Verdict.UNIQUE, o.evidence
    assert o.represented_by == [] and o.represented_fraction == 0.0
    assert o.recommendation is Recommendation.OPEN_PR


def test_lines_already_there_before_the_range_earn_nothing(world: GitRepo) -> None:
    world.commit("has the line", {"f.txt": text(edited(LINES, l30="    return None"))})
    world.git("checkout", "-q", "-b", "release", "main")
    world.commit("release work", {"other.txt": "release\n"})
    world.git("checkout", "-q", "main")
    world.commit("main drops it", {"f.txt": text(LINES)})
    c = world.commit(
        "bring it back with a fix", {"f.txt": text(edited(LINES, l30="    return None", l35="fixed = True"))}
    )
    o = judge(world, c, base="release")
    assert o.verdict is Verdict.UNIQUE, o.evidence
    content = kinds(o)["content"][0]
    assert any(u.get("older_than_range") for u in content.data["units"])


def test_an_exact_pick_whose_code_moved_is_represented(world: GitRepo) -> None:
    """Class: strong signals overruled by the content locator. Same patch-id,
    its reverse applies, but the code around it moved to another place."""
    body = [f"step_{i}()" for i in range(8)]
    lines = [*LINES[:10], "def run():", *body, "", *LINES[10:]]
    world.commit("run()", {"f.txt": text(lines)})
    world.git("checkout", "-q", "-b", "release", "main")
    world.git("checkout", "-q", "main")
    patched = [*LINES[:10], "def run():", *body[:4], "check_budget()", *body[4:], "", *LINES[10:]]
    c = world.commit("check the budget in run()", {"f.txt": text(patched)})
    world.git("checkout", "-q", "release")
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    moved = [*LINES, "", "def run():", *body[:4], "check_budget()", *body[4:]]
    world.commit("move run() to the end", {"f.txt": text(moved)}, author=OTHER)
    world.git("checkout", "-q", "main")
    o = judge(world, c, base="release")
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert pick in o.represented_by
    assert kinds(o)["patch-id"][0].data["match"]
    assert rule(o) in ("picked", "picked, then modified")
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_an_exact_pick_modified_later_is_represented_since_modified(world: GitRepo) -> None:
    c = on(world, "fork", "add a limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 10"]))})
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    later = world.commit("raise the limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 99"]))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [pick]
    assert rule(o) == "picked, then modified"
    assert f"since modified by {later[:10]}" in kinds(o)["rule"][0].detail
    assert kinds(o)["modified"][0].commits == [later]
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_an_exact_pick_partly_changed_since_is_represented_without_a_merge(world: GitRepo) -> None:
    """Class (most backports checked onto a base that moved on): an exact pick of which the base
    changed some lines since. Represented whatever a merge says (it could only tell an empty
    replay), so none is spent on it, and the evidence says it was not replayed, and why."""
    fix = {"f.txt": text(edited(LINES, l5="guard = True", l10=["line 10", "limit = 10"]))}
    c = on(world, "fork", "add a guard and a limit", fix)
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    world.commit(
        "raise the limit",
        {"f.txt": text(edited(LINES, l5="guard = True", l10=["line 10", "limit = 99"]))},
        author=OTHER,
    )
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED and o.represented_by == [pick]
    assert rule(o) == "picked, then modified"
    assert o.applied is None and o.conflict is None
    assert kinds(o)["empty"][0].detail.startswith("not replayed: an exact pick")
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_pick_undone_by_hand_is_needed_and_worth_a_look(world: GitRepo) -> None:
    c = on(world, "fork", "set a limit", {"f.txt": text(edited(LINES, l10="limit = 10"))})
    world.git("cherry-pick", "-x", c)
    # Not git revert, and not the exact reverse either: it takes the line out along with other work.
    undo = world.commit("rework limits", {"f.txt": text(edited(LINES, l30="limits elsewhere"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE
    assert rule(o) == "picked, then undone?"
    assert undo[:10] in kinds(o)["rule"][0].detail
    assert o.recommendation is Recommendation.HUMAN_LOOK


def test_a_pick_that_left_a_hunk_out_is_partial_by_the_pick(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l5="line five", l20="line twenty"))})
    world.commit(f"fix (backport)\n\n(cherry picked from commit {c})", {"f.txt": text(edited(LINES, l5="line five"))})
    pick = world.sha("HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL
    assert rule(o) == "adapted pick"
    assert pick in o.represented_by
    assert "+line twenty" in (o.remaining_diff or "")


def test_a_pick_reverted_then_picked_again_is_represented_by_the_second_pick(world: GitRepo) -> None:
    c = on(world, "fork", "add a limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 10"]))})
    world.git("cherry-pick", c)
    world.git("revert", "--no-edit", "HEAD")
    world.git("cherry-pick", c)
    again = world.sha("HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED and again in o.represented_by
    assert rule(o) == "picked"


def test_a_reverted_pick_made_again_by_hand_under_its_pr_number_is_the_new_pick(world: GitRepo) -> None:
    """Class (ipython 7.x: the bot's "Backport PR #12207" reverted, then "Backport PR #12207 on 7.x"
    by hand, one line adapted to the branch): the second pick names the PR and has most of its
    changes, but it was never read as a pick, since the patch already had one — the reverted one.
    Once the revert is known, a hint newer than it is read as a pick made again."""
    fix = {"f.txt": text(edited(LINES, l5="parse(strict=True)", l10="check(x)", l20='version = ">=2"'))}
    c = on(world, "fork", "Fix the parser (#77)", fix)
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    world.git("revert", "--no-edit", "HEAD")
    adapted = {"f.txt": text(edited(LINES, l5="parse(strict=True)", l10="check(x)", l20="version = '>=2'"))}
    again = world.commit("Backport PR #77 on the release branch", adapted, author=OTHER)
    o = judge(world, c)
    assert o.verdict in (Verdict.REPRESENTED, Verdict.PARTIAL), o.evidence
    assert again in o.represented_by and pick not in o.represented_by
    assert any(e.detail.startswith(f"picked again after the revert: {again[:10]}") for e in kinds(o)["identity"])


def test_a_hint_older_than_the_revert_is_no_pick_made_again(world: GitRepo) -> None:
    fix = {"f.txt": text(edited(LINES, l5="parse(strict=True)", l10="check(x)", l20='version = ">=2"'))}
    c = on(world, "fork", "Fix the parser (#77)", fix)
    world.commit("Backport PR #77 on the release branch", fix, author=OTHER)
    world.git("revert", "--no-edit", "HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE, o.evidence
    assert not any(e.detail.startswith("picked again") for e in kinds(o)["identity"])


def test_a_reverted_pick_whose_subject_a_later_commit_reuses_says_the_revert_in_its_reason(world: GitRepo) -> None:
    """The probe (pytest 9.0.x onto main): picked, reverted, and a later base commit under the same
    subject with other lines; the one-line reason said only "has its subject ... but not its lines"
    and left the pick and the revert — the real story — to the evidence below it."""
    c = on(world, "fork", "raise the default limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 10"]))})
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    world.git("revert", "--no-edit", "HEAD")
    revert = world.sha("HEAD")
    world.commit("raise the default limit", {"g.txt": "limit = 10\n"}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE and rule(o) == "signals disagree", o.evidence
    assert kinds(o)["rule"][0].detail.startswith(
        f"signals disagree: picked as {pick[:10]}, reverted by {revert[:10]}; "
    )


def test_a_pick_reverted_by_its_reverse_is_told_apart_from_a_commit_with_the_same_parent(world: GitRepo) -> None:
    """Class (ipython's 7.x onto main, 719 commits at once): a PR's merge and its branch's first
    commit share their parent; a pick of the merge was reverted by a commit that names nothing
    (only its patch-id, the pick's reversed, says so). The reversed patch-ids were kept by parent,
    so the other commit's stood in for the merge's and the revert went unseen — the verdict of a
    commit hung on which others were checked with it."""
    c = on(world, "fork", "set a limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 10"]))})
    world.git("checkout", "-q", "-b", "sibling", f"{c}^")  # the same parent as c
    sibling = world.commit("tidy the other file", {"other.txt": "tidied\n"})
    world.git("checkout", "-q", "main")
    world.git("cherry-pick", c, sibling)
    world.commit("Revert the limit (a bad idea)", {"f.txt": text(LINES)}, author=OTHER)  # no "This reverts" line
    alone = judge(world, c)
    together = judge(world, c, sibling)[0]
    for o in (alone, together):
        assert o.verdict is Verdict.UNIQUE, o.evidence
        assert kinds(o)["revert"], o.evidence
    assert together == alone


def test_a_picked_new_file_the_base_reverted_is_needed_again(world: GitRepo) -> None:
    """Class: picked, then reverted — for a patch that adds a file. The revert deletes the file,
    which read as a file "added, then deleted" (a release consuming its news fragment): every
    change in the base, represented. A revert's deletion takes the file out; it consumes nothing."""
    c = on(world, "fork", "add the limits module", {"limits.py": "LIMIT = 10\n"})
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    world.git("revert", "--no-edit", "HEAD")
    revert = world.sha("HEAD")
    world.commit("upstream moves on", {"f.txt": text(edited(LINES, l1="moved on"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE, o.evidence
    assert rule(o) == "needed"
    assert kinds(o)["rule"][0].detail.endswith(f"needed again: picked as {pick[:10]}, reverted by {revert[:10]}")
    assert o.represented_by == [] and o.recommendation is Recommendation.OPEN_PR


def test_a_pick_whose_news_fragment_the_release_deleted_is_represented(world: GitRepo) -> None:
    """Class: picked, then modified — towncrier removes changelog/<N>.*.rst at each release."""
    c = on(
        world,
        "fork",
        "Fix the summary (#12531)",
        {"f.txt": text(edited(LINES, l20="line twenty")), "changelog/12531.bugfix.rst": "Fixed the summary.\n"},
    )
    world.git("cherry-pick", "-x", c)
    pick = world.sha("HEAD")
    release = world.commit("Prepare release 8.2.3", {"changelog/12531.bugfix.rst": None}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [pick] and rule(o) == "picked, then modified"
    assert release[:10] in kinds(o)["rule"][0].detail
    assert o.remaining_diff is None and o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_backport_whose_news_fragment_the_release_consumed_is_not_partial(world: GitRepo) -> None:
    """Class: consumed fragments (pytest's towncrier). Upstream's PR added the fragment and a
    release deleted it; the backport, reworded and not marked as a pick, carries the same
    fragment. It is represented by the PR — not a partial whose remaining diff re-adds it."""
    world.commit(
        "Fix the summary (#12531)",
        {"f.txt": text(edited(LINES, l20="line twenty")), "changelog/12531.bugfix.rst": "Fixed the summary.\n"},
        author=OTHER,
    )
    pr = world.sha("HEAD")
    world.commit("Prepare release 8.2.3", {"changelog/12531.bugfix.rst": None, "CHANGES": "8.2.3\n"}, author=OTHER)
    c = on(
        world,
        "fork",
        "[8.2.x] summary fixed",
        {
            "f.txt": text(edited(LINES, l20="line twenty")),
            "changelog/12531.bugfix.rst": "Fixed the summary (backport).\n",
        },
    )
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, [e.detail for e in o.evidence]
    assert o.represented_by == [pr] and o.remaining_diff is None
    assert o.recommendation is Recommendation.DO_NOT_OPEN
    units = kinds(o)["content"][0].data["units"]
    assert any("then deleted by" in u["reason"] for u in units if u["path"].startswith("changelog/")), units


def test_a_file_upstream_added_and_deleted_is_no_evidence_for_a_patch_not_tied_to_it(world: GitRepo) -> None:
    """The same path, added and deleted upstream by commits unrelated to the patch, with other
    content: the base does not have the patch's file."""
    world.commit("add a note", {"notes/todo.txt": "upstream's own note\n"}, author=OTHER)
    world.commit("drop the note", {"notes/todo.txt": None}, author=OTHER)
    c = on(world, "fork", "our todo list", {"notes/todo.txt": "fork's todo\n"})
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE and o.recommendation is Recommendation.OPEN_PR


def test_a_pick_of_a_change_that_moves_lines_is_represented(world: GitRepo) -> None:
    """Class: a removed line the same patch adds back elsewhere (a sort) is not "still there"."""
    entries = ["   alpha", "   gamma", "   beta", "   delta"]
    world.commit("toctree", {"index.rst": text(["Contents", "", ".. toctree::", "", *entries, "", "End"])})
    world.git("branch", "-f", "fork", "HEAD")
    ordered = sorted(entries)
    c = on(
        world,
        "fork",
        "sort the toctree",
        {"index.rst": text(["Contents", "", ".. toctree::", "", *ordered, "", "End"])},
    )
    world.commit("unrelated", {"other.txt": "x\n"})
    world.commit(
        "sorted upstream too",
        {"index.rst": text(["Contents", "", ".. toctree::", "", *ordered, "", "End"])},
        author=OTHER,
    )
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence


def test_an_exact_pick_in_a_file_of_repeated_blocks_is_represented(world: GitRepo) -> None:
    """Class: strong signals overruled — a changelog whose sections repeat the same lines."""
    section = ["Bug fixes", "---------", "", "- a fix", ""]
    lines = []
    for v in ("8.3.2", "8.3.1", "8.3.0"):
        lines += [f"pytest {v}", "=" * 12, "", *section]
    world.commit("changelog", {"changelog.rst": text(lines)})
    world.git("branch", "-f", "fork", "HEAD")
    patched = list(lines)
    patched.insert(len(lines) - 2, "- the fix of the user tag")
    c = on(world, "fork", "doc/changelog: update user tag", {"changelog.rst": text(patched)})
    world.commit("unrelated", {"other.txt": "x\n"})
    world.git("cherry-pick", c)
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED and rule(o) == "picked"


# -- the rest of the table --------------------------------------------------------------------------


def test_an_empty_replay_is_represented_though_the_lines_are_elsewhere(world: GitRepo) -> None:
    """The base moved the file more often than the lines' history is followed (a move a commit):
    its lines are not found, but git's merge, which pairs the file across all the moves at once,
    replays it to nothing."""
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l20="line twenty"))})
    for old, new in [("f", "g"), ("g", "h"), ("h", "i"), ("i", "j")]:
        world.git("mv", f"{old}.txt", f"{new}.txt")
        world.commit(f"rename {old} to {new}")
    world.commit("the same fix, upstream", {"j.txt": text(edited(LINES, l20="line twenty"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert rule(o) == "empty replay"
    assert kinds(o)["empty"][0].data["empty"] is True


def test_a_base_commit_with_the_same_subject_is_a_hint_not_a_verdict(world: GitRepo) -> None:
    c = on(world, "fork", "Fix the flaky scheduler test (#512)", {"f.txt": text(edited(LINES, l20="line twenty"))})
    same = world.commit("[1.2.x] Fix the flaky scheduler test (#513)", {"other.txt": "a different fix\n"})
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE
    assert rule(o) == "signals disagree"
    assert kinds(o)["hint"][0].commits == [same]
    assert o.recommendation is Recommendation.HUMAN_LOOK


def test_the_docs_print_the_verdict_tables_as_the_code_has_them() -> None:
    """(Every rule has rows of facts in tests/test_rules_table.py; this holds the words.)"""
    judgement = (Path(__file__).resolve().parent.parent / "docs" / "judgement.md").read_text()
    assert markdown_table() in judgement, "docs/judgement.md's verdict table differs from ggstack/check/rules.py"
    assert fold_table() in judgement, "docs/judgement.md's table of the tests' fold differs from ggstack/check/rules.py"


@pytest.mark.parametrize("name", [r[0] for r in RULES])
def test_rule_names_are_unique(name: str) -> None:
    assert [r[0] for r in RULES].count(name) == 1


# -- reruns ----------------------------------------------------------------------------------------


def _git_calls(trace: Path) -> list[str]:
    return [line for line in trace.read_text().splitlines() if "trace: built-in: git" in line]


def test_a_rerun_on_the_same_base_reads_the_kept_verdicts(world: GitRepo, tmp_path: Path) -> None:
    from gitrepo import run_ggstack

    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    world.git("cherry-pick", c)
    first_trace, second_trace = tmp_path / "first.trace", tmp_path / "second.trace"
    args = ("check", "--onto", "main", "--commits", c, "--json")
    first = run_ggstack(*args, cwd=world.path, env={"GIT_TRACE": str(first_trace)})
    second = run_ggstack(*args, cwd=world.path, env={"GIT_TRACE": str(second_trace)})
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout
    assert any(" log " in line for line in _git_calls(first_trace))
    assert not any(" log " in line or "merge-tree" in line for line in _git_calls(second_trace))
    again = run_ggstack(*args, "--no-cache", cwd=world.path, env={"GIT_TRACE": str(second_trace)})
    assert again.stdout == first.stdout and any(" log " in line for line in _git_calls(second_trace))
    # A kept file that is not what ggstack wrote is only a lost cache.
    for kept in (world.path / ".git" / "ggstack" / "cache" / "check").iterdir():
        kept.write_text("{not json")
    assert run_ggstack(*args, cwd=world.path).stdout == first.stdout


def test_a_changed_patch_or_a_moved_base_is_judged_again(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    repo, stack = stack_of(world, c)
    assert check_stack(repo, stack, "main").outcomes[0].verdict is Verdict.UNIQUE
    world.git("cherry-pick", c)
    assert check_stack(repo, stack, "main").outcomes[0].verdict is Verdict.REPRESENTED


def test_a_block_among_repeated_lines_is_found_though_the_alignment_ties_them_one_copy_off() -> None:
    """Class: placement among repeated anchors. Seen on pytest's pyproject.toml, a list of
    [[tool.towncrier.type]] sections that all end in "showcontent = true": git's diff of the
    pre-image and the base tied the pre-image's "showcontent = true" to the first copy in the
    base, so the block's place between the anchors was one line wide."""
    from ggstack.check.containment import judge_block
    from ggstack.diff import Block, Hunk

    pre = ["[[type]]", 'directory = "doc"', 'name = "Improved Documentation"', "showcontent = true", "", "[end]"]
    added = [
        'name = "Improved documentation"',
        "showcontent = true",
        "",
        "[[type]]",
        'directory = "misc"',
        'name = "Misc"',
    ]
    base = ["[[type]]", 'directory = "doc"', *added, "showcontent = true", "", "[end]"]
    block = Block(2, removed=[pre[2]], added=added)
    # pre's "showcontent = true" tied to the first copy in the base (index 3), not to the last (8).
    tied_off = [0, 1, None, 3, 4, 10]
    unit = judge_block("pyproject.toml", Hunk("@@ -1,6 +1,11 @@", 1), 0, block, pre, base, tied_off)
    assert unit.present, unit.reason


def test_lines_back_after_a_reverted_merge_are_the_new_commits_not_the_reverted_pick(world: GitRepo) -> None:
    """The seed's shape: the fix merged, the merge reverted, then the lines brought back by a
    consolidating commit of other work. The present lines are that commit's, not the reverted pick's."""
    c = on(world, "fork", "fix (#130)", {"f.txt": text(edited(LINES, l10=["line 10", "retain = True"]))})
    world.git("merge", "-q", "--no-ff", "-m", "Merge pull request #130 from me/fix", "fork")
    world.git("revert", "--no-edit", "-m", "1", "HEAD")
    again = world.commit(
        "lifecycle rework",
        {"f.txt": text(edited(LINES, l10=["line 10", "retain = True"], l30="teardown()"))},
        author=OTHER,
    )
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, [e.detail for e in o.evidence]
    assert o.represented_by == [again]
    assert kinds(o)["blame"][0].commits == [again]


def test_commits_from_two_lines_are_each_judged_against_their_own_range(world: GitRepo) -> None:
    """Class: one ``--commits`` call over commits of two branches (a release branch forked
    long ago, and a topic branch forked after upstream took the fix). Each commit's range
    is the base minus its own history, as ``git cherry BASE COMMIT``: the pick on main is
    an ancestor of the newer commit, but not of the release commit, which it represents."""
    old = on(world, "fork", "fix the limit", {"f.txt": text(edited(LINES, l10="limit = 10"))})
    world.git("cherry-pick", old)
    pick = world.sha("HEAD")
    world.commit("upstream moves on", {"other.txt": "moved\n"}, author=OTHER)
    world.git("checkout", "-q", "-b", "topic", "main")
    new = world.commit("topic work", {"f.txt": text(edited(LINES, l10="limit = 10", l30="topic"))})
    world.git("checkout", "-q", "main")
    alone = judge(world, old)
    assert alone.verdict is Verdict.REPRESENTED and alone.represented_by == [pick], alone.evidence
    both = {o.source_commit: o for o in judge(world, old, new)}
    assert both[old].verdict is Verdict.REPRESENTED, both[old].evidence
    assert both[old].represented_by == [pick]
    assert both[new].verdict is Verdict.UNIQUE


def test_a_backport_named_after_a_pr_merged_by_a_merge_commit_hints_at_the_merge(world: GitRepo) -> None:
    """Class: a backport bot names the pick after the PR's title ("[7.4.x] <title> (#backport)");
    upstream landed the PR as a merge commit, whose subject is "Merge pull request #N from …"
    and whose title is its first body line. The title is the hint, as a squash's subject is."""
    world.git("checkout", "-q", "-b", "topic", "main")
    world.commit("improve the docs", {"f.txt": text(edited(LINES, l20="docs, improved"))})
    world.git("checkout", "-q", "main")
    world.git("merge", "-q", "--no-ff", "topic", "-m", "Merge pull request #11180 from u/docs\n\nImprove the node docs")
    merge = world.sha("HEAD")
    world.commit("rewrite the docs", {"f.txt": text(edited(LINES, l20="docs, rewritten"))}, author=OTHER)
    c = on(world, "fork", "[7.4.x] Improve the node docs (#11181)", {"f.txt": text(edited(LINES, l20="docs, for 7.4"))})
    o = judge(world, c)
    assert o.verdict in (Verdict.UNIQUE, Verdict.CONFLICT), o.evidence
    assert merge in kinds(o)["hint"][0].commits
    assert o.recommendation is Recommendation.HUMAN_LOOK


def test_a_backport_of_a_merged_pr_modified_since_is_represented_by_the_merge(world: GitRepo) -> None:
    """Class: "Backport PR #12: …" (a backport bot's pick of a PR merged upstream by a merge
    commit; its context differs, so no patch-id), and upstream changed the lines since. The PR
    number alone is a hint; with the merge's own tree holding every change of the backport it is
    the pick: represented, since modified, not "human look"."""
    merge = _merged_pr_12(world, {"l10": "limit = 10"}, "Add a limit")
    later = world.commit("raise the limit", {"f.txt": text(edited(LINES, l10="limit = 99"))}, author=OTHER)
    o = _backport_of_pr_12(world, "Add a limit", "limit = 10")
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert merge in o.represented_by  # (and the PR's own commit, which has its subject)
    assert rule(o) == "picked, then modified"
    assert later[:10] in kinds(o)["rule"][0].detail
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_backport_of_a_recurring_bot_title_is_found_by_its_pr_among_commits_of_that_title(world: GitRepo) -> None:
    """Class (astropy's "Backport PR #18816: Update minimum required version of astropy-iers-data"
    onto main): a bot opens the same-titled PR again and again, each bumping the same line. The
    merge of the backported PR is read for the lines before the newer commits of its title: a PR
    number names one change, a recurring title many. It is the pick, modified since."""
    merge = _merged_pr_12(world, {"l10": "pin >= 2"}, "Update the pin")
    for version in (3, 4, 5):
        world.commit("Update the pin", {"f.txt": text(edited(LINES, l10=f"pin >= {version}"))}, author=OTHER)
    o = _backport_of_pr_12(world, "Update the pin", "pin >= 2")
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert merge in o.represented_by
    assert rule(o) == "picked, then modified"
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_removal_the_base_made_of_its_own_version_of_the_lines_is_the_same_post_image(world: GitRepo) -> None:
    """Class (astropy's "Remove greeter bot" onto v7.2.x): upstream reworded a section, then
    removed it; the release branch removed its own, older wording of it. The lines the patch
    removes were never in the base, so no line of it is earned; but the file is in the base
    byte for byte as the patch leaves it, and a base commit made it so: represented by it."""
    section = {"l30": "greeter:", "l31": "  say: hello", "l32": "  to: newcomers"}
    gone = dict.fromkeys(("l30", "l31", "l32"))
    world.commit("add the greeter", {"f.txt": text(edited(LINES, **section))})
    world.git("branch", "-f", "fork", "main")
    removal = world.commit("Delete the greeter on this branch", {"f.txt": text(edited(LINES, **gone))}, author=OTHER)
    on(world, "fork", "reword the greeter", {"f.txt": text(edited(LINES, **{**section, "l31": "  say: welcome"}))})
    c = on(world, "fork", "Remove the greeter", {"f.txt": text(edited(LINES, **gone))})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert rule(o) == "same post-image"
    assert o.represented_by == [removal]
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_a_file_as_the_patch_leaves_it_since_before_the_range_is_no_same_post_image(world: GitRepo) -> None:
    """The converse: the fork added a line and took it out again; the base never had it. The base's
    file is the patch's post-image, and the base's last commit on it wrote that blob, but it was so
    at the merge base already (upstream changed the file and took that back): no evidence."""
    world.commit("tweak line 5", {"f.txt": text(edited(LINES, l5="line five"))}, author=OTHER)
    world.commit("Revert the tweak of line 5", {"f.txt": text(LINES)}, author=OTHER)
    on(world, "fork", "add a debug line", {"f.txt": text(edited(LINES, l20=["line 20", "debug"]))})
    c = on(world, "fork", "drop the debug line", {"f.txt": text(LINES)})
    o = judge(world, c)
    assert rule(o) != "same post-image"
    assert "post-image" not in kinds(o)


def test_a_pr_named_base_commit_without_all_the_lines_stays_a_hint(world: GitRepo) -> None:
    """The converse: the merge of PR #12 took another fix; the backport's lines were never there."""
    _merged_pr_12(world, {"l10": "limit = 20"}, "Add a limit")
    o = _backport_of_pr_12(world, "Add a limit", "limit = 10")
    assert o.verdict in (Verdict.UNIQUE, Verdict.CONFLICT), o.evidence
    assert o.recommendation is Recommendation.HUMAN_LOOK


def _backport_of_pr_12(world: GitRepo, title: str, line_10: str):
    """The release branch's "Backport PR #12: <title>", making line 10 ``line_10``, judged onto main."""
    backport = on(
        world,
        "release",
        f"Backport PR #12: {title}",
        {"f.txt": text(edited(LINES, l10=line_10, l12="line 12 (release)"))},
    )
    return judge(world, backport)


def _merged_pr_12(world: GitRepo, changes: dict, title: str = "Add limits") -> str:
    """A release branch with a tweak of its own, and main with PR #12 (``title``, one commit
    making ``changes``) merged by a merge commit: the merge's id."""
    world.git("checkout", "-q", "-b", "release", "main")
    world.commit("release tweak", {"f.txt": text(edited(LINES, l12="line 12 (release)"))})
    world.git("checkout", "-q", "-b", "topic", "main")
    world.commit(title[:1].lower() + title[1:], {"f.txt": text(edited(LINES, **changes))})
    world.git("checkout", "-q", "main")
    world.git("merge", "-q", "--no-ff", "topic", "-m", f"Merge pull request #12 from u/limit\n\n{title}")
    return world.sha("HEAD")


def test_an_adapted_backport_of_a_merged_pr_is_partial_by_the_merge(world: GitRepo) -> None:
    """Class: "Backport PR #12: …" that had to be adapted (one of its changes differs from the
    PR's, and it has one of its own), upstream changed some of those lines since. The PR's merge
    had most of its changes: an adapted pick, partial by the merge, not "human look"; what it
    has of its own, at a place the base left alone, is the remaining diff."""
    merge = _merged_pr_12(world, {"l10": "limit = 10", "l20": "rate = 1", "l25": "window = 3", "l30": "burst = 5"})
    world.commit(
        "retune",
        {"f.txt": text(edited(LINES, l10="limit = 99", l20="rate = 2", l25="window = 3", l30="burst = 5"))},
        author=OTHER,
    )
    backport = on(
        world,
        "release",
        "Backport PR #12: Add limits",
        {
            "f.txt": text(
                edited(
                    LINES,
                    l10="limit = 10",
                    l12="line 12 (release)",
                    l20="rate = 1",
                    l25="window = 3",
                    l30="burst = 5",
                    l35="extra = 1",
                )
            )
        },
    )
    o = judge(world, backport)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert merge in o.represented_by
    assert rule(o) == "adapted pick"
    assert "+extra = 1" in (o.remaining_diff or "") and "limit = 10" not in (o.remaining_diff or "")
    assert o.recommendation is Recommendation.REWORK  # the two blocks upstream retuned are left out, named


def test_an_adapted_backport_whose_rest_the_base_rewrote_is_partial_worth_a_look(world: GitRepo) -> None:
    """Class (pytest's and pydantic's release branches checked onto main): a backport adapted to
    its old branch, whose every change the PR did not have lies where upstream has since rewritten
    those lines. Nothing of it can be carried over (a remaining diff would undo upstream's
    work), but its lines are not there either: partial by the PR, a look (its tests can show the
    behaviour is there) — not "represented" on a name, nor "rework" for work upstream already has."""
    merge = _merged_pr_12(world, {"l10": "limit = 10", "l30": "burst = 5", "l20": "rate = 1"})
    retune = world.commit(
        "retune", {"f.txt": text(edited(LINES, l10="limit = 99", l30="burst = 9", l20="rate = 2"))}, author=OTHER
    )
    backport = on(
        world,
        "release",
        "Backport PR #12: Add limits",
        {"f.txt": text(edited(LINES, l10="limit = 10", l12="line 12 (release)", l20="rate = 1", l30="burst = 7"))},
    )
    o = judge(world, backport)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert rule(o) == "adapted pick, rest rewritten"
    assert merge in o.represented_by and retune not in o.represented_by
    assert o.recommendation is Recommendation.HUMAN_LOOK
    assert o.remaining_diff is None
    assert "f.txt line 30" in kinds(o)["rule"][0].detail


def _c_extension_gone_on_main(world: GitRepo) -> None:
    """A release branch that keeps a file (its C extension) main deleted after the fork."""
    world.commit("add the C extension", {"ext.c": text(LINES)})
    world.git("checkout", "-q", "-b", "release", "main")
    world.git("checkout", "-q", "main")
    world.commit("replace the C extension", {"ext.c": None})


def _new_year_backport(world: GitRepo) -> str:
    """The release branch's copyright bump: in the file both have, and in the one main deleted."""
    return on(
        world,
        "release",
        "happy new year",
        {"f.txt": text(edited(LINES, l1="Copyright 2024")), "ext.c": text(edited(LINES, l1="Copyright 2024"))},
    )


def test_a_backport_whose_other_files_upstream_deleted_is_represented_by_the_same_subject(world: GitRepo) -> None:
    """Class (sqlalchemy's "happy new year, continued" on rel_1_4 checked onto main): the release
    branch makes the same change as a base commit of the same subject, and also in files the
    base deleted long before (its C extension). Those changes have no place in the base: the
    base commit's own tree holding every change in the files it has is the pick, modified since
    — not "superseded?" for the later change of the same lines."""
    _c_extension_gone_on_main(world)
    same = world.commit("happy new year", {"f.txt": text(edited(LINES, l1="Copyright 2024"))})
    later = world.commit("happy new year again", {"f.txt": text(edited(LINES, l1="Copyright 2025"))})
    backport = _new_year_backport(world)
    o = judge(world, backport)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [same]
    assert rule(o) == "picked, then modified"
    assert later[:10] in kinds(o)["rule"][0].detail
    assert "ext.c" in kinds(o)["identity"][-1].detail


def test_a_same_subject_commit_in_the_files_it_has_still_needs_the_change_there(world: GitRepo) -> None:
    """The converse: the same subject, a file the base deleted, but the base commit's own tree
    lacks the change in the file it has: a hint, not the pick."""
    _c_extension_gone_on_main(world)
    world.commit("happy new year", {"other.txt": "Copyright 2024\n"})
    backport = _new_year_backport(world)
    o = judge(world, backport)
    assert o.verdict in (Verdict.UNIQUE, Verdict.CONFLICT), o.evidence
    assert o.recommendation is Recommendation.HUMAN_LOOK


def test_a_file_the_same_subject_commit_lacks_but_the_base_brought_back_still_counts(world: GitRepo) -> None:
    """The converse: the base deleted the file, took the change in the file it kept, then brought
    the file back without the change: that change is missing, not moot."""
    _c_extension_gone_on_main(world)
    world.commit("happy new year", {"f.txt": text(edited(LINES, l1="Copyright 2024"))})
    world.commit("bring the C extension back", {"ext.c": text(LINES)})
    backport = _new_year_backport(world)
    o = judge(world, backport)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert "+Copyright 2024" in (o.remaining_diff or "")


def test_a_commit_with_a_coincidental_line_that_conflicts_is_a_conflict_not_unique(world: GitRepo) -> None:
    """Class (sqlalchemy's 1.4 connection docs onto main): one of a commit's many changes happens
    to be in the base (under the share that makes a partial), and the base changed another of its
    lines its own way. That is no partial, so nothing may skip its replay: it conflicts, a rework,
    not "unique, open PR"."""
    mine = {f"l{i}": f"line {i} reworded" for i in range(2, 26, 2)}  # twelve one-line changes
    c = on(world, "fork", "reword the connection docs", {"f.txt": text(edited(LINES, **mine))})
    world.commit(
        "upstream edits", {"f.txt": text(edited(LINES, l24="line 24 reworded", l2="line 2 upstream"))}, author=OTHER
    )
    o = judge(world, c)
    assert o.verdict is Verdict.CONFLICT, o.evidence
    assert rule(o) == "needed"
    assert o.recommendation is Recommendation.REWORK


THREE = dict(l5="line five", l20="line twenty", l35=["line 35", "extra after 35"])


def test_a_reverted_pick_the_base_partly_redid_its_own_way_is_a_look_not_partial(world: GitRepo) -> None:
    """Class (sqlalchemy's asyncpg fix picked onto main, reverted, then main's own codec rework):
    a pick the base reverted, some of whose lines another base commit brought since. Those lines
    are the base's own redo, not a partial of the patch: needed again?, naming the pick, the
    revert and the redo, for a look."""
    c = on(world, "fork", "degrade unsupported types", {"f.txt": text(edited(LINES, **THREE))})
    world.git("cherry-pick", "-x", c)
    pick = world.sha("HEAD")
    world.git("revert", "--no-edit", "HEAD")
    revert = world.sha("HEAD")
    redo = world.commit("rework the codecs", {"f.txt": text(edited(LINES, l20="line twenty"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE, o.evidence
    assert rule(o) == "reverted, partly back"
    assert o.represented_by == []
    detail = kinds(o)["rule"][0].detail
    assert pick[:10] in detail and revert[:10] in detail and redo[:10] in detail
    assert o.recommendation is Recommendation.HUMAN_LOOK


def test_a_pick_whose_revert_left_some_of_it_is_partial_by_the_pick(world: GitRepo) -> None:
    """The converse: the revert took out only part of the pick; what is left is the pick's."""
    c = on(world, "fork", "degrade unsupported types", {"f.txt": text(edited(LINES, **THREE))})
    world.git("cherry-pick", "-x", c)
    pick = world.sha("HEAD")
    world.commit(
        f'Revert "degrade unsupported types"\n\nThis reverts commit {pick}.',
        {"f.txt": text(edited(LINES, l20="line twenty", l35=["line 35", "extra after 35"]))},
    )
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert rule(o) == "partial"
    assert o.represented_by == [pick]


VENV = [
    "def activate(p_venv, paths):",
    "    while p.is_symlink():",
    "        paths.append(p.resolve())",
    "",
    "    # In Cygwin paths are possible",
    "    if str(p_venv).startswith('cygdrive'):",
    "        p_venv = Path(str(p_venv)[11:])",
    "    elif len(str(p_venv)) >= 2:",
    "        p_venv = Path(str(p_venv)[2:])",
    "",
    "    if sys.platform == 'win32':",
    "        p_venv = Path(str(p_venv).lower())",
    "",
    "    if any(os.fspath(p_venv) in os.fspath(p) for p in paths):",
    "        return",
    "",
    "    warn('attempting to work in a virtualenv')",
]
FIXED = [
    "def activate(p_venv, paths):",
    "    while p.is_symlink():",
    "        paths.append(p.resolve())",
    "    ",  # (whitespace where a blank line was: git's diff then pairs the blank lines below otherwise)
    "    # In Cygwin paths are possible",
    "    if str(p_venv).startswith('cygdrive'):",
    "        p_venv = 'C:' / Path(str(p_venv)[11:])",
    "",
    "    if any(p_venv == p.parents[1] for p in paths):",
    "        return",
    "",
    "    warn('attempting to work in a virtualenv')",
]


def test_a_removed_blank_line_beside_the_blank_line_left_is_no_line_still_there(world: GitRepo) -> None:
    """Class (ipython's "Backport PR #13140" onto main): a block takes out lines up to a blank line,
    and a blank line stays just after it. git's diff may pair the removed blank line with the one
    that stays; a blank line carries nothing, so it does not say the removed lines are still there."""
    world.commit("the venv check", {"venv.py": text(VENV)})
    world.git("branch", "release")
    c = on(world, "release", "Use pathlib parents to compare virtualenv directories", {"venv.py": text(FIXED)})
    same = world.commit(
        "venv: compare by parents, and a note",
        {"venv.py": text(FIXED), "other.txt": "a note\n"},
        author=OTHER,
    )
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert rule(o) == "content"
    assert o.represented_by == [same]


# -- a clone without the stack's recorded parents (the CI bot's fresh clone) ---------------------


def test_a_clone_without_the_recorded_parents_is_judged_not_crashed(world: GitRepo, tmp_path: Path) -> None:
    """The patches were recorded on fork commits a single-branch clone never fetched: they are
    replayed from their diffs (git apply), and a run of them is no squash candidate."""
    world.git("checkout", "-q", "-b", "side", "main")
    world.commit("a fork-only commit", {"other.txt": "fork\n"})
    commits = [
        world.commit("add rate limiter", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 10"]))}),
        world.commit("tune the limit", {"f.txt": text(edited(LINES, l10=["line 10", "limit = 25"]))}),
    ]
    world.git("checkout", "-q", "main")
    world.commit("an upstream change to the same file", {"f.txt": text(edited(LINES, l50="line 50 (upstream)"))})
    stack_of(world, *commits)
    clone = tmp_path / "ci-clone"
    world.git("clone", "-q", "--no-local", "--single-branch", "--branch", "main", str(world.path), str(clone))
    repo = git.Repository(str(clone))
    assert not any(repo.has_objects([world.sha("side~2"), *commits]).values())
    run = check_stack(repo, store.load(str(world.path / "patches"), "s"), "main")
    assert [o.name[:4] for o in run.outcomes] == ["0001", "0002"]
    assert all(o.verdict is not None for o in run.outcomes)
    unmade = [Candidate(n, "", "", [], [], "", "") for n in ("0001", "0002")]
    assert groups.chained(unmade, {}) == []  # no tree, no run (it once chained them, then looked up trees[""])


# -- a backport carried by its own "(cherry picked from commit X)" line -------------------------


def test_a_backports_cherry_picked_from_line_names_its_main_commit_in_a_stack(world: GitRepo) -> None:
    """A release branch's backport (``cherry-pick -x``) imported into a stack, judged onto main,
    which has the original and later consumed its changelog fragment: the message's own line
    names the original, as ``check --commits`` reads it — represented, not partial."""
    world.git("checkout", "-q", "-b", "release", "main")
    world.git("checkout", "-q", "main")
    fix = world.commit(
        "fix the limiter (#123)",
        {"f.txt": text(edited(LINES, l10="line 10 fixed")), "changelog/123.bugfix.rst": "Fixed the limiter.\n"},
    )
    world.git("rm", "-q", "changelog/123.bugfix.rst")
    world.git("commit", "-qm", "release 1.2: the changelog fragments into CHANGELOG")
    world.git("checkout", "-q", "release")
    world.git("cherry-pick", "-x", fix)
    backport = world.sha("HEAD")
    world.git("checkout", "-q", "main")
    outcome = stack_verdicts(world, backport)["0001"]
    assert outcome.verdict is Verdict.REPRESENTED, (outcome.verdict, [e.detail for e in outcome.evidence])
    assert fix in outcome.represented_by
    identity = next(e for e in outcome.evidence if e.kind is Signal.IDENTITY)
    assert fix[:10] in identity.detail, identity.detail


# -- code that moved: the base moved the file after taking the change ------------------------------


def _moved_upstream(world: GitRepo, fix: dict) -> str:
    """Upstream takes ``fix`` (with other work, so no patch-id matches), moves f.txt into pkg/,
    then edits next to the fix: a replay conflicts, and f.txt is not in the base any more."""
    taken = world.commit("Fix it properly, with docs (#6)", {"f.txt": text(edited(LINES, **fix)), "docs.txt": "d\n"})
    world.git("mv", "f.txt", "pkg.txt")
    world.commit("move f.txt to pkg.txt", author=OTHER)
    moved = edited(LINES, **fix)
    moved[8], moved[10] = "line 9 (upstream)", "line 11 (upstream)"
    world.commit("upstream edits around it", {"pkg.txt": text(moved)}, author=OTHER)
    return taken


def test_a_change_upstream_took_then_moved_to_another_file_is_represented_by_the_commit_that_took_it(
    world: GitRepo,
) -> None:
    """Class: code that moved. The fix is upstream, in the file's new place; judged against the
    file where it is now, and the lines' history followed through the move (as blame -M does)."""
    c = on(world, "fork", "Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    taken = _moved_upstream(world, {"l10": "line ten fixed"})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert rule(o) == "content"
    assert o.represented_by == [taken]
    assert o.recommendation is Recommendation.DO_NOT_OPEN
    assert "f.txt in pkg.txt" in kinds(o)["content"][0].detail


def test_a_partial_change_in_a_moved_file_has_a_remaining_diff_for_the_file_where_it_is_now(world: GitRepo) -> None:
    c = on(world, "fork", "Fix ten and thirty", {"f.txt": text(edited(LINES, l10="line ten fixed", l30="line 30 too"))})
    taken = _moved_upstream(world, {"l10": "line ten fixed"})
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert o.represented_by == [taken]
    diff = o.remaining_diff or ""
    assert "+++ b/pkg.txt" in diff and "+line 30 too" in diff and "f.txt" not in diff, diff
    assert test_check.applies_to(world, "main", diff)


def test_a_stack_patch_whose_file_upstream_moved_after_taking_it_is_represented(world: GitRepo) -> None:
    c = on(world, "fork", "Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    taken = _moved_upstream(world, {"l10": "line ten fixed"})
    o = stack_verdicts(world, c)["0001"]
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [taken]


# -- code moved into another file, the first one staying ---------------------------------------

G = [f"g line {i}" for i in range(1, 21)]


def _extract(world: GitRepo, f_lines: list[str], into_new_file: bool = False) -> str:
    """Upstream moves lines 8-12 of f.txt (as ``f_lines`` has them) into g.txt; f.txt stays."""
    if not into_new_file:
        world.commit("add g.txt", {"g.txt": text(G)}, author=OTHER)
    rest = f_lines[:7] + f_lines[12:]
    g = ([*G[:10], *f_lines[7:12], *G[10:]]) if not into_new_file else f_lines[7:12]
    return world.commit("move the middle of f.txt into g.txt", {"f.txt": text(rest), "g.txt": text(g)}, author=OTHER)


def test_a_fix_upstream_took_then_moved_into_another_file_is_represented_by_the_commit_that_took_it(
    world: GitRepo,
) -> None:
    """Class: code that moved into a file that was there (a function moved from a.py to b.py,
    a.py staying): git's rename detection does not pair them, blame -C does."""
    c = on(world, "fork", "Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    taken = world.commit(
        "Fix ten, with docs (#6)", {"f.txt": text(edited(LINES, l10="line ten fixed")), "d.txt": "d\n"}
    )
    mover = _extract(world, edited(LINES, l10="line ten fixed"))
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [taken]
    assert o.recommendation is Recommendation.DO_NOT_OPEN
    content = kinds(o)["content"][0]
    assert "f.txt's code in g.txt" in content.detail, content.detail
    assert mover[:10] in content.data["units"][0]["reason"]


def test_a_fix_made_upstream_after_moving_the_code_into_a_new_file_is_represented_by_that_fix(
    world: GitRepo,
) -> None:
    c = on(world, "fork", "Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    _extract(world, LINES, into_new_file=True)
    fixed = world.commit("fix ten where it is now", {"g.txt": text(edited(LINES[7:12], l3="line ten fixed"))})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [fixed]


def test_code_moved_into_another_file_without_the_fix_is_not_represented(world: GitRepo) -> None:
    c = on(world, "fork", "Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    _extract(world, LINES)
    o = judge(world, c)
    assert o.verdict not in (Verdict.REPRESENTED, Verdict.PARTIAL), o.evidence
    assert o.represented_by == []
    assert o.recommendation is not Recommendation.DO_NOT_OPEN


def test_lines_another_file_had_before_the_range_are_no_move(world: GitRepo) -> None:
    """A trap: g.txt already has the fixed lines (a copy), and a range commit deletes them from
    f.txt while touching g.txt elsewhere. Nothing moved the fix: no evidence."""
    world.git("checkout", "-q", "fork")
    world.commit("a copy in g.txt", {"g.txt": text([*G, *edited(LINES, l10="line ten fixed")[7:12]])})
    c = world.commit("Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    world.git("checkout", "-q", "main")
    world.git("merge", "-q", "--no-ff", "-m", "the copy", c + "^")
    world.commit(
        "drop f.txt's middle, touch g.txt",
        {
            "f.txt": text(LINES[:7] + LINES[12:]),
            "g.txt": text(["head", *G, *edited(LINES, l10="line ten fixed")[7:12]]),
        },
        author=OTHER,
    )
    o = judge(world, c)
    assert o.verdict is not Verdict.REPRESENTED, o.evidence
    assert "g.txt" not in kinds(o)["content"][0].detail


def test_a_partial_fix_whose_taken_part_moved_to_another_file_leaves_the_rest_in_its_own_file(
    world: GitRepo,
) -> None:
    c = on(world, "fork", "Fix ten and thirty", {"f.txt": text(edited(LINES, l10="line ten fixed", l30="line 30 too"))})
    taken = world.commit("Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))}, author=OTHER)
    _extract(world, edited(LINES, l10="line ten fixed"))
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert o.represented_by == [taken]
    diff = o.remaining_diff or ""
    assert "+line 30 too" in diff and "g.txt" not in diff and "line ten fixed" not in diff, diff
    assert test_check.applies_to(world, "main", diff)


def test_a_stack_patch_whose_code_upstream_moved_into_another_file_is_represented(world: GitRepo) -> None:
    c = on(world, "fork", "Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    taken = world.commit("Fix ten (#6)", {"f.txt": text(edited(LINES, l10="line ten fixed")), "d.txt": "d\n"})
    _extract(world, edited(LINES, l10="line ten fixed"))
    o = stack_verdicts(world, c)["0001"]
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [taken]


# -- code the candidate's own side moved into a new file ----------------------------------------


def _split_on_the_fork(world: GitRepo) -> None:
    """The fork (the candidates' side) moves lines 8-17 of f.txt into a new file g.txt after
    the merge base; the base keeps them in f.txt."""
    world.git("checkout", "-q", "fork")
    world.commit(
        "move the middle of f.txt into g.txt", {"f.txt": text(LINES[:7] + LINES[17:]), "g.txt": text(LINES[7:17])}
    )
    world.git("checkout", "-q", "main")


def test_a_fix_to_a_file_its_own_side_split_out_is_judged_where_the_base_has_that_code(world: GitRepo) -> None:
    """Class: a candidate-side file split. The fix changes g.txt, a file its side made after the
    merge base by moving code out of f.txt; the base never split it, and took the same fix in
    f.txt. Its lines are looked for in the file they came from, with its base history."""
    _split_on_the_fork(world)
    c = on(world, "fork", "Fix ten", {"g.txt": text(edited(LINES[7:17], l3="line ten fixed"))})
    taken = world.commit("Fix ten (backport)", {"f.txt": text(edited(LINES, l10="line ten fixed"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [taken]
    content = kinds(o)["content"][0]
    assert "g.txt's code in f.txt" in content.detail, content.detail


def test_a_fix_to_a_split_out_file_the_base_lacks_is_not_represented(world: GitRepo) -> None:
    _split_on_the_fork(world)
    c = on(world, "fork", "Fix ten", {"g.txt": text(edited(LINES[7:17], l3="line ten fixed"))})
    world.commit("upstream elsewhere", {"f.txt": text(edited(LINES, l30="line 30 upstream"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict not in (Verdict.REPRESENTED, Verdict.PARTIAL), o.evidence
    assert o.represented_by == []


def test_lines_of_a_split_out_file_the_base_had_before_the_range_earn_nothing(world: GitRepo) -> None:
    """A trap: the fork's new file says what f.txt said at the merge base (a fix of the fork's
    made on both sides before the split is no evidence of this one)."""
    _split_on_the_fork(world)
    world.git("checkout", "-q", "fork")
    world.commit("g.txt drops a line", {"g.txt": text(edited(LINES[7:17], l5=None))})
    c = world.commit("g.txt has it back", {"g.txt": text(LINES[7:17])})
    world.git("checkout", "-q", "main")
    world.commit("upstream elsewhere", {"f.txt": text(edited(LINES, l30="line 30 upstream"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict not in (Verdict.REPRESENTED, Verdict.PARTIAL), o.evidence


# -- check --commits: each commit against its own range ---------------------------------------


def test_a_commit_is_judged_the_same_alone_or_beside_a_later_one_that_merged_the_base(world: GitRepo) -> None:
    """``git cherry BASE COMMIT`` for each: a fork's pick (no -x) of an upstream commit stays
    represented by it when a later commit of the same branch, after merging the base in, is
    judged in the same call (its range no longer has the upstream commit)."""
    upstream = world.commit("Fix ten upstream", {"f.txt": text(edited(LINES, l10="line ten fixed"))}, author=OTHER)
    world.commit("more upstream", {"other.txt": "other, more\n"}, author=OTHER)
    world.git("checkout", "-q", "fork")
    pick = world.commit("Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    world.git("merge", "-q", "--no-edit", "main")
    later = world.commit("fork's own", {"fork.txt": "mine\n"})
    world.git("checkout", "-q", "main")
    alone = judge(world, pick)
    both = {o.name[:4]: o for o in judge(world, pick, later)}
    assert alone.verdict is Verdict.REPRESENTED and alone.represented_by == [upstream], alone.evidence
    assert both[pick[:4]].verdict is Verdict.REPRESENTED and both[pick[:4]].represented_by == [upstream]
    assert both[later[:4]].verdict is Verdict.UNIQUE


# -- a clone without the patches' recorded bases (a CI checkout) --------------------------------


def _without_recorded_bases(world: GitRepo) -> None:
    """Each stored patch as a clone of only the base would see it: its recorded base and its
    blobs are nowhere (the fork's branch was never fetched)."""
    for f in sorted((world.path / "patches" / "s").glob("*.patch")):
        text = f.read_text()
        base = next(line for line in text.splitlines() if line.startswith("base-commit: "))
        text = re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+", "index " + "ab" * 20 + ".." + "cd" * 20, text, flags=re.M)
        f.write_text(text.replace(base, "base-commit: " + "1234567" * 5 + "12345"))


@pytest.mark.parametrize("marked", [True, False])
def test_a_pick_whose_recorded_base_is_missing_is_still_represented_on_gits_word(world: GitRepo, marked: bool) -> None:
    """The bot's clone has the base, not the fork's branch: an exact pick (cherry-pick -x, or the
    same diff) is still known by its source and by the patch-id of the stored diff."""
    upstream = world.commit("Fix ten upstream", {"f.txt": text(edited(LINES, l10="line ten fixed"))}, author=OTHER)
    world.git("checkout", "-q", "fork")
    pick = world.commit(
        "Fix ten" + (f"\n\n(cherry picked from commit {upstream})" if marked else ""),
        {"f.txt": text(edited(LINES, l10="line ten fixed"))},
    )
    world.git("checkout", "-q", "main")
    repo, _ = stack_of(world, pick)
    _without_recorded_bases(world)
    o = check_stack(repo, store.load(str(world.path / "patches"), "s"), "main").outcomes[0]
    assert "blobs missing" in o.note, o.note
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert o.represented_by == [upstream]
    assert o.recommendation is Recommendation.DO_NOT_OPEN
    said = kinds(o)
    assert said["patch-id"][0].data["match"] is True
    assert said["identity"][0].data["match"] is marked


# -- a remaining diff that would break the file --------------------------------------------------

PY = ["import os", "", "try:", "    import json", "    import csv", "except ImportError:", "    pass", "", "X = 1"]


def test_a_remaining_diff_that_would_leave_python_unparsable_is_left_out(world: GitRepo) -> None:
    """Class: a splice that applies and breaks the file. The patch drops ``import csv``; upstream
    dropped ``import json`` instead and took the patch's other change. Putting the patch's
    removal back would leave an empty ``try:`` (an IndentationError): that block is left out and
    named, and the patch is a rework, not a remaining diff to open."""
    world.commit("add mod.py", {"mod.py": text(PY)})
    world.git("branch", "-f", "fork", "main")
    c = on(world, "fork", "drop csv, add Y", {"mod.py": text([*PY[:4], *PY[5:], "Y = 2"])})
    taken = world.commit("drop json, add Y", {"mod.py": text([*PY[:3], *PY[4:], "Y = 2"])}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    assert o.represented_by == [taken]
    assert o.recommendation is Recommendation.REWORK
    assert not (o.remaining_diff or "").strip(), o.remaining_diff
    left = [e for e in kinds(o)["content"] if "left_out" in e.data]
    assert left and "mod.py would not parse" in left[0].detail, [e.detail for e in kinds(o)["content"]]


# -- a fork's own stack: changes git apply -R cannot tell about ----------------------------------


def test_a_stacks_own_add_then_delete_and_a_mode_change_are_needed_not_disputed(world: GitRepo) -> None:
    """A file a patch adds and a later patch deletes again, and a mode change: the reverse of the
    deletion (the file back) applies to any base without the file, and ``git apply -R`` only
    warns about a mode. Neither is evidence: all are needed, "open PR", not "human look"."""
    world.git("checkout", "-q", "fork")
    added = world.commit("add a workaround", {"w.py": "tmp = 1\n"})
    (world.path / "f.txt").chmod(0o755)
    world.git("update-index", "--chmod=+x", "f.txt")
    moded = world.commit("make f.txt executable")
    dropped = world.commit("drop the workaround", {"w.py": None})
    world.git("checkout", "-q", "main")
    world.commit("upstream", {"other.txt": "other, upstream\n"}, author=OTHER)
    got = stack_verdicts(world, added, moded, dropped)
    assert [(o.verdict, o.recommendation) for o in got.values()] == [(Verdict.UNIQUE, Recommendation.OPEN_PR)] * 3, [
        (o.name, o.verdict, o.recommendation, [e.detail for e in o.evidence]) for o in got.values()
    ]


def test_a_deletion_the_base_made_too_is_represented(world: GitRepo) -> None:
    world.commit("add old.txt", {"old.txt": "old\n"})
    world.git("branch", "-f", "fork", "main")
    c = on(world, "fork", "remove old.txt", {"old.txt": None})
    gone = world.commit("upstream removes old.txt too", {"old.txt": None}, author=OTHER)
    o = stack_verdicts(world, c)["0001"]
    assert o.verdict is Verdict.REPRESENTED and o.represented_by == [gone], o.evidence


def test_a_recorded_base_fetched_later_makes_the_cached_verdict_judged_again(world: GitRepo, tmp_path: Path) -> None:
    """The check cache knows which recorded bases were here: once a fetch brings a patch's base
    in, the patch is judged with its commit, not served the verdict made without it."""
    world.git("checkout", "-q", "fork")
    world.commit("fork's own start", {"fork.txt": "mine\n"})
    pick = world.commit("Fix ten", {"f.txt": text(edited(LINES, l10="line ten fixed"))})
    world.git("checkout", "-q", "main")
    world.commit("Fix ten upstream", {"f.txt": text(edited(LINES, l10="line ten fixed"))}, author=OTHER)
    _, stack = stack_of(world, pick)
    keep = GitRepo(tmp_path / "keep")
    world.git("clone", "-q", "--bare", str(world.path), str(keep.path))
    world.git("branch", "-D", "fork")
    world.git("reflog", "expire", "--expire=now", "--all")
    world.git("gc", "-q", "--prune=now")
    assert world.git("cat-file", "-t", pick, check=False) == ""

    first = check_stack(git.Repository(str(world.path)), stack, "main").outcomes[0]
    assert "recorded base missing" in first.note, first.note
    world.git("fetch", "-q", str(keep.path), "fork:refs/remotes/keep/fork")
    again = check_stack(git.Repository(str(world.path)), stack, "main").outcomes[0]
    assert "recorded base missing" not in again.note, again.note
    assert again.verdict is Verdict.REPRESENTED


def test_only_a_merge_that_brought_base_commits_in_splits_a_line(world: GitRepo) -> None:
    """Each part of a line is one range scan: a merge of a side branch changes no commit's
    range (main's history is full of PR merges), a merge of the base does."""
    by_commits = importlib.import_module("ggstack.check.commits")

    world.commit("upstream", {"other.txt": "up\n"}, author=OTHER)
    world.git("checkout", "-q", "fork")
    a = world.commit("a", {"a.txt": "a\n"})
    world.git("checkout", "-q", "-b", "side", "fork")
    world.commit("side", {"s.txt": "s\n"})
    world.git("checkout", "-q", "fork")
    world.git("merge", "-q", "--no-ff", "--no-edit", "side")
    b = world.commit("b", {"b.txt": "b\n"})
    world.git("merge", "-q", "--no-edit", "main")
    c = world.commit("c", {"c.txt": "c\n"})
    world.git("checkout", "-q", "main")
    repo = git.Repository(str(world.path))
    groups, merge_base = by_commits._lines(repo, repo.resolve("main"), repo.commit_infos([a, b, c]))
    assert sorted(sorted(i.sha for i in g) for g in groups) == sorted([sorted([a, b]), [c]])
    assert merge_base == world.git("merge-base", "main", a).strip()  # a's line has no merge: its fork point
    # The merge base check reports: from the walk where no merge is on the first commit's line,
    # else git's (c's line merged main in); git's own answer either way.
    for first, rest in ((a, [b, c]), (c, [a, b])):
        run = check_commits(repo, [first, *rest], "main")
        assert run.merge_base == world.git("merge-base", "main", first).strip()
    assert by_commits._lines(repo, repo.resolve("main"), repo.commit_infos([c, a]))[1] == ""


def test_a_change_to_a_file_the_base_deleted_is_a_human_look_naming_the_deletion(world: GitRepo) -> None:
    """Rule "files gone": a patch whose every file the base deleted since has nothing to port
    where it was; "rework" would send a maintainer to redo what may be moot."""
    world.commit("add notes.rst", {"notes.rst": text(LINES)})
    world.git("branch", "-f", "fork", "main")
    c = on(world, "fork", "tidy the notes", {"notes.rst": text(edited(LINES, l3=None))})
    gone = world.commit("notes.rst is notes.md now", {"notes.rst": None, "notes.md": "# notes\n"}, author=OTHER)
    o = judge(world, c)
    assert rule(o) == "files gone", o.evidence
    assert o.recommendation is Recommendation.HUMAN_LOOK and o.represented_by == []
    assert f"notes.rst ({gone[:10]})" in kinds(o)["rule"][0].detail


# -- a revert the base undid again ---------------------------------------------------------------


@pytest.mark.parametrize(
    "again", ['Add back "Fix the tenth line (#5)" (#9)', 'Reapply "Fix the tenth line (#5)"', "Fix the tenth line (#5)"]
)
def test_a_revert_whose_change_the_base_landed_again_is_not_represented(world: GitRepo, again: str) -> None:
    """Class: picked, then undone by a re-land. The branch carries a revert; the base took the
    same revert, then landed the reverted change again: the base no longer has what the revert
    did, whatever its patch-id says."""
    fix = world.commit("Fix the tenth line (#5)", {"f.txt": text(edited(LINES, l10="line ten fixed"))}, author=OTHER)
    world.git("branch", "-f", "fork", "main")
    c = on(world, "fork", 'Revert "Fix the tenth line (#5)"', {"f.txt": text(LINES)})
    revert = world.commit('Revert "Fix the tenth line (#5)"', {"f.txt": text(LINES)}, author=OTHER)
    # landed again with a change of its own (not the revert's exact reverse: no patch-id finds it)
    back = world.commit(again, {"f.txt": text(edited(LINES, l10="line ten fixed", l30="line 30 too"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is not Verdict.REPRESENTED and o.recommendation is not Recommendation.DO_NOT_OPEN, o.evidence
    undone = kinds(o)["revert"][0]
    assert back in undone.commits and revert[:10] in undone.detail and fix not in o.represented_by


def test_an_exact_pick_is_represented_by_the_pick_not_by_a_commit_that_wrote_its_lines_elsewhere(
    world: GitRepo,
) -> None:
    """Class (pydantic's lockfile bumps): an exact pick whose post-image is there was represented
    by the pick and by an unrelated base commit that had written the same lines in the same file
    before (blame's answer for them); a maintainer read "represented by <that commit>"."""
    c = on(world, "fork", "pin x", {"f.txt": text(edited(LINES, l10=["line 10", "pin = 'x==1.2'", "pin_y = 2"]))})
    other = world.commit("pin x for the docs", {"f.txt": text([*LINES, "pin = 'x==1.2'", "pin_y = 2"])}, author=OTHER)
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED, o.evidence
    assert rule(o) == "picked"
    assert o.represented_by == [pick], (other, o.evidence)


def test_a_users_merge_renormalize_is_no_crash_in_a_bare_repository(
    world: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Class (a CI bot's bare mirror, a user's gitconfig): git cannot renormalize without an
    index, and ``merge.renormalize = true`` aborted every merge-tree of a bare repository
    ("BUG: attr.c"), so check said "infrastructure failure" (exit 3) for any patch it replays."""
    from gitrepo import run_ggstack

    c = on(world, "fork", "a change of its own", {"f.txt": text(edited(LINES, l10="line ten"))})
    both = edited(LINES, l10="line ten", l11="eleven, its own way")  # c's lines, its context changed
    world.commit("the base's own take", {"f.txt": text(both)}, author=OTHER)
    bare = tmp_path / "mirror.git"
    world.git("clone", "-q", "--bare", str(world.path), str(bare))
    config = tmp_path / "user.gitconfig"
    config.write_text("[merge]\n\trenormalize = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    proc = run_ggstack("--repo", str(bare), "check", "--onto", "main", "--commits", c, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [p["verdict"] for p in json.loads(proc.stdout)["patches"]] == ["represented"]


def test_a_users_suppress_blank_empty_does_not_change_a_verdict(
    world: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Class (any fork, a user's gitconfig): ``diff.suppressBlankEmpty = true`` makes diff-tree
    write a blank context line as an empty line; on pytest's 9.0.x base 32 of 208 verdicts
    changed with it (conflicts read as "changes nothing", represented)."""
    spaced = [line if i % 4 else "" for i, line in enumerate(LINES, 1)]
    world.commit("blank lines", {"f.txt": text(spaced)})
    world.git("branch", "-f", "fork")
    c = on(world, "fork", "a change beside blank lines", {"f.txt": text(edited(spaced, l10="line ten"))})
    world.commit(
        "the base changes that line its own way", {"f.txt": text(edited(spaced, l10="line 10!"))}, author=OTHER
    )
    config = tmp_path / "user.gitconfig"
    config.write_text("[diff]\n\tsuppressBlankEmpty = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    o = judge(world, c)  # first: what one run reads, the next may take from the cache
    assert o.verdict is Verdict.CONFLICT and rule(o) == "needed", o.evidence
