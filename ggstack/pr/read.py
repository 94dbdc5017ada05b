"""``pr``'s first step: what the forge and the remote have, read once, so the plan needs no forge.
A patch's open PR is found by the marker in its body (else by its head branch): a renamed patch keeps its PR."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ggstack import git
from ggstack.branches import branch_namespace, branch_refs
from ggstack.errors import UserError
from ggstack.forge import Comment, CommitFacts, Forge, MergeFacts, NativeStack, RemotePR, maintainer_approvals
from ggstack.forge.marker import is_closing_comment, read_marker
from ggstack.model import LandPolicy, Outcome, Run, Stack, Verdict

NEEDED = (Verdict.UNIQUE, Verdict.PARTIAL)  # the only verdicts that get a PR


@dataclass
class Snapshot:
    branches: dict[str, str] = field(default_factory=dict)  # patch name -> its remote branch (no refs/heads/)
    pulls: dict[str, RemotePR] = field(default_factory=dict)  # patch name -> its open PR
    heads: dict[str, str] = field(default_factory=dict)  # remote branch -> sha
    closed: dict[str, RemotePR] = field(default_factory=dict)  # patch name -> latest closed PR of its branch
    approvals: dict[int, list[str]] = field(default_factory=dict)  # PR number -> approving maintainers
    facts: dict[int, MergeFacts] = field(default_factory=dict)  # a needed patch's open PR -> merge readiness facts
    permissions: dict[str, str] = field(default_factory=dict)  # reviewer (lower case) -> permission
    required: list[str] = field(default_factory=list)  # the checks the PR base branch requires
    stacks: list[NativeStack] | None = None  # the forge's native stacks; None: not used
    comments: dict[int, list[Comment]] = field(default_factory=dict)  # PR number -> its comments
    commits: dict[str, CommitFacts] = field(default_factory=dict)  # remote head sha -> the forge's facts
    patch_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # remote head sha -> its Stack-Patch-Ids
    foreign: dict[str, RemotePR] = field(default_factory=dict)  # patch -> a PR with its marker, another stack's head
    base_exists: bool = True  # the PR base branch is on the forge
    head_repo_exists: bool = True  # target.fork is on the forge (and visible to the token)
    offline: bool = False


class Matched(NamedTuple):
    pulls: dict[str, RemotePR]  # patch name -> its open PR
    branches: dict[str, str]  # patch name -> its remote branch
    foreign: dict[str, RemotePR]  # patch name -> a PR with its marker on another stack's head


def needs_pr(o: Outcome) -> bool:
    return o.verdict in NEEDED and o.commit is not None


def head_owner(stack: Stack) -> str:
    """The owner of the PRs' head branches: the fork's where the stack pushes to one."""
    target = stack.config.target
    return (target.fork or target.repo).split("/")[0]


def read_snapshot(
    forge: Forge, repo: git.Repository, stack: Stack, run: Run, *, base_branch: str, close_redundant: bool
) -> Snapshot:
    if forge.offline:
        return Snapshot(branches=match(run, stack, []).branches, offline=True)
    pulls, branches, foreign = match(run, stack, forge.open_pulls())
    snap = Snapshot(branches=branches, pulls=pulls, foreign=foreign)
    needed = [o for o in run.outcomes if needs_pr(o)]
    _read_heads(repo, stack.config.target.remote, snap, needed)
    _read_readiness(forge, snap, stack, needed, base_branch)
    _read_approvals(forge, snap)
    for o in needed:
        if o.name not in pulls:
            _read_closed(forge, snap, o, head_owner(stack))
    if close_redundant:
        _read_closing_comments(forge, snap, run)
    _read_remote_commits(forge, snap, stack, needed)
    if needed:
        _read_places(forge, snap, stack, base_branch)
    return snap


def _read_approvals(forge: Forge, snap: Snapshot) -> None:
    for pull in snap.pulls.values():
        facts = snap.facts.get(pull.number)  # its reviews are read already
        snap.approvals[pull.number] = maintainer_approvals(facts.reviews) if facts else forge.approvals(pull)


def _read_closing_comments(forge: Forge, snap: Snapshot, run: Run) -> None:
    """The comments of each redundant patch's open PR: one closing comment a PR, never two."""
    for o in run.outcomes:
        if o.verdict is Verdict.REPRESENTED and o.name in snap.pulls:
            snap.comments[snap.pulls[o.name].number] = forge.comments(snap.pulls[o.name])


def _read_places(forge: Forge, snap: Snapshot, stack: Stack, base_branch: str) -> None:
    target = stack.config.target
    snap.base_exists = forge.has_branch(target.repo, base_branch)
    snap.head_repo_exists = target.fork is None or forge.has_repository(target.fork)


def _read_heads(repo: git.Repository, remote: str, snap: Snapshot, needed: list[Outcome]) -> None:
    wanted = [f"refs/heads/{snap.branches[o.name]}" for o in needed]
    heads = repo.ls_remote(remote, wanted) if wanted else {}  # no patterns would list every ref
    snap.heads = {ref.removeprefix("refs/heads/"): sha for ref, sha in heads.items()}
    fetch_missing(repo, remote, heads)


def _read_readiness(forge: Forge, snap: Snapshot, stack: Stack, needed: list[Outcome], base_branch: str) -> None:
    """What ``land`` would decide of each needed open PR (``report`` shows it), and the native stacks."""
    if not needed:
        return
    for o in needed:
        if o.name in snap.pulls:
            snap.facts[snap.pulls[o.name].number] = forge.merge_facts(snap.pulls[o.name])
    snap.permissions = read_permissions(forge, stack.config.land, snap.facts.values())
    if snap.facts:
        snap.required = forge.required_checks(base_branch)
    snap.stacks = native_stacks(forge, stack)


