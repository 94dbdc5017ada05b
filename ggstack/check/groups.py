"""Series-level representation: a run of consecutive patches the base has together.

Upstream often takes a fork's branch as one commit: a squash merge (the
run's combined diff has that commit's patch-id) or a bigger commit that
folded the run in with other work (the run's combined lines are there, all
brought by it). Alone, a member of such a run conflicts or looks partial,
because a later member changed its lines; together they are represented.

Candidates are found from the base side, so the cost stays near linear in
the stack: a base commit can only be a run's squash when it changes exactly
the run's files, and only runs of patches that are chained (each on the
one before, as imported from a branch) have a combined diff of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ggstack import diff, git
from ggstack.check.attribution import attribute
from ggstack.check.containment import Containment, Unit, contain, contained_at, place
from ggstack.check.files import Files
from ggstack.check.history import BaseRange, normal_subject
from ggstack.check.signals import Candidate, hints

_LONGEST = 64  # runs longer than this are not looked for (a squash of a whole long branch is still found by lines)
_TRIES = 24  # combined-content tries a segment may cost
_NAMED_TRIES = 8  # runs around a named patch tried against the commit that names it
_WIDEST = 256  # a PR that merged main in was imported with main's commits between its own
NEARLY = 0.9  # share of a run's informative changed lines a squash must hold (review adapts squashes)


@dataclass
class Group:
    members: list[int]  # indexes of the candidates, consecutive
    by: list[str]  # the base commits that carry the run
    how: str  # in words: "their combined patch-id is 1a2b3c4d5e's" | "all their lines come from …"
    names: list[str] = field(default_factory=list)  # the members' names, filled in by the front end


def trees_of(repo: git.Repository, cands: Sequence[Candidate]) -> dict[str, str]:
    """commit -> tree, for every candidate's commit and parent (one process)."""
    shas = list(dict.fromkeys(x for c in cands for x in (c.commit, c.parent)))
    return {i.sha: i.tree for i in repo.commit_infos(shas)}


def chained(cands: Sequence[Candidate], trees: dict[str, str]) -> list[list[int]]:
    """Maximal runs of consecutive candidates each on the one before (same tree). A patch not
    materialised (its recorded parent is not in this clone) has no tree and is in no run."""
    runs: list[list[int]] = []
    for k, c in enumerate(cands):
        tree = trees.get(c.parent) if c.commit and c.parent else None
        if runs and k - 1 == runs[-1][-1] and tree is not None and tree == trees.get(cands[k - 1].commit):
            runs[-1].append(k)
        else:
            runs.append([k])
    return [r for r in runs if len(r) > 1]


def squashes(
    repo: git.Repository, history: BaseRange, cands: Sequence[Candidate], runs: list[list[int]], trees: dict[str, str]
) -> list[Group]:
    """Runs whose combined diff has the patch-id of one base commit changing exactly their files."""
    wanted: dict[tuple[int, int], list[str]] = {}
    for run in runs:
        for i, j, commits in _same_files(history, cands, run):
            wanted[(i, j)] = commits
    if not wanted:
        return []
    scratch = repo.hash_commits(
        [(trees[cands[j].commit], [cands[i].parent], f"ggstack run {i}..{j}\n") for i, j in wanted]
    )
    history.add_patch_ids(repo, [(s, None) for s in scratch], in_range=False)
    history.add_patch_ids(repo, [(c, None) for cs in wanted.values() for c in cs], in_range=True)
    groups: list[Group] = []
    for ((i, j), commits), sha in zip(wanted.items(), scratch, strict=True):
        pid = history.patch_ids.get(sha, "")
        same = [c for c in commits if pid and history.patch_ids.get(c) == pid and not history.reverted(c)]
        if same:
            groups.append(Group(list(range(i, j + 1)), same, f"their combined patch-id is {same[0][:10]}'s"))
    return _maximal(groups)


