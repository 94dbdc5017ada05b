"""A PR branch the base took as one squash after review (main merged in, follow-ups reworking
lines): its net change, the tip against the base it last merged, is the squash's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ggstack import diff, git
from ggstack.check.attribution import attribute
from ggstack.check.containment import Containment, Unit, contain, contained_at, entries_of, place
from ggstack.check.files import Files
from ggstack.check.groups import Group, since_modified
from ggstack.check.history import BaseRange, normal_subject
from ggstack.check.signals import Candidate


@dataclass
class _Line:
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
    """The longest run from a branch's start whose net change is one range commit's own (review
    may have adapted it); a later commit upstream never took stays out."""
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
            out.append(Group(list(range(first, k + 1)), [squash], how + since_modified(history, squash, paths)))
    return out


def _exact_net(
    repo: git.Repository, history: BaseRange, cands: Sequence[Candidate], ends: list[int], nets: list[bytes]
) -> tuple[int, str, str] | None:
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
    """Review adapted the squash: it brought half the lines, and wrote its own way where the rest are."""
    changes = [diff.parse(raw) for raw in nets]
    squash = _the_squash(history, files, changes[-1], base_tree)
    if squash is None:
        return None
    there, before, touched = _in_squash(repo, files, changes, squash)
    took = _took(files, cands, ends, squash)
    listed = _lists_members(history, squash, [cands[k] for k in range(ends[0] - 1, ends[-1] + 1)])
    share = 0.25 if listed else 0.5
    for n in reversed(range(len(ends))):
        if took[n] and _accounted(there[n], before[n], touched, files, share):
            how = (
                f"{squash[:10]} took their net change (the branch against the base it last merged): every "
                "line of it is in its own tree, or where it wrote its own way"
            )
            return ends[n], squash, how
    return None


def _the_squash(history: BaseRange, files: Files, whole: list[diff.FileChange], base_tree: str) -> str | None:
    paths = diff.paths_of(whole)
    content = contain(whole, entries_of(files.entries(base_tree, paths), paths), files)
    attribute([content], history, files)
    return next((c for c in content.commits if history.in_range(c)), None)


def _in_squash(
    repo: git.Repository, files: Files, changes: list[list[diff.FileChange]], squash: str
) -> tuple[list[Containment], list[Containment | None], dict[str, list[tuple[int, int]]]]:
    parent = (repo.commit_infos([squash])[0].parents or [""])[0]
    touched = _touched(diff.parse(repo.diffs_of_commits([(squash, parent)])[squash])) if parent else {}
    there = contained_at(files, [(ch, squash) for ch in changes])
    before: list[Containment | None] = [None] * len(changes)
    if parent:
        before = list(contained_at(files, [(ch, parent) for ch in changes]))
    return there, before, touched


def _took(files: Files, cands: Sequence[Candidate], ends: list[int], squash: str) -> list[bool]:
    # A run ends at a member the squash took, never at a commit upstream did not.
    return [
        any(u.present and u.weight for u in there.units)
        for there in contained_at(files, [(cands[k].changes, squash) for k in ends])
    ]


def _touched(changes: list[diff.FileChange]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for fc in changes:
        spans = out.setdefault(fc.new_path or fc.old_path or "", [])
        for h in fc.hunks:
            spans += _written(h)
        if not fc.hunks:
            spans.append((0, 1 << 30))  # a whole-file change (added, deleted, binary): all of it
    return out


def _written(h: diff.Hunk) -> list[tuple[int, int]]:
    """The [start, end) line ranges a hunk's blocks wrote in the new file."""
    new_start = int(h.header.split("+", 1)[1].split(",")[0].split(" ")[0] or 1)
    shift = new_start - 1 - (h.old_start - 1 if h.old_start else 0)
    spans = []
    for b in h.blocks:
        at = b.p0 + shift
        spans.append((at, at + len(b.added)))
        shift += len(b.added) - len(b.removed)
    return spans


def _lists_members(history: BaseRange, squash: str, members: Sequence[Candidate]) -> bool:
    """GitHub's squash message lists "* <subject>" for each commit of the PR."""
    lines = {normal_subject(line.lstrip("*- ").strip()) for line in history.messages.get(squash, "").splitlines()[1:]}
    return any(normal_subject(c.subject) in lines for c in members if normal_subject(c.subject))


def _accounted(
    there: Containment,
    before: Containment | None,
    touched: dict[str, list[tuple[int, int]]],
    files: Files,
    share: float = 0.5,
) -> bool:
    if not there.judged or not there.units:
        return False
    brought, total = _brought_lines(there, before)
    if brought < share * total:
        return False
    return all(u.present or _wrote_there(there, u, touched, files) for u in there.counted)


def _brought_lines(there: Containment, before: Containment | None) -> tuple[int, int]:
    had = {(u.path, u.what, id(u.block)) for u in (before.units if before else []) if u.present}
    counted = there.counted
    total = sum(max(u.weight, 1) for u in counted)
    brought = sum(max(u.weight, 1) for u in counted if u.present and (u.path, u.what, id(u.block)) not in had)
    return brought, total


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
    origins = _origins(repo, cands)
    if sum(bool(o) for o in origins) < 2:
        return []
    parents = _branch_parents(repo, origins, base)
    merged = _merged_bases(parents, history)
    ancestry = _Ancestry(parents)
    runs: list[_Line] = []
    k = 0
    while k < len(cands):
        if not _begins_branch(origins[k], parents):
            k += 1  # in the base already, not in this clone, or not where a branch begins
            continue
        j, ends = _extent(origins, k, ancestry)
        if ends:
            runs.append(_Line(list(range(k, j + 1)), ends, [merged[origins[e]] for e in ends]))
        k = j + 1
    return [r for r in runs if all(r.bases)]


def _origins(repo: git.Repository, cands: Sequence[Candidate]) -> list[str]:
    here = repo.read_commits(c.origin for c in cands if c.origin)
    return [c.origin if c.origin in here else "" for c in cands]


def _branch_parents(repo: git.Repository, origins: list[str], base: str) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    feed = repo.out("rev-list", "--topo-order", "--parents", *dict.fromkeys(o for o in origins if o), f"^{base}")
    for line in feed.splitlines():
        sha, *ps = line.split()
        parents[sha] = ps
    return parents


def _begins_branch(origin: str, parents: dict[str, list[str]]) -> bool:
    return origin in parents and not any(p in parents for p in parents[origin][:1])


_SIDE = 64  # how far on a side branch's commit may sit before the member that merges it


def _extent(origins: list[str], k: int, ancestry: _Ancestry) -> tuple[int, list[int]]:
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
    """Each branch commit's merge base with the base, without a process a commit."""
    out: dict[str, str] = {}
    for sha in reversed(list(parents)):  # rev-list lists children first: parents come first here
        out[sha] = _newest([p if p not in parents else out[p] for p in parents[sha]], history)
    return out


def _newest(bases: list[str], history: BaseRange) -> str:
    newest = ""
    for b in (b for b in bases if b):
        if not newest or history.newer(b, newest):
            newest = b
    return newest
