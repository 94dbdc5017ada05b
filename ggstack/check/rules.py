"""The verdict table, signals to verdict in one ordered list: a false "represented" closes a needed fix, a false
"needed" redoes upstream's work. git's signals, then content; a partial needs the base commit bringing its lines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from ggstack.check.containment import UNREADABLE, Containment, Unit, adds
from ggstack.check.remaining import Remaining
from ggstack.model import Applied, Recommendation, TextVerdict, Verdict


@dataclass
class Match:
    """A base commit that git's identity or patch-id says is this change."""

    # "same patch-id as" | "merged as" (the commit itself) | "source merged as" (the commit it names) |
    # "cherry-picked as" | "Stack-Patch-Id in" | "Change-Id in" | a hint's (judge.HINTED)
    how: str
    commit: str  # the base commit (for "reachable": the source commit itself)
    undone_by: list[str] = field(default_factory=list)  # base commits that took it out again
    complete: bool | None = True  # that commit's own tree had every change of the patch (None: not read yet)
    modified_by: list[str] = field(default_factory=list)  # base commits since, changing its files


class Later(Protocol):
    """Facts read only when a rule asks for them: each costs a search of the range."""

    def own(self) -> list[Unit]: ...

    def remaining(self, own: bool = False) -> Remaining: ...

    def superseded(self) -> list[str]: ...


class _NothingLater:
    def own(self) -> list[Unit]:
        return []

    def remaining(self, own: bool = False) -> Remaining:
        return Remaining(None, [])

    def superseded(self) -> list[str]:
        return []


@dataclass
class Facts:
    """Everything the rules read about one patch on one base."""

    content: Containment
    replay: Applied | None = None  # None: not replayed (decided without a merge)
    reverse: bool | None = None  # its reverse applies to the base
    matches: list[Match] = field(default_factory=list)
    group: list[str] = field(default_factory=list)  # a represented run it belongs to: its names
    group_by: list[str] = field(default_factory=list)  # ... and the base commits that carry the run
    hints: list[str] = field(default_factory=list)  # same subject or PR number
    related: set[str] = field(default_factory=set)  # base commits tied to it otherwise (hints, a consolidation)
    gone: dict[str, str] = field(default_factory=dict)  # its files the base deleted or moved away -> the commit
    same_blobs: list[str] = field(default_factory=list)  # range commits that left its files as it leaves them
    later: Later = field(default_factory=_NothingLater)

    @cached_property
    def own(self) -> list[Unit]:
        """The fork's own lines: missing from the base at places no range commit touched."""
        return self.later.own()

    @cached_property
    def left_out(self) -> list[str]:
        """The missing blocks no remaining diff can carry: the base rewrote their place its own way."""
        return self.later.remaining().left_out

    @cached_property
    def own_left_out(self) -> list[str]:
        """The fork's own lines no remaining diff can carry (the file would not parse with them)."""
        return self.later.remaining(own=True).left_out

    @property
    def rewritten(self) -> list[str]:
        """The missing blocks, when every one of them is left out (nothing could be carried over)."""
        r = self.later.remaining()
        return r.left_out if r.diff is None else []

    @cached_property
    def superseded(self) -> list[str]:
        """Base commits by its author or with its title that changed the same lines another way."""
        return self.later.superseded()

    @property
    def live(self) -> list[Match]:
        return [m for m in self.matches if not m.undone_by]

    @property
    def undone(self) -> list[Match]:
        return [m for m in self.matches if m.undone_by]

    @property
    def post_image(self) -> bool:
        """git (or every line) finds the patched text in the base."""
        return self.content.literally or self.replay is Applied.EMPTY or bool(self.reverse)

    @property
    def conflicts(self) -> bool:
        return self.replay is Applied.CONFLICT

    @property
    def tied(self) -> set[str]:
        """Base commits tied to the patch: its live picks, hints and consolidations."""
        return {m.commit for m in self.live} | self.related | set(self.hints)

    @property
    def earning(self) -> list[Unit]:
        """The present units that are evidence of a partial: lines it adds, or removals by a commit tied
        to it (upstream gutting a file for its own reasons says nothing about the patch)."""
        tied = self.tied
        return [u for u in self.content.counted if u.earned and (adds(u) or set(u.by) & tied)]

    @property
    def share(self) -> float:
        """The share of the informative changed lines that ``earning`` holds."""
        units = self.content.counted
        total = sum(max(u.weight, 1) for u in units)
        return sum(max(u.weight, 1) for u in self.earning) / total if total else 0.0