def _same_files(history: BaseRange, cands: Sequence[Candidate], run: list[int]) -> list[tuple[int, int, list[str]]]:
    """(i, j, base commits) for the sub-runs of ``run`` whose files can be exactly some base
    commit's: all the files they touch, or fewer by files a later member put back as they were
    (a review suggestion undoing part of the first commit: the squash does not touch that file)."""
    by_files: dict[frozenset[str], list[str]] = {}
    for sha, files in history.commits:
        by_files.setdefault(frozenset(p for p, _, _ in files), []).append(sha)
    out = []
    for a, i in enumerate(run):
        union: set[str] = set()
        again: set[str] = set()  # touched by two members or more: maybe put back
        for j in run[a : a + _LONGEST]:
            again |= union & set(cands[j].paths)
            union |= set(cands[j].paths)
            commits = [c for files in _without_some(union, again) for c in by_files.get(files, [])]
            if commits and j > i:
                out.append((i, j, list(dict.fromkeys(commits))))
    return out


_PUT_BACK = 3  # files of a run tried as put back (each subset of them: 2**3 lookups at most)


def _without_some(union: set[str], again: set[str]) -> list[frozenset[str]]:
    """``union``, and ``union`` without each non-empty subset of the first few of ``again``."""
    maybe = sorted(again)[:_PUT_BACK]
    out = [frozenset(union)]
    for mask in range(1, 2 ** len(maybe)):
        dropped = {p for k, p in enumerate(maybe) if mask >> k & 1}
        if union - dropped:
            out.append(frozenset(union - dropped))
    return out


def _maximal(groups: list[Group]) -> list[Group]:
    """Longest first; a run inside one already found adds nothing."""
    kept: list[Group] = []
    for g in sorted(groups, key=lambda g: -len(g.members)):
        if not any(set(g.members) <= set(k.members) for k in kept):
            kept.append(g)
    return sorted(kept, key=lambda g: g.members[0])


def by_content(
    repo: git.Repository,
    history: BaseRange,
    cands: Sequence[Candidate],
    segments: list[list[int]],
    base_tree: str,
    files: Files,
) -> list[Group]:
    """Runs whose combined change is all in the base, every informative line
    brought by base commits (squashed together with other work).

    Each segment's runs are tried longest first and a run inside one found is not tried; the
    tries are measured in two batches (each segment's longest run, then the other runs of the
    segments it did not settle), so that hundreds of tries cost a few processes, not some each."""
    tries = {k: _runs_longest_first(seg)[:_TRIES] for k, seg in enumerate(segments)}
    measured = _contained(repo, history, cands, [t[0] for t in tries.values() if t], base_tree, files)
    unsettled = [run for t in tries.values() if t and not _earned(measured[t[0]]) for run in t[1:]]
    measured.update(_contained(repo, history, cands, unsettled, base_tree, files))
    groups: list[Group] = []
    for runs in tries.values():
        for i, j in runs:
            if any(set(range(i, j + 1)) & set(g.members) for g in groups):
                continue
            if (i, j) not in measured:  # a try left out of the batches (none, as the runs are ordered)
                measured.update(_contained(repo, history, cands, [(i, j)], base_tree, files))
            c = measured[(i, j)]
            if _earned(c) and _rework_each_other(cands, i, j):
                by = c.commits
                groups.append(
                    Group(list(range(i, j + 1)), by, "all their lines come from " + ", ".join(x[:10] for x in by))
                )
    return groups


def _rework_each_other(cands: Sequence[Candidate], i: int, j: int) -> bool:
    """Does each member after the first change a file an earlier one changed? Neighbours that
    never touch each other's files are each judged on their own: together they say nothing more
    (two backports side by side are not one squash of the base's)."""
    seen = set(cands[i].paths)
    for k in range(i + 1, j + 1):
        if not seen & set(cands[k].paths):
            return False
        seen |= set(cands[k].paths)
    return True


def _earned(c: Containment) -> bool:
    return bool(c.units) and c.all_earned


def _contained(
    repo: git.Repository,
    history: BaseRange,
    cands: Sequence[Candidate],
    runs: list[tuple[int, int]],
    base_tree: str,
    files: Files,
) -> dict[tuple[int, int], Containment]:
    """Each run's combined change looked up in the base and attributed: one diff-tree for all
    the combined diffs, the files read together, one attribution search for all."""
    combined = repo.diffs_of_pairs([(cands[j].commit, cands[i].parent) for i, j in runs])
    changes = [diff.parse(raw) for raw in combined]
    entries = files.entries(base_tree, list(dict.fromkeys(p for ch in changes for p in diff.paths_of(ch))))
    files.prefetch([fc.old_blob for ch in changes for fc in ch] + [b for _, b in entries.values()])
    out = {run: contain(ch, _mine(entries, ch), files) for run, ch in zip(runs, changes, strict=True)}
    attribute(list(out.values()), history, files)
    return out


