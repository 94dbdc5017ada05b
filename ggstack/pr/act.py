"""``pr``'s last step: one atomic push (a lease on each head the plan saw), then the PRs opened bottom first,
so each base exists and each body names the numbers before it; bodies, titles and bases are fixed last."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from ggstack import git
from ggstack.errors import InfraError, UserError
from ggstack.forge import Forge, RemotePR
from ggstack.forge.order import MergeOrder
from ggstack.model import Progress, Run, Stack
from ggstack.pr.plan import ForgeStep, Plan, Slot, changed_fields
from ggstack.pr.text import body_of, merge_order_of


class _Ticker:
    def __init__(self, plan: Plan, progress: Progress | None) -> None:
        self.total = sum(len(s.steps) for s in plan.slots)
        self.done = 0
        self.progress = progress

    def __call__(self, s: Slot, kind: str) -> None:
        self.done += sum(1 for step in s.steps if step.kind == kind)
        if self.progress:
            self.progress(min(self.done, self.total), self.total, f"{s.outcome.name}: {kind}")


def carry_out(
    repo: git.Repository, stack: Stack, run: Run, plan: Plan, forge: Forge, progress: Progress | None
) -> None:
    tick = _Ticker(plan, progress)
    _push(repo, stack, [s for s in plan.needed if any(st.kind == "push" for st in s.steps)])
    for s in plan.needed:
        tick(s, "push")
    _open_new(run, stack, plan, forge, tick)
    order = merge_order_of(plan)
    _native_steps(plan, forge, tick, "stack-dissolve")  # before any base changes: not inside a stack
    for s in plan.needed:
        _update(run, plan, s, forge, order)
        tick(s, "edit")
        _gate(s, forge)
    _close_others(plan, forge, tick)
    _native_steps(plan, forge, tick, "stack-create", "stack-add")


def _open_new(run: Run, stack: Stack, plan: Plan, forge: Forge, tick: _Ticker) -> None:
    for s in plan.needed:
        if s.pull is None:
            _open(run, stack, plan, s, forge)
            tick(s, "open")
            tick(s, "label")


def _native_steps(plan: Plan, forge: Forge, tick: _Ticker, *kinds: str) -> None:
    """The native stack's steps of these kinds (they ride on the top PR's slot)."""
    if not plan.needed:
        return
    top = plan.needed[-1]
    by_name = {s.outcome.name: s for s in plan.needed}
    for step in top.steps:
        if step.kind in kinds:
            pulls = [by_name[n].pull for n in step.fields.get("names", "").split(",") if n]
            _native_step(forge, step, [p.number for p in pulls if p is not None])
            tick(top, step.kind)


def _native_step(forge: Forge, step: ForgeStep, numbers: list[int]) -> None:
    if step.kind == "stack-dissolve":
        forge.unstack(int(step.fields["stack"]))
    elif step.kind == "stack-create":
        forge.create_stack(numbers)
    else:
        forge.add_to_stack(int(step.fields["stack"]), numbers)


def _open(run: Run, stack: Stack, plan: Plan, s: Slot, forge: Forge) -> None:
    assert s.state is not None
    s.pull = forge.create_pull(
        title=s.state.title or s.patch.subject,
        body=body_of(run, plan, s),  # the numbers opened so far
        base=s.state.base or plan.base,
        head_owner=plan.head_owner,
        head_ref=s.branch,
        head=s.state.head or s.branch,
        draft=bool(s.state.draft),
    )
    s.state.number, s.state.url, s.state.state = s.pull.number, s.pull.url, "open"
    if plan.gate:
        _add_missing_labels(forge, s.pull, stack.config.pr.labels)


def _add_missing_labels(forge: Forge, pull: RemotePR, labels: Sequence[str]) -> None:
    missing = [x for x in labels if x.lower() not in {y.lower() for y in pull.labels}]
    if missing:
        forge.add_labels(pull, missing)
        pull.labels += missing


def _update(run: Run, plan: Plan, s: Slot, forge: Forge, order: MergeOrder) -> None:
    assert s.state is not None and s.pull is not None
    s.body = body_of(run, plan, s, order)
    fields = changed_fields(s)
    if fields:
        forge.edit_pull(s.pull, **fields)
        s.pull.title, s.pull.body, s.pull.base_ref = s.state.title or "", s.body, s.state.base or ""
        if not any(st.kind == "edit" for st in s.steps):
            s.steps.append(ForgeStep("edit", f"update {', '.join(fields)}", fields))


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


def _close_others(plan: Plan, forge: Forge, tick: _Ticker) -> None:
    """The open PRs of patches that need none: closed where redundant, else left as they are."""
    for s in plan.slots:
        if not s.needed and s.pull is not None and s.state is not None:
            _close(s, forge, tick)


def _close(s: Slot, forge: Forge, tick: _Ticker) -> None:
    assert s.pull is not None and s.state is not None
    for step in s.steps:
        if step.kind == "comment":
            forge.comment(s.pull, s.state.comment or "")
        elif step.kind == "close":
            forge.edit_pull(s.pull, state="closed")
            s.state.state = "closed"
        tick(s, step.kind)


def _push(repo: git.Repository, stack: Stack, slots: Sequence[Slot]) -> None:
    """The lease is each head the plan saw: if anyone pushed since, nothing is pushed and the user is told."""
    if not slots:
        return
    remote = stack.config.target.remote
    refspecs = [f"{s.commit}:refs/heads/{s.branch}" for s in slots]
    leases = [f"refs/heads/{s.branch}:{s.remote_sha or ''}" for s in slots]
    proc = repo.push(remote, refspecs, leases, atomic=True)
    if proc.returncode != 0:
        raise _push_failure(remote, proc)


def _push_failure(remote: str, proc: subprocess.CompletedProcess[bytes]) -> Exception:
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace").strip()
    rejected = _rejected_branches(out)
    if rejected and ("stale info" in out or "fetch first" in out or "rejected" in out):
        return UserError(
            f"git push to {remote!r} refused ({', '.join(rejected)}): someone pushed to these branches since "
            f"ggstack looked; nothing was pushed — rerun `ggstack pr` to plan from the new state"
        )
    return InfraError(f"git push to {remote!r} failed: {err[-2000:] or out[-2000:]}")


def _rejected_branches(porcelain: str) -> list[str]:
    return [
        line.split("\t")[1].split(":")[-1] for line in porcelain.splitlines() if line.startswith("!") and "\t" in line
    ]
