"""``ggstack resolve`` / ``refresh``: settle a conflict once, in the patch itself, in a worktree
of ggstack's own under the git dir (never the user's checkout), ``rerere`` on."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, replace

from ggstack import git, replay, state
from ggstack.errors import UserError
from ggstack.model import Applied, Patch, Stack
from ggstack.picks import Pick, materialize, remember_materialized
from ggstack.rewrite import authored_commit, patch_file
from ggstack.series import patchfile

T_ADAPTED = "Adapted"
_MARKER = re.compile(r"^(<{7}|>{7})( |$)")


@dataclass(frozen=True)
class Session:
    """Found by Stack-Patch-Id, so renumbering the series in between does not lose it."""

    stack: str
    name: str  # the patch file when the session began
    stack_patch_id: str
    worktree: str
    parent: str  # the replayed parent the patch was picked onto
    base: str
    base_ref: str
    conflicts: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()  # paths rerere resolved from a recorded resolution

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["conflicts"], d["reused"] = list(self.conflicts), list(self.reused)
        return d


def _session_path(repo: git.Repository, stack: Stack, spid: str) -> str:
    return os.path.join(repo.state_dir("resolve", stack.name), spid + ".json")


def find_session(repo: git.Repository, stack: Stack, patch: Patch) -> Session | None:
    """A worktree a kill left half removed is no session: what is left of it goes."""
    try:
        with open(_session_path(repo, stack, patch.provenance.stack_patch_id), encoding="utf-8") as f:
            d = json.load(f)
        d["conflicts"], d["reused"] = tuple(d.get("conflicts", ())), tuple(d.get("reused", ()))
        session = Session(**d)
    except (OSError, ValueError, TypeError, RecursionError):
        return None
    if not repo.is_whole_worktree(session.worktree):
        _end(repo, stack, session)
        return None
    return session


def _session_of(repo: git.Repository, stack: Stack, patch: Patch) -> Session:
    session = find_session(repo, stack, patch)
    if session is None:
        raise UserError(f"no resolve in progress for {patch.name} (start one with `ggstack resolve {stack.name} N`)")
    return session


def replayed_parent(repo: git.Repository, stack: Stack, patch: Patch, base: str, picks: list[Pick]) -> str:
    """An earlier patch that conflicts is resolved first, else this resolution is against the wrong code."""
    index = stack.patches.index(patch)
    steps = replay.replay(repo, picks[:index], base)
    for p, step in zip(stack.patches, steps):
        if step.applied is Applied.CONFLICT:
            raise UserError(
                f"{p.name}, before {patch.name}, conflicts too: resolve it first (ggstack resolve), "
                "or, when `ggstack check` says the base has it, drop it (ggstack drop --represented)"
            )
    applied = [s.commit for s in steps if s.applied is Applied.APPLIED and s.commit]
    return applied[-1] if applied else base


def resolve(repo: git.Repository, stack: Stack, key: str, base_ref: str) -> Session:
    patch = stack.find(key)
    existing = find_session(repo, stack, patch)
    if existing is not None:
        return existing
    base = replay.resolve_base(repo, stack, base_ref)
    picks = materialize(repo, stack)
    pick = picks[stack.patches.index(patch)]
    if pick.commit is None:
        raise UserError(
            f"its recorded base {(patch.base_commit or '?')[:12]} is not in this repository: fetch it first",
            path=os.path.join(stack.path, patch.name),
        )
    parent = replayed_parent(repo, stack, patch, base, picks)
    spid = patch.provenance.stack_patch_id
    path = os.path.join(repo.state_dir("resolve", stack.name), patch.name.removesuffix(".patch"))
    if os.path.exists(path):  # a leftover without its session (killed): start again
        repo.remove_worktree(path)
        shutil.rmtree(path, ignore_errors=True)
    repo.prune_worktrees()
    worktree = repo.add_resolve_worktree(path, parent)
    conflicts, reused = worktree.cherry_pick(pick.commit)
    session = Session(stack.name, patch.name, spid, path, parent, base, base_ref, tuple(conflicts), tuple(reused))
    state.write_atomic(_session_path(repo, stack, spid), (json.dumps(session.to_json(), indent=2) + "\n").encode())
    return session


def abort(repo: git.Repository, stack: Stack, key: str) -> Session:
    patch = stack.find(key)
    session = _session_of(repo, stack, patch)
    _end(repo, stack, session)
    return session


def _end(repo: git.Repository, stack: Stack, session: Session) -> None:
    repo.remove_worktree(session.worktree)
    shutil.rmtree(session.worktree, ignore_errors=True)
    repo.prune_worktrees()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_session_path(repo, stack, session.stack_patch_id))


def _leftover_markers(worktree: str, paths: list[str]) -> list[str]:
    found = []
    for path in paths:
        full = os.path.join(worktree, path)
        if not os.path.isfile(full):
            continue
        with open(full, "rb") as f:
            for n, line in enumerate(f.read().decode("utf-8", "replace").split("\n"), 1):
                if _MARKER.match(line):
                    found.append(f"{path}:{n}")
                    break
    return found


def refresh(repo: git.Repository, stack: Stack, key: str) -> tuple[Stack, Patch, Session]:
    """Not yet saved: the caller saves it under the stack's lock, then calls ``finish``."""
    patch = stack.find(key)
    session = _session_of(repo, stack, patch)
    worktree = repo.resolve_worktree(session.worktree)
    markers = _leftover_markers(session.worktree, worktree.unmerged_paths() or list(session.conflicts))
    if markers:
        raise UserError(
            "conflict markers are still there: " + ", ".join(markers) + f" (edit them in {session.worktree})"
        )
    worktree.record_resolution()
    tree = worktree.tree_of_files()
    if tree == repo.resolve(session.parent, "tree"):
        raise UserError(
            f"the resolution changes nothing on its parent: nothing of {patch.name} is left to carry. If the "
            f"base has it, `ggstack check {stack.name}` says so and `ggstack drop {stack.name} --represented` "
            f"drops it; to drop it anyway, `ggstack remove {stack.name} {patch.name}`; or keep it: "
            f"`ggstack refresh {stack.name} {patch.name} --abort`"
        )
    adapted = f"resolved onto {session.parent[:12]} ({session.base_ref} at {session.base[:12]}) by ggstack refresh"
    message = git.add_trailers(patch.message, [(T_ADAPTED, adapted)])
    commit = authored_commit(repo, patch, tree, session.parent, message)
    index = stack.patches.index(patch)
    new = patch_file(repo, stack, patch, commit, session.parent, index + 1, len(stack.patches))
    new = patchfile.checked_provenance(new, git.parse_trailers([new.message])[0], os.path.join(stack.path, patch.name))
    remember_materialized(repo, [(new, commit)])
    patches = list(stack.patches)
    patches[index] = new
    # The new parent must stay reachable: one ref a resolved patch, to the commit it now is.
    ref = f"refs/ggstack/{stack.name}/resolved/{patch.provenance.stack_patch_id}"
    repo.update_refs([(ref, commit, repo.ref_values([ref]).get(ref))], f"ggstack refresh {stack.name} {patch.name}")
    return replace(stack, patches=tuple(patches)), new, session


def finish(repo: git.Repository, stack: Stack, session: Session) -> None:
    _end(repo, stack, session)


def adapted(patch: Patch) -> list[str]:
    return [line.partition(": ")[2] for line in patch.message.splitlines() if line.startswith(f"{T_ADAPTED}: ")]