def _mine(entries: dict[str, tuple[str, str]], changes: list[diff.FileChange]) -> dict[str, tuple[str, str]]:
    """The base's entries for the paths of one change set, as ``Files.entries`` gives them."""
    return {p: entries[p] for p in diff.paths_of(changes) if p in entries}


def _runs_longest_first(seg: list[int]) -> list[tuple[int, int]]:
    runs = [(seg[a], seg[b]) for a in range(len(seg)) for b in range(a + 1, min(len(seg), a + _LONGEST))]
    return sorted(runs, key=lambda r: (r[0] - r[1], r[0]))


def named(
    repo: git.Repository,
    history: BaseRange,
    files: Files,
    cands: Sequence[Candidate],
    picked: AbstractSet[int],
) -> list[Group]:
    """Runs taken as the one base commit that names one of them (its subject or PR number: the
    PR's squash merge) whose own tree holds the run's combined change, whole or nearly. The PR's
    commits reworked each other's lines, so alone the early ones look partial; the base may have
    changed the lines since (as after any pick); and a PR that merged main in was imported with
    main's commits between its own (``picked``: those git already finds, neutral in a run)."""
    found: list[Group] = []
    for member, c in enumerate(cands):
        if member in picked or not c.commit:
            continue
        for h in hints(history, c, set())[0][:3]:
            if not any(member in g.members and h in g.by for g in found):
                group = _named_run(repo, history, files, cands, _around(cands, picked, member, h, history), h, picked)
                found += [group] if group is not None else []
    return _disjoint(found)


def _around(
    cands: Sequence[Candidate], picked: AbstractSet[int], member: int, h: str, history: BaseRange
) -> list[tuple[int, int]]:
    """Spans of two or more patches holding ``member``, between patches git does not find yet,
    whose files are all ``h``'s, longest first."""
    own = history.files_of(h)
    lo, hi = max(0, member - _WIDEST), min(len(cands), member + _WIDEST)
    ends = [k for k in range(lo, hi) if k not in picked and cands[k].commit and set(cands[k].paths) <= own]
    if member not in ends:
        return []
    spans = [(i, j) for i in ends if i <= member for j in ends if j >= member and j > i and j - i < _WIDEST]
    return sorted(spans, key=lambda r: (r[0] - r[1], r[0]))[:_NAMED_TRIES]


def _named_run(
    repo: git.Repository,
    history: BaseRange,
    files: Files,
    cands: Sequence[Candidate],
    spans: list[tuple[int, int]],
    h: str,
    picked: AbstractSet[int],
) -> Group | None:
    """The longest span, one line of the fork's history, whose combined change ``h``'s own tree
    holds (nearly) on ``h``'s files, trimmed of end patches that were there before ``h``."""
    own = history.files_of(h)
    for i, j in spans:
        line = {cands[i].parent, *repo.rev_list(cands[j].commit, f"^{cands[i].parent}")}
        if not all(cands[k].parent in line or cands[k].sources[0] in line for k in range(i, j + 1)):
            continue  # not one line of history: no combined diff of their own
        whole = diff.parse(repo.diffs_of_commits([(cands[j].commit, cands[i].parent)])[cands[j].commit])
        changes = [fc for fc in whole if set(fc.paths) & own]
        mine = [k for k in range(i, j + 1) if k not in picked and set(cands[k].paths) <= own]
        there = contained_at(files, [(changes, h)])[0] if changes else None
        if there is None or not there.judged or _share(there) < NEARLY:
            continue
        members = _brought(repo, files, cands, mine, h)
        if len(members) < 2:
            continue
        share = _share(there)
        what = "every change" if share == 1.0 else f"{round(100 * share)}% of the changed lines"
        later = [c for c in history.touching(diff.paths_of(changes)) if history.newer(c, h)][:5]
        how = f"{h[:10]} names one of them, and its own tree has {what} of their combined diff" + (
            f"; since modified by {', '.join(c[:10] for c in later)}" if later else ""
        )
        return Group(members, [h], how)
    return None


