"""One carry patch through every signal to a verdict: the part ``check STACK`` and
``check --commits`` share (they differ only in what a patch is compared against)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ggstack import diff, git, replay
from ggstack.check import remaining, signals
from ggstack.check.attribution import attribute, changed_places
from ggstack.check.containment import NO_FILE, Containment, Unit, contain, contained_at, entries_of, needs_alignment
from ggstack.check.files import Files, is_zero
from ggstack.check.groups import Group
from ggstack.check.history import BaseRange, normal_subject
from ggstack.check.moved import look_elsewhere, look_where_it_came_from
from ggstack.check.own import describe, own_units
from ggstack.check.rules import Decision, Facts, Match, decide
from ggstack.check.signals import Candidate
from ggstack.model import Applied, Evidence, Outcome, Run, Says, Signal, TextVerdict, Verdict


@dataclass
class Context:
    repo: git.Repository
    history: BaseRange
    files: Files
    changed: dict[str, list[str]] = field(default_factory=dict)  # candidate -> who changed its lines (see below)
    own: dict[tuple[str, str], list[Unit]] = field(default_factory=dict)  # (candidate, tree) -> its own lines
    remaining: dict[tuple[str, str, bool], remaining.Remaining] = field(default_factory=dict)  # ... -> what it adds


def find_changed(ctx: Context, todo: Sequence[tuple[Candidate, Containment]]) -> None:
    for (c, _), found in zip(todo, changed_places([k for _, k in todo], ctx.history, ctx.files), strict=True):
        ctx.changed[c.name] = found


@dataclass
class Identified:
    matches: list[Match] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Measured:
    content: Containment
    step: replay.Step | None = None  # the replay, where one was spent
    applies: bool = False  # no replay: git apply's check (in-process) takes it
    reverse: bool | None = None
    reverse_later: list[str] = field(default_factory=list)  # reversed once these later patches were taken out
    unreplayed: str = ""  # why no replay was spent where one could have been
    uncomputed: str = ""  # why the replay could not be made (git's word: an object this clone lacks)
    tree: str = ""  # the tree it was measured in (for an adapted pick's remaining diff)


def identify(
    ctx: Context, cands: Sequence[Candidate], reversed_ids: Mapping[str, str] | None = None
) -> dict[str, Identified]:
    """``reversed_ids``: ``reversed_patch_ids`` of all of them, where read already."""
    out = {cand.name: _by_git(ctx, cand) for cand in cands}
    _named_and_whole(ctx, [c for c in cands if not out[c.name].matches], out)
    matched = [c for c in cands if out[c.name].matches]
    if reversed_ids is None:
        reversed_ids = reversed_patch_ids(ctx.repo, _revertible(ctx, matched, out))
    for cand in matched:
        _undone_or_since(ctx, cand, out[cand.name], out[cand.name].matches, reversed_ids.get(cand.commit, ""))
    _picked_again(ctx, matched, out, reversed_ids)
    _unread(matched, out)
    return out


def _by_git(ctx: Context, cand: Candidate) -> Identified:
    found, ev_id = signals.identity(ctx.history, cand)
    same, ev_pid = signals.patch_id(ctx.history, cand)
    return Identified(found + same, [ev_id, ev_pid])


def _picked_again(
    ctx: Context, matched: Sequence[Candidate], out: dict[str, Identified], reversed_ids: Mapping[str, str]
) -> None:
    """A reverted pick may have been made again by hand ("Backport PR #12207" after a revert)."""
    reverted = [c for c in matched if all(m.undone_by for m in out[c.name].matches)]
    before = {c.name: len(out[c.name].matches) for c in reverted}
    undoers = {c.name: [r for m in out[c.name].matches for r in m.undone_by] for c in reverted}
    _named_and_whole(ctx, reverted, out, undoers)
    for cand in reverted:
        again = out[cand.name].matches[before[cand.name] :]
        if again:
            _undone_or_since(ctx, cand, out[cand.name], again, reversed_ids.get(cand.commit, ""))


def _undone_or_since(ctx: Context, cand: Candidate, ident: Identified, matches: list[Match], reversed_id: str) -> None:
    revert = signals.undo(ctx.history, matches, reversed_id)
    again = signals.relanded(ctx.history, cand, matches)
    since = signals.modified(ctx.history, cand, matches)
    ident.evidence += [e for e in (revert, again, since) if e is not None]


def _revertible(ctx: Context, cands: Sequence[Candidate], out: dict[str, Identified]) -> list[Candidate]:
    # Only a range commit changing exactly its files, not a pick, can be its revert.
    return [c for c in cands if c.commit and _reverts_possible(ctx, c, out)]


def _reverts_possible(ctx: Context, cand: Candidate, out: dict[str, Identified]) -> bool:
    picks = {m.commit for m in out[cand.name].matches}
    return any(c not in picks for c in ctx.history.changing_exactly(frozenset(cand.paths)))


def reversed_patch_ids(repo: git.Repository, cands: Sequence[Candidate]) -> dict[str, str]:
    """commit -> the patch-id of its change reversed: a revert's own."""
    # "<parent> <commit>" makes diff-tree diff the commit back to its parent: the patch reversed.
    backwards = repo.diffs_of_pairs([(c.parent, c.commit) for c in cands])
    return repo.patch_ids_of_diffs({c.commit: d for c, d in zip(cands, backwards, strict=True) if d})


