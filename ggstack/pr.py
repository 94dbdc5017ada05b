"""``ggstack pr``: open, update and close the stack's pull requests.

The seed's PR should never have been opened: the base already had its change.
So this stage only acts on what ``check`` (and ``test``) decided, and it is
split in two: a *plan* (the Run, the forge's PRs and the remote's branch heads
in, a list of steps per patch out) and the *act* that carries the plan out in
merge order. ``--dry-run`` stops after the plan, so what it prints is exactly
what a real run would do, and nothing anywhere changes.

What it avoids:
- Noise. A branch whose remote head is already the replayed commit is not
  pushed again, a PR whose title, body and base are already right is not
  edited: a rerun with nothing changed makes no write call at all, so no CI
  run, no review bot, no notification.
- Duplicates. PRs are found by a hidden marker carrying the Stack-Patch-Id
  (and by head branch), so reruns update; the closing comment carries its own
  marker. A run killed midway is converged from.
- Flapping. A PR's base follows the previous needed patch only when the
  stacked chain itself changed; an existing stack keeps the mode (stacked or
  flat) it was opened in unless the user says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ggstack import git, replay, report
from ggstack.errors import InfraError, UserError
from ggstack.forge import Forge, RemotePR
from ggstack.forge.github import GitHub
from ggstack.model import Applied, Outcome, Patch, PRState, Run, Stack, Verdict

NEEDED = (Verdict.UNIQUE, Verdict.PARTIAL)  # the only verdicts that get a PR
Progress = Callable[[int, int, str], None]
_TRAILER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*: .*|\(cherry picked from commit [0-9a-f]+\))$")

# -- the plan ------------------------------------------------------------------------------


@dataclass
class Step:
    kind: str  # push | open | edit | label | unlabel | ready | comment | close | would-close
    words: str  # what the plan prints
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Slot:
    """One patch in the plan: what it is, what the forge and remote have, what to do."""

    outcome: Outcome
    patch: Patch
    branch: str  # the remote branch name (without refs/heads/)
    commit: str | None
    remote_sha: str | None
    pull: RemotePR | None
    state: PRState | None = None
    steps: list[Step] = field(default_factory=list)
    summary: str = ""
    diffstat: report.Diffstat = field(default_factory=list)
    note: str = ""

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

    @property
    def needed(self) -> list[Slot]:
        return [s for s in self.slots if s.needed]


def pr(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    dry_run: bool = False,
    close_redundant: bool = False,
    stacked: bool | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    client: Any = None,
) -> Run:
    """``ggstack pr``: plan the forge actions for the Run's verdicts, then (unless
    ``dry_run``) carry them out in merge order. Fills each Outcome's ``pr`` and
    ``run.stages["pr"]``. Nothing is ever merged."""
    missing = [o.name for o in run.outcomes if o.verdict is None]
    if missing:
        raise UserError(f"no verdict for {', '.join(missing)}: `pr` needs the Run of `check` (run check first)")
    # ``client``: another forge to read (e.g. ``NoForge`` for the demo's plan).
    forge = client or GitHub(stack.config.target.repo, env=env)
    try:
        plan = make_plan(repo, stack, run, forge, close_redundant=close_redundant, stacked=stacked)
        if not dry_run:
            act(repo, stack, run, plan, forge, progress)
        for slot in plan.slots:
            if slot.state is not None:
                slot.state.actions = [step.words for step in slot.steps]
                slot.state.action = _summary_action(slot, dry_run)
            slot.outcome.pr = slot.state
        run.stages["pr"] = "dry-run" if dry_run else "ok"
        return run
    finally:
        forge.close()


def make_plan(
    repo: git.Repository, stack: Stack, run: Run, forge: Forge, *, close_redundant: bool, stacked: bool | None
) -> Plan:
    """Read the forge and the remote, and decide every step (nothing is written)."""
    target = stack.config.target
    head_owner = (target.fork or target.repo).split("/")[0]
    patches = {p.name: p for p in stack.patches}
    refs = replay.branch_refs(stack)
    pulls = forge.open_pulls()
    ids = {p.provenance.stack_patch_id for p in stack.patches}
    by_marker: dict[str, RemotePR] = {}
    for p in pulls:  # oldest first: a later duplicate never wins
        # Anyone may open a PR whose body ends in a marker: only a head in the stack's own repository is ours.
        if p.marker in ids and p.marker not in by_marker and p.head_owner.lower() == head_owner.lower():
            by_marker[p.marker] = p
    slots = []
    for o in run.outcomes:
        patch = patches.get(o.name)
        if patch is None:
            raise UserError(f"the Run names {o.name!r}, which is not in stack {stack.name!r}")
        default = _remote_branch(o.branch or refs[stack.patches.index(patch)])
        pull = by_marker.get(o.stack_patch_id) or next(
            (
                p
                for p in pulls
                if p.marker is None and p.head_ref == default and p.head_owner.lower() == head_owner.lower()
            ),
            None,
        )
        # An existing PR keeps its head branch (PRs cannot change head), e.g. after a rename.
        branch = pull.head_ref if pull else default
        slots.append(Slot(o, patch, branch, o.commit if o.verdict in NEEDED else None, None, pull))
    wanted = [f"refs/heads/{s.branch}" for s in slots if s.needed]
    heads = repo.ls_remote(target.remote, wanted) if wanted else {}  # no patterns would list every ref
    for s in slots:
        s.remote_sha = heads.get(f"refs/heads/{s.branch}")
    for s in slots:
        if s.pull is not None:
            s.pull.approved_by = forge.approvals(s.pull)
        elif s.needed:
            _respect_closed(s, forge, head_owner)
    plan = Plan(slots, _stacked_mode(stacked, stack, slots), _gate_words(stack), head_owner, target.fork is not None)
    _settle_commits(repo, stack, run, plan, forge)
    _plan_needed(repo, stack, run, plan)
    _plan_others(run, plan, forge, close_redundant)
    return plan


def _respect_closed(s: Slot, forge: Forge, head_owner: str) -> None:
    """A needed patch whose PR someone merged or closed gets no new one.

    Only a PR that ggstack itself closed as redundant (its closing comment
    says so) may be followed by a new PR when the patch is needed again.
    """
    closed = forge.find_closed_pull(head_owner, s.branch)
    if closed is None or closed.marker not in (None, s.outcome.stack_patch_id):
        return
    if closed.merged:
        s.note = f"its PR #{closed.number} was merged (into {closed.base_ref}); no new PR"
    elif any(report.is_closing_comment(b, s.outcome.stack_patch_id) for b in forge.comment_bodies(closed)):
        return
    else:
        s.note = f"its PR #{closed.number} was closed by someone else: not reopened or replaced (reopen it, or remove the patch)"
    s.commit, s.pull = None, closed


def _remote_branch(ref: str) -> str:
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ref.removeprefix("refs/")


def _stacked_mode(stacked: bool | None, stack: Stack, slots: list[Slot]) -> bool:
    """The flag if given; else the mode the open PRs were opened in; else stack.toml.

    With the heads in a fork there is no stacking: a PR's base must be a branch
    of the target repository, and the patches' branches live in the fork.
    """
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
        return any(p.base_ref != stack.config.target.base for p in later)
    return stack.config.pr.stacked


def _gate_words(stack: Stack) -> str | None:
    policy = stack.config.pr
    if not policy.approval_gate:
        return None
    words = (["draft"] if policy.draft else []) + [f"label {report.md_code(label)}" for label in policy.labels]
    return ", ".join(words) or "approval"


def _settle_commits(repo: git.Repository, stack: Stack, run: Run, plan: Plan, forge: Forge) -> None:
    """Make each needed patch's commit sit on the previous needed one, and
    keep the remote's commit where it is the same change.

    ``apply`` chains every patch that applied; a patch without a PR (broken,
    held, represented yet applied) would ride along in the next PR, so the
    next one is replayed onto the previous needed commit instead. And a
    replay on another machine (the CI bot's fresh clone) makes new commit
    objects for the same change (the committer date differs): when the
    remote head has the same tree, parent and message, it is kept, so an
    unchanged branch is not pushed again.
    """
    target = stack.config.target
    head_repo = target.fork or target.repo
    picks: dict[str, replay.Pick] | None = None
    previous = run.base
    for s in plan.needed:
        assert s.commit is not None
        info = repo.commit_info(s.commit)
        if info.parents[:1] != (previous,):
            picks = picks or {p.name: p for p in replay.materialize(repo, stack)}
            replayer = replay.Replayer(repo, previous)
            try:
                step = replayer.try_pick(picks[s.outcome.name])
            finally:
                replayer.close()
            if step.applied is not Applied.APPLIED or step.commit is None:
                s.commit, s.note = (
                    None,
                    f"does not apply on the previous needed patch alone ({step.applied.value}): no PR action",
                )
                continue
            s.commit = step.commit
            info = repo.commit_info(s.commit)
        if s.remote_sha and s.remote_sha != s.commit:
            facts = forge.commit_facts(head_repo, s.remote_sha)
            if (
                facts is not None
                and ("Stack-Patch-Id", s.outcome.stack_patch_id) not in git.parse_trailers([facts[2]])[0]
            ):
                # Not a commit ggstack made of this patch: a reviewer's fixup, say. Never overwritten.
                raise UserError(
                    f"someone else pushed {s.remote_sha[:10]} ({facts[2].splitlines()[0] if facts[2] else 'no message'!r}) "
                    f"to {s.branch} on {target.remote!r}; ggstack will not overwrite it: fold that change into "
                    f"{s.outcome.name} (or delete the branch), then rerun"
                )
            if (
                facts is not None
                and facts[0] == info.tree
                and facts[1] == [previous]
                and facts[2].rstrip("\n") == info.message.rstrip("\n")
            ):
                s.commit = s.remote_sha
        s.outcome.commit = s.commit
        previous = s.commit


def _plan_needed(repo: git.Repository, stack: Stack, run: Run, plan: Plan) -> None:
    policy, target = stack.config.pr, stack.config.target
    needed = plan.needed
    previous: Slot | None = None
    for n, s in enumerate(needed, 1):
        base = previous.branch if plan.stacked and previous else target.base
        pull = s.pull
        approved = bool(pull and pull.approved_by)
        s.state = PRState(
            number=pull.number if pull else None,
            url=pull.url if pull else None,
            state="open" if pull else "planned",
            draft=pull.draft if pull else (policy.draft and plan.gate is not None),
            approved=approved,
            head=f"{plan.head_owner}:{s.branch}" if plan.fork else s.branch,
            base=base,
            title=s.patch.subject,
            labels=list(pull.labels) if pull else (list(policy.labels) if plan.gate else []),
            approved_by=list(pull.approved_by) if pull else [],
            position=n,
            total=len(needed),
        )
        s.outcome.pr = s.state  # the bodies of its neighbours read its number
        info = repo.commit_info(s.commit)
        parent = info.parents[0] if info.parents else git.EMPTY_TREE
        s.diffstat = repo.numstat(parent, s.commit)
        s.summary = summary_of(s.patch)
        if s.commit != s.remote_sha:
            s.steps.append(
                Step(
                    "push",
                    f"push {s.branch} {report.short(s.remote_sha) or '(new)'} → {report.short(s.commit)} (--force-with-lease)",
                )
            )
        if pull is None:
            gate = f" as {plan.gate}" if plan.gate else ""
            s.steps.append(Step("open", f"open PR {n} of {len(needed)}: {s.state.head} → {base}{gate}"))
            if plan.gate and policy.labels:
                s.steps.append(Step("label", f"label {', '.join(policy.labels)}"))
        elif plan.gate is not None:
            if approved and pull.draft:
                s.steps.append(Step("ready", f"approved by {', '.join(pull.approved_by)}: mark ready for review"))
            for label in policy.labels:
                has = any(label.lower() == x.lower() for x in pull.labels)
                if approved and has:
                    s.steps.append(Step("unlabel", f"approved: remove label {label}", {"label": label}))
                elif not approved and not has:
                    s.steps.append(Step("label", f"label {label}", {"label": label}))
        previous = s
    for s in needed:
        s.state.body = _body(run, plan, s)
        if s.pull is not None:
            fields = _changed_fields(s)
            if fields:
                words = ", ".join(f"base {s.pull.base_ref} → {v}" if k == "base" else k for k, v in fields.items())
                s.steps.append(Step("edit", f"update {words}", fields))


def _body(run: Run, plan: Plan, s: Slot) -> str:
    if s.state is not None:
        s.state.approved = bool(s.pull and s.pull.approved_by)
    return report.pr_body(
        run, s.outcome, summary=s.summary, diffstat=s.diffstat, order=[x.outcome for x in plan.needed], gate=plan.gate
    )


def _changed_fields(s: Slot) -> dict[str, str]:
    assert s.pull is not None and s.state is not None
    fields = {}
    if s.pull.title != s.state.title:
        fields["title"] = s.state.title or ""
    if s.pull.body.replace("\r\n", "\n") != s.state.body:
        fields["body"] = s.state.body or ""
    if s.pull.base_ref != s.state.base:
        fields["base"] = s.state.base or ""
    return fields


def _plan_others(run: Run, plan: Plan, forge: Forge, close_redundant: bool) -> None:
    """Patches without a PR to open: close the redundant ones' PRs, leave the rest."""
    for s in plan.slots:
        if s.needed or s.pull is None:
            continue
        o, pull = s.outcome, s.pull
        s.state = PRState(
            number=pull.number,
            url=pull.url,
            state="merged" if pull.merged else pull.state,
            draft=pull.draft,
            approved=bool(pull.approved_by),
            head=pull.head_ref,
            base=pull.base_ref,
            title=pull.title,
            labels=list(pull.labels),
            approved_by=list(pull.approved_by),
        )
        if o.verdict is Verdict.REPRESENTED:
            s.state.comment = report.closing_comment(run, o)
            via = ", ".join(report.short(c) for c in o.represented_by) or "the base"
            if not close_redundant:
                s.steps.append(Step("would-close", f"would close: represented by {via} (pass --close-redundant)"))
                continue
            # Whatever base it was checked on: one closing comment a PR, also across a moving base.
            if not any(report.is_closing_comment(b, o.stack_patch_id) for b in forge.comment_bodies(pull)):
                s.steps.append(Step("comment", f"comment: represented by {via}, with the evidence"))
            s.steps.append(Step("close", f"close #{pull.number}"))
        elif o.verdict in (Verdict.CONFLICT, Verdict.BROKEN):
            s.state.note = f"{o.verdict.value}: needs rework; PR left as it is"
        elif o.verdict is Verdict.INCONCLUSIVE:
            s.state.note = "inconclusive: held; PR left as it is"
        elif o.verdict in NEEDED:
            s.state.note = s.note or "no replayed commit: PR left as it is"


def summary_of(patch: Patch) -> str:
    """The patch message without subject and trailers: the PR's summary."""
    paragraphs = patch.body.split("\n\n")
    if paragraphs and all(_TRAILER.match(line) for line in paragraphs[-1].strip().splitlines()):
        paragraphs = paragraphs[:-1]
    text = "\n\n".join(paragraphs)
    return "\n".join(line for line in text.splitlines() if not line.startswith("(cherry picked from commit ")).strip()


def _summary_action(slot: Slot, dry_run: bool) -> str:
    kinds = list(dict.fromkeys(step.kind for step in slot.steps))
    if not kinds:
        return "nothing"
    return ("would " if dry_run and kinds != ["would-close"] else "") + ", ".join(kinds)


# -- acting -------------------------------------------------------------------------------


def act(repo: git.Repository, stack: Stack, run: Run, plan: Plan, forge: Forge, progress: Progress | None) -> None:
    """Carry the plan out: push, open in merge order, fix bodies and bases, gates, closes."""
    total = sum(len(s.steps) for s in plan.slots)
    done = 0

    def tick(s: Slot, kind: str) -> None:
        nonlocal done
        done += sum(1 for step in s.steps if step.kind == kind)
        if progress:
            progress(min(done, total), total, f"{s.outcome.name}: {kind}")

    _push(repo, stack, [s for s in plan.needed if any(st.kind == "push" for st in s.steps)])
    for s in plan.needed:
        tick(s, "push")
    policy = stack.config.pr
    for s in plan.needed:  # open in merge order, so each base exists and earlier numbers are known
        if s.pull is not None:
            continue
        assert s.state is not None
        body = _body(run, plan, s)
        s.pull = forge.create_pull(
            title=s.state.title or s.patch.subject,
            body=body,
            base=s.state.base or stack.config.target.base,
            head_owner=plan.head_owner,
            head_ref=s.branch,
            head=s.state.head or s.branch,
            draft=bool(s.state.draft),
        )
        s.state.number, s.state.url, s.state.state = s.pull.number, s.pull.url, "open"
        tick(s, "open")
        missing = [x for x in policy.labels if x.lower() not in {y.lower() for y in s.pull.labels}] if plan.gate else []
        if missing:
            forge.add_labels(s.pull, missing)
            s.pull.labels += missing
        tick(s, "label")
    for s in plan.needed:  # with every number known, each body, title and base once
        assert s.state is not None and s.pull is not None
        s.state.body = _body(run, plan, s)
        fields = _changed_fields(s)
        if fields:
            forge.edit_pull(s.pull, **fields)
            s.pull.title, s.pull.body, s.pull.base_ref = s.state.title or "", s.state.body or "", s.state.base or ""
            if not any(st.kind == "edit" for st in s.steps):
                s.steps.append(Step("edit", f"update {', '.join(fields)}", fields))
        tick(s, "edit")
        _gate(s, forge)
    for s in plan.slots:
        if s.needed or s.pull is None or s.state is None:
            continue
        for step in s.steps:
            if step.kind == "comment":
                forge.comment(s.pull, s.state.comment or "", s.outcome.stack_patch_id)
            elif step.kind == "close":
                forge.edit_pull(s.pull, state="closed")
                s.state.state = "closed"
            tick(s, step.kind)


def _gate(s: Slot, forge: Forge) -> None:
    """Lift the gate of an approved PR, or put back a label an interrupted run lost."""
    assert s.pull is not None and s.state is not None
    for step in s.steps:
        if step.kind == "ready":
            forge.mark_ready(s.pull)
            s.state.draft = False
        elif step.kind == "unlabel":
            forge.remove_label(s.pull, step.fields["label"])
            s.state.labels = [x for x in s.state.labels if x.lower() != step.fields["label"].lower()]
        elif step.kind == "label" and step.fields.get("label"):
            forge.add_labels(s.pull, [step.fields["label"]])
            s.state.labels.append(step.fields["label"])


def _push(repo: git.Repository, stack: Stack, slots: Sequence[Slot]) -> None:
    """One atomic ``git push --force-with-lease`` of every branch that moved.

    The lease is the remote head the plan saw: if anyone pushed since, nothing
    is pushed and the user is told which branch moved.
    """
    if not slots:
        return
    remote = stack.config.target.remote
    refspecs = [f"{s.commit}:refs/heads/{s.branch}" for s in slots]
    leases = [f"refs/heads/{s.branch}:{s.remote_sha or ''}" for s in slots]
    proc = repo.push(remote, refspecs, leases, atomic=True)
    if proc.returncode == 0:
        return
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace").strip()
    rejected = [
        line.split("\t")[1].split(":")[-1] for line in out.splitlines() if line.startswith("!") and "\t" in line
    ]
    if rejected and ("stale info" in out or "fetch first" in out or "rejected" in out):
        raise UserError(
            f"git push to {remote!r} refused ({', '.join(rejected)}): someone pushed to these branches since "
            f"ggstack looked; nothing was pushed — rerun `ggstack pr` to plan from the new state"
        )
    raise InfraError(f"git push to {remote!r} failed: {err[-2000:] or out[-2000:]}")