@dataclass
class Decision:
    rule: str
    verdict: Verdict
    recommendation: Recommendation
    represented_by: list[str]
    why: str
    group: list[str] = field(default_factory=list)  # the names of the run it is represented with
    carries_own: bool = False  # a partial whose remaining diff is its own lines only (the rest is its pick's)


def _commits(*groups: list[str]) -> list[str]:
    return list(dict.fromkeys(c for g in groups for c in g))


def _needed(f: Facts) -> Recommendation:
    return Recommendation.REWORK if f.conflicts else Recommendation.OPEN_PR


def _still_needed(f: Facts) -> Recommendation:
    """A partial's remaining diff is the PR, unless a block has no clean place in the base: rework."""
    return Recommendation.REWORK if f.conflicts or f.left_out else Recommendation.OPEN_PR


def short_ids(commits: list[str]) -> str:
    """Commits as a reason names them: short ids, each once, in order (rules' and signals' words alike)."""
    return ", ".join(dict.fromkeys(c[:10] for c in commits))


# -- the rules, each a condition and what follows ---------------------------------------------


def _changes_nothing(f: Facts) -> bool:
    return f.content.judged and not f.content.units


def _nothing(f: Facts) -> Decision:
    return Decision("changes nothing", Verdict.REPRESENTED, Recommendation.DO_NOT_OPEN, [], "the patch changes nothing")


def _picked_whole(f: Facts) -> bool:
    return bool(f.live) and f.post_image and not (f.replay is Applied.EMPTY and not f.reverse and f.own)


def _picked(f: Facts) -> Decision:
    # The picks brought it whole; another commit blame names for a few of its lines (one that
    # wrote the same line earlier) stays in the content evidence, not among what represents it.
    by = _commits([m.commit for m in f.live])
    how = "; ".join(dict.fromkeys(f"{m.how} {m.commit[:10]}" for m in f.live))
    return Decision("picked", Verdict.REPRESENTED, Recommendation.DO_NOT_OPEN, by, f"git finds it: {how}")


def _picked_then_undone(f: Facts) -> bool:
    """The base looks like before the pick (one whose additions alone were deleted since is modified)."""
    changed = any(u.block is not None and u.block.removed for u in f.content.units)
    whole = any(m.complete for m in f.live)  # a pick that had none of it cannot have been undone
    return whole and changed and not any(u.present for u in f.content.units) and f.replay is Applied.APPLIED


def _undone_by_hand(f: Facts) -> Decision:
    since = _commits(*(m.modified_by for m in f.live))
    return Decision(
        "picked, then undone?",
        Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
        [],
        f"picked as {short_ids([m.commit for m in f.live])}, but none of its lines are left and it applies again"
        + (f": undone by {short_ids(since)}?" if since else ""),
    )


def _picked_then_modified(f: Facts) -> bool:
    """A whole pick is the patch; a line of the fork's own beside it is not (an adapted pick)."""
    return any(m.complete for m in f.live) and not f.own


def _modified(f: Facts) -> Decision:
    picks = [m for m in f.live if m.complete]
    since = _commits(*(m.modified_by for m in picks))
    return Decision(
        "picked, then modified",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
        _commits([m.commit for m in picks]),
        f"picked as {short_ids([m.commit for m in picks])}"
        + (f", since modified by {short_ids(since)}" if since else ", its lines changed since"),
    )


