"""Import: commits of the fork checkout become patches of a stack, with provenance.

A separate module from ``ggstack.series`` (which reads, checks and writes the
stored files): import decides *what* enters the series — which commits of a
range, which paths of a commit, which trailers — and hands ``series`` a new
``Stack`` to save.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Iterable, Sequence

from ggstack import git
from ggstack.errors import UserError
from ggstack.model import Patch, Stack
from ggstack.series import (
    T_CHERRY_PICKED,
    T_DROPPED,
    T_ORIGINAL_PR,
    T_STACK_PATCH_ID,
    checked_provenance,
    not_utf8,
    parse_patch,
    renumbered,
)

_PR_REF = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\d+$")


def import_commits(
    repo: git.Repository,
    stack: Stack,
    revs: Sequence[str],
    *,
    original_pr: str | None = None,
    only: Sequence[str] = (),
    exclude: Sequence[str] = (),
    dropped: Sequence[str] = (),
) -> Stack:
    """Append the commits ``revs`` (shas or ``A..B`` ranges) to the series, with provenance."""
    if original_pr is not None and not _PR_REF.match(original_pr):
        raise UserError(f"--original-pr must look like owner/repo#123, not {original_pr!r}")
    for flag, patterns in (("--only", only), ("--exclude", exclude)):
        for pattern in patterns:
            if os.path.isabs(pattern) or ".." in pattern.split("/"):
                raise UserError(
                    f"{flag} {pattern}: a path outside the repository (paths are relative to its top, e.g. vllm/)"
                )
    commits = _expand(repo, revs)
    if not commits:
        raise UserError(f"{' '.join(revs)}: no commits to import")
    new_patches: list[Patch] = []
    existing = {p.provenance.stack_patch_id: p.name for p in stack.patches}
    for sha in commits:
        patch = _import_one(repo, stack, sha, original_pr, only, exclude, dropped)
        spid = patch.provenance.stack_patch_id
        if spid in existing:
            raise UserError(f"commit {sha[:12]} is already in the stack as {existing[spid]} (same {T_STACK_PATCH_ID})")
        existing[spid] = patch.name
        new_patches.append(patch)
    return renumbered(stack, [*stack.patches, *new_patches])


def _expand(repo: git.Repository, revs: Sequence[str]) -> list[str]:
    commits: list[str] = []
    for rev in revs:
        if "..." in rev:
            raise UserError(f"{rev}: A...B (either side, not the other) has no merge order to import; use A..B")
        if ".." in rev:
            a, _, b = rev.partition("..")
            lo, hi = repo.resolve(a or "HEAD"), repo.resolve(b or "HEAD")
            commits += repo.rev_list("--reverse", "--topo-order", "--first-parent", f"{lo}..{hi}")
        else:
            commits.append(repo.resolve(rev))
    return list(dict.fromkeys(commits))


def _import_one(
    repo: git.Repository,
    stack: Stack,
    sha: str,
    original_pr: str | None,
    only: Sequence[str],
    exclude: Sequence[str],
    dropped: Sequence[str],
) -> Patch:
    info = repo.commit_info(sha)
    if not info.parents:
        raise UserError(f"commit {sha[:12]} is a root commit; there is nothing to replay it onto")
    parent = info.parents[0]
    message = info.message
    pr = original_pr or _pr_from_message(message, stack.config.target.repo)
    if len(info.parents) > 1:
        message = _merge_message(message)
    changed = repo.diff_names(parent, sha)
    kept = [p for p in changed if _selected(p, only, exclude)]
    left_out = [p for p in changed if p not in kept]
    for path in kept:
        if not_utf8(path):
            raise UserError(
                f"commit {sha[:12]} changes {path.encode('utf-8', 'surrogateescape')!r}, a file name that is not UTF-8 "
                "(a patch file is UTF-8); leave it out with --exclude"
            )
    if not kept:
        raise UserError(
            f"importing {sha[:12]} would leave an empty patch (--only/--exclude keep none of: {', '.join(changed) or 'no files'})"
        )
    existing = dict(t for t in git.parse_trailers([message])[0])
    trailers: list[tuple[str, str]] = []
    if pr:
        trailers.append((T_ORIGINAL_PR, pr))
    trailers.append((T_CHERRY_PICKED, sha))
    trailers += [(T_DROPPED, text) for text in _dropped_texts(left_out, dropped)]
    if T_STACK_PATCH_ID not in existing:
        trailers.append((T_STACK_PATCH_ID, _stack_patch_id(stack.name, sha, kept)))
    message = git.add_trailers(message, trailers)
    scratch = repo.commit_tree(
        info.tree,
        [parent],
        message,
        author=(info.author_name, info.author_email, info.author_date),
        committer=(info.committer_name, info.committer_email, info.committer_date),
    )
    number = len(stack.patches) + 1
    fname, data = repo.format_patch(scratch, parent, kept if left_out else (), number=number, total=number)
    # The mbox "From " line names the commit the patch was taken from, not our scratch copy.
    data = data.replace(scratch.encode(), sha.encode(), 1)
    patch = parse_patch(data, os.path.join(stack.path, fname))
    try:
        return checked_provenance(patch, git.parse_trailers([patch.message])[0], None)
    except UserError as e:  # the commit's own message carried a second or a malformed one
        raise UserError(f"commit {sha[:12]}: {e}") from None


def _selected(path: str, only: Sequence[str], exclude: Sequence[str]) -> bool:
    if only and not any(_matches(path, pat) for pat in only):
        return False
    return not any(_matches(path, pat) for pat in exclude)


def _matches(path: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    return path == pattern or path.startswith(pattern + "/") or fnmatch.fnmatchcase(path, pattern)


def _dropped_texts(left_out: Sequence[str], texts: Sequence[str]) -> list[str]:
    """One ``Dropped:`` text per left-out part: the given texts (which name
    their paths in parentheses, or get the next uncovered path), and a plain
    one for every left-out path no text covers."""
    named = [_named_paths(t, left_out) for t in texts]
    uncovered = [p for p in left_out if not any(p in n for n in named)]
    out = []
    for text, paths in zip(texts, named):
        if not paths and uncovered:
            text = f"{text} ({uncovered.pop(0)})"
        out.append(text)
    out += [f"left out at import ({p})" for p in uncovered]
    return out


def _named_paths(text: str, left_out: Sequence[str]) -> set[str]:
    """The left-out paths a ``--dropped`` text names (a path, a directory or a
    glob, as for --only) in its closing "(a, b)"."""
    m = re.search(r"\(([^()]*)\)\s*$", text)
    names = [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []
    return {p for p in left_out if any(_matches(p, n) for n in names)}


def _pr_from_message(message: str, repo_slug: str) -> str | None:
    subject = message.split("\n", 1)[0]
    m = re.search(r"\(#(\d+)\)\s*$", subject)
    if m:
        return f"{repo_slug}#{m.group(1)}"
    m = re.match(r"^Merge pull request #(\d+) from ([^/\s]+)/", subject)
    if m:
        return f"{repo_slug}#{m.group(1)}"
    return None


def _merge_message(message: str) -> str:
    """A GitHub merge commit's message with the PR title as the subject."""
    subject, _, body = message.partition("\n")
    body = body.strip("\n")
    if body:
        title, _, rest = body.partition("\n")
        return title + "\n\n" + (rest.strip("\n") + "\n\n" if rest.strip() else "") + subject + "\n"
    return message


def _stack_patch_id(stack: str, sha: str, kept: Iterable[str]) -> str:
    """Assigned once at import; deterministic so that re-importing the same
    history regenerates the same bytes."""
    h = hashlib.sha1(f"{stack}\0{sha}\0{chr(0).join(kept)}".encode()).hexdigest()
    return "I" + h
