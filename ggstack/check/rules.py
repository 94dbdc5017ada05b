"""The verdict table: one ordered list of rules from the signals to a verdict.

A false "represented" makes a maintainer close a needed fix, and a false
"needed" makes them redo work upstream already has; so which signal wins is
written down once, here, in the order it is applied, and every rule is a
test. git's own signals come first (an exact pick whose post-image is there
is represented, whatever the line locator says, because code moves); the
content decides only where git is silent, or was contradicted by a revert
or a later change; a partial verdict needs a base commit that brought the
present lines in. The README prints this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ggstack.check.containment import Containment
from ggstack.model import Applied, Recommendation, Verdict


@dataclass
class Match:
    """A base commit that git's identity or patch-id says is this change."""

    how: str  # "same patch-id as" | "cherry-picked as" | "merged as" | "Stack-Patch-Id in" | "Change-Id in"
    commit: str  # the base commit (for "reachable": the source commit itself)
    undone_by: list[str] = field(default_factory=list)  # base commits that took it out again
    complete: bool | None = True  # that commit's own tree had every change of the patch (None: not read yet)
    modified_by: list[str] = field(default_factory=list)  # base commits since, changing its files


@dataclass
class Facts:
    """Everything the rules read about one patch on one base."""

    content: Containment
    replay: Applied | None = None  # None: not replayed (decided without a merge)
    reverse: bool | None = None  # its reverse applies to the base
    matches: list[Match] = field(default_factory=list)
    group: list[str] = field(default_factory=list)  # a represented run it belongs to: its names
    group_by: list[str] = field(default_factory=list)  # ... and the base commits that carry the run
    superseded: list[str] = field(default_factory=list)  # same author or title, changed the same lines
    hints: list[str] = field(default_factory=list)  # same subject or PR number
    related: set[str] = field(default_factory=set)  # base commits tied to it otherwise (hints, a consolidation)
    rewritten: list[str] = field(default_factory=list)  # an adapted pick's missing blocks, all where the base rewrote
    gone: dict[str, str] = field(default_factory=dict)  # its files the base deleted or moved away -> the commit
    same_blobs: list[str] = field(default_factory=list)  # range commits that left its files as it leaves them

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


@dataclass
class Decision:
    rule: str
    verdict: Verdict
    recommendation: Recommendation
    represented_by: list[str]
    why: str
    group: list[str] = field(default_factory=list)  # the names of the run it is represented with


def _commits(*groups: list[str]) -> list[str]:
    return list(dict.fromkeys(c for g in groups for c in g))


def _needed(f: Facts) -> Recommendation:
    return Recommendation.REWORK if f.conflicts else Recommendation.OPEN_PR


def short_ids(commits: list[str]) -> str:
    """Commits as a reason names them: short ids, each once, in order (rules' and signals' words alike)."""
    return ", ".join(dict.fromkeys(c[:10] for c in commits))


# -- the rules, each a condition and what follows ---------------------------------------------


def _changes_nothing(f: Facts) -> bool:
    return f.content.judged and not f.content.units


def _nothing(f: Facts) -> Decision:
    return Decision("changes nothing", Verdict.REPRESENTED, Recommendation.DO_NOT_OPEN, [], "the patch changes nothing")


def _picked_whole(f: Facts) -> bool:
    return bool(f.live) and f.post_image


def _picked(f: Facts) -> Decision:
    # The picks brought it whole; another commit blame names for a few of its lines (one that
    # wrote the same line earlier) stays in the content evidence, not among what represents it.
    by = _commits([m.commit for m in f.live])
    how = "; ".join(dict.fromkeys(f"{m.how} {m.commit[:10]}" for m in f.live))
    return Decision("picked", Verdict.REPRESENTED, Recommendation.DO_NOT_OPEN, by, f"git finds it: {how}")


def _picked_then_undone(f: Facts) -> bool:
    """Its removed lines are back and its added ones gone: the base looks like before the pick.
    (A pick whose additions were only deleted since — a release removing news fragments — is modified.)"""
    changed = any(u.block is not None and u.block.removed for u in f.content.units)
    return bool(f.live) and changed and not any(u.present for u in f.content.units) and f.replay is Applied.APPLIED


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
    return any(m.complete for m in f.live)


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
    """(A member of a run the base has together — a PR's squash that names one of its
    commits — is the series': what it lacks alone, its later members changed.)"""
    return bool(f.live) and not f.group


def _adapted_rest_rewritten(f: Facts) -> bool:
    return _adapted_pick(f) and bool(f.rewritten)


def _adapted_to_its_base(f: Facts) -> Decision:
    n = len(f.rewritten)
    shown = "; ".join(f.rewritten[:3]) + (f"; and {n - 3} more" if n > 3 else "")
    return Decision(
        "adapted pick, rest rewritten",
        Verdict.REPRESENTED,
        Recommendation.HUMAN_LOOK,
        _commits([m.commit for m in f.live], f.content.commits),
        f"picked as {short_ids([m.commit for m in f.live])}; what it has beyond the pick ({n} block(s): {shown}) "
        "lies where the base rewrote those lines its own way, so nothing of it can be carried over: "
        "look whether it was only adapted to its own base before dropping it",
    )