def _adapted_pick(f: Facts) -> bool:
    """(A member of a run the base has together is the series': its later members changed what it lacks.)"""
    return bool(f.live) and not f.group


def _adapted_rest_rewritten(f: Facts) -> bool:
    return _adapted_pick(f) and not f.own and bool(f.rewritten)


def _adapted_to_its_base(f: Facts) -> Decision:
    n = len(f.rewritten)
    shown = "; ".join(f.rewritten[:3]) + (f"; and {n - 3} more" if n > 3 else "")
    return Decision(
        "adapted pick, rest rewritten",
        Verdict.PARTIAL,
        Recommendation.HUMAN_LOOK,
        _commits([m.commit for m in f.live], f.content.commits),
        f"picked as {short_ids([m.commit for m in f.live])}; what it has beyond the pick ({n} block(s): {shown}) "
        "lies where the base rewrote those lines its own way, so no remaining diff can carry it: look whether "
        "it was only adapted to its own base (its tests can tell) before dropping it",
    )


def _adapted(f: Facts) -> Decision:
    """What the pick did not bring: the fork's own lines (the PR) or lines the base rewrote since (nothing)."""
    by = _commits([m.commit for m in f.live], f.content.commits)
    if f.own:
        rec = Recommendation.REWORK if f.conflicts or f.own_left_out else Recommendation.OPEN_PR
        words = (
            f"; {len(f.own)} of its changes are the fork's own, at places the base never touched: the remaining diff"
        )
    else:
        rec, words = _still_needed(f), ""
    return Decision(
        "adapted pick",
        Verdict.PARTIAL,
        rec,
        by,
        f"picked as {short_ids([m.commit for m in f.live])} without all of its changes{words}",
        carries_own=bool(f.own),
    )


def _in_a_group(f: Facts) -> bool:
    return bool(f.group)


def _group(f: Facts) -> Decision:
    names = f.group[0] if len(f.group) == 1 else f"{f.group[0]}–{f.group[-1]}"
    return Decision(
        "series",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
        list(f.group_by),
        f"{names} together are {short_ids(f.group_by)}",
        list(f.group),
    )


def _all_lines(f: Facts) -> bool:
    return f.content.all_earned


def _content(f: Facts) -> Decision:
    look = _would_still_change(f)
    return Decision(
        "content",
        Verdict.REPRESENTED,
        Recommendation.HUMAN_LOOK if look else Recommendation.DO_NOT_OPEN,
        f.content.commits,
        "every change is in the base, brought by "
        + short_ids(f.content.commits)
        + ("; but replaying it would still change the base: look at what it would change" if look else ""),
    )


def _would_still_change(f: Facts) -> bool:
    # (Replaying one whose news fragments a release consumed re-adds them: that is no news.)
    every_unit = all(u.present for u in f.content.units)
    return every_unit and f.replay is Applied.APPLIED and not any(u.consumed for u in f.content.units)


def _same_blobs(f: Facts) -> bool:
    return bool(f.same_blobs)


def _made_so(f: Facts) -> Decision:
    return Decision(
        "same post-image",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
        _commits(f.same_blobs, f.content.commits),
        "every file it touches is in the base as it leaves it (the same blobs), made so by " + short_ids(f.same_blobs),
    )


def _empty_replay(f: Facts) -> bool:
    """(A merge can drop a change to a file the base never had: that line is the fork's own still.)"""
    return f.replay is Applied.EMPTY and not f.own


def _empty(f: Facts) -> Decision:
    return Decision(
        "empty replay",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
        f.content.commits,
        "replaying it changes nothing (git rebase would drop it), though not all its lines were found at their place",
    )


SOME = 0.1  # below this share, lines brought by an otherwise unrelated commit are a coincidence