def _share(c: Containment) -> float:
    """Share of the informative changed lines present (attribution aside)."""
    counted = c.counted
    total = sum(u.weight for u in counted) or len(counted)
    present = sum((u.weight or 1) for u in counted if u.present) if total else 0
    return present / total if total else 0.0


def _brought(repo: git.Repository, files: Files, cands: Sequence[Candidate], span: list[int], h: str) -> list[int]:
    """The members ``h`` took: some of its lines are in ``h``'s tree and were not in its parent's,
    or (between two such) what is there was there before, the rest is not, and a later member
    changed its files (the PR reworked them).
    The ends must be ``h``'s, the last nearly whole (no later member reworked it); [] else."""
    parents = repo.commit_infos([h])[0].parents
    at = contained_at(files, [(cands[k].changes, h) for k in span])
    before = contained_at(files, [(cands[k].changes, parents[0]) for k in span]) if parents else []
    took = {
        k
        for n, k in enumerate(span)
        if any(u.present and not (before and before[n].units[x].present) for x, u in enumerate(at[n].units))
    }
    if span[0] not in took or span[-1] not in took or _share(at[-1]) < NEARLY:
        return []
    reworked = {
        k
        for n, k in enumerate(span)
        if k not in took
        and not at[n].all_present
        and any(set(cands[k].paths) & set(cands[x].paths) for x in span[n + 1 :])
    }
    return [k for k in span if k in took or k in reworked]


def _disjoint(groups: list[Group]) -> list[Group]:
    """Longest first; a run overlapping one already kept is left out."""
    kept: list[Group] = []
    for g in sorted(groups, key=lambda g: -len(g.members)):
        if not any(set(g.members) & set(k.members) for k in kept):
            kept.append(g)
    return sorted(kept, key=lambda g: g.members[0])


def combined(*found: list[Group]) -> list[Group]:
    """Groups of several finders, no member in two."""
    return _disjoint([g for gs in found for g in gs])


# -- a PR branch squash-merged whole: its net change, against the squash's own tree ---------------


@dataclass
class _Line:
    """Consecutive patches of one branch's history (merges of the base, and of side branches whose
    commits are patches too, between them), from a commit on the base's history."""

    members: list[int]
    ends: list[int]  # the members every earlier member of the line is an ancestor of: where a net change ends
    bases: list[str]  # for each end: the newest base commit it has merged (its merge base with the base)


def branch_nets(
    repo: git.Repository,
    history: BaseRange,
    files: Files,
    cands: Sequence[Candidate],
    base: str,
    base_tree: str,
) -> list[Group]:
    """Runs upstream took as one commit after review: a PR branch (merges of main in it, review
    follow-ups reworking earlier commits' lines) squash-merged as S. Alone, its members look partial
    or conflict; their *net* change — the branch tip against the base it last merged — is S's own:
    the same patch-id, or every informative line of it in S's own tree, or at a place S wrote its own
    way (review adapted it). The longest such run from the line's start is represented by S; a later
    commit upstream never took stays out."""
    out = []
    for line in _lines(repo, history, cands, base):
        ends = line.ends
        nets = repo.diffs_of_pairs([(cands[k].commit, b) for k, b in zip(ends, line.bases, strict=True)])
        found = _exact_net(repo, history, cands, ends, nets) or _taken_net(
            repo, history, files, cands, ends, nets, base_tree
        )
        if found is not None:
            k, squash, how = found
            first = line.members[0]  # (its first commit is no end: the line's net change is never one commit)
            paths = [p for x in range(first, k + 1) for p in cands[x].paths]
            later = [c for c in history.touching(paths) if history.newer(c, squash)][:5]
            how += f"; since modified by {', '.join(c[:10] for c in later)}" if later else ""
            out.append(Group(list(range(first, k + 1)), [squash], how))
    return out