def _adapted(f: Facts) -> Decision:
    by = _commits([m.commit for m in f.live], f.content.commits)
    return Decision(
        "adapted pick",
        Verdict.PARTIAL,
        _needed(f),
        by,
        f"picked as {short_ids([m.commit for m in f.live])} without all of its changes",
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
    every_unit = all(u.present for u in f.content.units)
    # (Replaying one whose news fragments a release consumed re-adds them: that is no news.)
    look = every_unit and f.replay is Applied.APPLIED and not any(u.consumed for u in f.content.units)
    return Decision(
        "content",
        Verdict.REPRESENTED,
        Recommendation.HUMAN_LOOK if look else Recommendation.DO_NOT_OPEN,
        f.content.commits,
        "every change is in the base, brought by "
        + short_ids(f.content.commits)
        + ("; but replaying it would still change the base: look at what it would change" if look else ""),
    )


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
    return f.replay is Applied.EMPTY


def _empty(f: Facts) -> Decision:
    return Decision(
        "empty replay",
        Verdict.REPRESENTED,
        Recommendation.DO_NOT_OPEN,
        f.content.commits,
        "replaying it changes nothing (git rebase would drop it), though not all its lines were found at their place",
    )


SOME = 0.1  # below this share, lines brought by an otherwise unrelated commit are a coincidence


def _some_lines(f: Facts) -> bool:
    related = bool(set(f.content.commits) & (f.related | set(f.hints)))
    return f.content.any_earned and (f.content.fraction >= SOME or related)


def _reverted_partly_back(f: Facts) -> bool:
    """A pick the base reverted (no live one), some of whose lines other base commits brought
    since: the base redid part of it its own way, which is no partial of this patch. (Lines the
    pick itself still holds are a revert that left them: partial, by the pick.)"""
    picks = {m.commit for m in f.undone}
    return bool(picks) and not f.live and _some_lines(f) and not picks & set(f.content.commits)


def _look_reverted(f: Facts) -> Decision:
    picks = short_ids([m.commit for m in f.undone])
    reverts = short_ids(_commits(*(m.undone_by for m in f.undone)))
    return Decision(
        "reverted, partly back",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        Recommendation.HUMAN_LOOK,
        [],
        f"needed again? picked as {picks}, reverted by {reverts}; since then "
        f"{short_ids(f.content.commits)} brought {round(100 * f.content.fraction)}% of its lines back its own way: "
        "look whether the base redid it",
    )


def _partial(f: Facts) -> Decision:
    return Decision(
        "partial",
        Verdict.PARTIAL,
        _needed(f),
        f.content.commits,
        f"{round(100 * f.content.fraction)}% of its changed lines are in the base, brought by "
        + short_ids(f.content.commits),
    )


def _superseded(f: Facts) -> bool:
    return bool(f.superseded)


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
        why.append(
            f"picked as {short_ids([m.commit for m in f.undone])}, "
            f"reverted by {short_ids(_commits(*(m.undone_by for m in f.undone)))}"
        )
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


def _files_gone(f: Facts) -> bool:
    """Nothing of it is there, and every file it changes is one the base deleted (or moved away
    where rename detection does not follow) since the merge base."""
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


def _always(f: Facts) -> bool:
    return True


def _needed_rule(f: Facts) -> Decision:
    why = "none of its changes is in the base"
    if f.content.any_earned:
        why = (
            f"only {round(100 * f.content.fraction)}% of its informative lines are in the base, brought by "
            f"{short_ids(f.content.commits)}, otherwise unrelated to it: a coincidence, not evidence"
        )
    if f.undone:
        undone = [m for m in f.undone]
        why = (
            f"needed again: picked as {short_ids([m.commit for m in undone])}, "
            f"reverted by {short_ids(_commits(*(m.undone_by for m in undone)))}"
        )
    return Decision("needed", Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE, _needed(f), [], why)


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
        "an exact pick, but its removed lines are back, its added ones gone, and it applies again → unique, human look",
        _picked_then_undone,
        _undone_by_hand,
    ),
    (
        "picked, then modified",
        "an exact pick whose lines the base changed since → represented by it (since modified by …), do not open",
        _picked_then_modified,
        _modified,
    ),
    (
        "adapted pick, rest rewritten",
        "a pick that left some changes out, each where the base has since rewritten those lines its own way "
        "(no remaining diff could carry them) → represented by it, human look",
        _adapted_rest_rewritten,
        _adapted_to_its_base,
    ),
    (
        "adapted pick",
        "a pick that left some changes out → partial, by it; open PR (rework if it conflicts)",
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
        "replaying it changes nothing → represented, do not open",
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
        "commit tied to it: same subject or PR, or one that brought lines of other patches of the stack) "
        "→ partial, by them; open PR with the remaining diff (rework if it conflicts)",
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
        "needed",
        "otherwise → unique (open PR) or conflict (rework); a reverted pick is named",
        _always,
        _needed_rule,
    ),
)


def decide(f: Facts) -> Decision:
    """The first rule whose condition holds."""
    if not f.content.judged:
        return _unjudged(f)
    for _, _, when, then in RULES:
        if when(f):
            return then(f)
    raise AssertionError("the last rule always holds")


def _unjudged(f: Facts) -> Decision:
    """No pre-image to compare lines against: git's own signals are all there is."""
    if f.live or f.replay is Applied.EMPTY or f.reverse:
        by = _commits([m.commit for m in f.live])
        return Decision(
            "picked" if f.live else "empty replay",
            Verdict.REPRESENTED,
            Recommendation.DO_NOT_OPEN if f.live else Recommendation.HUMAN_LOOK,
            by,
            "its pre-image is not in this repository, so its lines were not compared; git finds it in the base",
        )
    return Decision(
        "needed",
        Verdict.CONFLICT if f.conflicts else Verdict.UNIQUE,
        _needed(f),
        [],
        "its pre-image is not in this repository, so its lines were not compared",
    )


def markdown_table() -> str:
    """The table as the README prints it (a test holds the README to it)."""
    rows = ["| rule | when | verdict, recommendation |", "|---|---|---|"]
    for name, words, _, _ in RULES:
        when, _, then = words.partition(" → ")
        rows.append(f"| {name} | {when} | {then} |")
    return "\n".join(rows) + "\n"