HINTED = "named by its PR or subject, with all its lines,"


def _named_and_whole(
    ctx: Context, cands: Sequence[Candidate], out: dict[str, Identified], reverts: Mapping[str, list[str]] | None = None
) -> None:
    """A commit naming the patch's PR or subject is a hint; it is the pick where its own tree holds
    most of the patch's changes (an adapted pick). ``reverts``: what took its picks out again."""
    after = reverts or {}
    todo = _hinted(ctx, cands, after)
    for (cand, h), there in zip(todo, contained_at(ctx.files, [(c.changes, at) for c, at in todo]), strict=True):
        placed, moot = _placed(ctx.history, there)
        present = sum(u.present for u in placed)
        if not there.judged or 2 * present <= len(placed):
            continue  # at most half of its changes: a hint, not the pick
        out[cand.name].matches.append(Match(HINTED, h, complete=present == len(placed)))
        out[cand.name].evidence.append(_hint_evidence(h, present, len(placed), cand.name in after, moot))


def _hinted(ctx: Context, cands: Sequence[Candidate], after: Mapping[str, list[str]]) -> list[tuple[Candidate, str]]:
    return [
        (c, h)
        for c in cands
        for h in signals.hints(ctx.history, c, set())[0][:3]
        if all(ctx.history.newer(h, r) for r in after.get(c.name, ()))
    ]


def _hint_evidence(h: str, present: int, changes: int, again: bool, moot: list[str]) -> Evidence:
    detail = f"{h[:10]} has its PR number or subject, and its own tree has " + (
        "every change of the patch" if present == changes else f"{present} of its {changes} changes"
    )
    if again:
        detail = f"picked again after the revert: {detail}"
    if moot:
        detail += f" in the files it has (not {', '.join(moot)}, which it does not have)"
    return Evidence(Signal.IDENTITY, detail, [h], data={"match": True, "by": "hint"}, says=Says.PRESENT)


NAMING = ("cherry-picked as", "Stack-Patch-Id in", "Change-Id in", "source merged as")
EXACT = ("same patch-id as", "merged as")  # the patch's own change, whole: nothing to read of it


def _unread(cands: Sequence[Candidate], out: dict[str, Identified]) -> None:
    """A commit that only names the patch (-x after a conflict) may have picked part of it: whole
    only once ``read_picks`` reads it. One with the patch's own patch-id is whole as it is."""
    for c in cands:
        exact = {m.commit for m in out[c.name].matches if m.how in EXACT}
        for m in out[c.name].matches:
            if m.how in NAMING and m.commit not in exact:
                m.complete = None


def read_picks(ctx: Context, todo: Sequence[tuple[Candidate, Identified, Measured | None]]) -> None:
    """Was each pick ``identify`` left unread whole? Read in one batch, only where it decides."""
    named = [
        (c, m) for c, ident, measured in todo if _may_decide(measured) for m in ident.matches if m.complete is None
    ]
    unique = {(c.name, m.commit): c for c, m in named}  # a commit named twice (-x and Change-Id) read once
    read = contained_at(ctx.files, [(c.changes, commit) for (_, commit), c in unique.items()])
    whole = {key: _whole(ctx.history, there) for key, there in zip(unique, read, strict=True)}
    for c, m in named:
        m.complete = whole[(c.name, m.commit)]


def _may_decide(measured: Measured | None) -> bool:
    # Where the base has the post-image, the first rule decides whatever the pick left out.
    if measured is None:
        return True
    return not signals.facts_of(measured.content, measured.step, measured.applies, measured.reverse).post_image


def _whole(history: BaseRange, there: Containment) -> bool:
    placed, _ = _placed(history, there)
    return there.judged and bool(placed) and all(u.present for u in placed)


