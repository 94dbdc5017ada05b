"""``ggstack check STACK``: each patch judged on the base plus the earlier patches still needed, as the PRs will stack.
Squashes are found before the walk; runs found by lines or by reverse-apply, after it."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ggstack import diff, git, replay
from ggstack.check import cache, groups, squashed_branches
from ggstack.check import judge as judging
from ggstack.check.containment import TreeEntries
from ggstack.check.files import Files
from ggstack.check.groups import Group
from ggstack.check.history import CHANGE_ID, PICKED_FROM, BaseRange, scan
from ggstack.check.judge import Context, Identified, Measured
from ggstack.check.rules import Match
from ggstack.check.signals import Candidate, paths_of_all
from ggstack.gcpause import paused
from ggstack.model import Applied, Outcome, Patch, Progress, Run, Stack, Verdict
from ggstack.picks import Pick, materialize


@dataclass
class _Judged:
    cand: Candidate
    outcome: Outcome
    measured: Measured
    tip_tree: str
    author: str


def check_stack(
    repo: git.Repository,
    stack: Stack,
    base_ref: str,
    *,
    run: Run | None = None,
    progress: Progress | None = None,
    use_cache: bool = True,
) -> Run:
    base = replay.resolve_base(repo, stack, base_ref)
    if run is None:
        run = Run(stack=stack.name, base_ref=base_ref, base=base, repo_slug=stack.config.target.repo)
    else:
        run = run.copy()  # apply's Run stays apply's
    outcomes = [_outcome(run, patch) for patch in stack.patches]
    candidates = cache.candidates_key(stack, repo)
    k = cache.verdicts_key([candidates, base])
    if cache.load_verdicts(repo, k, run, read=use_cache):
        run.stages["check"] = "ok"
        return run
    if not cache.carry_over(repo, stack, candidates, run, read=use_cache):
        with paused():  # see gcpause: the lines of thousands of file versions, nothing cyclic to free
            _judge(repo, stack, base, run, outcomes, progress)
    if cache.worth_keeping(run):
        cache.save_verdicts(repo, k, run, candidates=candidates)
    run.stages["check"] = "ok"
    return run


def _judge(
    repo: git.Repository, stack: Stack, base: str, run: Run, outcomes: list[Outcome], progress: Progress | None
) -> None:
    picks = materialize(repo, stack)
    run.merge_base = _merge_base(repo, base, picks)
    cands = [_candidate(p) for p in picks]
    whole = [c for c in cands if c.commit and c.parent]
    ctx = Context(repo, _scan(repo, base, run.merge_base, cands, whole), Files(repo))
    trees = groups.trees_of(repo, whole)
    idents = _identify(ctx, picks, cands, whole)
    base_tree = repo.resolve(base, "tree")
    squashed = _squashed(ctx, cands, idents, trees, base, base_tree)
    moot = _moot_reversals(repo, run.merge_base, base_tree, cands)
    reverse = _cumulative_reverse(repo, base_tree, picks, moot)
    related = _consolidating(ctx, whole, base_tree)
    walked = _walk(ctx, run, picks, cands, outcomes, idents, squashed, reverse, related, progress)
    _later_groups(ctx, walked, cands, idents, trees, reverse, base_tree, related)
    judging.name_commits(repo, run)


def _merge_base(repo: git.Repository, base: str, picks: Sequence[Pick]) -> str | None:
    parents = [p.parent for p in picks if p.parent]
    return repo.merge_base(base, parents[0]) if parents else None


def _identify(
    ctx: Context, picks: Sequence[Pick], cands: Sequence[Candidate], whole: Sequence[Candidate]
) -> dict[str, Identified]:
    # A patch whose recorded base this clone lacks (a CI checkout) has no commit, but git's own
    # signals still speak: its patch-id from the patch's diff, its provenance from its message.
    loose = [(c, p) for c, p in zip(cands, picks, strict=True) if not c.commit and c.changes]
    _patch_ids_of_diffs(ctx, loose)
    idents = judging.identify(ctx, [*whole, *(c for c, _ in loose)])
    # The picks' own trees in one batch, not one a patch as the walk judges them.
    judging.read_picks(ctx, [(c, idents[c.name], None) for c in cands if c.name in idents])
    return idents


def _patch_ids_of_diffs(ctx: Context, loose: list[tuple[Candidate, Pick]]) -> None:
    for (cand, _), pid in zip(loose, ctx.repo.patch_ids_of_texts([p.diff for _, p in loose]), strict=True):
        ctx.history.patch_ids[cand.name] = pid


def _squashed(
    ctx: Context,
    cands: Sequence[Candidate],
    idents: dict[str, Identified],
    trees: dict[str, str],
    base: str,
    base_tree: str,
) -> dict[int, Group]:
    """Runs the base carries together, found before the walk so that their members stay out of the tip."""
    picked = {k for k, c in enumerate(cands) if any(_exact(m) for m in idents.get(c.name, _NONE).matches)}
    found = groups.combined(
        squashed_branches.branch_nets(ctx.repo, ctx.history, ctx.files, cands, base, base_tree),
        groups.squashes(ctx.repo, ctx.history, cands, groups.chained(cands, trees), trees),
        groups.named(ctx.repo, ctx.history, ctx.files, cands, picked),
    )
    return _index(found, cands)


_NONE = Identified()


def _exact(m: Match) -> bool:
    return not m.undone_by and m.how != judging.HINTED


def _scan(
    repo: git.Repository, base: str, merge_base: str | None, cands: list[Candidate], whole: list[Candidate]
) -> BaseRange:
    return scan(
        repo,
        base,
        [merge_base] if merge_base else [],
        paths_of_all(cands),
        [(c.commit, c.parent) for c in whole],
        [s for c in cands for s in c.sources],
        {frozenset(c.paths) for c in cands},
    )


def _candidate(pick: Pick) -> Candidate:
    patch = pick.patch
    assert patch is not None
    return Candidate(
        name=pick.name,
        commit=pick.commit or "",
        parent=pick.parent or "",
        changes=diff.parse(pick.diff),
        # the commit it was picked from, what its message says it was picked from (a backport's
        # "(cherry picked from commit X)"), as check --commits reads a commit's message, and the
        # fork's commit it was imported from (upstream may have merged that very commit)
        sources=[
            patch.provenance.cherry_picked_from or "",
            *PICKED_FROM.findall(patch.message),
            patch.source_commit or "",
        ],
        spid=patch.provenance.stack_patch_id,
        subject=patch.subject,
        original_pr=patch.provenance.original_pr,
        change_id=(CHANGE_ID.findall(patch.message) or [""])[0],
        origin=patch.source_commit or "",
    )


def _index(found: list[Group], cands: Sequence[Candidate]) -> dict[int, Group]:
    out = {}
    for g in found:
        g.names = [cands[k].name for k in g.members]
        out.update({k: g for k in g.members})
    return out


def _walk(
    ctx: Context,
    run: Run,
    picks: Sequence[Pick],
    cands: Sequence[Candidate],
    outcomes: list[Outcome],
    idents: dict[str, Identified],
    squashed: dict[int, Group],
    reverse: dict[str, _Reversal],
    related: set[str],
    progress: Progress | None,
) -> list[_Judged]:
    replayer = replay.Replayer(ctx.repo, run.base)
    replayer.prepare(picks)  # a patch whose merge is trivial then needs no merge-tree, as in apply
    walked: list[_Judged] = []
    left_out: dict[str, str] = {}  # path -> an earlier needed patch the tip lacks (it does not apply), changing it
    try:
        for i, (pick, cand) in enumerate(zip(picks, cands, strict=True)):
            m, step = _measure(ctx, replayer, pick, cand, idents, reverse.get(pick.name), left_out)
            author = _email(pick.patch.author if pick.patch else "")
            ident = idents.get(cand.name, Identified())
            judged = judging.judge(ctx, cand, ident, m, squashed.get(i), author, related, own=True)
            judging.record_step(outcomes[i], step)
            judging.settle(outcomes[i], judged)
            walked.append(_Judged(cand, outcomes[i], m, m.tree, author))
            if i not in squashed:
                _carry(replayer, left_out, cand, outcomes[i], step)
            if progress:
                progress(i + 1, len(picks), pick.name)
    finally:
        replayer.close()
    return walked


def _measure(
    ctx: Context,
    replayer: replay.Replayer,
    pick: Pick,
    cand: Candidate,
    idents: dict[str, Identified],
    rev: _Reversal | None,
    left_out: dict[str, str],
) -> tuple[Measured, replay.Step | None]:
    tip_tree = replayer.tip_tree
    content = judging.measure_content(ctx, [cand], tip_tree, idents)[0]
    step, unmerged = _try_pick(replayer, pick)
    rev_applies, rev_later = (rev.applies, rev.later) if rev else (None, [])
    m = Measured(content, step, reverse=rev_applies, reverse_later=rev_later, tree=tip_tree)
    m.uncomputed = unmerged
    hole = [left_out[p] for p in cand.paths if p in left_out]
    if step is not None and step.applied is Applied.EMPTY and hole:
        # It changes lines an earlier patch brought, which the tip lacks: that it changes nothing
        # there says nothing of the base (its revert of that patch's line is still needed).
        m.step, m.unreplayed = None, _EMPTY_ONLY_WITHOUT.format(", ".join(dict.fromkeys(hole)))
    return m, step


_NEEDED = (Verdict.UNIQUE, Verdict.PARTIAL, Verdict.CONFLICT)


def _carry(
    replayer: replay.Replayer, left_out: dict[str, str], cand: Candidate, outcome: Outcome, step: replay.Step | None
) -> None:
    """A needed patch goes into the tip; one that does not apply marks its paths as changed by it."""
    if outcome.verdict not in _NEEDED:
        return
    if step is not None and step.applied is Applied.APPLIED:
        replayer.advance(step)
    else:
        left_out.update({p: cand.name for p in cand.paths})


def _try_pick(replayer: replay.Replayer, pick: Pick) -> tuple[replay.Step | None, str]:
    # An object this clone lacks costs the replay's evidence, not every verdict of the stack.
    try:
        return replayer.try_pick(pick), ""
    except git.GitFailed as e:
        return None, e.stderr.strip().splitlines()[-1] if e.stderr.strip() else str(e)


_EMPTY_ONLY_WITHOUT = (
    "replaying it changes nothing only because {} is not in the tip (needed, it does not apply there), and it "
    "changes that patch's files: no evidence"
)


def _outcome(run: Run, patch: Patch) -> Outcome:
    try:
        outcome = run.outcome(patch.name)
    except KeyError:
        outcome = replay.outcome_of(patch, replay.Step(Applied.SKIPPED, ""))
        outcome.applied = None
        run.outcomes.append(outcome)
    outcome.evidence = []
    return outcome


def _consolidating(ctx: Context, cands: Sequence[Candidate], base_tree: str) -> set[str]:
    """Base commits that brought lines of two or more patches: upstream took the series in one commit."""
    counts: dict[str, int] = {}
    for c in judging.measure_content(ctx, cands, base_tree):
        for sha in c.commits:
            counts[sha] = counts.get(sha, 0) + 1
    return {sha for sha, n in counts.items() if n > 1}


def _email(author: str) -> str:
    return author.rpartition("<")[2].rstrip(">").strip()


# -- after the walk: runs found by their lines, and StGit's cumulative reverse ---------------------


def _later_groups(
    ctx: Context,
    walked: list[_Judged],
    cands: Sequence[Candidate],
    idents: dict[str, Identified],
    trees: dict[str, str],
    reverse: dict[str, _Reversal],
    base_tree: str,
    related: set[str],
) -> None:
    found = _index(
        groups.by_content(ctx.repo, ctx.history, cands, _segments(walked, cands, trees), base_tree, ctx.files), cands
    )
    found.update({k: g for k, g in _through_later(ctx, walked, reverse, base_tree).items() if k not in found})
    for k, g in found.items():
        j = walked[k]
        if j.outcome.verdict is Verdict.REPRESENTED and j.outcome.group:
            continue
        ident = idents.get(j.cand.name, Identified())
        judged = judging.judge(ctx, j.cand, ident, j.measured, g, j.author, related, own=True)
        if judged.decision.verdict is Verdict.REPRESENTED:
            j.outcome.evidence = []
            judging.settle(j.outcome, judged)


def _segments(walked: list[_Judged], cands: Sequence[Candidate], trees: dict[str, str]) -> list[list[int]]:
    out = []
    for run in groups.chained(cands, trees):
        seg: list[int] = []
        for k in [*run, -1]:
            if k >= 0 and _eligible(walked[k]):
                seg.append(k)
                continue
            if _worth_grouping(walked, seg):
                out.append(seg)
            seg = []
    return out


def _eligible(j: _Judged) -> bool:
    return j.outcome.verdict is not Verdict.UNIQUE or any(u.present for u in j.measured.content.units)


def _worth_grouping(walked: list[_Judged], seg: list[int]) -> bool:
    return len(seg) > 1 and any(walked[x].outcome.verdict is not Verdict.REPRESENTED for x in seg)


@dataclass
class _Reversal:
    applies: bool
    tree: str  # the tree it was reverse-applied to: the base without the later patches that reversed
    later: list[str]  # names of those later patches


def _moot_reversals(
    repo: git.Repository, merge_base: str | None, base_tree: str, cands: Sequence[Candidate]
) -> set[str]:
    """Patches whose reverse applies whatever the base holds (``git apply -R`` only warns about a mode)."""
    deleting = {c.name: _deletes(c) for c in cands}
    moding = {c.name: _modes(c) for c in cands}
    paths = _paths_of(deleting, moding)
    if not paths:
        return set()
    there = repo.ls_tree(base_tree, paths)
    before = repo.ls_tree(repo.resolve(merge_base, "tree"), paths) if merge_base else {}
    return _deletes_its_own(deleting, there, before) | _sets_another_mode(moding, there)


def _paths_of(deleting: dict[str, list[str]], moding: dict[str, list[tuple[str, str]]]) -> list[str]:
    return sorted({p for ps in deleting.values() for p in ps} | {p for ms in moding.values() for p, _ in ms})


def _deletes(cand: Candidate) -> list[str]:
    return [fc.old_path for fc in cand.changes if fc.new_path is None and fc.old_path]


def _deletes_its_own(deleting: dict[str, list[str]], there: TreeEntries, before: TreeEntries) -> set[str]:
    return {name for name, ps in deleting.items() if any(p not in there and p not in before for p in ps)}


def _sets_another_mode(moding: dict[str, list[tuple[str, str]]], there: TreeEntries) -> set[str]:
    return {name for name, ms in moding.items() if any(p in there and there[p][0] != m for p, m in ms)}


def _modes(cand: Candidate) -> list[tuple[str, str]]:
    return [
        (fc.new_path, fc.new_mode) for fc in cand.changes if fc.new_path and fc.new_mode and fc.old_mode != fc.new_mode
    ]


def _cumulative_reverse(
    repo: git.Repository, tree: str, picks: Sequence[Pick], moot: AbstractSet[str] = frozenset()
) -> dict[str, _Reversal]:
    """StGit's ``--merged``: reverse-apply the patches, later ones first (a later one may change its lines)."""
    result: dict[str, _Reversal] = {}
    later: list[str] = []
    backwards = [pick for pick in reversed(picks) if pick.name not in moot]
    trees = repo.reverse_apply_in_turn(tree, [pick.diff for pick in backwards])
    for pick, reversed_tree in zip(backwards, trees, strict=True):
        result[pick.name] = _Reversal(reversed_tree is not None, tree, list(later))
        if reversed_tree is not None:
            tree = reversed_tree
            later.append(pick.name)
    return result


