"""Code moved between files that both stay (git pairs whole files only): a block missing from ``a.py`` is judged again
where the base moved it, counting where ``blame -C`` names who brought it; the converse for a module the fork split."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ggstack.check.attribution import attribute
from ggstack.check.containment import NO_FILE, Containment, TreeEntries, Unit, carries, contain, informative
from ggstack.check.files import Files, is_text, is_zero
from ggstack.check.history import BaseRange, FileVersions
from ggstack.check.signals import Candidate
from ggstack.diff import Block, FileChange
from ggstack.git import Repository

_CONTEXT = 3  # pre-image lines each side of a block that say where it was
_SWEEP = 50  # a commit changing more files than this moved no function
_SCAN = 64  # versions read in turn where bisection cannot find the move


@dataclass
class _Lost:
    content: Containment
    fc: FileChange
    unit: Unit  # the block, its added lines not in the tree's file
    block: Block


def look_elsewhere(
    repo: Repository,
    history: BaseRange,
    files: Files,
    cands: Sequence[Candidate],
    contents: Sequence[Containment],
    tree: str,
) -> None:
    lost = _lost_in_place(history, files, tree, cands, contents)
    movers = {id(x): m for x in lost if (m := _mover(history, files, x)) is not None}
    if not movers:
        return
    _read_what_movers_wrote(history, files, movers.values())
    into = {id(x): _into(history, files, x, movers[id(x)]) for x in lost if id(x) in movers}
    todo, judged = _judge_in(repo, history, files, tree, lost, into)
    for x, q in todo:
        history.moved_code.setdefault((x.fc.path, q), movers[id(x)])
    _attribute_through_move(history, files, judged)
    for x, q in todo:
        _take(x, q, history.moved_code[(x.fc.path, q)], judged[(id(x.content), x.fc.path, q)])


def _lost_in_place(
    history: BaseRange, files: Files, tree: str, cands: Sequence[Candidate], contents: Sequence[Containment]
) -> list[_Lost]:
    lost = [x for c, k in zip(cands, contents, strict=True) for x in _lost(c, k)]
    return _held_elsewhere(files, tree, lost, {p: _changed_with(history, p) for p in {x.fc.path for x in lost}})


def _attribute_through_move(history: BaseRange, files: Files, judged: _JudgedThere) -> None:
    for (_, path, q), there in judged.items():
        for u in there.units:
            u.moved = (path, q)  # its lines' history runs through the move
    attribute(list(judged.values()), history, files)


_JudgedThere = dict[tuple[int, str, str], Containment]  # (containment, patch's file, other file) -> judged there


def _judge_in(
    repo: Repository, history: BaseRange, files: Files, tree: str, lost: Sequence[_Lost], places: dict[int, list[str]]
) -> tuple[list[tuple[_Lost, str]], _JudgedThere]:
    entries = files.entries(tree, list(dict.fromkeys(q for qs in places.values() for q in qs)))
    files.prefetch([b for _, b in entries.values()])
    todo = [(x, q) for x in lost for q in places.get(id(x), []) if q in entries and _holds(x, entries[q][1], files)]
    history.read_paths(repo, list(dict.fromkeys(q for _, q in todo)))
    return todo, _judged_there(files, entries, todo)


def _judged_there(files: Files, entries: TreeEntries, todo: list[tuple[_Lost, str]]) -> _JudgedThere:
    judged: _JudgedThere = {}
    for x, q in todo:
        k = (id(x.content), x.fc.path, q)
        if k not in judged:
            judged[k] = contain([x.fc], {q: entries[q]}, files, moved={x.fc.path: q})
    return judged


def _held_elsewhere(files: Files, tree: str, lost: list[_Lost], near: dict[str, set[str]]) -> list[_Lost]:
    """Only blocks a nearby file holds whole get a bisection (sqlalchemy rel_1_4: 297 of 3,401 lost)."""
    if not lost:
        return []
    entries = files.entries(tree, sorted(set().union(*near.values())))
    anchors = {id(x): max((a.rstrip() for a in x.block.added), key=len) for x in lost}  # its rarest line
    paths_of = _paths_by_blob(entries)
    blobs = files.holders(list(paths_of), set(anchors.values()))
    holding = {line: set().union(*(paths_of[b] for b in bs)) for line, bs in blobs.items()}
    return [
        x
        for x in lost
        if any(_holds(x, entries[q][1], files) for q in holding.get(anchors[id(x)], set()) & near[x.fc.path])
    ]


def _paths_by_blob(entries: TreeEntries) -> dict[str, set[str]]:
    paths_of: dict[str, set[str]] = {}
    for q, (_, blob) in entries.items():
        paths_of.setdefault(blob, set()).add(q)
    return paths_of


def _changed_with(history: BaseRange, path: str) -> set[str]:
    out: set[str] = set()
    for sha, _, _ in history.versions(path):
        changed = history.files_changed(sha)
        if 1 < len(changed) <= _SWEEP:
            out.update(q for q, _, _ in changed)
    out.discard(path)
    return out


def _read_what_movers_wrote(history: BaseRange, files: Files, movers: Iterable[str]) -> None:
    changed = [history.files_changed(m) for m in dict.fromkeys(movers)]
    files.prefetch([new for fs in changed if len(fs) <= _SWEEP for _, _, new in fs])


def _lost(cand: Candidate, content: Containment) -> list[_Lost]:
    by_path: dict[str, list[Unit]] = {}
    for u in content.units:
        by_path.setdefault(u.path, []).append(u)
    out = []
    for fc in cand.changes:
        if fc.old_path != fc.new_path or fc.path not in content.base_paths or fc.path in content.elsewhere:
            continue  # only a file changed in place, and there in the tree (a moved file is followed already)
        # (Its removed lines still there: not moved.)
        units = [u for u in by_path.get(fc.path, []) if u.reason.startswith("its added lines are not in the base")]
        out += _missing(content, fc, units)
    return out


def _missing(content: Containment, fc: FileChange, units: Iterable[Unit]) -> list[_Lost]:
    return [
        _Lost(content, fc, u, u.block)
        for u in units
        if not u.present and u.block is not None and informative(u.block.added)
    ]


def _wanted(x: _Lost, files: Files) -> set[str]:
    around = files.line_slice(x.fc.old_blob, max(0, x.block.p0 - _CONTEXT), x.block.p1 + _CONTEXT)
    return {s.rstrip() for s in [*x.block.added, *around] if carries(s)}


def _places(x: _Lost, files: Files) -> list[list[str]]:
    # With its added lines too: upstream may have taken the change before it moved the code.
    lo = max(0, x.block.p0 - _CONTEXT)
    span = files.line_slice(x.fc.old_blob, lo, x.block.p1 + _CONTEXT)  # a few lines of a file of any size
    before, after = span[: x.block.p0 - lo], span[x.block.p1 - lo :]
    runs = [[*before, *x.block.removed, *after], [*before, *x.block.added, *after]]
    return [run for run in runs if informative(run) >= 2]


def _mover(history: BaseRange, files: Files, x: _Lost) -> str | None:
    """The range commit that took the block's place out of its file, bisected along the file's own
    line of history, then the range's log (which interleaves branches)."""
    places = _places(x, files)
    versions = history.versions(x.fc.path)
    if not places or not versions:
        return None
    had = _has_place(files, places)
    if had(versions[0][2]):
        return None
    for line in (_lineage(versions), versions):
        if had(line[-1][1]):
            # The newest version whose old blob had the place (the oldest one's had it).
            at = bisect.bisect_left(line, True, 0, len(line) - 1, key=lambda v: had(v[1]))
            if not had(line[at][2]):
                return line[at][0]
    return _scan(history, versions, had)


