"""``ggstack check --commits``: each commit judged alone on the base, like ``git cherry``. In phases (batched reads,
content judged in-process, replays only where a verdict needs a merge), so hundreds of commits cost a few processes."""

from __future__ import annotations

import functools
from collections import Counter

from ggstack import diff, forked, git, replay
from ggstack.check import cache
from ggstack.check import judge as judging
from ggstack.check.containment import entries_of
from ggstack.check.files import Files
from ggstack.check.history import CHANGE_ID, PICKED_FROM, SPID, RangeRead, merge_title, read_range, scan
from ggstack.check.judge import Context, Identified, Measured
from ggstack.check.rules import SOME
from ggstack.check.signals import Candidate, paths_of_all
from ggstack.check.would_apply import applies, reverse_applies, surely_conflicts
from ggstack.errors import UserError
from ggstack.gcpause import paused
from ggstack.model import Applied, Conflict, Outcome, Run
from ggstack.threads import Pending, cores


def check_commits(
    repo: git.Repository, shas: list[str], base_ref: str, *, use_cache: bool = True, jobs: int | None = None
) -> Run:
    """``jobs``: how many processes the judging may take (default: one a core)."""
    base = replay.resolve_base(repo, None, base_ref)
    infos = _commits(repo, shas)
    run = Run(stack=None, base_ref=base_ref, base=base)
    if not infos:
        return run
    k = cache.verdicts_key(["commits", base, *(i.sha for i in infos)])
    if not cache.load_verdicts(repo, k, run, read=use_cache):
        _judge_in_order(repo, base, infos, run, jobs or cores())
        if cache.worth_keeping(run):
            cache.save_verdicts(repo, k, run)
    run.stages["check"] = "ok"
    return run


def _judge_in_order(repo: git.Repository, base: str, infos: list[git.CommitInfo], run: Run, jobs: int) -> None:
    with paused():  # see gcpause: the lines of thousands of file versions, nothing cyclic to free
        _judge_lines(repo, base, infos, run, jobs)
    order = {i.sha: n for n, i in enumerate(infos)}
    run.outcomes.sort(key=lambda o: order[o.source_commit or ""])


def _commits(repo: git.Repository, shas: list[str]) -> list[git.CommitInfo]:
    infos = list({i.sha: i for i in repo.commit_infos(shas)}.values())
    for info in infos:
        if not info.parents:
            raise UserError(f"{info.sha[:12]}: a root commit has no change to compare")
    return infos


def _judge_lines(repo: git.Repository, base: str, infos: list[git.CommitInfo], run: Run, jobs: int) -> None:
    lines, merge_base = _lines(repo, base, infos)
    asked = None if merge_base else repo.start_merge_base(base, infos[0].sha)  # answered meanwhile
    parts = _parts(lines, jobs)
    shared = _shared_ranges(repo, base, lines, parts)
    judged = forked.map_in_forks(functools.partial(_judge_pieces, repo, base, shared), parts, repo.after_fork)
    for _, part in sorted(p for ps in judged for p in ps):  # the lines' order, as one process has it
        _add(run, part)
    run.merge_base = merge_base or (asked() if asked else None)


# Commits a forked part is worth at least, and what judging a line costs besides its commits (its
# own read of the range, its own merges' start), in commits' worth.
_PART = 16
_EARLY = 8  # commits whose reversed patch-ids are read beside the range, all, matched by the base or not
_LINE = 16

Piece = tuple[tuple[int, int], list[git.CommitInfo]]  # ((line, first commit's index in it), commits)


