"""What a patch's test runs say about it (docs/judgement.md, "Tests as evidence"): only tests that
ran and failed count; one failing everywhere alike is the environment's, reported as pre-existing."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ggstack.model import TestResult
from ggstack.testing.results import COULD_NOT_RUN, how_to_settle

UNDECIDED = ("could-not-run", "inconclusive")
_WHERE_WORDS = {"patched": "with the patch", "base": "on the base without the patch", "old-base": "on the old base"}


@dataclass(frozen=True)
class Judgement:
    kind: str  # broken | needed | represented | could-not-run | inconclusive | none
    tests: tuple[str, ...]
    detail: str
    settle: str = ""  # when it could not decide: what would let it
    pre_existing: tuple[str, ...] = ()  # failing with and without the patch and on the old base: no evidence


def judge_kind(kind: str, runs: dict[str, TestResult], own: Collection[str] = ()) -> Judgement:
    """A test the patch adds or changes (``own``) is never pre-existing: its failure is the patch's."""
    patched, base, old = runs.get("patched"), runs["base"], runs.get("old-base")
    pre = _pre_existing(patched, base, old, own)
    judged = _judge_runs(kind, patched, base, old, set(pre))
    if not pre:
        return judged
    detail = (
        f"{judged.detail}; pre-existing (failing with the patch, on the base and on the old base): {_names(list(pre))}"
    )
    return dataclasses.replace(judged, detail=detail, pre_existing=pre)


def _pre_existing(
    patched: TestResult | None, base: TestResult, old: TestResult | None, own: Collection[str]
) -> tuple[str, ...]:
    if patched is None or old is None:
        return ()
    everywhere = set(patched.failed) & set(old.failed)
    return tuple(t for t in base.failed if t in everywhere and _test_name(t) not in own)


def combine(judgements: Sequence[Judgement]) -> str:
    """The kinds' judgements as one: one that could not decide does not overrule one that did."""
    kinds = {j.kind for j in judgements}
    for kind in ("broken", "needed", "represented", *UNDECIDED):
        if kind in kinds:
            return kind
    return "none"


def _test_name(test: str) -> str:
    """A test id's function name: ``tests.test_c::TestC::test_x[1]`` -> ``test_x``."""
    return test.rpartition("::")[2].rpartition(".")[2].partition("[")[0]


def _judge_runs(
    kind: str, patched: TestResult | None, base: TestResult, old: TestResult | None, pre: set[str]
) -> Judgement:
    passing: set[str] | None = None
    if patched is not None and patched.status != "not-run":
        early = _judge_patched(kind, patched, pre)
        if early is not None:
            return early
        passing = set(patched.passed)
    return _judge_base(kind, base, passing, pre) or _judge_control(kind, base, old, pre)


def _judge_patched(kind: str, patched: TestResult, pre: set[str]) -> Judgement | None:
    failed = [t for t in patched.failed if t not in pre]
    if patched.status == "failed" and (failed or not patched.failed):
        return Judgement("broken", tuple(failed), f"{kind} tests fail with the patch: {_names(failed)}")
    return _undecided(kind, patched, f"no {kind} tests collected")


def _judge_base(kind: str, base: TestResult, passing: set[str] | None, pre: set[str]) -> Judgement | None:
    if base.status == "failed" and (needed := _needed(kind, base, passing, pre)):
        return needed
    return _undecided(kind, base, f"no {kind} tests collected on the base")


def _undecided(kind: str, r: TestResult, no_tests: str) -> Judgement | None:
    """A run that says nothing either way; "not-run" only ever reaches here for the base."""
    if r.status in COULD_NOT_RUN:
        return _could_not_run(kind, r)
    if r.status in ("skipped", "not-run"):
        return _skipped(kind, r)
    if r.status == "no-tests":
        return Judgement("none", (), no_tests)
    return None


def _needed(kind: str, base: TestResult, passing: set[str] | None, pre: set[str]) -> Judgement | None:
    failing = _failing_without(base, passing, pre)
    if not failing:
        return None
    how = "and pass with it" if passing is not None else "(the patch does not apply, so they were not run with it)"
    return Judgement(
        "needed", tuple(failing), f"{kind} tests fail on the base without the patch {how}: {_names(failing)}"
    )


def _failing_without(base: TestResult, passing: set[str] | None, pre: set[str]) -> list[str]:
    # Only tests seen failing: one that did not run on the base (``-x`` stopped it) is no evidence.
    failing = [t for t in base.failed if t not in pre]
    return [t for t in failing if passing is None or t in passing] or failing


def _could_not_run(kind: str, r: TestResult) -> Judgement:
    why = r.reason or r.status
    return Judgement(
        "could-not-run",
        tuple(r.errors),
        f"{kind} tests could not run: {why} (in tests.{kind}, {_WHERE_WORDS.get(r.where, r.where)})",
        how_to_settle(r.harness_error or r.status, why, r.command),
    )


def _skipped(kind: str, r: TestResult) -> Judgement:
    settle = (
        f"run the {kind} tests on a machine with a GPU (`ggstack test --gpu require` on a GPU runner)"
        if kind == "gpu"
        else f"find out why the {kind} tests were skipped"
    )
    return Judgement(
        "inconclusive", tuple(r.skipped), f"{kind} tests {_WHERE_WORDS.get(r.where, r.where)}: {_why(r)}", settle
    )


def _judge_control(kind: str, base: TestResult, old: TestResult | None, pre: set[str]) -> Judgement:
    """The tests pass without the patch: does the old base (the control) fail them?"""
    if old is not None and old.status == "failed" and not set(old.failed) - pre:
        return Judgement("none", (), f"{kind} tests: only pre-existing failures on the old base: no behaviour evidence")
    if old is None or old.status != "failed":
        return Judgement(
            "none",
            (),
            f"{kind} tests pass on the base without the patch, but {_no_control(old)}: no behaviour evidence",
        )
    return _represented(kind, base, old, pre)


def _represented(kind: str, base: TestResult, old: TestResult, pre: set[str]) -> Judgement:
    shown = [t for t in base.passed if t in old.failed] or [t for t in old.failed if t not in pre]
    return Judgement(
        "represented",
        tuple(shown),
        f"{kind} tests fail on the old base and pass on the base without the patch: {_names(shown)}",
    )


def _no_control(old: TestResult | None) -> str:
    if old is not None and old.status == "passed":
        return "the control: pass on the old base too, so they cannot tell the change apart"
    return f"the control on the old base did not run ({_why(old) if old else 'not run'})"


def _why(r: TestResult) -> str:
    return r.reason or r.status


def _names(tests: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(tests[:limit])
    return shown + (f" and {len(tests) - limit} more" if len(tests) > limit else "") if tests else "(no test names)"
