"""``land``'s plan, pure: in merge order, each patch's action until the first that may not land, and
which of the PRs land in one merge of the forge's where they are a native stack."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ggstack.forge import MergeFacts, NativeStack, RemotePR
from ggstack.forge.marker import is_closing_comment
from ggstack.land.read import LandSnapshot
from ggstack.model import Outcome, Run, Stack, Verdict
from ggstack.pr.plan import ForgeStep
from ggstack.readiness import Readiness, readiness
from ggstack.report.words import short


@dataclass
class LandEntry:
    """One patch in merge order: what ``land`` does with it, or why it stops there."""

    name: str
    number: int | None  # its PR (open, or the closed one that landed it)
    url: str | None
    action: str  # land | close | done | stop
    why: str
    steps: list[ForgeStep] = field(default_factory=list)  # ready | unlabel | comment | close | unstack | …
    readiness: Readiness | None = None

    @property
    def label(self) -> str:
        return self.name.split("-", 1)[0]  # "0003" of 0003-fix-foo.patch

    def line(self) -> str:
        return f"{self.label}: {self.why}"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name,
            "number": self.number,
            "url": self.url,
            "action": self.action,
            "why": self.why,
            "steps": [s.words for s in self.steps],
        }
        if self.readiness is not None:
            r = self.readiness
            out["readiness"] = {
                "approval": r.approval,
                "approved_by": r.approved_by,
                "checks": [list(c) for c in r.checks],
                "mergeable": r.mergeable,
                "next_action": r.next_action,
            }
        return out


@dataclass
class LandPlan:
    base: str
    base_sha: str
    method: str
    entries: list[LandEntry]
    native: NativeStack | None = None  # the stack the ready PRs land through, atomically

    @property
    def stop(self) -> LandEntry | None:
        return next((e for e in self.entries if e.action == "stop"), None)

    def next_step(self) -> tuple[LandEntry, ForgeStep] | None:
        """The first write of the plan; None when there is none before the stop."""
        for e in self.entries:
            if e.action == "stop":
                return None
            if e.steps:
                return e, e.steps[0]
        return None


def plan_landing(run: Run, stack: Stack, snap: LandSnapshot, *, base: str, method: str) -> LandPlan:
    plan = LandPlan(base, snap.base_sha, method, [])
    for o in run.outcomes:
        entry = _entry(stack, snap, o, base, method)
        plan.entries.append(entry)
        if entry.action == "stop":
            break
    _plan_native(plan, snap)
    return plan


def _entry(stack: Stack, snap: LandSnapshot, o: Outcome, base: str, method: str) -> LandEntry:
    pull = snap.pulls.get(o.name)
    e = LandEntry(o.name, pull.number if pull else None, pull.url if pull else None, "done", "")
    if o.verdict is Verdict.REPRESENTED:
        return _represented(snap, o, pull, e, base)
    if o.verdict is not Verdict.UNIQUE:
        verdict = o.verdict.value if o.verdict else "not judged"
        why = f"{verdict} on {base} at {short(snap.base_sha)}: not landed (`ggstack check` says why)"
        return _stop(e, why)
    if pull is None:
        closed = snap.closed.get(o.name)
        if closed is not None:
            e.number, e.url = closed.number, closed.url
        return _stop(e, _no_open_pr(closed, base))
    return _land(stack, snap, o, pull, e, base, method)


def _stop(e: LandEntry, why: str) -> LandEntry:
    e.action, e.why, e.steps = "stop", why, []
    return e


def _represented(snap: LandSnapshot, o: Outcome, pull: RemotePR | None, e: LandEntry, base: str) -> LandEntry:
    via = ", ".join(short(c) for c in o.represented_by) or base
    if pull is None:
        closed = snap.closed.get(o.name)
        if closed is not None and closed.merged:
            e.number, e.url, e.why = closed.number, closed.url, f"landed (#{closed.number} merged)"
        else:
            e.why = f"in {base} already ({via})"
        return e
    e.action = "close"
    e.why = f"{base} took it meanwhile ({via}): #{pull.number} is closed with the evidence, not merged"
    comments = snap.comments.get(pull.number, [])
    if not any(is_closing_comment(c.body, o.stack_patch_id) for c in comments):
        e.steps.append(ForgeStep("comment", f"comment on #{pull.number}: represented by {via}, with the evidence"))
    e.steps.append(ForgeStep("close", f"close #{pull.number}"))
    return e


def _no_open_pr(closed: RemotePR | None, base: str) -> str:
    if closed is None:
        return "no open PR (run `ggstack pr` first)"
    if closed.merged:
        return f"its PR #{closed.number} was merged into {closed.base_ref}, but {base} does not have the change"
    return f"its PR #{closed.number} is closed (reopen it, or run `ggstack pr`)"


def _land(
    stack: Stack, snap: LandSnapshot, o: Outcome, pull: RemotePR, e: LandEntry, base: str, method: str
) -> LandEntry:
    facts = snap.facts[pull.number]
    ready = readiness(facts, stack.config.land, snap.permissions, snap.required, base)
    e.readiness = ready
    head = snap.heads.get(pull.number)
    if not head or head != snap.replayed.get(o.name):
        why = f"#{pull.number}'s head {short(facts.head_sha)} is not {o.name} as stored: run `ggstack pr` first"
        return _stop(e, why)
    if ready.blocker is not None:
        return _stop(e, ready.blocker)
    e.action, e.why = "land", f"{ready.approval}; land #{pull.number}"
    e.steps += _lift_gate(stack, facts, pull.number)
    if facts.base_ref != base:
        e.steps.append(ForgeStep("retarget", f"retarget #{pull.number} onto {base} (from {facts.base_ref})"))
    words = f"merge #{pull.number} into {base} ({method}) at {short(facts.head_sha)}"
    e.steps.append(ForgeStep("merge", words, {"sha": facts.head_sha}))
    return e


def _lift_gate(stack: Stack, facts: MergeFacts, number: int) -> list[ForgeStep]:
    steps = [ForgeStep("ready", f"mark #{number} ready for review (approved)")] if facts.draft else []
    if stack.config.pr.approval_gate:
        for label in stack.config.pr.labels:
            if any(label.lower() == x.lower() for x in facts.labels):
                steps.append(ForgeStep("unlabel", f"remove label {label} from #{number}", {"label": label}))
    return steps


def _plan_native(plan: LandPlan, snap: LandSnapshot) -> None:
    """Ready PRs of a native stack below the first to close land in one merge (the top one's); a PR to close
    inside it dissolves the stack first, and what is above it lands classically."""
    if snap.stacks is None:
        return
    holding = _holding(snap.stacks)
    moving = [e for e in plan.entries if e.action in ("land", "close")]
    cut = next((i for i, e in enumerate(moving) if e.action == "close"), len(moving))
    found = _native_prefix(plan, moving[:cut], holding)
    if found is None:
        _unstack_for_a_close(moving[cut : cut + 1], holding)
    else:
        _merge_as_one(plan, *found)


def _holding(stacks: list[NativeStack]) -> dict[int, NativeStack]:
    return {n: st for st in stacks for n in st.pulls if n not in st.merged}


def _merge_as_one(plan: LandPlan, st: NativeStack, prefix: list[LandEntry]) -> None:
    top = prefix[-1]
    sha = next(s.fields["sha"] for s in top.steps if s.kind == "merge")
    for e in prefix:
        e.steps = [s for s in e.steps if s.kind in ("ready", "unlabel")]
    words = f"merge native stack {st.number} up to #{top.number} into {plan.base} ({plan.method}), all at once"
    top.steps.append(ForgeStep("merge-stack", words, {"sha": sha, "stack": str(st.number)}))
    plan.native = st


def _native_prefix(
    plan: LandPlan, lands: list[LandEntry], holding: Mapping[int, NativeStack]
) -> tuple[NativeStack, list[LandEntry]] | None:
    """The native stack of the first PR to land, and the PRs to land that are its bottom, in its order."""
    first = lands[0].number if lands else None
    if first is None or first not in holding:
        return None
    st = holding[first]
    order = [n for n in st.pulls if n not in st.merged]
    if order[0] != first:
        _stop(lands[0], f"native stack {st.number} has #{order[0]} below #{first}: run `ggstack pr` first")
        del plan.entries[plan.entries.index(lands[0]) + 1 :]
        return None
    prefix = []
    for e, n in zip(lands, order, strict=False):
        if e.number != n:
            break
        prefix.append(e)
    return st, prefix


def _unstack_for_a_close(closing: list[LandEntry], holding: Mapping[int, NativeStack]) -> None:
    """A PR the base took, inside a native stack: the stack is dissolved before it is closed."""
    for e in closing:
        if e.number is not None and e.number in holding:
            st = holding[e.number]
            words = f"unstack stack {st.number} (#{e.number} is closed, not merged)"
            e.steps.insert(0, ForgeStep("unstack", words, {"stack": str(st.number)}))
