"""``ggstack land``: merge the stack's approved PRs in merge order, each checked again at the last moment.

The base may take a patch's change while its PR waits, so ``land`` works in rounds shaped like ``pr``'s:
read the forge, ``check`` against the base's tip (text only: no patch code runs where the token is),
plan purely (``plan_landing``), do the plan's first write, read again. A rerun starts from what the
forge says now: nothing is merged twice. Native stacks land in one asynchronous merge, polled.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ggstack import git, replay, report
from ggstack.check.stack import check_stack
from ggstack.errors import InfraError, UserError
from ggstack.forge import Comment, Forge, MergeAnswer, MergeFacts, NativeStack, RemotePR, open_forge
from ggstack.model import Outcome, Run, Stack, Verdict
from ggstack.pr.plan import ForgeStep
from ggstack.pr.read import head_owner, latest_closed, match, native_stacks, read_permissions
from ggstack.readiness import Readiness, readiness
from ggstack.secrets import TOKEN_VARS

METHODS = ("merge", "squash", "rebase")  # GitHub's default order: a merge commit where allowed


# -- reading ---------------------------------------------------------------------------------


@dataclass
class LandSnapshot:
    base_sha: str
    pulls: dict[str, RemotePR] = field(default_factory=dict)  # patch -> its open PR
    closed: dict[str, RemotePR] = field(default_factory=dict)  # patch without an open PR -> its latest closed one
    facts: dict[int, MergeFacts] = field(default_factory=dict)  # open PR -> what merging it needs
    heads: dict[int, str] = field(default_factory=dict)  # open PR -> patch-id of its head commit
    replayed: dict[str, str] = field(default_factory=dict)  # patch -> patch-id of its commit replayed now
    permissions: dict[str, str] = field(default_factory=dict)  # reviewer (lower case) -> permission
    required: list[str] = field(default_factory=list)  # the checks the base branch requires
    comments: dict[int, list[Comment]] = field(default_factory=dict)  # PR to close -> its comments
    stacks: list[NativeStack] | None = None  # None: no native stacks (or not used)
    methods: tuple[str, ...] = ("merge", "squash", "rebase")


def read_landing(forge: Forge, repo: git.Repository, stack: Stack, run: Run, base: str, base_sha: str) -> LandSnapshot:
    matched = match(run, stack, forge.open_pulls())
    snap = LandSnapshot(base_sha=base_sha, pulls=matched.pulls, methods=forge.merge_methods())
    owner = head_owner(stack)
    for o in run.outcomes:
        pull = matched.pulls.get(o.name)
        if pull is None:
            closed = latest_closed(forge, owner, matched.branches[o.name], o)
            if closed is not None:
                snap.closed[o.name] = closed
        elif o.verdict is Verdict.REPRESENTED:
            snap.comments[pull.number] = forge.comments(pull)
        elif o.verdict is Verdict.UNIQUE:
            snap.facts[pull.number] = forge.merge_facts(pull)
    snap.permissions = read_permissions(forge, stack.config.land, snap.facts.values())
    snap.required = forge.required_checks(base)
    snap.stacks = native_stacks(forge, stack)
    _read_heads(repo, stack, run, snap)
    return snap


def _read_heads(repo: git.Repository, stack: Stack, run: Run, snap: LandSnapshot) -> None:
    """The patch-id of each open PR's head and of its patch replayed now: the PR must carry the patch
    as stored, not an older version of it nor someone else's commit (``pr`` updates it)."""
    heads = _open_heads(run, snap)
    if not heads:
        return
    _fetch_missing(repo, stack.config.target.remote, snap, heads)
    replayed = {o.name: o.commit for o in run.outcomes if o.name in heads and o.commit}
    ids = repo.patch_ids_of_commits([(sha, None) for sha in [*heads.values(), *replayed.values()]])
    snap.heads = {snap.pulls[name].number: ids.get(sha, "") for name, sha in heads.items()}
    snap.replayed = {name: ids.get(sha, "") for name, sha in replayed.items()}


