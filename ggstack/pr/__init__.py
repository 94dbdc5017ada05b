"""``ggstack pr``: open, update and close the stack's PRs, acting only on what ``check`` decided.
``read`` the forge once, choose each branch's commit (``commits``), ``plan`` purely, ``act`` in merge order."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ggstack import git
from ggstack.errors import UserError
from ggstack.forge import Forge, open_forge
from ggstack.model import Patch, Progress, Run, Stack
from ggstack.pr.act import carry_out
from ggstack.pr.commits import choose_commits
from ggstack.pr.plan import Plan, Slot, make_plan
from ggstack.pr.read import read_snapshot

OFFLINE = "offline: no forge was read; planned as if nothing existed on it"


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
    client: Forge | None = None,
) -> Run:
    patches = _patches_of(run, stack)
    base_branch = pr_base(repo, stack, run.base_ref)
    forge = client or open_forge(stack, env, dry_run=dry_run)
    try:
        if forge.offline and not dry_run:
            raise UserError("no forge to write to: `pr` without --dry-run needs GITHUB_TOKEN (or GH_TOKEN)")
        snap = read_snapshot(forge, repo, stack, run, base_branch=base_branch, close_redundant=close_redundant)
        chosen = choose_commits(repo, stack, run, snap)
        plan = make_plan(
            run, stack, snap, chosen, patches, base_branch=base_branch, close_redundant=close_redundant, stacked=stacked
        )
        if not dry_run:
            carry_out(repo, stack, run, plan, forge, progress)
        return record(run, plan, dry_run=dry_run, offline=forge.offline)
    finally:
        forge.close()


def _patches_of(run: Run, stack: Stack) -> dict[str, Patch]:
    missing = [o.name for o in run.outcomes if o.verdict is None]
    if missing:
        raise UserError(f"no verdict for {', '.join(missing)}: `pr` needs the Run of `check` (run check first)")
    patches = {p.name: p for p in stack.patches}
    for o in run.outcomes:
        if o.name not in patches:
            raise UserError(f"the Run names {o.name!r}, which is not in stack {stack.name!r}")
    return patches


def pr_base(repo: git.Repository, stack: Stack, base_ref: str) -> str:
    """The branch the Run was replayed onto; a sha or a tag has none: its PRs would merge into an unchecked base."""
    target = stack.config.target
    for prefix in ("refs/heads/", f"refs/remotes/{target.remote}/"):
        if base_ref.startswith(prefix):
            return base_ref.removeprefix(prefix)
    if base_ref.startswith(f"{target.remote}/") and repo.try_resolve(f"refs/remotes/{base_ref}"):
        return base_ref.removeprefix(f"{target.remote}/")
    if repo.try_resolve(f"refs/heads/{base_ref}") or repo.try_resolve(f"refs/remotes/{target.remote}/{base_ref}"):
        return base_ref
    if _is_base_tip(repo, stack, base_ref):  # how the CI's test shards pin the base they test
        return target.base
    raise UserError(
        f"the stack was replayed onto {base_ref!r}, which is not a branch here or on {target.remote!r} "
        f"nor the tip of target.base {target.base!r}, so its PRs would have no base to match: "
        f"pass --onto a branch of {target.repo} (e.g. --onto {target.base})"
    )


def _is_base_tip(repo: git.Repository, stack: Stack, base_ref: str) -> bool:
    target = stack.config.target
    sha = repo.try_resolve(base_ref)
    tips = (
        repo.try_resolve(f"refs/heads/{target.base}"),
        repo.try_resolve(f"refs/remotes/{target.remote}/{target.base}"),
    )
    return sha is not None and sha in tips


def record(run: Run, plan: Plan, *, dry_run: bool, offline: bool) -> Run:
    outcomes = []
    for slot in plan.slots:
        o = slot.outcome
        if slot.state is not None:
            _record_state(slot, dry_run)
        o.pr = slot.state
        if slot.needed:
            o.commit = slot.commit
        outcomes.append(o)
    stage = ("dry-run" + (f" ({OFFLINE})" if offline else "")) if dry_run else "ok"
    return dataclasses.replace(run, outcomes=outcomes, stages={**run.stages, "pr": stage})


def _record_state(slot: Slot, dry_run: bool) -> None:
    assert slot.state is not None
    slot.state.actions = [step.words for step in slot.steps]
    slot.state.action = _summary_action(slot, dry_run)
    if slot.readiness is not None:
        r = slot.readiness
        slot.state.approval, slot.state.checks = r.approval, list(r.checks)
        slot.state.mergeable, slot.state.next_action = r.mergeable, r.next_action


def _summary_action(slot: Slot, dry_run: bool) -> str:
    kinds = list(dict.fromkeys(step.kind for step in slot.steps))
    if not kinds:
        return "nothing"
    return ("would " if dry_run and kinds != ["would-close"] else "") + ", ".join(kinds)