_Versions = list[tuple[str, str, str]]  # (commit, old blob, new blob), newest first


def _has_place(files: Files, places: list[list[str]]) -> Callable[[str], bool]:
    @functools.cache  # a version's old blob is often the next one's new: asked once
    def had(blob: str) -> bool:
        return any(files.holds(blob, run, strip=True) for run in places)

    return had


def _scan(history: BaseRange, versions: _Versions, had: Callable[[str], bool]) -> str | None:
    movers = [v for v in versions[:_SCAN] if 1 < len(history.files_changed(v[0])) <= _SWEEP]  # a move is two files
    return next((sha for sha, old, new in movers if had(old) and not had(new)), None)


def _lineage(versions: _Versions) -> _Versions:
    # Each the commit that wrote its successor's old blob; it ends where a merge wrote one.
    if not versions:
        return []
    wrote = {v[2]: v for v in reversed(versions)}  # the newest writer of a blob wins
    out, seen = [versions[0]], {versions[0][0]}
    while (prior := wrote.get(out[-1][1])) is not None and prior[0] not in seen:
        out.append(prior)
        seen.add(prior[0])
    return out


def _into(history: BaseRange, files: Files, x: _Lost, mover: str) -> list[str]:
    wanted = _wanted(x, files)
    mine = next(((old, new) for sha, old, new in history.versions(x.fc.path) if sha == mover), None)
    if mine is None:
        return []
    took = _taken_out(files, wanted, *mine)
    changed = history.files_changed(mover)
    if len(changed) > _SWEEP:
        return []  # a sweep over the tree (a reformat, a rename of an API), not a move
    return [q for q, old, new in changed if q != x.fc.path and not is_zero(new) and _brought_any(files, old, new, took)]


