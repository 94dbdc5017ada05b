"""``ggstack rebase``: move the stored series onto a new base, so its recorded parents stop
ageing and ``apply`` stops meeting resolved conflicts again (docs/commands/rebase.md)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ggstack import git, replay
from ggstack.errors import UserError
from ggstack.model import Applied, Patch, Stack
from ggstack.picks import materialize, remember_materialized
from ggstack.rewrite import authored_commit, patch_file
from ggstack.series import store

UNCHANGED = "unchanged"
REWRITTEN = "rewritten"
STOPPED = "stopped"  # the first patch that does not apply cleanly
NOT_REACHED = "not rebased"  # after the stop


@dataclass
class Entry:
    name: str
    subject: str
    status: str
    old_base: str | None
    new_base: str | None
    detail: str = ""  # for the stop: conflict paths, or "changes nothing on the base"


@dataclass
class Result:
    stack: str
    base_ref: str
    base: str
    partial: bool
    entries: list[Entry] = field(default_factory=list)
    written: bool = False  # the stack changed on disk
    stack_after: Stack | None = field(default=None, repr=False)
    made: list[tuple[Patch, str]] = field(default_factory=list, repr=False)  # rewritten patch -> its commit

    @property
    def stopped(self) -> Entry | None:
        return next((e for e in self.entries if e.status == STOPPED), None)

    @property
    def before_stop(self) -> int:
        stop = self.stopped
        return len(self.entries) if stop is None else self.entries.index(stop)

    def to_json(self) -> dict[str, object]:
        stop = self.stopped
        return {
            "stack": self.stack,
            "base_ref": self.base_ref,
            "base": self.base,
            "partial": self.partial,
            "written": self.written,
            "stopped_at": None if stop is None else {"name": stop.name, "detail": stop.detail},
            "patches": [vars(e) for e in self.entries],
        }


def rebased_ref(stack: Stack) -> str:
    return f"refs/ggstack/{stack.name}/rebased"


def plan(repo: git.Repository, stack: Stack, base_ref: str, *, partial: bool = False) -> tuple[Result, str | None]:
    """Writes commit objects, no ref or file."""
    base = replay.resolve_base(repo, stack, base_ref)
    result = Result(stack.name, base_ref, base, partial)
    if not stack.patches:
        result.stack_after = stack
        return result, None
    steps = replay.replay(repo, materialize(repo, stack), base)
    todo, head = _chain(repo, stack, steps, base, result.entries)
    if result.stopped is not None and not partial:
        result.stack_after = stack
        return result, None
    result.stack_after, result.made = _rewritten(repo, stack, todo)
    return result, head if todo else None


def _chain(
    repo: git.Repository, stack: Stack, steps: Sequence[replay.Step], base: str, entries: list[Entry]
) -> tuple[list[tuple[int, str, str]], str | None]:
    recorded = repo.has_objects([p.base_commit for p in stack.patches if p.base_commit])
    parent, head = base, None
    todo: list[tuple[int, str, str]] = []
    for i, (patch, step) in enumerate(zip(stack.patches, steps)):
        if step.applied is not Applied.APPLIED:
            entries += _stopped_at(stack, i, step)
            break
        entry = _entry(repo, patch, parent, recorded)
        entries.append(entry)
        parent = entry.new_base or parent
        # committer = author: the same series on the same base gives the same base-commit ids
        # on every machine; ``rebased_ref`` keeps them reachable.
        head = authored_commit(repo, patch, step.tree, parent, patch.message)
        if entry.status == REWRITTEN:
            todo.append((i, head, parent))
        parent = head
    return todo, head


def _stopped_at(stack: Stack, index: int, step: replay.Step) -> list[Entry]:
    patch = stack.patches[index]
    detail = (
        "conflicts in " + ", ".join(step.conflict.paths)
        if step.conflict
        else "changes nothing on the base (drop it: `ggstack drop --represented`)"
    )
    stopped = Entry(patch.name, patch.subject, STOPPED, patch.base_commit, None, detail)
    return [stopped] + [
        Entry(p.name, p.subject, NOT_REACHED, p.base_commit, p.base_commit) for p in stack.patches[index + 1 :]
    ]


def _entry(repo: git.Repository, patch: Patch, parent: str, recorded: dict[str, bool]) -> Entry:
    """Unchanged where its parent has the same tree: the file stays byte for byte."""
    old = patch.base_commit
    if old and recorded.get(old) and _tree(repo, old) == _tree(repo, parent):
        return Entry(patch.name, patch.subject, UNCHANGED, old, old)
    return Entry(patch.name, patch.subject, REWRITTEN, old, parent)


def _tree(repo: git.Repository, commit: str) -> str | None:
    info = repo.read_commit(commit)  # the persistent cat-file: no process a patch
    return info.tree if info else None


def _rewritten(
    repo: git.Repository, stack: Stack, todo: Sequence[tuple[int, str, str]]
) -> tuple[Stack, list[tuple[Patch, str]]]:
    patches = list(stack.patches)
    made = []
    total = len(patches)
    for i, commit, parent in todo:
        old = patches[i]
        new = replace(patch_file(repo, stack, old, commit, parent, i + 1, total), provenance=old.provenance)
        if new.message != old.message:  # format-patch keeps the message; a change would lose a trailer
            path = os.path.join(stack.path, old.name)
            raise UserError(f"rebasing would change the message of {old.name}; nothing was written", path=path)
        patches[i] = new
        made.append((new, commit))
    return replace(stack, patches=tuple(patches)), made


def rebase(
    repo: git.Repository, stack: Stack, base_ref: str, *, partial: bool = False, dry_run: bool = False
) -> Result:
    """The new parents' chain is made reachable (compare-and-swap) before the stack names it."""
    result, head = plan(repo, stack, base_ref, partial=partial)
    after = result.stack_after
    if dry_run or after is None:
        return result
    if head is not None:
        ref = rebased_ref(stack)
        repo.update_refs([(ref, head, repo.ref_values([ref]).get(ref))], f"ggstack rebase {stack.name} onto {base_ref}")
    result.written = store.save(after)  # also when nothing changed: the save tidies what a killed change left
    remember_materialized(repo, result.made)
    return result
