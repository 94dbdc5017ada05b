"""The branch each applied patch gets, and the one transaction that moves them. What ggstack last wrote is one ref
(``refs/ggstack/<stack>/last-apply``: a ref is a file write); a branch someone else moved or checked out stays."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ggstack import git
from ggstack.errors import UserError
from ggstack.model import Stack
from ggstack.series import branchnames, config

_Update = tuple[str, str | None, str | None]  # ref, new value (None: delete), value it must have now


def branch_refs(stack: Stack, prefix: str | None = None) -> list[str]:
    toml = os.path.join(stack.path, config.STACK_TOML)
    _check_prefix(prefix)
    refs = []
    for i, patch in enumerate(stack.patches, 1):
        ref = _branch_name(stack, i, _ref_part(patch.slug), _ref_part(patch.name.removesuffix(".patch")), prefix)
        problem = branchnames.branch_ref_problem(ref)
        if problem:
            raise UserError(
                f"--branch-prefix {prefix!r} {problem}" if prefix else f"branches.template {problem}",
                path=None if prefix else toml,
            )
        refs.append(ref)
    if len(set(refs)) < len(refs):
        raise UserError("branches.template names one ref for two patches (use {index}, {slug} or {name})", path=toml)
    return refs


def _check_prefix(prefix: str | None) -> None:
    if prefix and prefix != prefix.encode("utf-8", "replace").decode("utf-8"):
        raise UserError(f"--branch-prefix {prefix!r} is not UTF-8")  # a surrogate-escaped byte from the command line
    if prefix and not prefix.startswith(branchnames.BRANCH_NAMESPACES):  # also: never a value git reads as an option
        raise UserError(
            f"--branch-prefix must be a full ref prefix under refs/heads/ or refs/ggstack/ "
            f"such as refs/heads/try, not {prefix!r}"
        )


def _branch_name(stack: Stack, index: int, slug: str, name: str, prefix: str | None) -> str:
    if prefix:
        branch = f"{prefix.rstrip('/')}/{index:02d}-{slug}"
    else:
        try:
            branch = stack.config.branch_template.format(stack=stack.name, index=index, slug=slug, name=name)
        except (KeyError, IndexError, ValueError) as e:
            toml = os.path.join(stack.path, config.STACK_TOML)
            raise UserError(f"branches.template: {e} (fields: stack, index, slug, name)", path=toml) from None
    return branch if branch.startswith("refs/") else "refs/heads/" + branch


def branch_namespace(stack: Stack, prefix: str | None) -> str | None:
    """``refs/heads/gg/<stack>/``; None where that would be too wide."""
    if prefix:
        return prefix.rstrip("/") + "/"
    template = stack.config.branch_template
    cut = min((i for i in (template.find("{" + f) for f in ("index", "slug", "name")) if i >= 0), default=-1)
    if cut <= 0:
        return None
    try:
        head = template[:cut].format(stack=stack.name)
    except (KeyError, IndexError, ValueError):
        return None
    full = head if head.startswith("refs/") else "refs/heads/" + head
    full = full[: full.rfind("/") + 1]
    return full if full.count("/") > 2 else None


def _ref_part(stem: str) -> str:
    """format-patch cuts a long subject anywhere; git refuses ``..`` and a part ending in ``.lock``."""
    part = re.sub(r"\.{2,}", ".", stem).lstrip(".")
    while part.endswith((".", ".lock")):
        part = part.removesuffix(".lock").rstrip(".")
    return part or "patch"


@dataclass
class _Record:
    ref: str
    value: str | None  # the record ref's value now
    last: dict[str, str]
    now: dict[str, str]

    @classmethod
    def read(cls, repo: git.Repository, stack: Stack, values: dict[str, str]) -> _Record:
        value = values.get(_record_ref(stack))
        lines = repo.read_blob(value).decode("utf-8", "surrogateescape").splitlines() if value is not None else []
        last = {ref: sha for sha, _, ref in (line.partition(" ") for line in lines if line)}
        return cls(_record_ref(stack), value, last, dict(last))

    def point(self, ref: str, target: str | None) -> None:
        if target:
            self.now[ref] = target
        else:
            self.now.pop(ref, None)

    def update(self, repo: git.Repository, *, delete_empty: bool = False) -> list[_Update]:
        if self.now == self.last:
            return []
        text = "".join(f"{sha} {ref}\n" for ref, sha in sorted(self.now.items()))
        blob = repo.hash_blob(text.encode("utf-8", "surrogateescape")) if self.now or not delete_empty else None
        return [(self.ref, blob, self.value)]


def _record_ref(stack: Stack) -> str:
    return f"refs/ggstack/{stack.name}/last-apply"


class BranchReads:
    """Started before ``apply`` replays; a ref moved in between fails the compare-and-swap."""

    def __init__(self, repo: git.Repository, stack: Stack, refs: Sequence[str], *, early: bool = True) -> None:
        self._values = repo.start_ref_values([*refs, _record_ref(stack)])
        self._worktrees = repo.start_checked_out_branches() if early else repo.checked_out_branches
        self._checked_out: dict[str, str] | None = None

    def values(self) -> dict[str, str]:
        return self._values()

    def checked_out(self) -> dict[str, str]:
        if self._checked_out is None:
            self._checked_out = self._worktrees()
        return self._checked_out


def write_branches(
    repo: git.Repository,
    stack: Stack,
    commits: Sequence[str | None],
    refs: Sequence[str],
    *,
    force: bool = False,
    namespace: str | None = None,
    reads: BranchReads | None = None,
) -> list[str | None]:
    reads = reads or BranchReads(repo, stack, refs, early=False)
    values = reads.values()
    record = _Record.read(repo, stack, values)
    updates, theirs, moved = _branch_moves(refs, commits, values, record, force)
    _refuse_not_own(stack, theirs, moved)
    _refuse_checked_out([ref for ref, _, _ in updates], reads.checked_out)
    updates += _orphans(repo, refs, record, namespace, reads.checked_out)
    updates += record.update(repo)
    repo.update_refs(updates, f"ggstack apply {stack.name}")
    return [ref if commit else None for ref, commit in zip(refs, commits)]


def _branch_moves(
    refs: Sequence[str], commits: Sequence[str | None], values: dict[str, str], record: _Record, force: bool
) -> tuple[list[_Update], list[str], list[str]]:
    """Also the refs not ggstack's to move: never written by it (``theirs``) or moved since (``moved``)."""
    updates: list[_Update] = []
    theirs, moved = [], []
    for ref, target in zip(refs, commits):
        value, last = values.get(ref), record.last.get(ref)
        if value is not None and last is None:
            # A branch, tag or record of the user's that the name happens to match: never moved,
            # not even with --force, nor taken into the record when it already agrees.
            theirs += [ref] if value != target else []
            continue
        if value not in (None, last, target) and not force:
            moved.append(ref)
            continue
        if value != target:
            updates.append((ref, target, value))
        record.point(ref, target)
    return updates, theirs, moved