def _earned_by(f: Facts) -> list[str]:
    """The base commits that brought the units that earn a partial, most lines first."""
    counts: dict[str, int] = {}
    for u in f.earning:
        for c in u.by:
            counts[c] = counts.get(c, 0) + max(u.weight, 1)
    return sorted(counts, key=lambda c: -counts[c])


def _some_lines(f: Facts) -> bool:
    if not f.earning:
        return False
    related = bool(set(_earned_by(f)) & (f.related | set(f.hints)))
    return f.share >= SOME or related


def _reverted_partly_back(f: Facts) -> bool:
    """A reverted pick some of whose lines other base commits brought since: the base redid part of it
    its own way, no partial of this patch (lines the pick still holds are: partial, by the pick)."""
    picks = {m.commit for m in f.undone}
    return bool(picks) and not f.live and _some_lines(f) and not picks & set(_earned_by(f))


def _look_reverted(f: Facts) -> Decision:
    return Decision(
        "reverted, partly back",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
        [],
        f"needed again? {_picked_and_reverted(f)}; since then "
        f"{short_ids(_earned_by(f))} brought {round(100 * f.share)}% of its lines back its own way: "
        "look whether the base redid it",
    )


def _partial(f: Facts) -> Decision:
    return Decision(
        "partial",
        Verdict.PARTIAL,
        _still_needed(f),
        _earned_by(f),
        f"{round(100 * f.share)}% of its changed lines are in the base, brought by " + short_ids(_earned_by(f)),
    )


def _superseded(f: Facts) -> bool:
    """(Asked only of a conflict: a patch that merges cleanly changes no line the base changed.)"""
    return f.conflicts and bool(f.superseded)


def _look_superseded(f: Facts) -> Decision:
    return Decision(
        "superseded?",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
        [],
        f"superseded? {short_ids(f.superseded)} changed the same lines another way",
    )


def _git_disagrees(f: Facts) -> bool:
    return bool(f.reverse) or bool(f.hints)


def _look(f: Facts) -> Decision:
    why = []
    if f.undone:  # the story that explains the disagreement, first
        why.append(_picked_and_reverted(f))
    if f.reverse:
        why.append("its reverse applies (git apply -R finds its post-image), but its lines are not at their place")
    if f.hints:
        verb = "has" if len(set(f.hints)) == 1 else "have"
        why.append(f"{short_ids(f.hints)} {verb} its subject or PR number, but not its lines")
    return Decision(
        "signals disagree",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
        [],
        "; ".join(why),
    )


def _picked_and_reverted(f: Facts) -> str:
    reverts = _commits(*(m.undone_by for m in f.undone))
    return f"picked as {short_ids([m.commit for m in f.undone])}, reverted by {short_ids(reverts)}"


def _files_gone(f: Facts) -> bool:
    """Nothing of it is there, and the base deleted (or moved away) every file it changes since the merge base."""
    counted = f.content.counted
    return bool(counted and f.gone) and not any(u.present for u in counted) and all(u.path in f.gone for u in counted)


def _look_gone(f: Facts) -> Decision:
    files = ", ".join(f"{p} ({c[:10]})" for p, c in f.gone.items())
    return Decision(
        "files gone",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
        [],
        f"the base deleted the files it changes since: {files}; is it moot, or does it belong elsewhere now?",
    )


def _not_compared(f: Facts) -> bool:
    """Lines that could not be compared (an object this clone lacks) and none found: no evidence."""
    counted = f.content.counted
    return any(u.reason == UNREADABLE for u in counted) and not any(u.present for u in counted)


def _unread(f: Facts) -> Decision:
    files = ", ".join(dict.fromkeys(u.path for u in f.content.counted if u.reason == UNREADABLE))
    return Decision(
        "not compared",
        Verdict.INCONCLUSIVE,
        Recommendation.HOLD,
        [],
        f"its lines in {files} could not be compared: the base's version is not in this clone "
        "(fetch the missing objects, e.g. git fetch --refetch, and check again)",
    )


