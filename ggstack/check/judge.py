"""One candidate through every signal to a decision: the part both front ends share.

``check STACK`` and ``check --commits`` differ in what a candidate is
compared against (the base plus the earlier needed patches, or the base) and
in how much they may replay; what a candidate's signals are, and how they
become a verdict, is this module's, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ggstack import git, replay
from ggstack.check import signals
from ggstack.check.attribution import attribute
from ggstack.check.containment import Containment, contain
from ggstack.check.files import Files
from ggstack.check.groups import Group
from ggstack.check.history import History
from ggstack.check.rules import Decision, Match, decide
from ggstack.check.signals import Candidate
from ggstack.model import Applied, Evidence, Outcome, Run, Signal, Verdict


@dataclass
class Context:
    repo: git.Repository
    history: History
    files: Files


@dataclass
class Identified:
    """What git's identity and patch-id say of one candidate, before any line is read."""

    matches: list[Match] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Measured:
    """What was measured of one candidate on the tree it is judged against."""

    content: Containment
    step: replay.Step | None = None  # the replay, where one was spent
    applies: bool = False  # no replay: git apply's check (in-process) takes it
    reverse: bool | None = None
    reverse_later: list[str] = field(default_factory=list)  # reversed once these later patches were taken out


def identify(ctx: Context, cands: Sequence[Candidate]) -> dict[str, Identified]:
    """Identity, patch-id, reverts and later changes of every candidate, in a few batched calls."""
    out: dict[str, Identified] = {}
    for cand in cands:
        found, ev_id = signals.identity(ctx.history, cand)
        same, ev_pid = signals.patch_id(ctx.history, cand)
        out[cand.name] = Identified(found + same, [ev_id, ev_pid])
    matched = [c for c in cands if out[c.name].matches]
    # "<parent> <commit>" makes diff-tree diff the commit back to its parent: the patch reversed.
    reversed_ids = ctx.repo.patch_ids_of_commits([(c.parent, c.commit) for c in matched])
    for cand in matched:
        ident = out[cand.name]
        revert = signals.undo(ctx.history, ident.matches, reversed_ids.get(cand.parent, ""))
        since = signals.modified(ctx.history, cand, ident.matches)
        ident.evidence += [e for e in (revert, since) if e is not None]
    _completeness(ctx, matched, out)
    return out


def _completeness(ctx: Context, cands: Sequence[Candidate], out: dict[str, Identified]) -> None:
    """Was the pick whole? For a commit that only names the patch (cherry-pick -x after
    a conflict, a Stack-Patch-Id), read the patch's lines in that commit's own tree."""
    todo = [(c, m) for c in cands for m in out[c.name].matches if m.how in ("cherry-picked as", "Stack-Patch-Id in")]
    if not todo:
        return
    trees = {i.sha: i.tree for i in ctx.repo.commit_infos(list(dict.fromkeys(m.commit for _, m in todo)))}
    for cand, m in todo:
        entries = ctx.files.entries(trees[m.commit], cand.paths)
        m.complete = contain(cand.changes, entries, ctx.files).all_present


def measure_content(ctx: Context, cands: Sequence[Candidate], tree: str) -> list[Containment]:
    """Containment of each candidate in ``tree``, attributed to the range's commits."""
    paths = list(dict.fromkeys(p for c in cands for p in c.paths))
    entries = ctx.files.entries(tree, paths)
    ctx.files.prefetch([fc.old_blob for c in cands for fc in c.changes] + [b for _, b in entries.values()])
    contents = [contain(c.changes, {p: entries[p] for p in c.paths if p in entries}, ctx.files) for c in cands]
    attribute(contents, ctx.history, ctx.files)
    return contents


def judge(
    ctx: Context, cand: Candidate, ident: Identified, m: Measured, group: Group | None = None, author: str = ""
) -> tuple[Decision, list[Evidence]]:
    """The facts of one candidate, its decision and the evidence in order."""
    facts = signals.facts_of(m.content, m.step, m.applies, m.reverse)
    facts.matches = ident.matches
    evidence = list(ident.evidence)
    if group is not None:
        facts.group, facts.group_by = group.names, group.by
        evidence.append(signals.grouped(group.names, group.by, group.how))
    evidence += [e for e in (signals.replayed(m.step, m.applies), signals.reversed_(m.reverse, m.reverse_later)) if e]
    evidence.append(signals.content(m.content))
    blame = signals.blame(m.content)
    if blame:
        evidence.append(blame)
    first = decide(facts)
    if first.verdict in (Verdict.UNIQUE, Verdict.CONFLICT):
        known = {c for m in ident.matches for c in (m.commit, *m.undone_by)}
        facts.hints, hint = signals.hints(ctx.history, cand, known)
        paths = m.step.conflict.paths if m.step and m.step.conflict else []
        facts.superseded, superseded = signals.superseded(ctx.repo, ctx.history, cand, author, paths)
        evidence += [e for e in (hint, superseded) if e]
        first = decide(facts)
    if first.verdict is Verdict.REPRESENTED and facts.conflicts:
        detail = "the conflict is only the change already being in the base"
        evidence.append(Evidence(Signal.CONFLICT, detail, data={"spurious": True}))
    return first, evidence


def settle(outcome: Outcome, d: Decision, evidence: list[Evidence], content: Containment) -> None:
    """Write the decision into the outcome, the rule that made it last in the evidence."""
    outcome.evidence = [*outcome.evidence, *evidence, signals.decided(d)]
    outcome.verdict = d.verdict
    outcome.recommendation = d.recommendation
    outcome.represented_by = list(d.represented_by)
    outcome.group = list(d.group)
    if d.verdict is Verdict.REPRESENTED:
        outcome.represented_fraction = 1.0
    else:
        outcome.represented_fraction = round(content.fraction, 4) if content.judged else 0.0


def record_step(outcome: Outcome, step: replay.Step | None) -> None:
    """Keep ``apply``'s own facts where it already replayed the patch; else this replay's."""
    if step is None or outcome.applied is not None:
        return
    outcome.applied = step.applied
    outcome.conflict = step.conflict
    outcome.note = step.note or outcome.note


def applied_state(step: replay.Step | None, applies: bool) -> Applied | None:
    if step is not None:
        return step.applied
    return Applied.APPLIED if applies else None


def name_commits(repo: git.Repository, run: Run) -> None:
    """Subjects of the base commits the verdicts name, so reports show "abc1234 “subject”" without git."""
    named = list(
        dict.fromkeys(c for o in run.outcomes for c in [*o.represented_by, *(x for e in o.evidence for x in e.commits)])
    )
    known = [c for c in named if c not in run.subjects and len(c) >= 40]
    present = [c for c, ok in repo.has_objects(known).items() if ok] if known else []
    for info in repo.commit_infos(present) if present else []:
        run.subjects[info.sha] = info.message.split("\n", 1)[0]
