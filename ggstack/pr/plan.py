"""``pr``'s third step, pure: which patch gets a PR, onto which base, behind which gate, what is closed, and
how the PRs are kept as one native stack; tested on values alone (tests/test_pr_plan.py)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from ggstack.errors import UserError
from ggstack.forge import NativeStack, RemotePR
from ggstack.forge.marker import is_closing_comment
from ggstack.model import Outcome, Patch, PRState, Run, Stack, Verdict
from ggstack.pr.commits import Chosen
from ggstack.pr.read import NEEDED, Snapshot, closed_note, head_owner, needs_pr
from ggstack.pr.refusals import refuse_what_the_forge_would
from ggstack.pr.text import body_of, gate_words, merge_order_of, summary_of
from ggstack.readiness import Readiness, readiness
from ggstack.report.bodies import Diffstat, closing_comment
from ggstack.report.words import short


@dataclass
class ForgeStep:
    """One step a plan takes on the forge (or its remote), in the words it prints; ``land``'s too."""

    kind: str  # pr: push | open | edit | label | unlabel | ready | comment | close | would-close | stack-…
    words: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Slot:
    outcome: Outcome  # a copy: the Run given to ``pr`` is not changed
    patch: Patch
    branch: str  # the remote branch name (without refs/heads/)
    commit: str | None  # the commit its branch should hold; None: no PR action
    remote_sha: str | None
    pull: RemotePR | None
    approved_by: list[str] = field(default_factory=list)
    state: PRState | None = None
    steps: list[ForgeStep] = field(default_factory=list)
    summary: str = ""
    diffstat: Diffstat = field(default_factory=list)
    note: str = ""
    # Rendered only where it is needed: to compare with the open PR's, to open
    # or update it. An offline plan of n PRs renders none of its n bodies of n lines.
    body: str | None = None
    readiness: Readiness | None = None  # an open PR's: what ``land`` would decide now

    @property
    def needed(self) -> bool:
        return self.outcome.verdict in NEEDED and self.commit is not None


@dataclass
class Plan:
    slots: list[Slot]
    stacked: bool
    gate: str | None  # the approval gate in words, None when the stack has none
    head_owner: str
    fork: bool
    base: str  # the branch the first (or, flat, every) PR goes onto

    @functools.cached_property
    def needed(self) -> list[Slot]:
        return [s for s in self.slots if s.needed]


def make_plan(
    run: Run,
    stack: Stack,
    snap: Snapshot,
    chosen: Mapping[str, Chosen],
    patches: Mapping[str, Patch],
    *,
    base_branch: str,
    close_redundant: bool,
    stacked: bool | None,
) -> Plan:
    slots = [_slot(o, patches[o.name], snap, chosen) for o in run.outcomes]
    refuse_what_the_forge_would(stack, snap, slots, base_branch)
    plan = Plan(
        slots,
        _stacked_mode(stacked, stack, slots, base_branch),
        gate_words(stack),
        head_owner(stack),
        stack.config.target.fork is not None,
        base_branch,
    )
    _plan_needed(stack, plan)
    _plan_edits(run, plan)
    _plan_others(run, plan, snap, close_redundant)
    _plan_native(plan, snap)
    for s in plan.needed:
        facts = snap.facts.get(s.pull.number) if s.pull is not None else None
        if facts is not None:
            s.readiness = readiness(facts, stack.config.land, snap.permissions, snap.required, base_branch)
    return plan


def _slot(o: Outcome, patch: Patch, snap: Snapshot, chosen: Mapping[str, Chosen]) -> Slot:
    branch = snap.branches[o.name]
    pull = snap.pulls.get(o.name)
    # One level: the plan only sets the copy's fields (its pr, its commit), never edits a list in place.
    slot = Slot(dataclasses.replace(o), patch, branch, None, snap.heads.get(branch), pull)
    if pull is not None:
        slot.approved_by = list(snap.approvals.get(pull.number, []))
    note = closed_note(o, snap) if needs_pr(o) and pull is None else None
    if note is not None:
        slot.note, slot.pull = note, snap.closed[o.name]
    elif o.name in chosen:
        c = chosen[o.name]
        slot.commit, slot.diffstat, slot.note = c.commit, c.diffstat, c.note
    return slot