def _always(f: Facts) -> bool:
    return True


def _needed_rule(f: Facts) -> Decision:
    why = "needed again: " + _picked_and_reverted(f) if f.undone else _why_no_evidence(f)
    return Decision("needed", Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE, _needed(f), [], why)


def _why_no_evidence(f: Facts) -> str:
    if f.earning:
        return (
            f"only {round(100 * f.share)}% of its informative lines are in the base, brought by "
            f"{short_ids(_earned_by(f))}, otherwise unrelated to it: a coincidence, not evidence"
        )
    if f.content.any_earned:
        return "only lines it removes are gone from the base, taken out by commits with no tie to it: no evidence"
    return "none of its changes is in the base"


Rule = tuple[str, str, Callable[[Facts], bool], Callable[[Facts], Decision]]

RULES: tuple[Rule, ...] = (
    ("changes nothing", "the patch changes nothing → represented, do not open", _changes_nothing, _nothing),
    (
        "picked",
        "identity or patch-id names a base commit (not reverted since) and the post-image is there "
        "(every line, an empty replay, or its reverse applies) → represented by it, do not open",
        _picked_whole,
        _picked,
    ),
    (
        "picked, then undone?",
        "a whole pick, but its removed lines are back, its added ones gone, and it applies again → unique, human look",
        _picked_then_undone,
        _undone_by_hand,
    ),
    (
        "picked, then modified",
        "a pick whole in its own tree, whose lines the base changed since, and no line of the fork's own (a changed "
        "line missing where no base commit touched) → represented by it (since modified by …), do not open",
        _picked_then_modified,
        _modified,
    ),
    (
        "adapted pick, rest rewritten",
        "a pick that left some changes out, each where the base has since rewritten those lines its own way "
        "(no remaining diff could carry them), none of the fork's own → partial, by it; human look (its tests "
        "can show the behaviour is there)",
        _adapted_rest_rewritten,
        _adapted_to_its_base,
    ),
    (
        "adapted pick",
        "a pick that left some changes out, or beside which the patch has lines of the fork's own "
        "→ partial, by it; open PR with the remaining diff (rework if it conflicts, or a block has no clean place)",
        _adapted_pick,
        _adapted,
    ),
    (
        "series",
        "a run of consecutive patches is in the base together (one commit's patch-id; all their lines; or the squash "
        "that names one of them holds their combined change in its own tree, the base may have changed it since) "
        "→ each member represented by that commit, do not open",
        _in_a_group,
        _group,
    ),
    (
        "content",
        "every informative changed line is at its place, brought in by base commits → represented by them, "
        "do not open (human look if replaying would still change the base)",
        _all_lines,
        _content,
    ),
    (
        "same post-image",
        "every file it touches is in the base as it leaves it, blob for blob (a file it deletes gone), made so by "
        "base commits (not so at the merge base) → represented by them, do not open",
        _same_blobs,
        _made_so,
    ),
    (
        "empty replay",
        "replaying it changes nothing, and no line of it is the fork's own → represented, do not open",
        _empty_replay,
        _empty,
    ),
    (
        "reverted, partly back",
        "a pick the base reverted, some of whose lines (as for partial) other base commits brought since "
        "→ unique/conflict, human look (naming the pick, the revert and those commits)",
        _reverted_partly_back,
        _look_reverted,
    ),
    (
        "partial",
        "at least 10% of its informative lines are at their place, brought in by base commits (or fewer, by a "
        "commit tied to it: same subject or PR, or one that brought lines of other patches of the stack); lines "
        "it only removes count only where a commit tied to it took them out "
        "→ partial, by them; open PR with the remaining diff (rework if it conflicts, or a block has no clean place)",
        _some_lines,
        _partial,
    ),
    (
        "superseded?",
        "a base commit by the same author or with the same title changed the same lines → unique/conflict, human look",
        _superseded,
        _look_superseded,
    ),
    (
        "signals disagree",
        "its reverse applies, or a base commit has its subject or PR number, but its lines are not there "
        "→ unique/conflict, human look",
        _git_disagrees,
        _look,
    ),
    (
        "files gone",
        "none of its changes is there and the base deleted every file it changes since the merge base "
        "→ unique/conflict, human look (moot, or to port where that code lives now)",
        _files_gone,
        _look_gone,
    ),
    (
        "not compared",
        "none of its changes is found and some could not be compared (the base's file is not in this clone) "
        "→ inconclusive, hold",
        _not_compared,
        _unread,
    ),
    (
        "needed",
        "otherwise → unique (open PR) or conflict (rework); a reverted pick is named",
        _always,
        _needed_rule,
    ),
)