def _parts(lines: list[list[git.CommitInfo]], jobs: int) -> list[list[Piece]]:
    """The lines dealt into at most ``jobs`` parts of about one length; a line is cut while that helps."""
    n = max(1, min(jobs, sum(len(line) for line in lines) // _PART))
    pieces: list[Piece] = [((k, 0), line) for k, line in enumerate(lines)]
    best = _deal(pieces, n)
    while True:
        cut = _longest_halved(pieces)
        if cut is None:
            return best
        dealt = _deal(cut, n)
        if _span(dealt) >= _span(best):
            return best
        pieces, best = cut, dealt


def _longest_halved(pieces: list[Piece]) -> list[Piece] | None:
    # None: the longest piece is too short for a half to be worth a part.
    (k, at), big = max(pieces, key=lambda p: len(p[1]))
    half = len(big) // 2
    if half < _PART // 2:
        return None
    return [p for p in pieces if p[0] != (k, at)] + [((k, at), big[:half]), ((k, at + half), big[half:])]


def _deal(pieces: list[Piece], n: int) -> list[list[Piece]]:
    parts: list[list[Piece]] = [[] for _ in range(n)]
    for piece in sorted(pieces, key=lambda p: (-len(p[1]), p[0])):
        min(parts, key=_cost).append(piece)
    return [sorted(part) for part in parts if part]


def _cost(part: list[Piece]) -> int:
    return sum(_LINE + len(commits) for _, commits in part)


def _span(parts: list[list[Piece]]) -> int:
    return max(_cost(part) for part in parts)


def _shared_ranges(
    repo: git.Repository, base: str, lines: list[list[git.CommitInfo]], parts: list[list[Piece]]
) -> dict[int, RangeRead]:
    # Read once before the parts fork: each would read the same line's range again, on the same cores.
    spread = Counter(k for part in parts for k in {key[0] for key, _ in part})
    return {k: read_range(repo, base, [i.sha for i in lines[k]]) for k, n in spread.items() if n > 1}


def _judge_pieces(
    repo: git.Repository, base: str, shared: dict[int, RangeRead], pieces: list[Piece]
) -> list[tuple[tuple[int, int], Run]]:
    out = []
    for key, commits in pieces:
        run = Run(stack=None, base_ref="", base=base)
        _judge(repo, base, commits, run, shared.get(key[0]))
        out.append((key, run))
    return out


def _add(run: Run, part: Run) -> None:
    run.outcomes += part.outcomes
    run.subjects.update(part.subjects)


def _lines(repo: git.Repository, base: str, infos: list[git.CommitInfo]) -> tuple[list[list[git.CommitInfo]], str]:
    """The commits by their line of history, each judged against its line's range as ``git cherry``
    has it; and the merge base, where the walk says it ("" else)."""
    if len(infos) == 1:
        return [infos], ""  # one commit is one line: nothing to walk
    lines_of = repo.first_parents([i.sha for i in infos], base)
    parents = {c: ps[0] if ps else "" for c, ps in lines_of.items()}
    forks = _fork_points(infos, parents)  # commit -> its line's fork point ("in the base" for one the base has)
    tips = [i.sha for i in infos if i.sha in parents]
    walks = _first_parent_lines(tips, parents)
    # Only a merge on the lines can bring commits of the base in: with none, no graph is read.
    merges = _merges_of_the_base(repo, base, tips, walks, forks) if _any_merge(lines_of) else set()
    below = _merges_below(walks, parents, merges)
    return _by_line(infos, forks, below), _known_merge_base(infos[0].sha, lines_of, forks)


def _any_merge(lines_of: dict[str, list[str]]) -> bool:
    return any(len(ps) > 1 for ps in lines_of.values())


def _by_line(infos: list[git.CommitInfo], forks: dict[str, str], below: dict[str, str]) -> list[list[git.CommitInfo]]:
    # A line: where the first-parent line leaves the base, and the newest merge below that brought base commits.
    lines: dict[tuple[str, str], list[git.CommitInfo]] = {}
    for info in infos:
        lines.setdefault((forks[info.sha], below.get(info.sha, "")), []).append(info)
    return list(lines.values())


def _fork_points(infos: list[git.CommitInfo], parents: dict[str, str]) -> dict[str, str]:
    forks: dict[str, str] = {}
    for info in infos:
        _fork_of(info.sha, parents, forks)
    return forks


def _known_merge_base(sha: str, lines_of: dict[str, list[str]], forks: dict[str, str]) -> str:
    """``sha`` if the base has it; else where its merge-less line leaves the base; else "" (ask git)."""
    if forks.get(sha) == "in the base":
        return sha
    at = sha
    while at in lines_of:
        if len(lines_of[at]) != 1:
            return ""  # a merge (or a root) on the line
        at = lines_of[at][0]
    return forks.get(sha, "")


def _fork_of(sha: str, parents: dict[str, str], known: dict[str, str]) -> str:
    if sha not in parents:
        known[sha] = "in the base"
        return known[sha]
    walk, at = [], sha
    while at in parents and at not in known:
        walk.append(at)
        at = parents[at]
    fork = known.get(at, at)
    known.update(dict.fromkeys(walk, fork))
    return fork


def _merges_of_the_base(
    repo: git.Repository, base: str, tips: list[str], walks: list[list[str]], forks: dict[str, str]
) -> set[str]:
    """The merges on the lines that brought base commits in: only below them is a commit's range smaller."""
    points = sorted({f for f in forks.values() if f != "in the base" and f})
    if not tips:
        return set()
    ours = Pending(repo.graph, tips, [*points, base])  # the two walks side by side
    graph = repo.graph(tips, points)
    brought = set(graph) - set(ours.result())  # commits of the base the lines merged in
    return _bringing(walks, forks, graph, brought) if brought else set()


def _bringing(
    walks: list[list[str]], forks: dict[str, str], graph: dict[str, list[str]], brought: set[str]
) -> set[str]:
    out: set[str] = set()
    seen_by_fork: dict[str, set[str]] = {}
    for line in walks:
        seen = seen_by_fork.setdefault(forks.get(line[0], "") if line else "", set())
        out.update(c for c in line if _brings(c, graph, brought, seen))  # oldest first
    return out


def _brings(c: str, graph: dict[str, list[str]], brought: set[str], seen: set[str]) -> bool:
    """Does ``c`` bring in a commit of ``brought`` nothing before it on the line reached?"""
    seen.add(c)
    todo = _unseen(graph.get(c, [])[1:], graph, seen)
    new = False
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        new = new or x in brought
        todo += _unseen(graph.get(x, []), graph, seen)
    return new


def _unseen(parents: list[str], graph: dict[str, list[str]], seen: set[str]) -> list[str]:
    return [p for p in parents if p in graph and p not in seen]


def _first_parent_lines(tips: list[str], parents: dict[str, str]) -> list[list[str]]:
    done: set[str] = set()
    lines = []
    for tip in tips:
        walk, at = [], tip
        while at in parents and at not in done:
            walk.append(at)
            done.add(at)
            at = parents[at]
        lines.append(walk[::-1])
    return lines


def _merges_below(walks: list[list[str]], parents: dict[str, str], merges: set[str]) -> dict[str, str]:
    """commit -> the newest of ``merges`` strictly below it on its first-parent line."""
    below: dict[str, str] = {}
    if not merges:
        return below
    for line in walks:
        prior = parents.get(line[0], "") if line else ""
        merge = prior if prior in merges else below.get(prior, "")
        for c in line:
            below[c] = merge
            if c in merges:
                merge = c
    return below


def _judge(repo: git.Repository, base: str, infos: list[git.CommitInfo], run: Run, read: RangeRead | None) -> None:
    diffs = repo.diffs_of_commits([(i.sha, i.parents[0]) for i in infos])
    branches = repo.branches([i for i in infos if len(i.parents) > 1])
    cands = [_candidate(i, diffs[i.sha], branches.get(i.sha, [])) for i in infos]
    authors = {i.sha[:12]: i.author_email for i in infos}
    base_tree = repo.commit_infos([base])[0].tree  # through the long-lived reader, no rev-parse
    ctx, entries, idents = _read_and_identify(repo, base, base_tree, cands, diffs, read)
    done = _measure_all(ctx, base, base_tree, cands, idents, entries)
    _read_for_all(ctx, cands, idents, done, authors)
    judging.prepare_remaining(ctx, list(zip(cands, done, strict=True)))
    for cand, m in zip(cands, done, strict=True):
        run.outcomes.append(_outcome(ctx, cand, idents[cand.name], m, authors[cand.name]))
    judging.name_commits(repo, run)


def _measure_all(
    ctx: Context,
    base: str,
    base_tree: str,
    cands: list[Candidate],
    idents: dict[str, Identified],
    entries: dict[str, tuple[str, str]],
) -> list[Measured]:
    contents = judging.measure_content(ctx, cands, base_tree, idents)
    measured = [_measure(ctx, c, content, idents[c.name], entries) for c, content in zip(cands, contents, strict=True)]
    steps = _replay_all(ctx.repo, base, base_tree, [c for c, m in zip(cands, measured, strict=True) if m is None])
    done = [
        m or _replayed(ctx, c, k, steps.get(c.commit), entries)
        for c, k, m in zip(cands, contents, measured, strict=True)
    ]
    for m in done:
        m.tree = base_tree
    return done


def _read_for_all(
    ctx: Context, cands: list[Candidate], idents: dict[str, Identified], done: list[Measured], authors: dict[str, str]
) -> None:
    # One batch each, not one a candidate: the picks' trees, and who changed the lines of those that may be superseded.
    judging.read_picks(ctx, [(c, idents[c.name], m) for c, m in zip(cands, done, strict=True)])
    judging.find_changed(
        ctx,
        [
            (c, m.content)
            for c, m in zip(cands, done, strict=True)
            if judging.may_be_superseded(ctx, c, idents[c.name], m, authors[c.name])
        ],
    )


def _read_and_identify(
    repo: git.Repository,
    base: str,
    base_tree: str,
    cands: list[Candidate],
    diffs: dict[str, bytes],
    read: RangeRead | None,
) -> tuple[Context, dict[str, tuple[str, str]], dict[str, Identified]]:
    # A few commits' reversed patch-ids (a revert's) are read meanwhile, not after.
    early = Pending(judging.reversed_patch_ids, repo, cands) if len(cands) <= _EARLY else None
    ctx, entries = _read(repo, base, base_tree, cands, diffs, read)
    return ctx, entries, judging.identify(ctx, cands, early.result() if early else None)


def _read(
    repo: git.Repository,
    base: str,
    base_tree: str,
    cands: list[Candidate],
    diffs: dict[str, bytes],
    read: RangeRead | None = None,
) -> tuple[Context, dict[str, tuple[str, str]]]:
    # Side by side: the range is git's work (log, diff-tree | patch-id), reading the base's files is ours.
    paths = paths_of_all(cands)
    pending = Pending(
        scan,
        repo,
        base,
        [c.commit for c in cands],
        paths,
        [(c.commit, c.parent) for c in cands],
        [s for c in cands for s in c.sources],
        {frozenset(c.paths) for c in cands},
        diffs,  # the candidates' patch-ids from the diffs read already
        read,  # the range's logs, where the line's parts share them
    )
    files = Files(repo)
    entries = _base_files(files, base_tree, paths, cands)
    history = pending.result()
    return Context(repo, history, files), entries


def _base_files(files: Files, base_tree: str, paths: list[str], cands: list[Candidate]) -> dict[str, tuple[str, str]]:
    entries = files.entries(base_tree, paths)
    files.prefetch([fc.old_blob for c in cands for fc in c.changes] + [b for _, b in entries.values()])
    return entries


def _outcome(ctx: Context, cand: Candidate, ident: Identified, m: Measured, author: str) -> Outcome:
    outcome = Outcome(name=cand.name, subject=cand.subject, stack_patch_id=cand.spid, source_commit=cand.commit)
    judged = judging.judge(ctx, cand, ident, m, author=author)
    judging.record_step(outcome, m.step)
    if m.step is None and m.applies:
        outcome.applied = Applied.APPLIED
    judging.settle(outcome, judged)
    return outcome


def _candidate(info: git.CommitInfo, raw: bytes, branch: list[str]) -> Candidate:
    """A merge stands for its branch: the commits it brought in are its sources, its title is the PR's."""
    return Candidate(
        name=info.sha[:12],
        commit=info.sha,
        parent=info.parents[0],
        title=merge_title(info.message) if branch else "",
        changes=diff.parse(raw),
        sources=[info.sha, *PICKED_FROM.findall(info.message), *branch],
        spid=(SPID.findall(info.message) or [""])[0],
        subject=info.message.split("\n", 1)[0],
        change_id=(CHANGE_ID.findall(info.message) or [""])[0],
    )


def _mine(cand: Candidate, entries: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    return entries_of(entries, cand.paths)


def _measure(
    ctx: Context, cand: Candidate, content: judging.Containment, ident: Identified, entries: dict[str, tuple[str, str]]
) -> Measured | None:
    """What can be settled without a merge; None: replay it."""
    mine = _mine(cand, entries)
    if not content.units:
        return Measured(content)
    live = _live(ident)
    absent = _absent(content)
    if absent and applies(cand.changes, mine, ctx.files):
        return Measured(content, applies=True)
    clash = surely_conflicts(cand.changes, mine, ctx.files) if absent and not live else []
    if clash:
        why = "not replayed: lines it changes were changed in the base too, so the merge would conflict there"
        return Measured(content, replay.Step(Applied.CONFLICT, "", conflict=Conflict(clash, "", why)))
    return _settled(content, ident, live, reverse_applies(cand.changes, mine, ctx.files))


def _live(ident: Identified) -> bool:
    return any(not m.undone_by for m in ident.matches)


def _absent(content: judging.Containment) -> bool:
    return content.judged and not any(u.present for u in content.units)


def _settled(content: judging.Containment, ident: Identified, live: bool, reverse: bool) -> Measured | None:
    if content.all_present and (live or reverse):
        return Measured(content, reverse=reverse)  # every line there, and git's view (or the lines' history) agrees
    if _exact_pick_partly_there(content, ident):
        # Represented, picked (all there) or picked, then modified; a merge could only tell an
        # empty replay, which its reverse or its lines already tell where they can.
        return Measured(content, reverse=reverse, unreplayed=_EXACT_PICK)
    if _partial_without_a_merge(content, live):
        return Measured(content, reverse=reverse)
    return None


def _partial_without_a_merge(content: judging.Containment, live: bool) -> bool:
    # Its remaining diff applies by construction. (Below SOME, lines an unrelated commit brought
    # are a coincidence: no partial, so the replay must say whether it conflicts.)
    return content.any_earned and not content.all_present and not live and content.adding_fraction >= SOME


def _exact_pick_partly_there(content: judging.Containment, ident: Identified) -> bool:
    exact = any(m.how in judging.EXACT and not m.undone_by for m in ident.matches)
    return exact and any(u.present for u in content.units)


def _replayed(
    ctx: Context,
    c: Candidate,
    content: judging.Containment,
    step: replay.Step | None,
    entries: dict[str, tuple[str, str]],
) -> Measured:
    reverse = reverse_applies(c.changes, _mine(c, entries), ctx.files)
    if step is None:
        return Measured(content, reverse=reverse, uncomputed="git merge-tree could not make the merge")
    return Measured(content, step, reverse=reverse)


def _merge_or_none(repo: git.Repository, ours: str, theirs: str) -> git.MergeResult | None:
    try:
        return repo.merge_trees(ours, theirs)
    except git.GitFailed:
        return None


_EXACT_PICK = (
    "not replayed: an exact pick (identity or patch-id, not taken out since) of which some lines are there is "
    "represented by it whatever a merge says"
)


def _replay_all(repo: git.Repository, base: str, base_tree: str, todo: list[Candidate]) -> dict[str, replay.Step]:
    """Cherry-pick's merge of each commit onto the base: scratch commits (base tree on the commit's
    parent) in one process, the merges in one ``merge-tree --stdin``; nothing is committed."""
    if not todo:
        return {}
    scratch = repo.hash_commits([(base_tree, [c.parent], "ggstack scratch\n") for c in todo])
    merges = _merge_all(repo, [(ours, cand.commit) for cand, ours in zip(todo, scratch, strict=True)])
    # None: judged without the replay (``unmerged``)
    return {
        cand.commit: _step_of(merged, base_tree)
        for cand, merged in zip(todo, merges, strict=True)
        if merged is not None
    }


def _merge_all(repo: git.Repository, pairs: list[tuple[str, str]]) -> list[git.MergeResult | None]:
    try:
        return list(repo.merge_many(pairs))
    except git.GitFailed:  # an object this clone lacks: each merge on its own, the ones git can make
        return [_merge_or_none(repo, ours, theirs) for ours, theirs in pairs]


def _step_of(merged: git.MergeResult, base_tree: str) -> replay.Step:
    if not merged.clean:  # the paths and git's messages; the conflict regions are apply's to show
        conflict = Conflict(list(merged.conflicted_paths), "", merged.messages)
        return replay.Step(Applied.CONFLICT, merged.tree, conflict=conflict)
    return replay.Step(Applied.EMPTY if merged.tree == base_tree else Applied.APPLIED, merged.tree)