def _stacked_mode(stacked: bool | None, stack: Stack, slots: list[Slot], base_branch: str) -> bool:
    """The flag, else the open PRs' mode, else stack.toml; never with a fork: a PR's base must be in target.repo."""
    target = stack.config.target
    if target.fork is not None:
        if stacked:
            raise UserError(
                f"--stacked needs the patch branches in {target.repo}, but target.fork puts them in "
                f"{target.fork}: fork PRs are flat (use --flat, or push to {target.repo})"
            )
        return False
    if stacked is not None:
        return stacked
    later = [s.pull for s in [s for s in slots if s.needed][1:] if s.pull is not None]
    if later:
        return any(p.base_ref != base_branch for p in later)
    return stack.config.pr.stacked


# -- the needed patches' PRs, in merge order --------------------------------------------------


def _plan_needed(stack: Stack, plan: Plan) -> None:
    needed = plan.needed
    previous: Slot | None = None
    for n, s in enumerate(needed, 1):
        base = previous.branch if plan.stacked and previous else plan.base
        s.state = _new_state(s, stack, plan, base, n, len(needed))
        s.outcome.pr = s.state  # the bodies of its neighbours read its number
        s.summary = summary_of(s.patch)
        if s.commit != s.remote_sha:
            s.steps.append(_push_step(s))
        s.steps += _open_steps(s, stack, plan, n, len(needed), base) if s.pull is None else _gate_steps(s, stack, plan)
        previous = s


def _push_step(s: Slot) -> ForgeStep:
    was = short(s.remote_sha) or "(new)"
    return ForgeStep("push", f"push {s.branch} {was} → {short(s.commit)} (--force-with-lease)")


def _plan_edits(run: Run, plan: Plan) -> None:
    """An open PR's title, body and base where they differ from the plan's (every number known)."""
    order = merge_order_of(plan)
    for s in plan.needed:
        if s.pull is None:
            continue
        s.body = body_of(run, plan, s, order)
        fields = changed_fields(s)
        if fields:
            words = ", ".join(f"base {s.pull.base_ref} → {v}" if k == "base" else k for k, v in fields.items())
            s.steps.append(ForgeStep("edit", f"update {words}", fields))


def _new_state(s: Slot, stack: Stack, plan: Plan, base: str, n: int, total: int) -> PRState:
    policy, pull = stack.config.pr, s.pull
    return PRState(
        number=pull.number if pull else None,
        url=pull.url if pull else None,
        state="open" if pull else "planned",
        draft=pull.draft if pull else (policy.draft and plan.gate is not None),
        approved=bool(s.approved_by),
        head=f"{plan.head_owner}:{s.branch}" if plan.fork else s.branch,
        base=base,
        title=s.patch.subject,
        labels=list(pull.labels) if pull else (list(policy.labels) if plan.gate else []),
        approved_by=list(s.approved_by),
        position=n,
        total=total,
        diffstat=list(s.diffstat),
    )


def _open_steps(s: Slot, stack: Stack, plan: Plan, n: int, total: int, base: str) -> list[ForgeStep]:
    assert s.state is not None
    gate = f" as {plan.gate}" if plan.gate else ""
    steps = [ForgeStep("open", f"open PR {n} of {total}: {s.state.head} → {base}{gate}")]
    if plan.gate and stack.config.pr.labels:
        steps.append(ForgeStep("label", f"label {', '.join(stack.config.pr.labels)}"))
    return steps


def _gate_steps(s: Slot, stack: Stack, plan: Plan) -> list[ForgeStep]:
    """An open PR's gate: lifted once a maintainer approved, else kept (a lost label put back)."""
    assert s.pull is not None
    if plan.gate is None:
        return []
    approved, steps = bool(s.approved_by), []
    if approved and s.pull.draft:
        steps.append(ForgeStep("ready", f"approved by {', '.join(s.approved_by)}: mark ready for review"))
    labels = (_label_step(label, s.pull, approved) for label in stack.config.pr.labels)
    return steps + [step for step in labels if step is not None]


def _label_step(label: str, pull: RemotePR, approved: bool) -> ForgeStep | None:
    """Approved: the gate's label comes off; not yet: a label someone removed goes back on."""
    has = any(label.lower() == x.lower() for x in pull.labels)
    if approved and has:
        return ForgeStep("unlabel", f"approved: remove label {label}", {"label": label})
    if not approved and not has:
        return ForgeStep("label", f"label {label}", {"label": label})
    return None


