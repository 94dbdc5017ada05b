"""Runs of consecutive carry patches the base has together (a squash, or in a bigger commit): alone each conflicts or
looks partial. Found from the base side (a squash changes exactly the run's files): cost near linear in the stack."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ggstack import diff, git
from ggstack.check.attribution import attribute
from ggstack.check.containment import Containment, contain, contained_at, entries_of
from ggstack.check.files import Files
from ggstack.check.history import BaseRange
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
    shas = list(dict.fromkeys(x for c in cands for x in (c.commit, c.parent)))
    return {i.sha: i.tree for i in repo.commit_infos(shas)}


def chained(cands: Sequence[Candidate], trees: dict[str, str]) -> list[list[int]]:
    """Maximal runs each on the one before; a patch whose parent this clone lacks is in none."""
    runs: list[list[int]] = []
    for k in range(len(cands)):
        if runs and k > 0 and _on_previous(cands, trees, k):
            runs[-1].append(k)
        else:
            runs.append([k])
    return [r for r in runs if len(r) > 1]


def _on_previous(cands: Sequence[Candidate], trees: dict[str, str], k: int) -> bool:
    c = cands[k]
    tree = trees.get(c.parent) if c.commit and c.parent else None
    return tree is not None and tree == trees.get(cands[k - 1].commit)


def squashes(
    repo: git.Repository, history: BaseRange, cands: Sequence[Candidate], runs: list[list[int]], trees: dict[str, str]
) -> list[Group]:
    wanted = {(i, j): commits for run in runs for i, j, commits in _same_files(history, cands, run)}
    if not wanted:
        return []
    scratch = repo.hash_commits(
        [(trees[cands[j].commit], [cands[i].parent], f"ggstack run {i}..{j}\n") for i, j in wanted]
    )
    history.add_patch_ids(repo, [(s, None) for s in scratch], in_range=False)
    history.add_patch_ids(repo, [(c, None) for cs in wanted.values() for c in cs], in_range=True)
    groups: list[Group] = []
    for ((i, j), commits), sha in zip(wanted.items(), scratch, strict=True):
        same = _same_patch_id(history, commits, sha)
        if same:
            groups.append(Group(list(range(i, j + 1)), same, f"their combined patch-id is {same[0][:10]}'s"))
    return _maximal(groups)


def _same_patch_id(history: BaseRange, commits: list[str], sha: str) -> list[str]:
    pid = history.patch_ids.get(sha, "")
    return [c for c in commits if pid and history.patch_ids.get(c) == pid and not history.reverted(c)]


def _same_files(history: BaseRange, cands: Sequence[Candidate], run: list[int]) -> list[tuple[int, int, list[str]]]:
    """Sub-runs whose files can be exactly some base commit's: all they touch, or fewer by files
    a later member put back (a squash does not touch a file review undid)."""
    out = []
    for a, i in enumerate(run):
        union: set[str] = set()
        again: set[str] = set()  # touched by two members or more: maybe put back
        for j in run[a : a + _LONGEST]:
            again |= union & set(cands[j].paths)
            union |= set(cands[j].paths)
            commits = [c for files in _without_some(union, again) for c in history.changing_exactly(files)]
            if commits and j > i:
                out.append((i, j, list(dict.fromkeys(commits))))
    return out


_PUT_BACK = 3  # files of a run tried as put back (each subset of them: 2**3 lookups at most)


def _without_some(union: set[str], again: set[str]) -> list[frozenset[str]]:
    maybe = sorted(again)[:_PUT_BACK]
    out = [frozenset(union)]
    for mask in range(1, 2 ** len(maybe)):
        dropped = {p for k, p in enumerate(maybe) if mask >> k & 1}
        if union - dropped:
            out.append(frozenset(union - dropped))
    return out


def _maximal(groups: list[Group]) -> list[Group]:
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
    """Runs whose every informative line base commits brought (squashed with other work), longest first."""
    tries = {k: _runs_longest_first(seg)[:_TRIES] for k, seg in enumerate(segments)}
    measured = _measured(repo, history, cands, list(tries.values()), base_tree, files)
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


def _measured(
    repo: git.Repository,
    history: BaseRange,
    cands: Sequence[Candidate],
    tries: list[list[tuple[int, int]]],
    base_tree: str,
    files: Files,
) -> dict[tuple[int, int], Containment]:
    # Two batches (each segment's longest run, then the rest where it settled nothing): hundreds of tries, a few processes.
    measured = _contained(repo, history, cands, [t[0] for t in tries if t], base_tree, files)
    unsettled = [run for t in tries if t and not _earned(measured[t[0]]) for run in t[1:]]
    measured.update(_contained(repo, history, cands, unsettled, base_tree, files))
    return measured


def _rework_each_other(cands: Sequence[Candidate], i: int, j: int) -> bool:
    """Two backports side by side, never touching each other's files, are not one squash."""
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
    combined = repo.diffs_of_pairs([(cands[j].commit, cands[i].parent) for i, j in runs])
    changes = [diff.parse(raw) for raw in combined]
    entries = files.entries(base_tree, list(dict.fromkeys(p for ch in changes for p in diff.paths_of(ch))))
    files.prefetch([fc.old_blob for ch in changes for fc in ch] + [b for _, b in entries.values()])
    out = {
        run: contain(ch, entries_of(entries, diff.paths_of(ch)), files) for run, ch in zip(runs, changes, strict=True)
    }
    attribute(list(out.values()), history, files)
    return out


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
    """Runs taken by the base commit naming one of them (the PR's squash merge), nearly whole.
    ``picked``: patches git already finds (main's commits merged into a PR), neutral in a run."""
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
    own = history.files_of(h)
    lo, hi = max(0, member - _WIDEST), min(len(cands), member + _WIDEST)
    ends = [k for k in range(lo, hi) if k not in picked and cands[k].commit and set(cands[k].paths) <= own]
    return _spans(ends, member) if member in ends else []