def _fetch_missing(repo: git.Repository, remote: str, snap: LandSnapshot, heads: dict[str, str]) -> None:
    present = repo.has_objects(heads.values())
    missing = [f"refs/heads/{snap.pulls[name].head_ref}" for name, sha in heads.items() if not present[sha]]
    if missing:
        repo.fetch_objects(remote, missing)  # objects only: no ref is written


def _open_heads(run: Run, snap: LandSnapshot) -> dict[str, str]:
    unique = [o for o in run.outcomes if o.name in snap.pulls and o.verdict is Verdict.UNIQUE and o.commit]
    return {o.name: snap.facts[snap.pulls[o.name].number].head_sha for o in unique}


# -- the plan: pure --------------------------------------------------------------------------


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
    """In merge order, each patch's action until the first that may not land; nothing is read or written."""
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
        why = f"{verdict} on {base} at {report.short(snap.base_sha)}: not landed (`ggstack check` says why)"
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
    via = ", ".join(report.short(c) for c in o.represented_by) or base
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
    if not any(report.is_closing_comment(c.body, o.stack_patch_id) for c in comments):
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
        why = f"#{pull.number}'s head {report.short(facts.head_sha)} is not {o.name} as stored: run `ggstack pr` first"
        return _stop(e, why)
    if ready.blocker is not None:
        return _stop(e, ready.blocker)
    e.action, e.why = "land", f"{ready.approval}; land #{pull.number}"
    if facts.draft:
        e.steps.append(ForgeStep("ready", f"mark #{pull.number} ready for review (approved)"))
    if stack.config.pr.approval_gate:
        for label in stack.config.pr.labels:
            if any(label.lower() == x.lower() for x in facts.labels):
                e.steps.append(ForgeStep("unlabel", f"remove label {label} from #{pull.number}", {"label": label}))
    if facts.base_ref != base:
        e.steps.append(ForgeStep("retarget", f"retarget #{pull.number} onto {base} (from {facts.base_ref})"))
    words = f"merge #{pull.number} into {base} ({method}) at {report.short(facts.head_sha)}"
    e.steps.append(ForgeStep("merge", words, {"sha": facts.head_sha}))
    return e


def _plan_native(plan: LandPlan, snap: LandSnapshot) -> None:
    """Where the PRs are a native stack: the ready ones below the first to close land in one merge of
    the forge's (the top one's), after their gates are lifted; a PR to close inside it dissolves the
    stack first (what is above it then lands classically)."""
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
    """The PRs of ``prefix`` merged by one merge of the top one's, after their gates are lifted."""
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


# -- acting ----------------------------------------------------------------------------------


@dataclass
class Landing:
    """What ``land`` did (or, dry run, would do): ``land --json`` prints it."""

    stack: str
    base: str
    dry_run: bool
    method: str = ""
    base_sha: str = ""
    native: bool = False  # the forge's native stacks were used
    done: list[str] = field(default_factory=list)  # each write, in order
    merged: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    plan: list[LandEntry] = field(default_factory=list)  # the last plan read (a dry run's whole answer)
    stopped: str | None = None  # the first PR that may not land, in one line
    queued: str | None = None  # the forge put the stack in its merge queue

    @property
    def exit_code(self) -> int:
        """1 when a PR is not ready (a human's turn), else 0."""
        return 1 if self.stopped else 0

    def to_json(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "base": self.base,
            "base_sha": self.base_sha,
            "dry_run": self.dry_run,
            "method": self.method,
            "native": self.native,
            "done": self.done,
            "merged": self.merged,
            "closed": self.closed,
            "stopped": self.stopped,
            "queued": self.queued,
            "plan": [e.to_json() for e in self.plan],
        }


@dataclass(frozen=True)
class Timing:
    """How often and how long ``land`` polls an asynchronous merge (GGSTACK_MERGE_*_SECONDS)."""

    poll: float = 2.0
    wait: float = 600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Timing:
        def seconds(var: str, default: float) -> float:
            raw = env.get(var, "")
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise UserError(f"{var}={raw!r} is not a number of seconds") from None
            if not 0 <= value < 10**6:
                raise UserError(f"{var}={raw!r} is not a usable number of seconds")
            return value

        return cls(seconds("GGSTACK_MERGE_POLL_SECONDS", cls.poll), seconds("GGSTACK_MERGE_WAIT_SECONDS", cls.wait))


