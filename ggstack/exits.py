"""The one exit policy, from the Run alone: 0 nothing for a human; 1 a patch needs one; 2 a stage refused its input;
3 infrastructure (forge, git, a lock). ``UserError`` is 2 and ``InfraError`` 3 (``commands.context.handled``)."""

from __future__ import annotations

from ggstack.model import Applied, Outcome, Recommendation, Run, Verdict

OK, ATTENTION, USAGE, INFRA = 0, 1, 2, 3
FAILED_INFRA = "failed (infrastructure)"  # a stage's state, as sync writes it
FAILED_INPUT = "failed (input)"


def exit_code(run: Run) -> int:
    states = list(run.stages.values())
    if any(s.startswith(FAILED_INFRA) for s in states):
        return INFRA
    if any(s.startswith(FAILED_INPUT) for s in states):
        return USAGE
    return ATTENTION if attention(run) else OK


def attention(run: Run) -> list[str]:
    """One line a patch; empty when the bot may stay silent (waiting for approval needs nobody)."""
    reasons = []
    for o in run.outcomes:
        why = _why_a_human(o)
        if why:
            reasons.append(f"{o.name}: {why}")
        pending = [k for e in o.evidence if e.kind == "tests" for k in e.data.get("pending", [])]
        if pending and o.verdict is not Verdict.INCONCLUSIVE:
            reasons.append(f"{o.name}: {', '.join(pending)} tests inconclusive (hold for their results)")
    return reasons


def _why_a_human(o: Outcome) -> str | None:
    if o.verdict in (Verdict.CONFLICT, Verdict.BROKEN, Verdict.PARTIAL, Verdict.INCONCLUSIVE):
        return o.verdict.value
    if o.recommendation is Recommendation.HUMAN_LOOK:
        return "the signals disagree (human look)"
    if redundant_open(o):
        return f"represented, but PR #{o.pr.number if o.pr else None} is still open"
    if o.verdict is None and o.applied is Applied.CONFLICT:
        return "conflict"
    return None


def redundant_open(o: Outcome) -> bool:
    return o.verdict is Verdict.REPRESENTED and o.pr is not None and o.pr.number is not None and o.pr.state == "open"