def changed_fields(s: Slot) -> dict[str, str]:
    assert s.pull is not None and s.state is not None
    fields = {}
    if s.pull.title != s.state.title:
        fields["title"] = s.state.title or ""
    if s.pull.body.replace("\r\n", "\n") != s.body:
        fields["body"] = s.body or ""
    if s.pull.base_ref != s.state.base:
        fields["base"] = s.state.base or ""
    return fields


# -- the other patches' PRs: closed where redundant, else left ----------------------------------


def _plan_others(run: Run, plan: Plan, snap: Snapshot, close_redundant: bool) -> None:
    for s in plan.slots:
        if s.needed or s.pull is None:
            continue
        s.state = _kept_state(s, s.pull)
        o = s.outcome
        if o.verdict is Verdict.REPRESENTED:
            s.state.comment = closing_comment(run, o)
            s.steps += _close_steps(s, snap, close_redundant)
        else:
            s.state.note = _left_note(o, s.note)


def _kept_state(s: Slot, pull: RemotePR) -> PRState:
    return PRState(
        number=pull.number,
        url=pull.url,
        state="merged" if pull.merged else pull.state,
        draft=pull.draft,
        approved=bool(s.approved_by),
        head=pull.head_ref,
        base=pull.base_ref,
        title=pull.title,
        labels=list(pull.labels),
        approved_by=list(s.approved_by),
    )


def _left_note(o: Outcome, note: str) -> str:
    if o.verdict in (Verdict.CONFLICT, Verdict.BROKEN):
        return f"{o.verdict.value}: needs rework; PR left as it is"
    if o.verdict is Verdict.INCONCLUSIVE:
        return "inconclusive: held; PR left as it is"
    if o.verdict in NEEDED:
        return note or "no replayed commit: PR left as it is"
    return ""


def _close_steps(s: Slot, snap: Snapshot, close_redundant: bool) -> list[ForgeStep]:
    assert s.pull is not None
    o = s.outcome
    via = ", ".join(short(c) for c in o.represented_by) or "the base"
    if not close_redundant:
        return [ForgeStep("would-close", f"would close: represented by {via} (pass --close-redundant)")]
    # Whatever base it was checked on: one closing comment a PR, also across a moving base.
    steps = []
    if not any(is_closing_comment(c.body, o.stack_patch_id) for c in snap.comments.get(s.pull.number, [])):
        steps.append(ForgeStep("comment", f"comment: represented by {via}, with the evidence"))
    return [*steps, ForgeStep("close", f"close #{s.pull.number}")]


# -- native stacks ------------------------------------------------------------------------------


def _plan_native(plan: Plan, snap: Snapshot) -> None:
    """The needed PRs as one native stack, made once they are two, extended as patches come on top, else remade
    (a PR's base cannot change inside a stack). The steps ride on the top PR; ``act`` dissolves first."""
    if snap.stacks is None or not plan.stacked or plan.fork or not plan.needed:
        return
    needed, top = plan.needed, plan.needed[-1]
    touching = _touching(plan, snap.stacks)
    if len(touching) == 1 and _extends(plan, touching[0]):
        return
    for st in touching:
        words = f"unstack native stack {st.number} (the series changed)"
        top.steps.append(ForgeStep("stack-dissolve", words, {"stack": str(st.number)}))
    if len(needed) >= 2:
        words = f"stack the {len(needed)} PRs as one native stack, {needed[0].outcome.name} at the bottom"
        top.steps.append(ForgeStep("stack-create", words, {"names": ",".join(s.outcome.name for s in needed)}))


def _touching(plan: Plan, stacks: list[NativeStack]) -> list[NativeStack]:
    ours = {s.pull.number for s in plan.slots if s.pull is not None and s.pull.state == "open"}
    return [st for st in stacks if ours & (set(st.pulls) - set(st.merged))]


def _extends(plan: Plan, st: NativeStack) -> bool:
    """Whether the needed PRs are ``st``'s open ones and maybe more on top (then a step adds those)."""
    numbers = [s.pull.number if s.pull is not None and s.pull.state == "open" else None for s in plan.needed]
    current = [n for n in st.pulls if n not in st.merged]
    if st.base_ref != plan.base or numbers[: len(current)] != current:
        return False
    rest = plan.needed[len(current) :]
    if rest:
        names = [s.outcome.name for s in rest]
        words = f"add {', '.join(names)} to native stack {st.number}"
        plan.needed[-1].steps.append(ForgeStep("stack-add", words, {"stack": str(st.number), "names": ",".join(names)}))
    return True