def _through_later(
    ctx: Context, walked: list[_Judged], reverse: dict[str, _Reversal], base_tree: str
) -> dict[int, Group]:
    """A patch whose lines later patches changed is represented with them, where they are."""
    by_name = {j.cand.name: j.outcome for j in walked}
    out: dict[int, Group] = {}
    for k, j in enumerate(walked):
        rev = reverse.get(j.cand.name)
        later = _represented_later(j, rev, base_tree, by_name)
        if rev is None or not later or not _there_without_later(ctx, j.cand, rev):
            continue
        by = list(dict.fromkeys(c for o in later for c in o.represented_by))
        names = [j.cand.name, *rev.later[::-1]]
        how = "its lines are in the base once the later patches it has are taken out: they changed its lines"
        out[k] = Group([k], by, how, names)
    return out


def _there_without_later(ctx: Context, cand: Candidate, rev: _Reversal) -> bool:
    entries = ctx.files.entries(rev.tree, cand.paths)
    return judging.contain(cand.changes, entries, ctx.files).all_present


def _applies_without_later(rev: _Reversal, base_tree: str) -> bool:
    # A reverse that applies to the base itself is the walk's evidence already.
    return rev.applies and rev.tree != base_tree


def _represented_later(j: _Judged, rev: _Reversal | None, base_tree: str, by_name: dict[str, Outcome]) -> list[Outcome]:
    if rev is None or j.outcome.verdict is Verdict.REPRESENTED or not _applies_without_later(rev, base_tree):
        return []
    later = [by_name[n] for n in rev.later]
    return later if all(o.verdict is Verdict.REPRESENTED for o in later) else []
