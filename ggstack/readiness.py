"""Merge readiness of one open PR: may it land now, and if not, what holds it.

``land`` decides with it and ``pr`` records it in the Run, so ``report`` and
``pr --dry-run`` show the same words ``land`` stops with ("waiting for
approval", "check `gpu-tests` failing"). Pure: the forge's facts (reviews,
checks, mergeability), the permissions of the reviewers and ``stack.toml``'s
``[land]`` policy in, a ``Readiness`` out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ggstack.forge import MergeFacts, Review
from ggstack.model import LandPolicy
from ggstack.report.escape import md_code

WRITE_PERMISSIONS = ("admin", "maintain", "write")
MAINTAINERS = ("OWNER", "MEMBER", "COLLABORATOR")  # where the token may not read a permission
READY = "ready to land"


@dataclass
class Readiness:
    """Whether one open PR may land now, in the words ``report`` and ``land`` print."""

    approval: str
    approved_by: list[str]
    checks: list[tuple[str, str]]  # required check -> success | failure | pending | expected
    mergeable: str
    blocker: str | None  # why it may not land now; None: it may

    @property
    def next_action(self) -> str:
        return self.blocker or READY


def readiness(
    facts: MergeFacts,
    policy: LandPolicy,
    permissions: Mapping[str, str],
    required: Sequence[str],
    base: str,
) -> Readiness:
    """The approval (by someone ``policy`` allows, of the head as it is now), the required checks
    and GitHub's mergeability of one open PR, and the first thing that keeps it from landing."""
    allowed = _allowed(policy, permissions)
    latest: dict[str, Review] = {}
    for r in facts.reviews:  # oldest first: the latest decisive review of each reviewer counts
        if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[r.author.lower()] = r
    counted = [r for r in latest.values() if allowed(r)]
    approved = [r.author for r in counted if r.state == "APPROVED" and r.commit == facts.head_sha]
    stale = [r.author for r in counted if r.state == "APPROVED" and r.commit != facts.head_sha]
    changes = [r.author for r in counted if r.state == "CHANGES_REQUESTED"]
    names = dict.fromkeys([*required, *policy.checks])
    checks = [(name, facts.checks.get(name, "expected")) for name in names]
    if changes:
        approval = f"changes requested by {_logins(changes)}"
    elif approved:
        approval = f"approved by {_logins(approved)}"
    elif stale:
        approval = f"waiting for approval (the approval by {_logins(stale)} is of an older push)"
    else:
        approval = "waiting for approval"
    cleared = bool(approved) and not changes
    return Readiness(
        approval, approved, checks, facts.mergeable_state, _blocker(facts, approval, cleared, checks, base)
    )


def _allowed(policy: LandPolicy, permissions: Mapping[str, str]) -> Callable[[Review], bool]:
    named = {a.lower().lstrip("@") for a in policy.approvers}

    def allowed(r: Review) -> bool:
        if named:
            return r.author.lower() in named
        permission = permissions.get(r.author.lower(), "none")
        return permission in WRITE_PERMISSIONS or (permission == "unknown" and r.association in MAINTAINERS)

    return allowed


def _logins(logins: Sequence[str]) -> str:
    return ", ".join(f"@{x}" for x in logins)


def _blocker(facts: MergeFacts, approval: str, approved: bool, checks: list[tuple[str, str]], base: str) -> str | None:
    if not approved:
        return approval
    failing = [name for name, state in checks if state == "failure"]
    if failing:
        return f"check{'s' if len(failing) > 1 else ''} {', '.join(md_code(n) for n in failing)} failing"
    waiting = [name for name, state in checks if state in ("pending", "expected")]
    if waiting:
        return f"waiting for check{'s' if len(waiting) > 1 else ''} {', '.join(md_code(n) for n in waiting)}"
    if facts.mergeable is False or facts.mergeable_state == "dirty":
        return f"conflicts with {facts.base_ref or base}: rerun `ggstack pr` (or resolve the patch)"
    if facts.mergeable is None:
        return "GitHub has not computed yet whether it can merge; rerun in a moment"
    return None