def _exact_net(
    repo: git.Repository, history: BaseRange, cands: Sequence[Candidate], ends: list[int], nets: list[bytes]
) -> tuple[int, str, str] | None:
    """The longest run whose net change has a range commit's patch-id (a squash merge as it was)."""
    ids = repo.patch_ids_of_diffs({cands[k].commit: d for k, d in zip(ends, nets, strict=True) if d})
    for k in reversed(ends):
        same = [c for c in history.with_patch_id(ids.get(cands[k].commit, "")) if not history.reverted(c)]
        if same:
            return (
                k,
                same[0],
                f"their net change (the branch against the base it last merged) is {same[0][:10]}'s patch-id",
            )
    return None


def _taken_net(
    repo: git.Repository,
    history: BaseRange,
    files: Files,
    cands: Sequence[Candidate],
    ends: list[int],
    nets: list[bytes],
    base_tree: str,
) -> tuple[int, str, str] | None:
    """The longest run whose net change one range commit S took after review: S brought at least
    half of its informative lines, and every one S's own tree lacks is at a place S wrote its own
    way. S is the commit that brought most of the whole line's net change into the base."""
    changes = [diff.parse(raw) for raw in nets]
    whole = changes[-1]
    content = contain(whole, _mine(files.entries(base_tree, diff.paths_of(whole)), whole), files)
    attribute([content], history, files)
    squash = next((c for c in content.commits if history.in_range(c)), None)
    if squash is None:
        return None
    parent = (repo.commit_infos([squash])[0].parents or [""])[0]
    touched = _touched(diff.parse(repo.diffs_of_commits([(squash, parent)])[squash])) if parent else {}
    there = contained_at(files, [(ch, squash) for ch in changes])
    before = contained_at(files, [(ch, parent) for ch in changes]) if parent else [None] * len(changes)
    took = _took(files, cands, ends, squash)
    listed = _lists_members(history, squash, [cands[k] for k in range(ends[0] - 1, ends[-1] + 1)])
    for n in reversed(range(len(ends))):
        if took[n] and _accounted(there[n], before[n], touched, files, 0.25 if listed else 0.5):
            how = (
                f"{squash[:10]} took their net change (the branch against the base it last merged): every "
                "line of it is in its own tree, or where it wrote its own way"
            )
            return ends[n], squash, how
    return None


def _took(files: Files, cands: Sequence[Candidate], ends: list[int], squash: str) -> list[bool]:
    """For each end of a run: has the squash some change of that member itself (a line it adds, or
    the removal it makes)? A run ends at a member the squash took, never at a commit upstream did not."""
    return [
        any(u.present and u.weight for u in there.units)
        for there in contained_at(files, [(cands[k].changes, squash) for k in ends])
    ]