def land(
    repo: git.Repository,
    stack: Stack,
    *,
    onto: str | None = None,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    client: Forge | None = None,
    say: Callable[[str], None] | None = None,
) -> Landing:
    """Read, check, plan, do one write, and again, until the plan has none left. ``dry_run`` plans once
    and writes nothing (a token that may read is enough); ``say`` is told each write as it is done."""
    env = os.environ if env is None else env
    base = land_base(stack, onto)
    forge = client or _open_forge(stack, env)
    result = Landing(stack.name, base, dry_run)
    try:
        result.method = choose_method(stack, forge.merge_methods())
        timing = Timing.from_env(env)
        checked: dict[str, Run] = {}
        for _ in range(8 * len(stack.patches) + 8):  # every write moves the plan on: a bound, never reached
            plan, run, snap = _round(repo, stack, forge, base, result, checked)
            nxt = plan.next_step()
            if dry_run or nxt is None:
                result.stopped = plan.stop.line() if plan.stop is not None else None
                return result
            words, stop = _act(forge, run, snap, plan, *nxt, result, timing)
            if _done(result, nxt[0], words, stop, say):
                return result
        raise InfraError("land: the forge kept changing under every step; nothing more was done (rerun it)")
    finally:
        forge.close()


def _done(result: Landing, entry: LandEntry, words: str, stop: str | None, say: Callable[[str], None] | None) -> bool:
    """One write recorded (and said); True where land stops after it: refused, or in the merge queue."""
    result.done.append(f"{entry.label}: {words}")
    if say:
        say(result.done[-1])
    if stop is not None or result.queued:
        result.stopped = f"{entry.label}: {stop}" if stop else None
        return True
    return False


def _round(
    repo: git.Repository, stack: Stack, forge: Forge, base: str, result: Landing, checked: dict[str, Run]
) -> tuple[LandPlan, Run, LandSnapshot]:
    """One read of the forge and a check against the base's tip as it is now (once a tip), and the plan."""
    base_sha = forge.branch_sha(base)
    if base_sha is None:
        raise UserError(f"{base!r} is not a branch of {stack.config.target.repo} on the forge (pass --onto a branch)")
    if base_sha not in checked:
        checked[base_sha] = fresh_check(repo, stack, base, base_sha)
    run = checked[base_sha]
    snap = read_landing(forge, repo, stack, run, base, base_sha)
    plan = plan_landing(run, stack, snap, base=base, method=result.method)
    result.base_sha, result.plan = base_sha, plan.entries
    result.native = result.native or plan.native is not None
    return plan, run, snap


def fresh_check(repo: git.Repository, stack: Stack, base: str, base_sha: str) -> Run:
    """``apply`` (no branch written) and ``check`` against the base's tip on the forge: what the base has now."""
    if not repo.has_objects([base_sha])[base_sha]:
        repo.fetch_objects(stack.config.target.remote, [f"refs/heads/{base}"])  # objects only: no ref is written
        if not repo.has_objects([base_sha])[base_sha]:
            raise InfraError(
                f"{base} is at {report.short(base_sha)} on the forge, but {stack.config.target.remote!r} did not "
                f"give that commit: is target.remote the same repository as target.repo?"
            )
    run = check_stack(repo, stack, base_sha, run=replay.apply(repo, stack, base_sha, write=False))
    return dataclasses.replace(run, base_ref=base)


def _act(
    forge: Forge,
    run: Run,
    snap: LandSnapshot,
    plan: LandPlan,
    entry: LandEntry,
    step: ForgeStep,
    result: Landing,
    timing: Timing,
) -> tuple[str, str | None]:
    """Carry out one step; its words, and the stop line when the forge refused it."""
    pull = snap.pulls[entry.name]
    if step.kind == "merge":
        return _merged(result, [pull.number], step, forge.merge(pull, method=plan.method, sha=step.fields["sha"]))
    if step.kind == "merge-stack":
        first = forge.merge_async(pull, method=plan.method, sha=step.fields["sha"])
        numbers = _stack_numbers(plan, pull.number)
        return _merged(result, numbers, step, _poll(forge, pull, first, timing), stack=step.fields["stack"])
    _before_merge(forge, run, plan, entry.name, pull, step)
    if step.kind == "close":
        result.closed.append(pull.number)
    return step.words, None


