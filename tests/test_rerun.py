"""Reruns cost what changed: a base that moved on by commits that cannot change a
verdict carries the last verdicts over; any commit that could makes the stack judged again.

Each case builds the move as real commits and compares with a judgement from
scratch (``use_cache=False``), so a carried verdict is always the one a full
check reaches.
"""

from __future__ import annotations

import pytest
from gitrepo import GitRepo, run_ggstack
from test_check import LINES, edited, on, text
from test_check_classes import stack_of

from ggstack import git, replay
from ggstack.check import cache
from ggstack.check.stack import check_stack
from ggstack.model import Outcome, Run, Stack, Verdict


@pytest.fixture
def upstream(repo: GitRepo) -> GitRepo:
    repo.commit("root", {"f.txt": text(LINES), "other.txt": "other\n"})
    repo.git("branch", "fork")
    return repo


def _carried(repo: git.Repository, stack: Stack, base_ref: str) -> Run | None:
    base = replay.resolve_base(repo, stack, base_ref)
    run = Run(stack=stack.name, base_ref=base_ref, base=base)
    run.outcomes = [
        Outcome(p.name, p.subject, p.provenance.stack_patch_id, provenance=p.provenance) for p in stack.patches
    ]
    return run if cache.carry_over(repo, stack, cache.candidates_key(stack, repo), run) else None


def _verdicts(run: Run) -> list[dict]:
    return Run(stack=run.stack, base_ref="", base=run.base, outcomes=run.outcomes).to_json()["patches"]


def _two_patches(upstream: GitRepo) -> tuple[git.Repository, Stack]:
    """A unique patch and one the base already took (represented), judged on main."""
    upstream.commit("a package", {"pkg/a.txt": text(LINES), "pkg/b.txt": "b\n", "top.txt": "top\n"})
    upstream.git("branch", "-f", "fork", "main")
    unique = on(upstream, "fork", "tune the limit", {"f.txt": text(edited(LINES, l10="limit = 25"))})
    taken = on(upstream, "fork", "fix pkg", {"pkg/a.txt": text(edited(LINES, l5="fixed = True"))})
    upstream.git("cherry-pick", taken)
    repo, stack = stack_of(upstream, unique, taken)
    first = check_stack(repo, stack, "main")
    assert [o.verdict for o in first.outcomes] == [Verdict.UNIQUE, Verdict.REPRESENTED]
    return repo, stack


def test_a_base_moved_past_the_stack_carries_its_verdicts_over(upstream: GitRepo) -> None:
    repo, stack = _two_patches(upstream)
    for i in range(3):
        upstream.commit(f"upstream work {i}", {"other.txt": f"other {i}\n", f"new/{i}.txt": "x\n"})
    upstream.commit("drop the top file", {"top.txt": None})  # a deletion at the root renames no directory
    carried = _carried(repo, stack, "main")
    assert carried is not None
    assert _verdicts(carried) == _verdicts(check_stack(repo, stack, "main", use_cache=False))


def test_a_rerun_after_the_move_names_the_new_base(upstream: GitRepo) -> None:
    _two_patches(upstream)
    upstream.commit("upstream work", {"other.txt": "more\n"})
    args = ("check", "s", "--onto", "main", "--json")
    carried = run_ggstack(*args, cwd=upstream.path)
    fresh = run_ggstack(*args, "--no-cache", cwd=upstream.path)
    assert carried.returncode == fresh.returncode == 0, carried.stderr + fresh.stderr
    assert carried.stdout == fresh.stdout
    assert upstream.sha("main") in carried.stdout


@pytest.mark.parametrize(
    "move",
    [
        pytest.param(lambda w: w.commit("limit", {"f.txt": text(edited(LINES, l10="limit = 25"))}), id="its-lines"),
        pytest.param(lambda w: w.commit("tidy", {"f.txt": text(edited(LINES, l40="end"))}), id="its-file"),
        pytest.param(lambda w: w.commit("move b", {"pkg/b.txt": None}), id="a-deletion-beside-it"),
        pytest.param(lambda w: w.commit("tune the limit", {"other.txt": "2\n"}), id="its-subject"),
        pytest.param(
            lambda w: w.commit(f"port\n\n(cherry picked from commit {'1' * 40})", {"other.txt": "3\n"}),
            id="a-pick-line",
        ),
        pytest.param(lambda w: w.commit(f"Revert x\n\nThis reverts commit {'2' * 40}.", {}), id="a-revert"),
    ],
)
def test_a_move_that_could_change_a_verdict_is_judged_again(upstream: GitRepo, move) -> None:
    repo, stack = _two_patches(upstream)
    move(upstream)
    assert _carried(repo, stack, "main") is None
    again = check_stack(repo, stack, "main")
    assert _verdicts(again) == _verdicts(check_stack(repo, stack, "main", use_cache=False))


def test_a_base_moved_to_a_line_that_took_the_patch_judges_it_represented(upstream: GitRepo) -> None:
    repo, stack = _two_patches(upstream)
    unique = stack.patches[0].provenance.cherry_picked_from or stack.patches[0].source_commit
    upstream.git("cherry-pick", unique)
    assert [o.verdict for o in check_stack(repo, stack, "main").outcomes] == [Verdict.REPRESENTED] * 2


def test_a_base_that_went_back_is_judged_again(upstream: GitRepo) -> None:
    repo, stack = _two_patches(upstream)
    upstream.git("branch", "older", "main~1")  # before the pick: not a move past the judged base
    assert _carried(repo, stack, "older") is None


def test_each_stage_leaves_the_run_it_is_given_as_it_was(upstream: GitRepo) -> None:
    """One rule for who may change a Run: a stage returns a new one (sync keeps apply's, check's, test's)."""
    from ggstack.testing import stage as test_stage

    repo, stack = _two_patches(upstream)
    applied = replay.apply(repo, stack, "main", write=False)
    before = applied.to_json()
    checked = check_stack(repo, stack, "main", run=applied, use_cache=False)
    assert applied.to_json() == before
    assert [o.verdict for o in checked.outcomes] == [Verdict.UNIQUE, Verdict.REPRESENTED]
    judged = checked.to_json()
    tested = test_stage.test(repo, stack, checked)
    assert checked.to_json() == judged and tested.stages["test"].startswith("ok: nothing ran")  # no test files
