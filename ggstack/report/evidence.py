"""The words of a verdict: the deciding rule's reason, then what to know before acting (who brought the lines, a
differing patch-id, the tests). A Run from before the verdict table is worded from its signals."""

from __future__ import annotations

import re
from collections.abc import Callable

from ggstack.check.rules import BY_LINES, BY_PICK
from ggstack.model import Applied, Evidence, Outcome, Recommendation, Run, Signal, TestResult, Verdict
from ggstack.report.words import NOT_JUDGED, commit_words, conflict_words, short


def _details(o: Outcome, kind: str) -> list[str]:
    return [e.detail for e in o.evidence if e.kind == kind]


def _first(o: Outcome, kind: str) -> Evidence | None:
    return next((e for e in o.evidence if e.kind == kind), None)


def verdict_words(o: Outcome) -> str:
    """ "represented — every change is in the base, brought by 639aeff0c1; patch-id differs"."""
    if o.verdict is None:
        return ""
    decided = _first(o, Signal.RULE)
    if decided is None:
        return f"{o.verdict.value} — " + "; ".join(_signal_reasons(o))
    parts = _rule_reasons(o, decided)
    return f"{o.verdict.value} — " + "; ".join(dict.fromkeys(p for p in parts if p))


def _rule_reasons(o: Outcome, decided: Evidence) -> list[str]:
    why = decided.detail.partition(": ")[2] or decided.detail
    parts = [why, *_besides(o, decided.data.get("rule"))]
    if o.verdict is Verdict.CONFLICT and o.conflict and "conflict" not in why:
        parts.insert(0, conflict_words(o.conflict.paths))
    return parts + _spurious_conflicts(o)


def _spurious_conflicts(o: Outcome) -> list[str]:
    return [e.detail for e in o.evidence if e.kind == Signal.CONFLICT and e.data.get("spurious")]


def _besides(o: Outcome, rule: object) -> list[str]:
    """Who brought the lines, where the lines decided; a differing patch-id, unless git found the pick."""
    parts = []
    if o.verdict in (Verdict.REPRESENTED, Verdict.PARTIAL) and rule in BY_LINES:
        parts += _details(o, Signal.BLAME)
    if o.verdict is Verdict.REPRESENTED and rule not in BY_PICK and _patch_id_differs(o):
        parts.append("patch-id differs")
    return parts


def _patch_id_differs(o: Outcome) -> bool:
    pid = _first(o, Signal.PATCH_ID)
    return pid is not None and not pid.data.get("match")


def _signal_reasons(o: Outcome) -> list[str]:
    reason = _SIGNAL_REASON.get(o.verdict)
    parts = [reason(o)] if reason else []
    pid = _first(o, Signal.PATCH_ID)
    if pid is not None:
        parts.append(_patch_id_words(pid))
    return parts + [e.detail for e in o.evidence if e.kind == Signal.IDENTITY and e.data.get("match")]


def _patch_id_words(pid: Evidence) -> str:
    return (
        "patch-id matches " + ", ".join(short(c) for c in pid.commits) if pid.data.get("match") else "patch-id differs"
    )


def _agreed_content(o: Outcome) -> list[str]:
    return [e.detail for e in o.evidence if e.kind == Signal.CONTENT and "disagreement" not in e.data]


def _present(o: Outcome) -> str:
    return next(iter(_details(o, Signal.BLAME) + _agreed_content(o)), "the base has it")


def _partly_present(o: Outcome) -> str:
    return next(iter(_agreed_content(o)), f"{round(100 * o.represented_fraction)}% present")


def _conflicting(o: Outcome) -> str:
    paths = o.conflict.paths if o.conflict else []
    return conflict_words(paths) if paths else "does not apply"


_SIGNAL_REASON: dict[Verdict | None, Callable[[Outcome], str]] = {
    Verdict.REPRESENTED: _present,
    Verdict.PARTIAL: _partly_present,
    Verdict.CONFLICT: _conflicting,
    Verdict.UNIQUE: lambda o: "not in the base; applies",
}


def evidence_words(o: Outcome) -> str:
    """ "represented: 100% of added lines come from 639aeff; its tests pass on the base without the
    patch": the tests after the text's first reason, or first where they decided."""
    verdict = o.verdict.value if o.verdict else _unjudged_word(o)
    parts = _reasons(o, verdict) or _apply_words(o)
    if o.note:
        parts.append(o.note)
    parts = list(dict.fromkeys(p for p in parts if p))
    return f"{verdict}: {'; '.join(parts)}" if parts else verdict