def decide(f: Facts) -> Decision:
    if not f.content.judged:
        return _unjudged(f)
    for _, _, when, then in RULES:
        if when(f):
            return then(f)
    raise AssertionError("the last rule always holds")


def _unjudged(f: Facts) -> Decision:
    """No pre-image to compare lines against: git's own signals are all there is."""
    whole = [m for m in f.live if m.complete]
    if whole or f.replay is Applied.EMPTY or f.reverse:
        return _git_finds_it(whole)
    return Decision(
        "needed",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        _needed(f),
        [],
        "its pre-image is not in this repository, so its lines were not compared",
    )


def _git_finds_it(whole: list[Match]) -> Decision:
    return Decision(
        "picked" if whole else "empty replay",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN if whole else Recommendation.HUMAN_LOOK,
        _commits([m.commit for m in whole]),
        "its pre-image is not in this repository, so its lines were not compared; git finds it in the base",
    )


def markdown_table() -> str:
    # The table as the docs print it (a test holds them to it).
    rows = ["| rule | when | verdict, recommendation |", "|---|---|---|"]
    for name, words, _, _ in RULES:
        when, _, then = words.partition(" → ")
        rows.append(f"| {name} | {when} | {then} |")
    return "\n".join(rows) + "\n"


# What a rule's reason rests on, by the name a Run records, for the words a verdict is shown with:
# where the lines decided, blame names who brought them; where git found the pick, a differing
# patch-id is no news.
BY_LINES = ("content", "partial", "adapted pick")
BY_PICK = ("picked", "picked, then modified")


# -- the tests, folded onto the text verdict -----------------------------------------------------
#
# A patch's own tests (``ggstack test``) add one fact to the text's decision: what the runs with
# and without the patch said. They can show a behaviour the text cannot see (a base that rewrote
# the change), but they exercise only what they exercise: no test run outweighs a line of the
# fork's own, and a run that could not run is never evidence.


@dataclass(frozen=True)
class FromTests:
    """What one patch's tests said, every kind combined (``testing.evidence.combine``)."""

    kind: str  # broken | needed | represented | could-not-run | inconclusive | none
    detail: str
    require_tests: bool = True  # stack.toml pr.require_tests
    has_pr: bool = False  # an open PR exists for it
    applied: Applied | None = None  # how it replayed, for a patch check did not judge
    brought: tuple[str, ...] = ()  # the base commits blame found bringing its lines
    touching: tuple[str, ...] = ()  # commits between its old base and the base touching its code


@dataclass(frozen=True)
class Folded:
    rule: str
    verdict: Verdict | None
    recommendation: Recommendation | None
    detail: str
    commits: tuple[str, ...] = ()  # represented by, where the tests decided it
    agrees: bool | None = None  # with the text verdict (None: no text verdict to agree with)


_FROM_APPLIED = {
    Applied.APPLIED: Verdict.UNIQUE,
    Applied.EMPTY: Verdict.REPRESENTED,
    Applied.CONFLICT: Verdict.CONFLICT,
}


def _text_or_replay(text: TextVerdict | None, t: FromTests) -> Verdict | None:
    return text.verdict if text else _FROM_APPLIED.get(t.applied or Applied.SKIPPED)


