"""The forge, where the stack's PRs live: ``pr`` and ``land`` read it once, plan without it, act through it last, so a
forge is ``Forge``'s few calls (``github.GitHub``, offline ``none.NoForge``; GitLab: a class in ``open_forge``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ggstack.forge.marker import last_line
from ggstack.secrets import TOKEN_VARS

if TYPE_CHECKING:
    from ggstack.model import Stack

MAINTAINERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})  # the associations whose approval lifts the gate


@dataclass
class RemotePR:
    """A PR as the forge has it (facts the forge owns: read each run)."""

    number: int
    url: str
    draft: bool
    title: str
    body: str
    head_owner: str
    head_ref: str
    base_ref: str
    labels: list[str]
    state: str = "open"
    merged: bool = False
    author: str = ""  # the login that opened it
    head_sha: str = ""
    handle: Any = field(default=None, repr=False, compare=False)  # the forge's own object (PyGithub's PullRequest)


@dataclass(frozen=True)
class Comment:
    author: str  # login
    body: str


@dataclass(frozen=True)
class CommitFacts:
    """A commit as the forge has it: enough to tell the same change from another one."""

    tree: str
    parents: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Review:
    author: str  # login
    state: str  # APPROVED | CHANGES_REQUESTED | DISMISSED | COMMENTED
    commit: str  # the head it reviewed
    association: str = ""  # OWNER | MEMBER | COLLABORATOR | …: where the permission cannot be read


@dataclass
class MergeFacts:
    """What the forge says about merging one PR now: read together, just before deciding."""

    head_sha: str
    base_ref: str
    state: str  # open | closed
    merged: bool
    draft: bool
    labels: list[str]
    mergeable: bool | None  # None: not computed yet
    mergeable_state: str  # GitHub's words: clean, dirty, blocked, behind, unstable, draft, unknown…
    reviews: list[Review]  # oldest first
    checks: dict[str, str]  # check run or status name -> success | failure | pending
    merge_commit: str | None = None


@dataclass(frozen=True)
class NativeStack:
    """A stack of PRs the forge itself keeps (GitHub's stacked pull requests), bottom first."""

    number: int
    base_ref: str
    pulls: tuple[int, ...]
    merged: tuple[int, ...] = ()  # those of ``pulls`` already merged


@dataclass(frozen=True)
class MergeAnswer:
    """The forge's answer to a merge: merged (``sha``), pending (poll ``uuid``), enqueued, or refused/failed."""

    status: str  # merged | pending | enqueued | failed | refused
    message: str = ""
    sha: str | None = None
    uuid: str | None = None


class Forge(Protocol):
    """What ``pr`` and ``land`` ask of a forge. Reads answer None/False/[] for what is not there; a forge
    retries its writes itself, and never sends twice a write whose answer was lost."""

    offline: bool  # True: nothing was read (a forge on which nothing exists), and nothing may be written
    writes: int  # write calls made so far

    def close(self) -> None: ...

    # -- reads --
    def open_pulls(self) -> list[RemotePR]: ...  # oldest first
    def closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None: ...  # the latest, if any
    def approvals(self, pull: RemotePR) -> list[str]: ...  # maintainers whose latest review approves
    def comments(self, pull: RemotePR) -> list[Comment]: ...
    def commit_facts(self, slug: str, sha: str) -> CommitFacts | None: ...
    def has_branch(self, slug: str, branch: str) -> bool: ...
    def has_repository(self, slug: str) -> bool: ...
    def branch_sha(self, branch: str) -> str | None: ...  # of target.repo
    def merge_facts(self, pull: RemotePR) -> MergeFacts: ...
    def required_checks(self, branch: str) -> list[str]: ...  # branch protection and rulesets of target.repo
    def permission(self, login: str) -> str: ...  # admin | maintain | write | triage | read | none
    def merge_methods(self) -> tuple[str, ...]: ...  # what the repository allows, of merge, squash, rebase
    def native_stacks(self) -> list[NativeStack] | None: ...  # None: the repository has no stacked PRs
    def merge_result(self, pull: RemotePR, uuid: str) -> MergeAnswer: ...

    # -- writes --
    def create_pull(
        self, *, title: str, body: str, base: str, head_owner: str, head_ref: str, head: str, draft: bool
    ) -> RemotePR: ...
    def edit_pull(self, pull: RemotePR, **fields: str) -> None: ...
    def add_labels(self, pull: RemotePR, labels: Sequence[str]) -> None: ...
    def remove_label(self, pull: RemotePR, label: str) -> None: ...
    def mark_ready(self, pull: RemotePR) -> None: ...
    def comment(self, pull: RemotePR, body: str) -> None: ...
    def merge(self, pull: RemotePR, *, method: str, sha: str) -> MergeAnswer: ...  # merged or refused
    def merge_async(self, pull: RemotePR, *, method: str, sha: str) -> MergeAnswer: ...
    def create_stack(self, numbers: Sequence[int]) -> NativeStack: ...
    def add_to_stack(self, stack: int, numbers: Sequence[int]) -> NativeStack: ...
    def unstack(self, stack: int) -> None: ...


def same_last_line(a: str, b: str) -> bool:
    """Do two texts end in the same line? How a re-sent comment is recognised (ggstack ends each in a marker)."""
    return last_line(a) == last_line(b)


def maintainer_approvals(reviews: Sequence[Review]) -> list[str]:
    """The maintainers whose latest decisive review approves: what lifts ``pr``'s approval gate."""
    latest: dict[str, Review] = {}
    for r in reviews:
        if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[r.author] = r
    return sorted(a for a, r in latest.items() if r.state == "APPROVED" and r.association in MAINTAINERS)


def open_forge(stack: Stack, env: Mapping[str, str] | None, *, dry_run: bool) -> Forge:
    """The stack's target forge (GitHub); for a dry run without a token, the forge on which nothing exists."""
    env = os.environ if env is None else env
    if dry_run and not any(env.get(var, "").strip() for var in TOKEN_VARS):
        from ggstack.forge.none import NoForge

        return NoForge()
    from ggstack.forge.github import GitHub  # PyGithub takes a second to import: only when it is used

    return GitHub(stack.config.target.repo, env=env)