def _touched(changes: list[diff.FileChange]) -> dict[str, list[tuple[int, int]]]:
    """path -> the [start, end) line ranges a commit wrote in its new file (a deletion: an empty range)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for fc in changes:
        spans = out.setdefault(fc.new_path or fc.old_path or "", [])
        for h in fc.hunks:
            new_start = int(h.header.split("+", 1)[1].split(",")[0].split(" ")[0] or 1)
            shift = new_start - 1 - (h.old_start - 1 if h.old_start else 0)
            for b in h.blocks:
                at = b.p0 + shift
                spans.append((at, at + len(b.added)))
                shift += len(b.added) - len(b.removed)
        if not fc.hunks:
            spans.append((0, 1 << 30))  # a whole-file change (added, deleted, binary): all of it
    return out


def _lists_members(history: BaseRange, squash: str, members: Sequence[Candidate]) -> bool:
    """Does the commit's message list a member's subject on a line of its own (GitHub's squash
    message: "* <subject>" for each commit of the PR)?"""
    lines = {normal_subject(line.lstrip("*- ").strip()) for line in history.messages.get(squash, "").splitlines()[1:]}
    return any(normal_subject(c.subject) in lines for c in members if normal_subject(c.subject))


def _accounted(
    there: Containment,
    before: Containment | None,
    touched: dict[str, list[tuple[int, int]]],
    files: Files,
    share: float = 0.5,
) -> bool:
    """Is a net change the commit's whole: some share of its informative lines brought by it (in its
    tree, not in its parent's; half, or a quarter where its message lists a member), and every missing
    one at a place it wrote?"""
    if not there.judged or not there.units:
        return False
    had = {(u.path, u.what, id(u.block)) for u in (before.units if before else []) if u.present}
    counted = there.counted
    total = sum(max(u.weight, 1) for u in counted)
    brought = sum(max(u.weight, 1) for u in counted if u.present and (u.path, u.what, id(u.block)) not in had)
    if brought < share * total:
        return False
    return all(u.present or _wrote_there(there, u, touched, files) for u in counted)


def _wrote_there(c: Containment, u: Unit, touched: dict[str, list[tuple[int, int]]], files: Files) -> bool:
    spans = touched.get(c.base_paths.get(u.path, u.path)) or touched.get(u.path)
    if not spans:
        return False
    blob, pre = c.base_blobs.get(u.path), c.pre_blobs.get(u.path)
    if u.block is None or blob is None or pre is None:
        return True  # a whole-file fact of a file the commit changed
    start, end = place(u.block, files.lines_when_read(pre), files.lines(blob), files.alignment(pre, blob))
    return any(a <= max(end, start + 1) and start <= b for a, b in spans)


def _lines(repo: git.Repository, history: BaseRange, cands: Sequence[Candidate], base: str) -> list[_Line]:
    """The runs of two or more consecutive patches of one branch (each earlier one an ancestor of
    a later end, by the commits they were imported from), the first on the base's history."""
    here = repo.read_commits(c.origin for c in cands if c.origin)  # (a clone without the fork's commits has none)
    origins = [c.origin if c.origin in here else "" for c in cands]
    if sum(bool(o) for o in origins) < 2:
        return []
    parents: dict[str, list[str]] = {}
    feed = repo.out("rev-list", "--topo-order", "--parents", *dict.fromkeys(o for o in origins if o), f"^{base}")
    for line in feed.splitlines():
        sha, *ps = line.split()
        parents[sha] = ps
    merged = _merged_bases(parents, history)
    ancestry = _Ancestry(parents)
    runs: list[_Line] = []
    k = 0
    while k < len(cands):
        o = origins[k]
        if o not in parents or any(p in parents for p in parents[o][:1]):
            k += 1  # in the base already, not in this clone, or not where a branch begins
            continue
        j, ends = _extent(origins, k, ancestry)
        if ends:
            runs.append(_Line(list(range(k, j + 1)), ends, [merged[origins[e]] for e in ends]))
        k = j + 1
    return [r for r in runs if all(r.bases)]


_SIDE = 64  # how far on a side branch's commit may sit before the member that merges it


def _extent(origins: list[str], k: int, ancestry: _Ancestry) -> tuple[int, list[int]]:
    """The last member of the line beginning at ``k``, and its ends (members every earlier member
    of the line is an ancestor of). A side branch's commit, merged by a later member, stays in."""
    j, ends = k, []
    for x in range(k + 1, len(origins)):
        if not origins[x]:
            break
        if {origins[y] for y in range(k, x)} <= ancestry.of(origins[x]):
            j = x
            ends.append(x)
        elif any(
            origins[x] in ancestry.of(origins[z]) for z in range(x + 1, min(len(origins), x + _SIDE)) if origins[z]
        ):
            j = x
        else:
            break  # on no later member's history either: another branch
    return j, ends


class _Ancestry:
    """The branch-only ancestors of a commit, itself included (the base's commits left out), each read once."""

    def __init__(self, parents: dict[str, list[str]]) -> None:
        self._parents = parents
        self._seen: dict[str, frozenset[str]] = {}

    def of(self, sha: str) -> frozenset[str]:
        if sha not in self._seen:
            found, todo = {sha}, [sha]
            while todo:
                for p in self._parents.get(todo.pop(), ()):
                    if p in self._parents and p not in found:
                        found.add(p)
                        todo.append(p)
            self._seen[sha] = frozenset(found)
        return self._seen[sha]


def _merged_bases(parents: dict[str, list[str]], history: BaseRange) -> dict[str, str]:
    """For each branch commit, the base commit it last merged (its merge base with the base), without
    a process a commit: of the base commits among its ancestors' parents, the newest in the range."""
    out: dict[str, str] = {}
    for sha in reversed(list(parents)):  # rev-list lists children first: parents come first here
        seen = [p if p not in parents else out[p] for p in parents[sha]]
        newest = ""
        for b in (b for b in seen if b):
            if not newest or history.newer(b, newest):
                newest = b
        out[sha] = newest
    return out