def recommend(verdict: Verdict, has_pr: bool) -> Recommendation:
    """The recommendation a verdict gets where no rule said a more particular one."""
    if verdict in (Verdict.UNIQUE, Verdict.PARTIAL):
        return Recommendation.UPDATE_PR if has_pr else Recommendation.OPEN_PR
    if verdict is Verdict.REPRESENTED:
        return Recommendation.CLOSE_PR if has_pr else Recommendation.DO_NOT_OPEN
    if verdict in (Verdict.CONFLICT, Verdict.BROKEN):
        return Recommendation.REWORK
    return Recommendation.HOLD


def _keep(text: TextVerdict | None, t: FromTests) -> tuple[Verdict | None, Recommendation | None]:
    verdict = _text_or_replay(text, t)
    rec = text.recommendation if text else (recommend(verdict, t.has_pr) if verdict else None)
    return verdict, rec


def _broken(text: TextVerdict | None, t: FromTests) -> Folded:
    return Folded("broken", Verdict.BROKEN, Recommendation.REWORK, "broken: " + t.detail)


def _undecided_kind(text: TextVerdict | None, t: FromTests) -> bool:
    return t.kind in ("could-not-run", "inconclusive")


def _undecided(text: TextVerdict | None, t: FromTests) -> Folded:
    verdict, rec = _keep(text, t)
    said = "tests could not run" if t.kind == "could-not-run" else "tests inconclusive, never a pass"
    if verdict is not None and (verdict in (Verdict.REPRESENTED, Verdict.CONFLICT) or not t.require_tests):
        return Folded("tests undecided", verdict, rec, f"{verdict.value} (text evidence; {t.detail})")
    held = f"the text evidence says {verdict.value}; " if verdict else ""
    return Folded(
        "tests undecided, held",
        Verdict.INCONCLUSIVE,
        Recommendation.HOLD,
        f"inconclusive ({held}{said}; held: pr.require_tests): {t.detail}",
    )


def _needed_but_represented(text: TextVerdict | None, t: FromTests) -> bool:
    return t.kind == "needed" and text is not None and text.verdict is Verdict.REPRESENTED


def _disagree(text: TextVerdict | None, t: FromTests) -> Folded:
    assert text is not None
    by = ", ".join(c[:10] for c in text.represented_by) or "the base"
    return Folded(
        "tests and text disagree",
        Verdict.INCONCLUSIVE,
        Recommendation.HUMAN_LOOK,
        f"needed by its tests, but the text evidence says represented by {by}: the signals disagree, "
        "a human should look; " + t.detail,
        agrees=False,
    )


def _needed_kind(text: TextVerdict | None, t: FromTests) -> bool:
    return t.kind == "needed"


def _needed_by_tests(text: TextVerdict | None, t: FromTests) -> Folded:
    verdict, rec = _keep(text, t)
    verdict = verdict or Verdict.UNIQUE
    agrees = True if text else None
    detail = "needed: " + t.detail + ("; agrees with the text evidence" if agrees else "")
    return Folded("needed by its tests", verdict, rec or recommend(verdict, t.has_pr), detail, agrees=agrees)


def _behaviour_but_own(text: TextVerdict | None, t: FromTests) -> bool:
    return t.kind == "represented" and text is not None and bool(text.own_lines)


def _not_by_behaviour(text: TextVerdict | None, t: FromTests) -> Folded:
    assert text is not None
    verdict, rec = _keep(text, t)
    n = len(text.own_lines)
    return Folded(
        "behaviour there, own lines not",
        verdict,
        rec,
        f"{t.detail}; but {n} of its changes {'is' if n == 1 else 'are'} the fork's own "
        f"({'; '.join(text.own_lines[:3])}): no test outweighs a line the base does not have",
        agrees=verdict is Verdict.REPRESENTED,
    )


