"""The verdict table as a table: facts in, the rule and verdict out, every rule and the boundary
between neighbouring rules, in milliseconds. (The git-world tests in ``test_check*.py`` show
that the facts are gathered right; these show what the table does with them.)"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ggstack.check.containment import NO_FILE, UNREADABLE, Containment, Unit
from ggstack.check.remaining import Remaining
from ggstack.check.rules import FOLD_RULES, RULES, Facts, FromTests, Match, decide, fold
from ggstack.diff import Block
from ggstack.model import Applied, Recommendation, TextVerdict, Verdict


def added(present: bool = True, by: tuple[str, ...] = ("b1",), weight: int = 2, path: str = "f") -> Unit:
    block = Block(0, added=["x = 1"] * weight)
    return Unit(path, "hunk", weight, present, "", block=block, by=list(by) if present else [])


def removed(present: bool = True, by: tuple[str, ...] = ("b1",), weight: int = 2) -> Unit:
    return Unit("f", "hunk", weight, present, "", block=Block(0, removed=["y = 1"] * weight), by=list(by))


@dataclass
class Later:
    """What the rules may ask later, given."""

    own_units: list[Unit] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    diff: str | None = "diff"
    own_left: list[str] = field(default_factory=list)
    superseding: list[str] = field(default_factory=list)

    def own(self) -> list[Unit]:
        return self.own_units

    def remaining(self, own: bool = False) -> Remaining:
        return Remaining(self.diff, self.own_left if own else self.left)

    def superseded(self) -> list[str]:
        return self.superseding


def facts(units: list[Unit], later: Later | None = None, **kw) -> Facts:
    return Facts(Containment(units, {"f": "f"}), later=later or Later(), **kw)


def pick(complete: bool | None = True, undone: tuple[str, ...] = ()) -> Match:
    return Match("cherry-picked as", "p1", list(undone), complete)


OWN = [added(False)]
MIXED = [added(), added(False)]  # half there, brought by b1

ROWS = [
    # (id, facts, rule, verdict, recommendation)
    ("nothing to change", facts([]), "changes nothing", Verdict.REPRESENTED, Recommendation.DO_NOT_OPEN),
    ("a pick, all there", facts([added()], matches=[pick()]), "picked", Verdict.REPRESENTED, None),
    (
        "a whole pick undone",
        facts([removed(False)], matches=[pick()], replay=Applied.APPLIED),
        "picked, then undone?",
        Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
    ),
    (
        "an adapted pick undone is no undo",
        facts([removed(False)], Later(own_units=[removed(False)]), matches=[pick(False)], replay=Applied.APPLIED),
        "adapted pick",
        Verdict.PARTIAL,
        Recommendation.OPEN_PR,
    ),
    (
        "a whole pick modified since",
        facts(MIXED, matches=[pick()]),
        "picked, then modified",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
    ),
    (
        "a whole pick, and a line of the fork's own",
        facts(MIXED, Later(own_units=OWN), matches=[pick()]),
        "adapted pick",
        Verdict.PARTIAL,
        Recommendation.OPEN_PR,
    ),
    (
        "an adapted pick, the rest rewritten",
        facts(MIXED, Later(left=["f line 3"], diff=None), matches=[pick(False)]),
        "adapted pick, rest rewritten",
        Verdict.PARTIAL,
        Recommendation.HUMAN_LOOK,
    ),
    (
        "an adapted pick, the rest rewritten, and own lines",
        facts(MIXED, Later(own_units=OWN, left=["f line 3"], diff=None), matches=[pick(False)]),
        "adapted pick",
        Verdict.PARTIAL,
        Recommendation.OPEN_PR,
    ),
    (
        "an adapted pick whose own line has no clean place",
        facts(MIXED, Later(own_units=OWN, own_left=["f line 9"]), matches=[pick(False)]),
        "adapted pick",
        Verdict.PARTIAL,
        Recommendation.REWORK,
    ),
    (
        "an adapted pick that conflicts",
        facts(MIXED, Later(own_units=OWN), matches=[pick(False)], replay=Applied.CONFLICT),
        "adapted pick",
        Verdict.PARTIAL,
        Recommendation.REWORK,
    ),
    (
        "a pick in a run the base has",
        facts(MIXED, matches=[pick(False)], group=["0001", "0002"], group_by=["s1"]),
        "series",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
    ),
    ("a run the base has", facts(MIXED, group=["0001", "0002"], group_by=["s1"]), "series", Verdict.REPRESENTED, None),
    ("every line there", facts([added(), removed()]), "content", Verdict.REPRESENTED, Recommendation.DO_NOT_OPEN),
    (
        "every line there, yet it still changes the base",
        facts([added()], replay=Applied.APPLIED),
        "content",
        Verdict.REPRESENTED,
        Recommendation.HUMAN_LOOK,
    ),
    ("every line there, none brought", facts([added(by=())]), "needed", Verdict.UNIQUE, Recommendation.OPEN_PR),
    ("the same blobs", facts(MIXED, same_blobs=["b2"]), "same post-image", Verdict.REPRESENTED, None),
    ("an empty replay", facts(MIXED, replay=Applied.EMPTY), "empty replay", Verdict.REPRESENTED, None),
    (
        "an empty replay of a file the base never had",
        facts(MIXED, Later(own_units=OWN), replay=Applied.EMPTY),
        "partial",
        Verdict.PARTIAL,
        None,
    ),
    (
        "a reverted pick partly redone",
        facts(MIXED, matches=[pick(undone=("r1",))]),
        "reverted, partly back",
        Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
    ),
    ("half its lines there", facts(MIXED), "partial", Verdict.PARTIAL, Recommendation.OPEN_PR),
    (
        "half there, the rest without a clean place",
        facts(MIXED, Later(left=["f line 3"])),
        "partial",
        Verdict.PARTIAL,
        Recommendation.REWORK,
    ),
    (
        "a few lines, by an unrelated commit",
        facts([added(weight=1), added(False, weight=19)]),
        "needed",
        Verdict.UNIQUE,
        Recommendation.OPEN_PR,
    ),
    (
        "a few lines, by a related commit",
        facts([added(weight=1), added(False, weight=19)], related={"b1"}),
        "partial",
        Verdict.PARTIAL,
        None,
    ),
    (
        "only removals there, by an unrelated commit",
        facts([removed(), added(False)]),
        "needed",
        Verdict.UNIQUE,
        Recommendation.OPEN_PR,
    ),
    (
        "only removals there, by a commit of its subject",
        facts([removed(), added(False)], hints=["b1"]),
        "partial",
        Verdict.PARTIAL,
        None,
    ),
    (
        "a conflict its author's commit superseded",
        facts([added(False)], Later(superseding=["s1"]), replay=Applied.CONFLICT),
        "superseded?",
        Verdict.CONFLICT,
        Recommendation.HUMAN_LOOK,
    ),
    (
        "superseded is asked of a conflict only",
        facts([added(False)], Later(superseding=["s1"]), replay=Applied.APPLIED),
        "needed",
        Verdict.UNIQUE,
        Recommendation.OPEN_PR,
    ),
    ("a hint, no lines", facts([added(False)], hints=["h1"]), "signals disagree", Verdict.UNIQUE, None),
    (
        "its files gone",
        facts([Unit("f", "hunk", 2, False, NO_FILE, block=Block(0, added=["x"]))], gone={"f": "d1"}),
        "files gone",
        Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
    ),
    (
        "not comparable (a degraded clone)",
        facts([Unit("f", "hunk", 2, False, UNREADABLE, block=Block(0, added=["x"]))]),
        "not compared",
        Verdict.INCONCLUSIVE,
        Recommendation.HOLD,
    ),
    ("nothing there", facts([added(False)]), "needed", Verdict.UNIQUE, Recommendation.OPEN_PR),
    (
        "nothing there, conflicts",
        facts([added(False)], replay=Applied.CONFLICT),
        "needed",
        Verdict.CONFLICT,
        Recommendation.REWORK,
    ),
]


@pytest.mark.parametrize(("f", "name", "verdict", "recommendation"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_the_rule_that_decides(f: Facts, name: str, verdict: Verdict, recommendation: Recommendation | None) -> None:
    d = decide(f)
    assert (d.rule, d.verdict) == (name, verdict), d.why
    if recommendation is not None:
        assert d.recommendation is recommendation


def test_every_rule_has_a_row() -> None:
    assert {r[2] for r in ROWS} == {name for name, *_ in RULES}


def test_no_represented_verdict_with_a_line_of_the_forks_own() -> None:
    """Whatever else the facts say, a line the base lacks where it never touched keeps a patch from
    being represented, unless git itself finds the post-image (every line there, an empty replay, its
    reverse) or the run it belongs to is there as a whole."""
    for _, f, *_ in ROWS:
        if f.later.own() and not f.content.literally and not f.reverse and not f.group:
            assert decide(f).verdict is not Verdict.REPRESENTED


def text(verdict: Verdict, own: tuple[str, ...] = (), by: tuple[str, ...] = ()) -> TextVerdict:
    rec = {Verdict.REPRESENTED: Recommendation.DO_NOT_OPEN, Verdict.CONFLICT: Recommendation.REWORK}
    return TextVerdict(verdict, rec.get(verdict, Recommendation.OPEN_PR), "r", list(by), list(own))


FOLDS = [
    ("broken", text(Verdict.REPRESENTED), "broken", "broken", Verdict.BROKEN),
    ("could not run, represented", text(Verdict.REPRESENTED), "could-not-run", "tests undecided", Verdict.REPRESENTED),
    ("inconclusive, unique", text(Verdict.UNIQUE), "inconclusive", "tests undecided, held", Verdict.INCONCLUSIVE),
    ("needed, represented", text(Verdict.REPRESENTED), "needed", "tests and text disagree", Verdict.INCONCLUSIVE),
    ("needed, partial", text(Verdict.PARTIAL), "needed", "needed by its tests", Verdict.PARTIAL),
    ("behaviour, own lines", text(Verdict.PARTIAL, ("f +x",)), "represented", "behaviour there, own lines not", None),
    ("behaviour, rewritten", text(Verdict.CONFLICT, by=("c1",)), "represented", "represented by behaviour", None),
    ("no evidence", text(Verdict.UNIQUE), "none", "no behaviour evidence", Verdict.UNIQUE),
]


@pytest.mark.parametrize(("t", "kind", "name", "verdict"), [r[1:] for r in FOLDS], ids=[r[0] for r in FOLDS])
def test_the_tests_folded_onto_the_text(t: TextVerdict, kind: str, name: str, verdict: Verdict | None) -> None:
    folded = fold(t, FromTests(kind, "cpu tests …"))
    assert folded.rule == name
    if verdict is not None:
        assert folded.verdict is verdict
    if t.own_lines:
        assert folded.verdict is t.verdict and "fork's own" in folded.detail
    if name == "represented by behaviour":
        assert folded.verdict is Verdict.REPRESENTED and folded.commits == ("c1",)


def test_every_fold_rule_has_a_row() -> None:
    assert {r[3] for r in FOLDS} - {"tests undecided, held"} | {"tests undecided"} == {r[0] for r in FOLD_RULES}
