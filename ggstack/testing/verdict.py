"""A patch's test results folded onto its text verdict (``rules.fold``), for the local run and a
merge of CI's shards alike. Folding twice is folding once."""

from __future__ import annotations

from collections.abc import Sequence

from ggstack import git
from ggstack.check import rules
from ggstack.model import Evidence, Outcome, Recommendation, Run, Says, Signal, TestResult, TextVerdict, Verdict
from ggstack.testing.evidence import UNDECIDED, Judgement, combine, judge_kind
from ggstack.testing.plan import LABELS, Job


def fold_tests(
    repo: git.Repository,
    run: Run,
    jobs: Sequence[Job],
    results: dict[str, list[TestResult]],
    gpu_state: str | None,
    *,
    require_tests: bool = True,
) -> Run:
    """``require_tests``: a needed patch whose tests could not decide is held rather than given a PR."""
    run = run.copy()
    by_patch: dict[str, list[Job]] = {}
    for job in jobs:
        by_patch.setdefault(job.patch, []).append(job)
    for o in run.outcomes:
        if by_patch.get(o.name):
            _fold_patch(repo, o, by_patch[o.name], results, require_tests)
    run.gpu = gpu_state
    run.stages["test"] = "ok"
    return run


def _fold_patch(
    repo: git.Repository, o: Outcome, jobs: Sequence[Job], results: dict[str, list[TestResult]], required: bool
) -> None:
    text = _restore(o)
    o.tests = [r for j in jobs for r in results[j.id]]
    judged = [(j, judge_kind(j.kind, {r.where: r for r in results[j.id]}, j.own)) for j in jobs]
    _apply(repo, o, text, judged, required)


def _restore(o: Outcome) -> TextVerdict | None:
    folded = [e for e in o.evidence if e.kind == "tests"]
    if o.text is None and o.verdict is not None:
        o.text = _text_before(o, o.verdict, folded)
    o.evidence = [e for e in o.evidence if e.kind != "tests"]
    o.tests = []
    return o.text


def _text_before(o: Outcome, verdict: Verdict, folded: Sequence[Evidence]) -> TextVerdict | None:
    before = folded[0].data.get("before") if folded else None  # a Run of an older ggstack
    if isinstance(before, dict) and before.get("verdict"):
        text = TextVerdict(Verdict(before["verdict"]), Recommendation(before["recommendation"]), "")
        text.represented_by = list(before.get("represented_by", []))
        return text
    if folded:
        return None
    text = TextVerdict(verdict, o.recommendation or rules.recommend(verdict, False), "")
    text.represented_by = list(o.represented_by)
    return text


def _apply(
    repo: git.Repository, o: Outcome, text: TextVerdict | None, judged: Sequence[tuple[Job, Judgement]], required: bool
) -> None:
    judgements = [j for _, j in judged]
    kind = combine(judgements)
    detail = _details(judgements, kind)
    touching = _candidates(repo, judged[0][0]) if kind == "represented" and not _names_commits(text) else []
    facts = rules.FromTests(kind, detail, required, _open_pr(o), o.applied, tuple(_brought(o)), tuple(touching))
    d = rules.fold(text, facts)
    o.verdict, o.recommendation = d.verdict, d.recommendation
    if d.commits or text:
        o.represented_by = list(d.commits or _names_commits(text))
    o.evidence.append(Evidence("tests", d.detail + _left_behind(o), list(d.commits), data=_tests_data(d, judged, kind)))


def _details(judgements: Sequence[Judgement], kind: str) -> str:
    return "; ".join(j.detail for j in sorted(judgements, key=lambda j: j.kind != kind))  # the deciding kind first


def _names_commits(text: TextVerdict | None) -> list[str]:
    return text.represented_by if text else []


def _open_pr(o: Outcome) -> bool:
    return o.pr is not None and o.pr.number is not None and o.pr.state == "open"


def _left_behind(o: Outcome) -> str:
    left = [
        f"{r.kind} {LABELS.get(r.where, r.where)}: {', '.join(r.left_processes)}" for r in o.tests if r.left_processes
    ]
    return "; left processes behind (killed): " + "; ".join(left) if left else ""


def _tests_data(d: rules.Folded, judged: Sequence[tuple[Job, Judgement]], kind: str) -> dict[str, object]:
    judgements = [j for _, j in judged]
    return {
        "judgement": kind,
        "rule": d.rule,
        "pending": _pending(judged, kind),
        "tests": sorted({t for j in judgements if j.kind == kind for t in j.tests}),
        "runs": {jb.kind: jd.kind for jb, jd in judged},
        "agrees_with_text": d.agrees,
        "settle": _settle(judgements),
        "pre_existing": sorted({t for j in judgements for t in j.pre_existing}),
    }


def _pending(judged: Sequence[tuple[Job, Judgement]], kind: str) -> list[str]:
    if kind in UNDECIDED:
        return []
    return sorted(jb.kind for jb, jd in judged if jd.kind in UNDECIDED)


def _settle(judgements: Sequence[Judgement]) -> str:
    return "; ".join(dict.fromkeys(j.settle for j in judgements if j.kind in UNDECIDED and j.settle))


def _brought(o: Outcome) -> list[str]:
    """Where the text named no commit: a base that redid a change its own way (a reverted pick done
    again by a consolidating commit) is represented by the commits blame found once its tests agree."""
    found = (e.commits for e in o.evidence if e.kind is Signal.BLAME and e.says is Says.PRESENT)
    return list(dict.fromkeys(c for commits in found for c in commits))


def _candidates(repo: git.Repository, job: Job, limit: int = 5) -> list[str]:
    """Where the behaviour most likely came from: commits since the old base touching the patch's code."""
    trees = {t.where: t for t in job.trees}
    old, base = trees["old-base"].parent, trees["base"].parent
    if not old or not base or not job.code_paths:
        return []
    return repo.rev_list(f"{old}..{base}", f"--max-count={limit}", "--", *job.code_paths)
