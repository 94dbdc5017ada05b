"""Merge readiness of one open PR: may it land now, and if not, what holds it. Pure: ``land`` decides
with it and ``pr`` records it, so ``report`` shows the words ``land`` stops with ("waiting for approval")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ggstack.forge import MAINTAINERS, MergeFacts, Review
from ggstack.model import LandPolicy
from ggstack.report.escape import md_code

WRITE_PERMISSIONS = ("admin", "maintain", "write")
READY = "ready to land"


@dataclass
class Readiness:
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
    """The approval (by someone ``policy`` allows, of the head as it is now), the required checks,
    GitHub's mergeability, and the first thing that keeps the PR from landing."""
    counted = _latest_decisive(facts.reviews, _allowed(policy, permissions))
    approved, stale, changes = _sorted_out(counted, facts.head_sha)
    names = dict.fromkeys([*required, *policy.checks])
    checks = [(name, facts.checks.get(name, "expected")) for name in names]
    approval = _approval(approved, stale, changes)
    cleared = bool(approved) and not changes
    return Readiness(
        approval, approved, checks, facts.mergeable_state, _blocker(facts, approval, cleared, checks, base)
    )


def _latest_decisive(reviews: Sequence[Review], allowed: Callable[[Review], bool]) -> list[Review]:
    latest: dict[str, Review] = {}
    for r in reviews:  # oldest first
        if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[r.author.lower()] = r
    return [r for r in latest.values() if allowed(r)]


def _sorted_out(reviews: list[Review], head: str) -> tuple[list[str], list[str], list[str]]:
    approved = [r.author for r in reviews if r.state == "APPROVED" and r.commit == head]
    stale = [r.author for r in reviews if r.state == "APPROVED" and r.commit != head]
    changes = [r.author for r in reviews if r.state == "CHANGES_REQUESTED"]
    return approved, stale, changes


def _approval(approved: list[str], stale: list[str], changes: list[str]) -> str:
    if changes:
        return f"changes requested by {_logins(changes)}"
    if approved:
        return f"approved by {_logins(approved)}"
    if stale:
        return f"waiting for approval (the approval by {_logins(stale)} is of an older push)"
    return "waiting for approval"


def _allowed(policy: LandPolicy, permissions: Mapping[str, str]) -> Callable[[Review], bool]:
    named = {a.lower().lstrip("@") for a in policy.approvers}

    def allowed(r: Review) -> bool:
        if named:
            return r.author.lower() in named
        permission = permissions.get(r.author.lower(), "none")
        # A maintainer's association stands in where the token may not read a permission.
        return permission in WRITE_PERMISSIONS or (permission == "unknown" and r.association in MAINTAINERS)

    return allowed


def _logins(logins: Sequence[str]) -> str:
    return ", ".join(f"@{x}" for x in logins)


def _blocker(facts: MergeFacts, approval: str, approved: bool, checks: list[tuple[str, str]], base: str) -> str | None:
    if not approved:
        return approval
    return _checks_blocker(checks) or _merge_blocker(facts, base)


def _checks_blocker(checks: list[tuple[str, str]]) -> str | None:
    failing = [name for name, state in checks if state == "failure"]
    if failing:
        return f"{_checks_named(failing)} failing"
    waiting = [name for name, state in checks if state in ("pending", "expected")]
    if waiting:
        return f"waiting for {_checks_named(waiting)}"
    return None


def _checks_named(names: list[str]) -> str:
    return f"check{'s' if len(names) > 1 else ''} {', '.join(md_code(n) for n in names)}"


def _merge_blocker(facts: MergeFacts, base: str) -> str | None:
    if facts.mergeable is False or facts.mergeable_state == "dirty":
        return f"conflicts with {facts.base_ref or base}: rerun `ggstack pr` (or resolve the patch)"
    if facts.mergeable is None:
        return "GitHub has not computed yet whether it can merge; rerun in a moment"
    return None
