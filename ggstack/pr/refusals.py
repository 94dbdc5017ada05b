"""What the forge would refuse after the push, refused before it: nothing is pushed or opened.
Also what it would allow but must not happen: another stack's PR adopted, a reviewer's commit overwritten."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ggstack.errors import UserError
from ggstack.model import Stack, TargetConfig
from ggstack.pr.read import Snapshot

if TYPE_CHECKING:
    from ggstack.pr.plan import Slot


def refuse_what_the_forge_would(stack: Stack, snap: Snapshot, slots: Sequence[Slot], base_branch: str) -> None:
    target = stack.config.target
    for s in slots:
        _refuse_foreign(stack, snap, s)
    needed = [s for s in slots if s.needed]
    for s in needed:
        _refuse_overwrite(target, snap, s)
    if needed:
        _refuse_missing_places(target, snap, base_branch)


def _refuse_foreign(stack: Stack, snap: Snapshot, s: Slot) -> None:
    pull = snap.foreign.get(s.outcome.name)
    if pull is not None:
        raise UserError(
            f"PR #{pull.number} ({pull.url}) carries the Stack-Patch-Id of {s.outcome.name}, but its head branch "
            f"{pull.head_ref} is not one of stack {stack.name!r}'s ({s.branch}): it is another stack's PR. "
            f"ggstack will not adopt it or push to its branch; give {s.outcome.name} an id of its own "
            f"(`ggstack remove` it, then `ggstack import` its commit again), then rerun"
        )


def _refuse_overwrite(target: TargetConfig, snap: Snapshot, s: Slot) -> None:
    """A remote head that is not a commit ggstack made of this patch (a reviewer's fixup, say): never overwritten."""
    facts = snap.commits.get(s.remote_sha or "")
    if (
        s.remote_sha == s.commit
        or facts is None
        or s.outcome.stack_patch_id in snap.patch_ids.get(s.remote_sha or "", ())
    ):
        return
    first = facts.message.splitlines()[0] if facts.message else "no message"
    raise UserError(
        f"someone else pushed {(s.remote_sha or '')[:10]} ({first!r}) to {s.branch} on {target.remote!r}; "
        f"ggstack will not overwrite it: fold that change into {s.outcome.name} (or delete the branch), then rerun"
    )


def _refuse_missing_places(target: TargetConfig, snap: Snapshot, base_branch: str) -> None:
    if not snap.head_repo_exists:
        raise UserError(
            f"target.fork {target.fork!r} is not on the forge (or the token cannot see it): the PR heads would "
            f"live there; fix target.fork in stack.toml, or give the token access to it"
        )
    if not snap.base_exists:
        raise UserError(
            f"the PR base {base_branch!r} is not a branch of {target.repo} on the forge (the stack was replayed "
            f"onto it): push it to {target.repo} first, or pass --onto a branch it has (target.base is {target.base!r})"
        )