def _unjudged_word(o: Outcome) -> str:
    return o.applied.value if o.applied else NOT_JUDGED


def _reasons(o: Outcome, verdict: str) -> list[str]:
    text = verdict_words(o).partition(" — ")[2].replace(" (content)", "") if o.verdict else ""
    first, _, rest = text.partition("; ")
    tests = _tests_words(o, verdict)
    if o.verdict in (Verdict.BROKEN, Verdict.INCONCLUSIVE):
        return [p for p in (*tests, first, rest) if p]
    return [p for p in (first, *tests, rest) if p]


def _tests_words(o: Outcome, verdict: str) -> list[str]:
    tests = [d.removeprefix(f"{verdict}: ") for d in _details(o, Signal.TESTS) if d]
    return tests or [test_words(t) for t in o.tests if t.status != "passed" or t.where == "patched"]


def _apply_words(o: Outcome) -> list[str]:
    if o.conflict:
        return [conflict_words(o.conflict.paths)]
    if o.applied is Applied.EMPTY:
        return ["replaying it onto the base changes nothing"]
    return []


_WHERE = {"patched": "base+patch", "base": "base without the patch", "old-base": "the old base"}


def test_words(t: TestResult) -> str:
    extra = []
    if t.failed:
        extra.append(f"{len(t.failed)} failed: {', '.join(t.failed[:3])}{' …' if len(t.failed) > 3 else ''}")
    if t.passed and t.status != "passed":
        extra.append(f"{len(t.passed)} passed")
    if t.reason:
        extra.append(t.reason)
    return f"{t.kind} tests on {_WHERE.get(t.where, t.where)}: {t.status}" + (f" ({'; '.join(extra)})" if extra else "")


_TESTS_SHORT = {
    "broken": "tests fail with it",
    "needed": "tests fail without it",
    "represented": "tests pass on the base without it",
    "none": "",
}


def short_evidence(o: Outcome, run: Run) -> str:
    """ "by 6eaa67e5b9 “subject” — 100% of added lines; tests pass on the base without it"."""
    tests = _first(o, Signal.TESTS)
    parts = [_text_short(o, run), *(_tests_short(tests) if tests is not None else [])]
    return "; ".join(p for p in parts if p)


def _tests_short(tests: Evidence) -> list[str]:
    judgement = str(tests.data.get("judgement", ""))
    if judgement in ("could-not-run", "inconclusive"):
        cause = tests.detail.rsplit(": ", 1)[-1] if ": " in tests.detail else tests.detail
        said = ("tests could not run: " if judgement == "could-not-run" else "tests inconclusive: ") + cause
    else:
        said = _TESTS_SHORT.get(judgement, "")
    pending = tests.data.get("pending") or []
    return [said, f"{', '.join(pending)} tests pending"] if pending else [said]


def _text_short(o: Outcome, run: Run) -> str:
    if o.verdict in (Verdict.REPRESENTED, Verdict.PARTIAL) and o.represented_by:
        return _by_short(o, run)
    if o.conflict:
        return conflict_words(o.conflict.paths[:2]) + (" …" if len(o.conflict.paths) > 2 else "")
    if o.verdict is Verdict.UNIQUE:
        return "not in the base"
    if o.recommendation is Recommendation.HUMAN_LOOK:
        return "the signals disagree (see --verbose)"
    return ""


def _by_short(o: Outcome, run: Run) -> str:
    more = len(o.represented_by) - 1
    by = commit_words(o.represented_by[0], run) + (f" +{more}" if more > 0 else "")
    if o.verdict is Verdict.PARTIAL:  # the share its PR body says: of the patch's lines, not of blame's
        return f"{o.represented_fraction:.0%} of its lines, by {by}"
    share = _blame_share(o)
    return f"by {by}" + (f" — {share}" if share else "")


def _blame_share(o: Outcome) -> str:
    m = re.match(r"(\d+% of added lines)", next(iter(_details(o, Signal.BLAME)), ""))
    if m:
        return m.group(1)
    return f"{o.represented_fraction:.0%} of its lines" if o.represented_fraction else ""