def _spans(ends: list[int], member: int) -> list[tuple[int, int]]:
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
    """The longest span ``h``'s tree nearly holds, trimmed of end patches there before ``h``."""
    own = history.files_of(h)
    for i, j in spans:
        if not _one_line(repo, cands, i, j):
            continue  # no combined diff of their own
        changes = _combined_on(repo, cands, i, j, own)
        there = _nearly_held(files, changes, h)
        if there is None:
            continue
        mine = [k for k in range(i, j + 1) if k not in picked and set(cands[k].paths) <= own]
        members = _brought(repo, files, cands, mine, h)
        if len(members) >= 2:
            return Group(members, [h], _named_how(history, h, there, changes))
    return None


def _one_line(repo: git.Repository, cands: Sequence[Candidate], i: int, j: int) -> bool:
    line = {cands[i].parent, *repo.rev_list(cands[j].commit, f"^{cands[i].parent}")}
    return all(cands[k].parent in line or cands[k].sources[0] in line for k in range(i, j + 1))


def _combined_on(
    repo: git.Repository, cands: Sequence[Candidate], i: int, j: int, own: AbstractSet[str]
) -> list[diff.FileChange]:
    whole = diff.parse(repo.diffs_of_commits([(cands[j].commit, cands[i].parent)])[cands[j].commit])
    return [fc for fc in whole if set(fc.paths) & own]


def _nearly_held(files: Files, changes: list[diff.FileChange], h: str) -> Containment | None:
    there = contained_at(files, [(changes, h)])[0] if changes else None
    if there is None or not there.judged or _share(there) < NEARLY:
        return None
    return there


def _named_how(history: BaseRange, h: str, there: Containment, changes: list[diff.FileChange]) -> str:
    share = _share(there)
    what = "every change" if share == 1.0 else f"{round(100 * share)}% of the changed lines"
    how = f"{h[:10]} names one of them, and its own tree has {what} of their combined diff"
    return how + since_modified(history, h, diff.paths_of(changes))


def since_modified(history: BaseRange, commit: str, paths: list[str]) -> str:
    later = [c for c in history.touching(paths) if history.newer(c, commit)][:5]
    return f"; since modified by {', '.join(c[:10] for c in later)}" if later else ""


def _share(c: Containment) -> float:
    counted = c.counted
    total = sum(u.weight for u in counted) or len(counted)
    present = sum((u.weight or 1) for u in counted if u.present) if total else 0
    return present / total if total else 0.0


def _brought(repo: git.Repository, files: Files, cands: Sequence[Candidate], span: list[int], h: str) -> list[int]:
    """The members ``h`` took and, between them, those the PR reworked; [] unless both ends are
    ``h``'s and the last nearly whole."""
    at, before = _at_and_before(repo, files, cands, span, h)
    took = {k for k, now, then in zip(span, at, before, strict=True) if _took_some(now, then)}
    if span[0] not in took or span[-1] not in took or _share(at[-1]) < NEARLY:
        return []
    reworked = _reworked(cands, span, took, at)
    return [k for k in span if k in took or k in reworked]


def _at_and_before(
    repo: git.Repository, files: Files, cands: Sequence[Candidate], span: list[int], h: str
) -> tuple[list[Containment], list[Containment | None]]:
    parents = repo.commit_infos([h])[0].parents
    at = contained_at(files, [(cands[k].changes, h) for k in span])
    if not parents:
        return at, [None] * len(span)
    return at, list(contained_at(files, [(cands[k].changes, parents[0]) for k in span]))


def _took_some(now: Containment, then: Containment | None) -> bool:
    return any(u.present and not (then and then.units[x].present) for x, u in enumerate(now.units))


def _reworked(cands: Sequence[Candidate], span: list[int], took: set[int], at: list[Containment]) -> set[int]:
    return {
        k
        for n, k in enumerate(span)
        if k not in took
        and not at[n].all_present
        and any(set(cands[k].paths) & set(cands[x].paths) for x in span[n + 1 :])
    }


def _disjoint(groups: list[Group]) -> list[Group]:
    kept: list[Group] = []
    for g in sorted(groups, key=lambda g: -len(g.members)):
        if not any(set(g.members) & set(k.members) for k in kept):
            kept.append(g)
    return sorted(kept, key=lambda g: g.members[0])


def combined(*found: list[Group]) -> list[Group]:
    return _disjoint([g for gs in found for g in gs])