def _behaviour(text: TextVerdict | None, t: FromTests) -> bool:
    return t.kind == "represented"


def _by_behaviour(text: TextVerdict | None, t: FromTests) -> Folded:
    agrees = (text.verdict is Verdict.REPRESENTED) if text else None
    brought = _brought(text, t)
    commits = brought or list(t.touching)
    rec = text.recommendation if agrees and text else recommend(Verdict.REPRESENTED, t.has_pr)
    detail = "represented by behaviour: " + t.detail + _text_said(text, agrees)
    if commits and not brought:
        detail += _touching_words(commits)
    return Folded("represented by behaviour", Verdict.REPRESENTED, rec, detail, tuple(commits), agrees)


def _touching_words(commits: list[str]) -> str:
    return f"; commits between the old base and the base touching its files: {', '.join(c[:10] for c in commits)}"


def _brought(text: TextVerdict | None, t: FromTests) -> list[str]:
    # The commits the text named; else those blame found bringing its lines.
    return list(text.represented_by) if text and text.represented_by else list(t.brought)


def _text_said(text: TextVerdict | None, agrees: bool | None) -> str:
    if text is None:
        return ""
    return "; agrees with the text evidence" if agrees else f"; the text evidence says {text.verdict.value}"


def _no_evidence(text: TextVerdict | None, t: FromTests) -> Folded:
    verdict, rec = _keep(text, t)
    return Folded("no behaviour evidence", verdict, rec, t.detail)


def _anything(text: TextVerdict | None, t: FromTests) -> bool:
    return True


FoldRule = tuple[str, str, str, Callable[[TextVerdict | None, FromTests], bool], Callable[..., Folded]]

FOLD_RULES: tuple[FoldRule, ...] = (
    ("broken", "broken", "anything", lambda text, t: t.kind == "broken", _broken),
    (
        "tests undecided",
        "could not run / inconclusive",
        "represented or conflict (or anything, with `pr.require_tests = false`)",
        _undecided_kind,
        _undecided,
    ),
    ("tests and text disagree", "needed", "represented", _needed_but_represented, _disagree),
    ("needed by its tests", "needed", "anything else", _needed_kind, _needed_by_tests),
    (
        "behaviour there, own lines not",
        "represented by behaviour",
        "a verdict with lines of the fork's own (changed lines the base lacks where it never touched)",
        _behaviour_but_own,
        _not_by_behaviour,
    ),
    (
        "represented by behaviour",
        "represented by behaviour",
        "anything else (also where the text found only part of the lines: a base that rewrote the code)",
        _behaviour,
        _by_behaviour,
    ),
    ("no behaviour evidence", "no evidence", "anything", _anything, _no_evidence),
)

_FOLD_THEN = {
    "broken": "broken, rework",
    "tests undecided": "the text verdict, shown as text evidence; unique or partial where tests are required: "
    "inconclusive, hold",
    "tests and text disagree": "inconclusive, human look (the signals disagree)",
    "needed by its tests": "the text verdict (agreeing)",
    "behaviour there, own lines not": "the text verdict: partial (or needed), with the fork's own lines named",
    "represented by behaviour": "represented, do not open",
    "no behaviour evidence": "the text verdict",
}


def fold(text: TextVerdict | None, t: FromTests) -> Folded:
    """The verdict once a patch's tests are in: the first row of ``FOLD_RULES`` that holds."""
    for _, _, _, when, then in FOLD_RULES:
        if when(text, t):
            folded: Folded = then(text, t)
            return folded
    raise AssertionError("the last row always holds")


def fold_table() -> str:
    # The fold as the docs print it (a test holds them to it).
    rows = ["| tests say | text says | verdict, recommendation |", "|---|---|---|"]
    rows += [f"| {tests} | {says} | {_FOLD_THEN[name]} |" for name, tests, says, _, _ in FOLD_RULES]
    return "\n".join(rows) + "\n"