def read_permissions(forge: Forge, policy: LandPolicy, facts: Iterable[MergeFacts]) -> dict[str, str]:
    """Each reviewer's permission (by lower-case login), where stack.toml names no approvers."""
    permissions: dict[str, str] = {}
    if not policy.approvers:
        for f in facts:
            for r in f.reviews:
                permissions.setdefault(r.author.lower(), forge.permission(r.author))
    return permissions


def uses_native(stack: Stack) -> bool | None:
    """True (on), False (off), None (auto); never for a fork: GitHub does not stack across forks."""
    if stack.config.target.fork is not None or stack.config.pr.native_stacks == "off":
        return False
    return True if stack.config.pr.native_stacks == "on" else None


def native_stacks(forge: Forge, stack: Stack) -> list[NativeStack] | None:
    wanted = uses_native(stack)
    if wanted is False:
        return None
    found = forge.native_stacks()
    if found is None and wanted:
        raise UserError(
            f'pr.native_stacks = "on" in stack.toml, but {stack.config.target.repo} has no stacked pull requests '
            f'(GitHub answers 404 there): set it to "auto" or "off"'
        )
    return found


def fetch_missing(repo: git.Repository, remote: str, heads: dict[str, str]) -> None:
    """Objects only, of heads a clone never had (CI's single-branch checkout): the plan may keep them."""
    present = repo.has_objects(heads.values())
    missing = [ref for ref, sha in heads.items() if not present[sha]]
    if missing:
        repo.fetch_objects(remote, missing)


def _read_remote_commits(forge: Forge, snap: Snapshot, stack: Stack, needed: list[Outcome]) -> None:
    target = stack.config.target
    for o in needed:
        sha = snap.heads.get(snap.branches[o.name])
        if sha and sha != o.commit:
            facts = forge.commit_facts(target.fork or target.repo, sha)
            if facts is not None:
                snap.commits[sha] = facts
    shas = list(snap.commits)
    for sha, trailers in zip(shas, git.parse_trailers([snap.commits[s].message for s in shas]), strict=True):
        snap.patch_ids[sha] = tuple(v for k, v in trailers if k.lower() == "stack-patch-id")


def _read_closed(forge: Forge, snap: Snapshot, o: Outcome, owner: str) -> None:
    closed = latest_closed(forge, owner, snap.branches[o.name], o)
    if closed is None:
        return
    snap.closed[o.name] = closed
    if not closed.merged:
        snap.comments[closed.number] = forge.comments(closed)


def latest_closed(forge: Forge, owner: str, branch: str, o: Outcome) -> RemotePR | None:
    """The latest closed PR of the patch's branch, unless its marker names another patch."""
    closed = forge.closed_pull(owner, branch)
    if closed is None or read_marker(closed.body) not in (None, o.stack_patch_id):
        return None
    return closed


def match(run: Run, stack: Stack, pulls: Sequence[RemotePR]) -> Matched:
    """Each patch's open PR (by marker, else by head branch) and remote branch. By marker only on this stack's
    branches: another stack with the same Stack-Patch-Id (imported from this one) must not take it over."""
    ours = _ours(stack, pulls)
    by_marker = _by_marker(stack, ours)
    namespace = branch_namespace(stack, None)
    own = _remote_branch(namespace) if namespace else None
    refs = dict(zip((p.name for p in stack.patches), branch_refs(stack), strict=True))
    matched = Matched({}, {}, {})
    for o in run.outcomes:
        default = _remote_branch(o.branch or refs[o.name])
        marked = by_marker.get(o.stack_patch_id)
        if marked is not None and not _on_our_branch(marked, default, own):
            matched.foreign[o.name] = marked
            marked = None
        pull = marked or _unmarked_on(ours, default)
        # An existing PR keeps its head branch (PRs cannot change head), e.g. after a rename.
        matched.branches[o.name] = pull.head_ref if pull else default
        if pull is not None:
            matched.pulls[o.name] = pull
    return matched


def _on_our_branch(pull: RemotePR, branch: str, namespace: str | None) -> bool:
    return pull.head_ref == branch or bool(namespace and pull.head_ref.startswith(namespace))


def _unmarked_on(ours: Sequence[RemotePR], branch: str) -> RemotePR | None:
    return next((p for p in ours if read_marker(p.body) is None and p.head_ref == branch), None)


def _ours(stack: Stack, pulls: Sequence[RemotePR]) -> list[RemotePR]:
    owner = head_owner(stack).lower()
    return [p for p in pulls if p.head_owner.lower() == owner]  # anyone may open a PR ending in a marker


def _by_marker(stack: Stack, ours: Sequence[RemotePR]) -> dict[str, RemotePR]:
    ids = {p.provenance.stack_patch_id for p in stack.patches}
    by_marker: dict[str, RemotePR] = {}
    for p in ours:  # oldest first: a later duplicate never wins
        marker = read_marker(p.body)
        if marker in ids and marker not in by_marker:
            by_marker[marker] = p
    return by_marker


def _remote_branch(ref: str) -> str:
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ref.removeprefix("refs/")


def closed_note(o: Outcome, snap: Snapshot) -> str | None:
    """Why a needed patch gets no new PR; only a PR ggstack itself closed as redundant may be followed by one."""
    closed = snap.closed.get(o.name)
    if closed is None:
        return None
    if closed.merged:
        return f"its PR #{closed.number} was merged (into {closed.base_ref}); no new PR"
    if any(
        is_closing_comment(c.body, o.stack_patch_id) and c.author == closed.author
        for c in snap.comments.get(closed.number, [])
    ):
        return None
    return (
        f"its PR #{closed.number} was closed by someone else: not reopened or replaced (reopen it, or remove the patch)"
    )