def _before_merge(forge: Forge, run: Run, plan: LandPlan, name: str, pull: RemotePR, step: ForgeStep) -> None:
    if step.kind == "ready":
        forge.mark_ready(pull)
    elif step.kind == "unlabel":
        forge.remove_label(pull, step.fields["label"])
    elif step.kind == "comment":
        forge.comment(pull, report.closing_comment(run, next(o for o in run.outcomes if o.name == name)))
    elif step.kind == "close":
        forge.edit_pull(pull, state="closed")
    elif step.kind == "retarget":
        forge.edit_pull(pull, base=plan.base)
    elif step.kind == "unstack":
        forge.unstack(int(step.fields["stack"]))


def _stack_numbers(plan: LandPlan, top: int) -> list[int]:
    assert plan.native is not None
    below = [n for n in plan.native.pulls if n not in plan.native.merged]
    return below[: below.index(top) + 1]


def _merged(
    result: Landing, numbers: list[int], step: ForgeStep, answer: MergeAnswer, stack: str = ""
) -> tuple[str, str | None]:
    what = f"stack {stack} up to #{numbers[-1]}" if stack else f"#{numbers[-1]}"
    label = step.words
    if answer.status == "merged":
        result.merged += numbers
        return f"{label}: merged" + (f" as {report.short(answer.sha)}" if answer.sha else ""), None
    if answer.status == "enqueued":
        result.queued = f"{what} is in the merge queue of {result.base}: rerun `ggstack land` once it merged"
        return f"{label}: added to the merge queue", None
    said = "; ".join(line.strip() for line in answer.message.splitlines() if line.strip())  # one line
    refusal = f"GitHub refused to merge {what}: {said or answer.status}"
    return f"{label}: refused", refusal


def _poll(forge: Forge, pull: RemotePR, answer: MergeAnswer, timing: Timing) -> MergeAnswer:
    """The asynchronous merge's answer once it is no longer pending (bounded by ``timing.wait``)."""
    deadline = time.monotonic() + timing.wait
    while answer.status == "pending":
        if not answer.uuid:
            raise InfraError(f"the merge of #{pull.number} is pending, but GitHub gave no request id to follow")
        if time.monotonic() >= deadline:
            raise InfraError(
                f"the merge of #{pull.number} is still pending after {timing.wait:g} s (GGSTACK_MERGE_WAIT_SECONDS); "
                f"rerun `ggstack land` to follow it (GitHub keeps the request 24 hours)"
            )
        time.sleep(timing.poll)
        answer = forge.merge_result(pull, answer.uuid)
    return answer


def land_base(stack: Stack, onto: str | None) -> str:
    """The branch of target.repo the stack lands on: --onto or target.base, without a remote's prefix."""
    target = stack.config.target
    base = onto or target.base
    for prefix in ("refs/heads/", f"refs/remotes/{target.remote}/", f"{target.remote}/"):
        if base.startswith(prefix):
            return base.removeprefix(prefix)
    return base


def choose_method(stack: Stack, allowed: Sequence[str]) -> str:
    """stack.toml's ``land.method`` where the repository allows it; else the first it allows."""
    wanted, repo = stack.config.land.method, stack.config.target.repo
    if wanted:
        if wanted not in allowed:
            raise UserError(
                f"land.method = {wanted!r} in stack.toml, but {repo} allows only {', '.join(allowed) or 'no merge method'}"
            )
        return wanted
    for method in METHODS:
        if method in allowed:
            return method
    raise UserError(f"{repo} allows no merge method (merge commits, squash and rebase are all off)")


def _open_forge(stack: Stack, env: Mapping[str, str]) -> Forge:
    if not any(env.get(var, "").strip() for var in TOKEN_VARS):
        raise UserError(
            f"`land` needs GITHUB_TOKEN (or GH_TOKEN): one that may read {stack.config.target.repo} for --dry-run, "
            f"one that may merge its PRs otherwise"
        )
    return open_forge(stack, env, dry_run=False)
