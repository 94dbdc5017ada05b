"""``sync --rebase-series``: the bot proposes the rebased series as a PR, never commits it (the series is reviewed like
code): one commit, off checkout, index and HEAD, pushed with a lease; a rerun finding the same change writes nothing."""

from __future__ import annotations

import dataclasses
import os

from ggstack import git, rebase
from ggstack.errors import InfraError, UserError
from ggstack.forge import Forge, RemotePR
from ggstack.model import Run, Stack
from ggstack.report.escape import md_text
from ggstack.report.words import short

STAGE = "rebase-series"
MARKER = "<!-- ggstack:rebase-series={} -->"


def head_branch(stack: Stack) -> str:
    return f"ggstack/rebase-series/{stack.name}"


def propose(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    series_branch: str | None,
    dry_run: bool,
    forge: Forge,
) -> Run:
    """The Run with ``stages["rebase-series"]`` saying what was proposed (or would be, or why not)."""
    result, _ = rebase.plan(repo, stack, run.base_ref)
    rewritten = [e for e in result.entries if e.status == rebase.REWRITTEN]
    if result.stopped is not None:
        words = f"skipped: {result.stopped.name} stops the rebase ({result.stopped.detail})"
    elif not rewritten:
        words = "ok: the series is on the base already"
    else:
        words = _propose(repo, stack, result, series_branch=series_branch, dry_run=dry_run, forge=forge)
    return dataclasses.replace(run, stages={**run.stages, STAGE: words})


def _stack_path_in_repo(repo: git.Repository, stack: Stack) -> str:
    top = os.path.realpath(repo.worktree or "")
    where = os.path.realpath(stack.path)
    rel = os.path.relpath(where, top)
    if not repo.worktree or rel.startswith(".."):
        raise UserError(f"the stack directory {stack.path} is not in the repository {top}: nothing to propose")
    return rel.replace(os.sep, "/")


def _propose(
    repo: git.Repository,
    stack: Stack,
    result: rebase.Result,
    *,
    series_branch: str | None,
    dry_run: bool,
    forge: Forge,
) -> str:
    branch, tip = _series_tip(repo, stack, series_branch)
    tree, n = _proposed_tree(repo, stack, result, tip)
    title = f"ggstack: rebase the series {stack.name} onto {result.base_ref} ({short(result.base)})"
    head = head_branch(stack)
    if dry_run:
        return f"dry-run: would propose {n} rewritten patch(es) as a PR from {head} onto {branch}"
    pushed = _push(repo, stack, forge, tree, tip, title + "\n\n" + _summary(result) + "\n")
    body = _body(stack, result, branch)
    owner = stack.config.target.repo.split("/")[0]
    pull = next((p for p in forge.open_pulls() if p.head_ref == head and p.head_owner.lower() == owner.lower()), None)
    if pull is None:
        pull = forge.create_pull(
            title=title, body=body, base=branch, head_owner=owner, head_ref=head, head=head, draft=False
        )
        return f"ok: opened PR #{pull.number} ({n} patch(es) rewritten) {pull.url}"
    action = "updated" if _update(forge, pull, title, body) or pushed else "unchanged"
    return f"ok: PR #{pull.number} {action} ({n} patch(es) rewritten) {pull.url}"


def _update(forge: Forge, pull: RemotePR, title: str, body: str) -> bool:
    fields = {k: v for k, v in (("title", title), ("body", body)) if getattr(pull, k).replace("\r\n", "\n") != v}
    if fields:
        forge.edit_pull(pull, **fields)
    return bool(fields)


def _series_tip(repo: git.Repository, stack: Stack, series_branch: str | None) -> tuple[str, str]:
    """The branch the stack lives on and its tip (the remote's, when there is one)."""
    branch = series_branch or repo.head_branch()
    if branch is None:
        raise UserError("HEAD is detached: name the branch the stack lives on with --series-branch")
    remote = stack.config.target.remote
    tip = repo.try_resolve(f"refs/remotes/{remote}/{branch}") or repo.try_resolve(f"refs/heads/{branch}")
    if tip is None:
        raise UserError(f"--series-branch {branch!r} is not a branch here or on {remote!r}")
    return branch, tip


def _proposed_tree(repo: git.Repository, stack: Stack, result: rebase.Result, tip: str) -> tuple[str, int]:
    """``tip``'s tree with the rewritten patch files in place (a temporary index), and how many."""
    rel = _stack_path_in_repo(repo, stack)
    after = result.stack_after
    assert after is not None
    changed = [p for p, e in zip(after.patches, result.entries) if e.status == rebase.REWRITTEN]
    blobs = repo.hash_blobs([p.raw for p in changed])
    edits: dict[str, tuple[str, str] | None] = {f"{rel}/{p.name}": ("100644", b) for p, b in zip(changed, blobs)}
    return repo.edit_tree(repo.resolve(tip, "tree"), edits), len(changed)


def _push(repo: git.Repository, stack: Stack, forge: Forge, tree: str, tip: str, message: str) -> bool:
    """The proposal commit onto the head branch, with a lease; False when the forge has the same change."""
    remote, head = stack.config.target.remote, head_branch(stack)
    remote_sha = repo.ls_remote(remote, [f"refs/heads/{head}"]).get(f"refs/heads/{head}")
    facts = forge.commit_facts(stack.config.target.repo, remote_sha) if remote_sha else None
    if facts is not None and (facts.tree, facts.parents) == (tree, (tip,)):
        return False
    commit = repo.commit_tree(tree, [tip], message)
    proc = repo.push(remote, [f"{commit}:refs/heads/{head}"], [f"refs/heads/{head}:{remote_sha or ''}"])
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()
        raise InfraError(f"git push of {head} to {remote!r} failed: {err[-1000:]}")
    return True


def _summary(result: rebase.Result) -> str:
    lines = []
    for e in result.entries:
        lines.append(f"- {e.name}: {e.status} (base-commit {short(e.old_base)} -> {short(e.new_base)})")
    return "\n".join(lines)


def _body(stack: Stack, result: rebase.Result, branch: str) -> str:
    return (
        f"The stored series `{stack.name}` rewritten onto `{result.base_ref}` "
        f"({short(result.base)}) by `ggstack sync --rebase-series`: each patch's diff and "
        f"`base-commit` now relative to its replayed parent; messages, trailers and Stack-Patch-Ids unchanged. "
        f"Re-applying it gives the trees `ggstack apply` gives today.\n\n"
        f"{md_text(_summary(result))}\n\n"
        f"Merging it into `{branch}` moves the stored series; nothing else changes.\n\n" + MARKER.format(stack.name)
    )