def _placed(history: BaseRange, there: Containment) -> tuple[list[Unit], list[str]]:
    """A file that tree lacks and the base lacks too (one it deleted) says nothing of a pick."""

    def nowhere(u: Unit) -> bool:
        if u.reason != NO_FILE or history.moved_to(u.path):
            return False
        versions = history.versions(u.path)  # (the base has it now, if the range brought it back)
        return not versions or is_zero(versions[0][2])

    placed = [u for u in there.counted if not nowhere(u)]
    return placed, list(dict.fromkeys(u.path for u in there.counted if nowhere(u)))


def measure_content(
    ctx: Context, cands: Sequence[Candidate], tree: str, idents: dict[str, Identified] | None = None
) -> list[Containment]:
    entries, moved = _read_tree(ctx, cands, tree)
    contents = [contain(c.changes, _entries_of(c, entries, moved), ctx.files, moved) for c in cands]
    likely, undone = _picks(cands, idents or {})
    attribute(contents, ctx.history, ctx.files, likely, undone)
    look_elsewhere(ctx.repo, ctx.history, ctx.files, cands, contents, tree)
    look_where_it_came_from(ctx.repo, ctx.history, ctx.files, cands, contents, tree)
    return contents


def _read_tree(
    ctx: Context, cands: Sequence[Candidate], tree: str
) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    moved = {p: to for c in cands for p in c.paths if (to := ctx.history.moved_to(p))}
    paths = list(dict.fromkeys([*(p for c in cands for p in c.paths), *moved.values()]))
    entries = ctx.files.entries(tree, paths)
    ctx.files.prefetch([fc.old_blob for c in cands for fc in c.changes] + [b for _, b in entries.values()])
    ctx.files.prepare_alignments(_alignments(ctx, cands, entries, moved))
    return entries, moved


def _entries_of(
    cand: Candidate, entries: dict[str, tuple[str, str]], moved: dict[str, str]
) -> dict[str, tuple[str, str]]:
    return entries_of(entries, [*cand.paths, *_at(cand, moved)])


def _picks(cands: Sequence[Candidate], idents: dict[str, Identified]) -> tuple[list[set[str]], list[set[str]]]:
    """Its live picks (a reverted one did not bring what the base has now), and their reverts."""
    matches = [idents[c.name].matches if c.name in idents else [] for c in cands]
    return [{m.commit for m in ms if not m.undone_by} for ms in matches], [
        {r for m in ms for r in m.undone_by} for ms in matches
    ]


def _at(cand: Candidate, moved: dict[str, str]) -> list[str]:
    return [moved[p] for p in cand.paths if p in moved]


def _alignments(
    ctx: Context, cands: Sequence[Candidate], entries: dict[str, tuple[str, str]], moved: dict[str, str]
) -> list[tuple[str, str]]:
    pairs = [_to_align(ctx.files, fc, _judged_against(fc, entries, moved)) for c in cands for fc in c.changes]
    return [p for p in pairs if p is not None]


def _to_align(files: Files, fc: diff.FileChange, base: tuple[str, str] | None) -> tuple[str, str] | None:
    if fc.binary or not fc.old_blob or files.blob(fc.old_blob) is None:
        return None  # a pre-image this repository lacks (a clone without the fork): nothing to align
    if base and base[1] != fc.old_blob and needs_alignment(fc, base[1], files):
        return fc.old_blob, base[1]
    return None


def _judged_against(
    fc: diff.FileChange, entries: dict[str, tuple[str, str]], moved: dict[str, str]
) -> tuple[str, str] | None:
    return entries.get(fc.new_path or "") or entries.get(fc.old_path or "") or entries.get(moved.get(fc.path, ""))


def _gone(history: BaseRange, content: Containment) -> dict[str, str]:
    out = {}
    for path in dict.fromkeys(u.path for u in content.units if not u.present and u.reason == NO_FILE):
        versions = history.versions(path)
        if versions and is_zero(versions[0][2]):
            out[path] = versions[0][0]
    return out


@dataclass
class Judged:
    decision: Decision
    evidence: list[Evidence]
    own: list[str]  # the fork's own lines, in words (where read)
    remaining: remaining.Remaining | None = None  # a partial's remaining diff
    fraction: float = 0.0


