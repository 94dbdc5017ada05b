"""``land``'s reading: each open PR as the forge has it now, and the stack checked against the base's tip
again whenever the tip moved."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ggstack import git, replay
from ggstack.check.stack import check_stack
from ggstack.errors import InfraError
from ggstack.forge import Comment, Forge, MergeFacts, NativeStack, RemotePR
from ggstack.model import Run, Stack, Verdict
from ggstack.pr.read import fetch_missing, head_owner, latest_closed, match, native_stacks, read_permissions
from ggstack.report.words import short


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


def read_landing(forge: Forge, repo: git.Repository, stack: Stack, run: Run, base: str, base_sha: str) -> LandSnapshot:
    matched = match(run, stack, forge.open_pulls())
    snap = LandSnapshot(base_sha=base_sha, pulls=matched.pulls)
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
    """The patch-id of each open PR's head and of its patch replayed now: a PR must carry the patch as stored."""
    heads = _open_heads(run, snap)
    if not heads:
        return
    refs = {f"refs/heads/{snap.pulls[name].head_ref}": sha for name, sha in heads.items()}
    fetch_missing(repo, stack.config.target.remote, refs)  # objects only: no ref is written
    replayed = {o.name: o.commit for o in run.outcomes if o.name in heads and o.commit}
    ids = repo.patch_ids_of_commits([(sha, None) for sha in [*heads.values(), *replayed.values()]])
    snap.heads = {snap.pulls[name].number: ids.get(sha, "") for name, sha in heads.items()}
    snap.replayed = {name: ids.get(sha, "") for name, sha in replayed.items()}


def _open_heads(run: Run, snap: LandSnapshot) -> dict[str, str]:
    unique = [o for o in run.outcomes if o.name in snap.pulls and o.verdict is Verdict.UNIQUE and o.commit]
    return {o.name: snap.facts[snap.pulls[o.name].number].head_sha for o in unique}


def fresh_check(repo: git.Repository, stack: Stack, base: str, base_sha: str) -> Run:
    """``apply`` (no branch written) and ``check`` against the base's tip on the forge: what the base has now."""
    if not repo.has_objects([base_sha])[base_sha]:
        repo.fetch_objects(stack.config.target.remote, [f"refs/heads/{base}"])  # objects only: no ref is written
        if not repo.has_objects([base_sha])[base_sha]:
            raise InfraError(
                f"{base} is at {short(base_sha)} on the forge, but {stack.config.target.remote!r} did not "
                f"give that commit: is target.remote the same repository as target.repo?"
            )
    run = check_stack(repo, stack, base_sha, run=replay.apply(repo, stack, base_sha, write=False))
    return dataclasses.replace(run, base_ref=base)
