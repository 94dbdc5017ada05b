"""The PR plan as a pure function: Run, stack, forge snapshot (and the settled commits) in, steps out.

No forge, no git: the rules of ``pr`` — which patch gets a PR, onto which
base, behind which gate, which PR is found by which marker, what is closed
and what is refused before anything is pushed — on values built here. The
same rules against the real HTTP forge and real git are in test_pr.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from ggstack import pr
from ggstack.errors import UserError
from ggstack.forge import Comment, CommitFacts, RemotePR
from ggstack.forge.marker import closed_marker, pr_marker
from ggstack.model import Outcome, Patch, Provenance, Run, Stack, StackConfig, TargetConfig, Verdict
from ggstack.pr.commits import Chosen
from ggstack.pr.plan import Plan, make_plan
from ggstack.pr.read import NEEDED, Snapshot, match
from ggstack.pr.text import body_of
from ggstack.report.bodies import PR_GATE, closing_comment

BASE = "b" * 40
BOT = "ggstack-bot"


def patch(i: int, subject: str) -> Patch:
    spid = f"I{i:040d}"
    return Patch(
        name=f"{i:04d}-p{i}.patch",
        subject=subject,
        message=f"{subject}\n\nThe body of {i}.\n\nStack-Patch-Id: {spid}",
        author="A <a@example.com>",
        date="Mon, 1 Jan 2024 00:00:00 +0000",
        diff="",
        provenance=Provenance(spid),
        source_commit=None,
        base_commit=None,
        paths=(f"p{i}.txt",),
    )


STACK = Stack(
    "s", "/nowhere/s", StackConfig(TargetConfig("upstream/proj")), tuple(patch(i, f"fix {i}") for i in (1, 2, 3))
)
PATCHES = {p.name: p for p in STACK.patches}
BRANCHES = [f"gg/s/{i:02d}-p{i}" for i in (1, 2, 3)]


def run_of(*verdicts: Verdict) -> Run:
    outcomes = [
        Outcome(p.name, p.subject, p.provenance.stack_patch_id, provenance=p.provenance, commit=f"{i}" * 40, verdict=v)
        for i, (p, v) in enumerate(zip(STACK.patches, verdicts, strict=True), 1)
    ]
    return Run("s", "main", BASE, outcomes=outcomes)


def pull(n: int, i: int, *, base: str = "main", owner: str = "upstream", body: str | None = None, **kw) -> RemotePR:
    return RemotePR(
        number=n,
        url=f"https://forge/pull/{n}",
        draft=kw.pop("draft", True),
        title=f"fix {i}",
        body=body if body is not None else f"body\n{pr_marker(f'I{i:040d}')}\n",
        head_owner=owner,
        head_ref=BRANCHES[i - 1],
        base_ref=base,
        labels=kw.pop("labels", ["do-not-merge"]),
        author=BOT,
        **kw,
    )


def plan_of(run: Run, snap: Snapshot | None = None, *, close_redundant: bool = False, **chosen_kw) -> Plan:
    snap = snap or Snapshot()
    if not snap.branches:
        snap.pulls, snap.branches, _ = match(run, STACK, list(snap.pulls.values()))
    chosen = {
        o.name: Chosen(chosen_kw.get(o.name, o.commit), [(f"p{i}.txt", 1, 0)])
        for i, o in enumerate(run.outcomes, 1)
        if o.verdict in NEEDED
    }
    return make_plan(
        run, STACK, snap, chosen, PATCHES, base_branch="main", close_redundant=close_redundant, stacked=None
    )


def kinds(plan: Plan) -> list[list[str]]:
    return [[step.kind for step in s.steps] for s in plan.slots]


def test_nothing_on_the_forge_opens_stacked_gated_prs_for_the_needed_patches_only() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.REPRESENTED, Verdict.PARTIAL)
    plan = plan_of(run)
    assert kinds(plan) == [["push", "open", "label"], [], ["push", "open", "label"]]
    first, _, third = plan.slots
    assert first.state.base == "main" and third.state.base == BRANCHES[0]  # stacked on the previous needed one
    assert first.state.draft and first.state.labels == ["do-not-merge"]
    body = body_of(run, plan, third)
    assert "PR 2 of 2" in body and PR_GATE in body
    assert body.rstrip().endswith(pr_marker(STACK.patches[2].provenance.stack_patch_id))


def test_the_first_pr_goes_onto_the_branch_the_stack_was_replayed_onto() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    snap = Snapshot()
    snap.pulls, snap.branches, _ = match(run, STACK, [])
    chosen = {o.name: Chosen(o.commit) for o in run.outcomes}
    plan = make_plan(run, STACK, snap, chosen, PATCHES, base_branch="dev/before", close_redundant=False, stacked=None)
    assert [s.state.base for s in plan.slots] == ["dev/before", BRANCHES[0], BRANCHES[1]]
    assert "dev/before" in plan.slots[0].steps[1].words


def test_a_rerun_with_everything_in_place_plans_nothing() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    pulls = [pull(10 + i, i, base="main" if i == 1 else BRANCHES[i - 2]) for i in (1, 2, 3)]
    snap = Snapshot(heads={b: f"{i}" * 40 for i, b in enumerate(BRANCHES, 1)})
    snap.pulls, snap.branches, _ = match(run, STACK, pulls)
    first = plan_of(run, snap)
    assert kinds(first) == [["edit"]] * 3  # the bodies those PRs have are not ggstack's current ones
    for p, s in zip(pulls, first.slots, strict=True):
        p.body = s.body  # as the first run left them
    assert kinds(plan_of(run, snap)) == [[], [], []]
    assert [s.pull.number for s in first.slots] == [11, 12, 13]


def test_every_body_lists_the_merge_order_with_the_numbers_known_and_itself_as_this_pr() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    pulls = [pull(10 + i, i, base="main" if i == 1 else BRANCHES[i - 2]) for i in (1, 3)]  # 2 not opened yet
    snap = Snapshot(heads={b: f"{i}" * 40 for i, b in enumerate(BRANCHES, 1)})
    snap.pulls, snap.branches, _ = match(run, STACK, pulls)
    plan = plan_of(run, snap)
    bodies = [s.body for s in plan.slots]  # rendered to compare with the open PRs'
    assert bodies[1] is None  # 2 has no PR to compare with: its body is rendered when it is opened
    bodies[1] = body_of(run, plan, plan.slots[1])
    listed = ["1. #11 fix 1", "2. (not opened yet) fix 2", "3. #13 fix 3"]
    for n, body in enumerate(bodies, 1):
        want = [f"{n}. **this PR**: fix {n}" if i == n else line for i, line in enumerate(listed, 1)]
        assert "\n".join(want) in body and f"This is PR {n} of 3" in body
    assert "Previous: #11 · Next: #13" in bodies[1] and "Next: (not opened yet)" in bodies[0]
    assert all(o.pr is None for o in run.outcomes)  # the plan fills in copies


def test_a_marker_counts_only_on_the_last_line_and_only_with_a_head_in_the_stacks_repository() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    claims_2 = pull(5, 1, body=f"{pr_marker('I' + '2'.rjust(40, '0'))}\nmore text after it\n")
    stranger = pull(6, 2, owner="stranger")
    found, branches, _ = match(run, STACK, [claims_2, stranger])
    assert found == {"0001-p1.patch": claims_2}  # matched by its head branch, as a PR without a marker
    assert branches["0002-p2.patch"] == BRANCHES[1]


def test_a_marker_is_adopted_on_any_branch_under_the_stacks_namespace_and_is_foreign_elsewhere() -> None:
    """A PR keeps its head after a rename (``gg/s/…``: the branches apply may remove as its own);
    the same marker on another stack's branch is that stack's PR, which ``pr`` refuses to take over."""
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    marker = [pr_marker(p.provenance.stack_patch_id) for p in STACK.patches]
    renamed = dataclasses.replace(pull(7, 1, body=f"old\n\n{marker[0]}"), head_ref="gg/s/05-an-older-subject")
    elsewhere = dataclasses.replace(pull(8, 2, body=f"t's\n\n{marker[1]}"), head_ref="gg/t/02-p2")
    found, branches, foreign = match(run, STACK, [renamed, elsewhere])
    assert found == {"0001-p1.patch": renamed} and branches["0001-p1.patch"] == "gg/s/05-an-older-subject"
    assert foreign == {"0002-p2.patch": elsewhere} and branches["0002-p2.patch"] == BRANCHES[1]


def test_an_approved_pr_gets_its_gate_lifted_and_a_lost_label_is_put_back() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.REPRESENTED)
    snap = Snapshot(heads={BRANCHES[0]: "1" * 40, BRANCHES[1]: "2" * 40})
    snap.pulls, snap.branches, _ = match(run, STACK, [pull(1, 1), pull(2, 2, base=BRANCHES[0], labels=[])])
    snap.approvals = {1: ["maint"]}
    plan = plan_of(run, snap)
    assert [k for k in kinds(plan)[0] if k != "edit"] == ["ready", "unlabel"]
    assert [k for k in kinds(plan)[1] if k != "edit"] == ["label"]
    assert "Approved by @maint" in (plan.slots[0].body or "")


def test_a_redundant_pr_is_closed_only_when_asked_with_one_closing_comment() -> None:
    run = run_of(Verdict.REPRESENTED, Verdict.UNIQUE, Verdict.UNIQUE)
    snap = Snapshot()
    snap.pulls, snap.branches, _ = match(run, STACK, [pull(1, 1)])
    assert kinds(plan_of(run, snap))[0] == ["would-close"]
    assert kinds(plan_of(run, snap, close_redundant=True))[0] == ["comment", "close"]
    posted = closing_comment(run, run.outcomes[0])
    snap.comments = {1: [Comment(BOT, posted)]}
    assert kinds(plan_of(run, snap, close_redundant=True))[0] == ["close"]


def test_a_pr_someone_closed_is_not_replaced_but_one_ggstack_closed_as_redundant_may_be() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    closed = pull(4, 2, state="closed")
    snap = Snapshot(closed={"0002-p2.patch": closed})
    snap.pulls, snap.branches, _ = match(run, STACK, [])
    plan = plan_of(run, snap)
    assert kinds(plan)[1] == [] and "closed by someone else" in plan.slots[1].state.note
    assert plan.slots[2].state.base == BRANCHES[0]  # the chain skips it
    # A closing comment quoted by someone else is not ggstack's; its own is.
    marker = closed_marker(STACK.patches[1].provenance.stack_patch_id, BASE)
    snap.comments = {4: [Comment("someone", f"quoting:\n{marker}")]}
    assert kinds(plan_of(run, snap))[1] == []
    snap.comments = {4: [Comment(BOT, f"closing\n{marker}")]}
    assert kinds(plan_of(run, snap))[1] == ["push", "open", "label"]


def test_a_commit_someone_else_pushed_is_refused_before_anything_is_written() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    fixup = "f" * 40
    snap = Snapshot(
        heads={BRANCHES[0]: fixup},
        commits={fixup: CommitFacts("t" * 40, (BASE,), "reviewer fixup\n")},
        patch_ids={fixup: ()},
    )
    with pytest.raises(UserError, match=r"someone else pushed ffffffffff .*reviewer fixup.* to gg/s/01-p1"):
        plan_of(run, snap)
    snap.patch_ids = {fixup: (STACK.patches[0].provenance.stack_patch_id,)}  # ggstack's own, older: replaced
    assert kinds(plan_of(run, snap))[0][0] == "push"


def test_a_base_branch_or_head_repository_the_forge_does_not_have_is_refused_naming_it() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.REPRESENTED, Verdict.REPRESENTED)
    with pytest.raises(UserError, match="the PR base 'main' is not a branch of upstream/proj"):
        plan_of(run, Snapshot(base_exists=False))
    with pytest.raises(UserError, match=r"target\.fork"):
        plan_of(run, Snapshot(head_repo_exists=False))
    nothing_needed = run_of(Verdict.REPRESENTED, Verdict.REPRESENTED, Verdict.REPRESENTED)
    assert kinds(plan_of(nothing_needed, Snapshot(base_exists=False))) == [[], [], []]


def test_an_existing_flat_stack_stays_flat() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.UNIQUE, Verdict.UNIQUE)
    snap = Snapshot()
    snap.pulls, snap.branches, _ = match(run, STACK, [pull(1, 1), pull(2, 2), pull(3, 3)])
    plan = plan_of(run, snap)
    assert not plan.stacked and [s.state.base for s in plan.slots] == ["main", "main", "main"]


def test_record_returns_a_new_run_and_leaves_the_given_one_alone() -> None:
    run = run_of(Verdict.UNIQUE, Verdict.REPRESENTED, Verdict.UNIQUE)
    plan = plan_of(run, **{"0003-p3.patch": "9" * 40})
    after = pr.record(run, plan, dry_run=True, offline=True)
    assert all(o.pr is None for o in run.outcomes) and "pr" not in run.stages
    assert after.stages["pr"].startswith("dry-run (offline")
    assert after.outcomes[2].commit == "9" * 40 and run.outcomes[2].commit == "3" * 40
    assert after.outcomes[0].pr.action == "would push, open, label"