def _refuse_not_own(stack: Stack, theirs: Sequence[str], moved: Sequence[str]) -> None:
    if theirs:
        raise UserError(
            "these refs exist and were not written by ggstack, which never moves them, not even with --force: "
            + ", ".join(theirs)
            + "; name other refs (branches.template, or --branch-prefix) or rename those; nothing was written",
            path=os.path.join(stack.path, config.STACK_TOML),
        )
    if moved:
        raise UserError(
            "someone else moved these branches since ggstack wrote them (use --force to overwrite): " + ", ".join(moved)
        )


def _orphans(
    repo: git.Repository,
    refs: Sequence[str],
    record: _Record,
    namespace: str | None,
    worktrees: Callable[[], dict[str, str]],
) -> list[_Update]:
    stale = [r for r in record.last if namespace and r.startswith(namespace) and r not in refs]
    if not stale:
        return []
    values = repo.ref_values(stale)
    checked_out = worktrees()
    out: list[_Update] = []
    for ref in stale:
        if values.get(ref) is None:
            record.now.pop(ref, None)
        elif values[ref] == record.last[ref] and ref not in checked_out:
            out.append((ref, None, values[ref]))
            record.now.pop(ref, None)
    return out


def remove_branches(
    repo: git.Repository, stack: Stack, refs: Sequence[str], *, write: bool = True
) -> tuple[list[str], list[str]]:
    """``write`` off: what it would do (``drop --dry-run``)."""
    values = repo.ref_values([*refs, _record_ref(stack)])
    record = _Record.read(repo, stack, values)
    checked_out = repo.checked_out_branches() if refs else {}
    updates, kept = _removals(refs, values, record, checked_out)
    if not write:  # a dry run: not even the record's blob is written
        return [ref for ref, _, _ in updates], kept
    updates += record.update(repo, delete_empty=True)
    repo.update_refs(updates, f"ggstack drop {stack.name}")
    return [ref for ref, _, _ in updates if ref != record.ref], kept


def _removals(
    refs: Sequence[str], values: dict[str, str], record: _Record, checked_out: dict[str, str]
) -> tuple[list[_Update], list[str]]:
    """The deletions, and the branches kept with why; the record forgets every branch not kept."""
    updates: list[_Update] = []
    kept = []
    for ref in refs:
        value = values.get(ref)
        why = None if value is None else _kept_because(ref, value, record.last, checked_out)
        if why:
            kept.append(f"{ref} ({why})")
            continue
        if value is not None:
            updates.append((ref, None, value))
        record.now.pop(ref, None)
    return updates, kept


def _kept_because(ref: str, value: str, last: dict[str, str], checked_out: dict[str, str]) -> str | None:
    if value != last.get(ref):
        return "moved since ggstack wrote it" if ref in last else "not written by ggstack"
    if ref in checked_out:
        return f"checked out in {checked_out[ref]}"
    return None


def _refuse_checked_out(refs: Sequence[str], worktrees: Callable[[], dict[str, str]]) -> None:
    """As ``git branch -f``: its HEAD would move and its index show a phantom change."""
    checked_out = worktrees() if refs else {}
    busy = [
        f"{ref.removeprefix('refs/heads/')} (checked out in {checked_out[ref]})" for ref in refs if ref in checked_out
    ]
    if busy:
        raise UserError(
            "will not move a branch that is checked out; switch that worktree to another branch "
            "(or apply with --branch-prefix), nothing was written: " + ", ".join(busy)
        )