def judge(
    ctx: Context,
    cand: Candidate,
    ident: Identified,
    m: Measured,
    group: Group | None = None,
    author: str = "",
    related: AbstractSet[str] = frozenset(),
    *,
    own: bool = False,
) -> Judged:
    """The facts of one candidate and its decision, the evidence in order; its own lines are read
    where a rule asks for them, or always with ``own`` (a stack's tests and ``drop`` need them)."""
    facts, known, hint = _facts(ctx, cand, ident, m, group, related)
    later = _Later(ctx, cand, ident, m, author, known)
    facts.later = later
    evidence = _evidence(ident, m, group, facts, hint)
    d = decide(facts)
    if later.superseding is not None:
        evidence.append(later.superseding)
    if d.verdict is Verdict.REPRESENTED:
        return _represented(d, facts, evidence)
    return _not_represented(d, facts, evidence, later, m, own)


def _not_represented(
    d: Decision, facts: Facts, evidence: list[Evidence], later: _Later, m: Measured, own: bool
) -> Judged:
    mine = facts.own if own or "own" in vars(facts) else []
    if mine:
        evidence.append(signals.own_lines(mine))
    r = later.remaining(own=d.carries_own) if d.verdict is Verdict.PARTIAL else None
    if r is not None and r.left_out:
        evidence.append(signals.left_out(r.left_out))
    fraction = round(facts.share, 4) if m.content.judged else 0.0
    return Judged(d, evidence, describe(mine, limit=len(mine)), r, fraction)


def _evidence(
    ident: Identified, m: Measured, group: Group | None, facts: Facts, hint: Evidence | None
) -> list[Evidence]:
    evidence = list(ident.evidence)
    if group is not None:  # (its members and commits are among the facts already)
        evidence.append(signals.grouped(group.names, group.by, group.how))
    replayed = signals.replayed(m.step, m.applies, m.unreplayed, m.uncomputed)
    evidence += [e for e in (replayed, signals.reversed_(m.reverse, m.reverse_later)) if e]
    evidence.append(signals.content(m.content))
    if facts.same_blobs:
        evidence.append(signals.same_blobs_evidence(facts.same_blobs))
    blame = signals.blame(m.content)
    evidence += [e for e in (blame, hint) if e]
    return evidence


def _represented(d: Decision, facts: Facts, evidence: list[Evidence]) -> Judged:
    if facts.conflicts:
        detail = "the conflict is only the change already being in the base"
        evidence.append(Evidence(Signal.CONFLICT, detail, data={"spurious": True}))
    return Judged(d, evidence, [], fraction=1.0)


class _Later:
    def __init__(
        self, ctx: Context, cand: Candidate, ident: Identified, m: Measured, author: str, known: set[str]
    ) -> None:
        self.ctx, self.cand, self.ident, self.m, self.author, self.known = ctx, cand, ident, m, author, known
        self.superseding: Evidence | None = None

    def own(self) -> list[Unit]:
        content = self.m.content
        if not content.judged or all(u.present for u in content.counted):
            return []
        if self._whole_pick():
            return []
        key = (self.cand.name, self.m.tree)
        if key not in self.ctx.own:
            found = own_units([content], self.ctx.history, self.ctx.files)[0]
            self.ctx.own[key] = _not_picked(self.ctx, self.cand, self.ident, found)
        return self.ctx.own[key]

    def _whole_pick(self) -> bool:
        # A pick whole in its own tree, in the range, touched every place the patch changes:
        # none of its lines can be the fork's own (most release-branch picks: no search).
        live = [x for x in self.ident.matches if not x.undone_by]
        return any(x.complete and self.ctx.history.in_range(x.commit) for x in live)

    def remaining(self, own: bool = False) -> remaining.Remaining:
        key = (self.cand.name, self.m.tree, own)
        if key not in self.ctx.remaining:
            if not self.m.tree:
                return remaining.Remaining(None, [])
            remaining.prepare([(self.m.tree, self.cand.changes, self.m.content)], self.ctx.files)
            self.ctx.remaining[key] = remaining.remaining_diff(
                self.ctx.repo,
                self.m.tree,
                self.cand.changes,
                self.m.content,
                self.ctx.files,
                self.own() if own else None,
            )
        return self.ctx.remaining[key]

    def superseded(self) -> list[str]:
        if not _kin(self.ctx, self.cand, self.author, self.known):
            return []
        if self.cand.name not in self.ctx.changed:
            find_changed(self.ctx, [(self.cand, self.m.content)])
        changed = self.ctx.changed.get(self.cand.name, [])
        found, self.superseding = signals.superseded(self.ctx.repo, self.cand, self.author, changed, self.known)
        return found


def _not_picked(ctx: Context, cand: Candidate, ident: Identified, units: list[Unit]) -> list[Unit]:
    """A line a live pick brought and the base changed since is the pick's, not the fork's own."""
    picks = [m.commit for m in ident.matches if not m.undone_by and ctx.history.in_range(m.commit)]
    if not units or not picks:
        return units
    brought = _brought_by(ctx, cand, picks)
    return [u for u in units if u.block is None or id(u.block) not in brought]