def _taken_out(files: Files, lines: set[str], old: str, new: str) -> set[str]:
    # Asked of the bytes, a line at a time: a mover's files are mostly read for these few lines only.
    return {w for w in lines if files.holds(old, [w], strip=True) and not files.holds(new, [w], strip=True)}


def _brought_any(files: Files, old: str, new: str, lines: set[str]) -> bool:
    return any(_brought(files, old, new, t) for t in lines)


def _brought(files: Files, old: str, new: str, line: str) -> bool:
    return files.holds(new, [line], strip=True) and (is_zero(old) or not files.holds(old, [line], strip=True))


def _holds(x: _Lost, blob: str, files: Files) -> bool:
    if not is_text(files.blob(blob)):
        return False
    have = files.stripped(blob)
    return all(a.rstrip() in have for a in x.block.added)


def _take(x: _Lost, q: str, mover: str, there: Containment) -> None:
    v = next((u for u in there.units if u.block is x.block and u.earned), None)
    units = x.content.units
    k = next((k for k, u in enumerate(units) if u is x.unit), None)
    if v is not None and k is not None:
        v.reason = f"{v.reason} of {q} (the base moved it there from {x.fc.path} in {mover[:10]})"
        units[k] = v
        x.content.elsewhere[x.fc.path] = q


# -- code the candidate's side moved into a new file ------------------------------------------


def look_where_it_came_from(
    repo: Repository,
    history: BaseRange,
    files: Files,
    cands: Sequence[Candidate],
    contents: Sequence[Containment],
    tree: str,
) -> None:
    """A block in a file the base never had, judged again where the fork's side took its code from."""
    lost = [(c, x) for c, content in zip(cands, contents, strict=True) for x in _lost_split(history, c, content)]
    if not lost or not history.tips:
        return
    adders = _adders(repo, history, lost)
    held = _held_elsewhere(files, tree, [x for _, x in lost if x.fc.path in adders], _older_files(adders))
    todo, judged = _judge_in(repo, history, files, tree, held, _sources(files, held, adders))
    attribute(list(judged.values()), history, files)
    for x, q in todo:
        _take_from(x, q, judged[(id(x.content), x.fc.path, q)])


def _older_files(adders: dict[str, FileVersions]) -> dict[str, set[str]]:
    return {p: {q for q, old, _ in fs if q != p and not is_zero(old)} for p, fs in adders.items()}


def _sources(files: Files, held: list[_Lost], adders: dict[str, FileVersions]) -> dict[int, list[str]]:
    files.prefetch([old for x in held for _, old, _ in adders[x.fc.path]])
    return {id(x): _came_from(files, x, adders[x.fc.path]) for x in held}


def _adders(repo: Repository, history: BaseRange, lost: Sequence[tuple[Candidate, _Lost]]) -> dict[str, FileVersions]:
    wanted = list(dict.fromkeys(c.parent for c, _ in lost if c.parent))
    parents = [p for p, ok in repo.has_objects(wanted).items() if ok]
    paths = list(dict.fromkeys(x.fc.path for _, x in lost))
    log = repo.log_raw(parents, history.tips[:1], paths) if parents else []
    return {p: fs for p in paths if (fs := _added_by(log, p)) is not None}


def _take_from(x: _Lost, q: str, there: Containment) -> None:
    v = next((u for u in there.units if u.block is x.block and u.earned), None)
    k = next((k for k, u in enumerate(x.content.units) if u is x.unit), None)
    if v is not None and k is not None:
        v.reason = f"{v.reason} of {q} (its own side moved that code from {q} into {x.fc.path})"
        x.content.units[k] = v
        x.content.came_from[x.fc.path] = q


def _lost_split(history: BaseRange, cand: Candidate, content: Containment) -> list[_Lost]:
    out = []
    for fc in cand.changes:
        if _made_on_its_side(history, content, fc):
            out += _missing(content, fc, [u for u in content.units if u.path == fc.path and u.reason == NO_FILE])
    return out


def _made_on_its_side(history: BaseRange, content: Containment, fc: FileChange) -> bool:
    return (
        fc.old_path == fc.new_path
        and fc.path not in content.base_paths
        and not history.versions(fc.path)
        and not history.moved_to(fc.path)
    )


def _added_by(log: list[tuple[str, FileVersions]], path: str) -> FileVersions | None:
    return next((fs for _, fs in reversed(log) if any(p == path and is_zero(old) for p, old, _ in fs)), None)


def _came_from(files: Files, x: _Lost, adder: FileVersions) -> list[str]:
    places = _places(x, files)
    return [
        q
        for q, old, _ in adder
        if q != x.fc.path and not is_zero(old) and any(files.holds(old, run, strip=True) for run in places)
    ]
