"""A Run's facts in a maintainer's words, one set for every output: what the maintainer reads and
what the bot acts on are the same facts."""

from __future__ import annotations

import re

from ggstack.model import Outcome, PRState, Recommendation, Run, Verdict

NOT_JUDGED = "not judged"
VERDICT_ORDER = (
    Verdict.UNIQUE,
    Verdict.PARTIAL,
    Verdict.REPRESENTED,
    Verdict.CONFLICT,
    Verdict.BROKEN,
    Verdict.INCONCLUSIVE,
)
_NEEDED = (Verdict.UNIQUE, Verdict.PARTIAL)  # the verdicts whose patch a PR carries

_NUMBERED = re.compile(r"^(\d{4})-")


def short(sha: str | None) -> str:
    return sha[:10] if sha else ""


def patch_label(name: str, subject: str) -> str:
    """ "0002 Fix the buffer": never the file name, which folds mid-word."""
    m = _NUMBERED.match(name)
    return f"{m.group(1) if m else name} {subject}".strip()


def commit_words(sha: str, run: Run) -> str:
    subject = run.subjects.get(sha, "")
    if len(subject) > 50:
        subject = subject[:49] + "…"
    return f"{short(sha)} “{subject}”" if subject else short(sha)


def conflict_words(paths: list[str]) -> str:
    return "conflicts in " + ", ".join(paths)


def verdict_counts(run: Run) -> dict[str, int]:
    counts = {v.value: 0 for v in VERDICT_ORDER}
    counts[NOT_JUDGED] = 0
    for o in run.outcomes:
        counts[o.verdict.value if o.verdict else NOT_JUDGED] += 1
    return {k: n for k, n in counts.items() if n}


def header_line(run: Run) -> str:
    n = len(run.outcomes)
    counts = ", ".join(f"{k} {v}" if k == NOT_JUDGED else f"{v} {k}" for k, v in verdict_counts(run).items())
    return f"{run.stack or 'commits'}: {n} patch{'es' if n != 1 else ''} onto {run.base_ref} at {short(run.base)}" + (
        f" — {counts}" if counts else ""
    )


def stage_words(run: Run) -> str:
    return " · ".join(f"{stage} {state}" for stage, state in run.stages.items())


def provenance_words(o: Outcome) -> list[str]:
    prov = o.provenance
    if prov is None:
        return [f"from {short(o.source_commit)}"] if o.source_commit else []
    words = [_original_pr_words(prov.original_pr)] if prov.original_pr else []
    if prov.cherry_picked_from:
        words.append(f"cherry-picked from {short(prov.cherry_picked_from)}")
    elif o.source_commit:
        words.append(f"from {short(o.source_commit)}")
    return words + [f"dropped: {d}" for d in prov.dropped]


def _original_pr_words(original_pr: str) -> str:
    known = not original_pr.startswith("#")
    return f"original PR {original_pr}" + ("" if known else " (its repository is not recorded)")


def pr_words(o: Outcome) -> str:
    pr = o.pr
    if pr is None:
        return ""
    if pr.number is None:
        return "new PR planned" if pr.state == "planned" else (pr.action or "")
    text = f"#{pr.number} " + (_open_pr_state_words(o, pr) if pr.state == "open" else pr.state or "open")
    return f"{text} ({pr.note})" if pr.note else text


def _open_pr_state_words(o: Outcome, pr: PRState) -> str:
    text = ", ".join(["open", *_open_words(o, pr)])
    return f"{text}; {readiness_words(pr)}" if pr.next_action else text


def _open_words(o: Outcome, pr: PRState) -> list[str]:
    words = ["draft"] if pr.draft else []
    if pr.approved:
        words.append("approved" + (f" by {', '.join('@' + u for u in pr.approved_by)}" if pr.approved_by else ""))
    elif o.verdict in (*_NEEDED, None):
        words.append("waiting for approval")
    return words


def readiness_words(pr: PRState) -> str:
    if not pr.next_action:
        return ""
    checks = ", ".join(f"{name} {state}" for name, state in pr.checks)
    return "; ".join(
        part
        for part in (f"checks: {checks}" if checks else "", f"GitHub: {pr.mergeable}", f"next: {pr.next_action}")
        if part
    )


def recommendation_words(o: Outcome) -> str:
    """Once ``pr`` has run, the PR's state says it better than ``check``'s recommendation."""
    pr = o.pr
    if pr is not None and pr.number is not None and pr.state == "open":
        words = _open_pr_recommendation(o, pr)
        if words:
            return words
    words = o.recommendation.value if o.recommendation else "—"
    settle = settle_words(o)
    return f"{words} — to settle it: {settle}" if settle else words


def _open_pr_recommendation(o: Outcome, pr: PRState) -> str:
    if o.verdict in _NEEDED:
        return _open_pr_words(pr)
    return Recommendation.CLOSE_PR.value if o.verdict is Verdict.REPRESENTED else ""


def _open_pr_words(pr: PRState) -> str:
    if pr.next_action:  # what ``land`` would decide, as the forge said when ``pr`` read it
        return "land (`ggstack land`)" if pr.next_action == "ready to land" else pr.next_action
    return "merge (approved)" if pr.approved else Recommendation.WAIT_APPROVAL.value


def settle_words(o: Outcome) -> str:
    """When the patch's tests could not decide: what would let them (install pytest, run on a GPU)."""
    for e in o.evidence:
        if e.kind == "tests" and (
            e.data.get("judgement") in ("could-not-run", "inconclusive") or e.data.get("pending")
        ):
            return str(e.data.get("settle") or "")
    return ""