def _brought_by(ctx: Context, cand: Candidate, picks: list[str]) -> set[int]:
    return {
        id(u.block)
        for there in contained_at(ctx.files, [(cand.changes, c) for c in dict.fromkeys(picks)])
        for u in there.units
        if u.present and u.block is not None
    }


class _Asked(_Later):
    asked = False

    def superseded(self) -> list[str]:
        self.asked = _kin(self.ctx, self.cand, self.author, self.known)
        return []


def _facts(
    ctx: Context, cand: Candidate, ident: Identified, m: Measured, group: Group | None, related: AbstractSet[str]
) -> tuple[Facts, set[str], Evidence | None]:
    read_picks(ctx, [(cand, ident, m)])  # where the front end has not read them in a batch
    facts = signals.facts_of(m.content, m.step, m.applies, m.reverse)
    facts.matches = ident.matches
    facts.related = set(related)
    facts.gone = _gone(ctx.history, m.content)
    if m.tree:
        entries = ctx.files.entries(m.tree, [fc.new_path or fc.old_path or "" for fc in cand.changes])
        facts.same_blobs = signals.same_blobs(ctx.history, cand, entries)
    known = _tied(ctx.history, ident)
    facts.hints, hint = signals.hints(ctx.history, cand, known)
    if group is not None:
        facts.group, facts.group_by = group.names, group.by
    return facts, known, hint


def _tied(history: BaseRange, ident: Identified) -> set[str]:
    undoers = [c for x in ident.matches for c in x.undone_by]
    known = {x.commit for x in ident.matches} | set(undoers)
    return known | {c for r in undoers for c in history.undoes.get(r, [])}  # and what they undid (a PR's merge)


def may_be_superseded(ctx: Context, cand: Candidate, ident: Identified, m: Measured, author: str) -> bool:
    """Will ``judge`` ask who changed its lines? (So a front end reads that for many in one batch.)"""
    if m.step is None or m.step.applied is not Applied.CONFLICT:
        return False
    facts, known, _ = _facts(ctx, cand, ident, m, None, frozenset())
    probe = _Asked(ctx, cand, ident, m, author, known)
    facts.later = probe
    decide(facts)
    return probe.asked


def _kin(ctx: Context, cand: Candidate, author: str, known: AbstractSet[str]) -> bool:
    """A range commit on its files by its author or with its title: else nothing can supersede it."""
    title = normal_subject(cand.subject)
    return any(
        c not in known
        and ((author and ctx.history.authors.get(c) == author) or normal_subject(ctx.history.subject(c)) == title)
        for c in ctx.history.touching(cand.paths)
    )


def settle(outcome: Outcome, j: Judged) -> None:
    d = j.decision
    outcome.evidence = [*outcome.evidence, *j.evidence, signals.decided(d)]
    outcome.verdict = d.verdict
    outcome.recommendation = d.recommendation
    outcome.represented_by = list(d.represented_by)
    outcome.group = list(d.group)
    outcome.text = TextVerdict(d.verdict, d.recommendation, d.rule, list(d.represented_by), list(j.own))
    outcome.represented_fraction = j.fraction
    outcome.remaining_diff = j.remaining.diff if j.remaining else None


def prepare_remaining(ctx: Context, todo: Sequence[tuple[Candidate, Measured]]) -> None:
    maybe = [
        (c, m) for c, m in todo if m.tree and m.content.judged and m.content.any_earned and not m.content.all_present
    ]
    remaining.prepare([(m.tree, c.changes, m.content) for c, m in maybe], ctx.files)


def record_step(outcome: Outcome, step: replay.Step | None) -> None:
    """Keep ``apply``'s own facts where it already replayed the patch; else this replay's."""
    if step is None or outcome.applied is not None:
        return
    outcome.applied = step.applied
    outcome.conflict = step.conflict
    outcome.note = step.note or outcome.note


def name_commits(repo: git.Repository, run: Run) -> None:
    """So reports show "abc1234 “subject”" without running git."""
    known = [c for c in _named(run) if c not in run.subjects and len(c) >= 40]
    for sha, info in repo.read_commits(known).items():  # the long-lived reader: no process to start
        run.subjects[sha] = info.message.split("\n", 1)[0]


def _named(run: Run) -> list[str]:
    return list(
        dict.fromkeys(c for o in run.outcomes for c in [*o.represented_by, *(x for e in o.evidence for x in e.commits)])
    )
