"""Code the base moved into another file: a function taken out of ``a.py`` into ``b.py``, while
``a.py`` stays.

git's rename detection pairs whole files only, so a fix to such a function is "not in the
base" where the patch left it. A block missing from its own file is looked for in the files
that a range commit changed together with it, and judged there; the history of its lines is
followed back through that commit into the file it left (as ``git blame -C`` follows lines
between the files of one commit). Such a block counts only when that history names the base
commit that brought it: the same lines merely somewhere else are no evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ggstack.check.attribution import attribute
from ggstack.check.containment import Containment, Unit, contain, informative
from ggstack.check.files import Files, is_text, is_zero
from ggstack.check.history import FileVersions, History
from ggstack.check.signals import Candidate
from ggstack.diff import FileChange
from ggstack.git import Repository

_CONTEXT = 3  # pre-image lines each side of a block that say where it was


@dataclass
class _Lost:
    """A file of a candidate whose blocks are all somewhere its own file in the tree is not."""

    content: Containment
    fc: FileChange
    units: list[Unit]  # its blocks whose added lines the tree's file does not have


def look_elsewhere(
    repo: Repository,
    history: History,
    files: Files,
    cands: Sequence[Candidate],
    contents: Sequence[Containment],
    tree: str,
) -> None:
    """For each candidate's blocks missing from their file in ``tree``: judged again in a file a
    range commit moved that file's code into; a block found there, and brought by a base
    commit, takes the missing one's place in its containment."""
    lost = [x for cand, content in zip(cands, contents, strict=True) for x in _lost(cand, content)]
    if not lost:
        return
    others = {x.fc.path: history.co_changed(x.fc.path) for x in lost}
    entries = files.entries(tree, list(dict.fromkeys(q for o in others.values() for _, fs in o for q, _, _ in fs)))
    files.prefetch([b for _, b in entries.values()])
    todo = [(x, q) for x in lost for q in _holding(x, others[x.fc.path], entries, files)]
    history.read_paths(repo, list(dict.fromkeys(q for _, q in todo)))
    judged = []
    for x, q in todo:
        mover = _mover(history, files, x, q)
        if mover is None:
            continue
        history.moved_code[(x.fc.path, q)] = mover
        there = contain([x.fc], {q: entries[q]}, files, moved={x.fc.path: q})
        for u in there.units:
            u.moved = (x.fc.path, q)
        judged.append((x, q, mover, there))
    attribute([there for *_, there in judged], history, files)
    for x, q, mover, there in judged:
        _take(x, q, mover, there)


def _lost(cand: Candidate, content: Containment) -> list[_Lost]:
    out = []
    for fc in cand.changes:
        if fc.old_path != fc.new_path or fc.path not in content.base_paths or fc.path in content.elsewhere:
            continue  # only a file changed in place, and there in the tree (a moved file is followed already)
        units = [
            u
            for u in content.units
            if u.path == fc.path and not u.present and u.block is not None and informative(u.block.added)
        ]
        if units:
            out.append(_Lost(content, fc, units))
    return out


def _holding(
    x: _Lost, others: list[tuple[str, FileVersions]], entries: dict[str, tuple[str, str]], files: Files
) -> list[str]:
    """The files changed with ``x``'s file whose tree version has every added line of one of its
    missing blocks."""
    out = []
    for q in dict.fromkeys(q for _, fs in others for q, _, _ in fs):
        if q not in entries or not is_text(files.blob(entries[q][1])):
            continue
        have = files.stripped(entries[q][1])
        if any(all(a.rstrip() in have for a in u.block.added) for u in x.units if u.block is not None):
            out.append(q)
    return out


def _mover(history: History, files: Files, x: _Lost, q: str) -> str | None:
    """The newest range commit that took lines of ``x``'s missing blocks (or the pre-image lines
    around them) out of its file and added them to ``q``: code already in ``q`` is not moved."""
    pre = files.lines(x.fc.old_blob)
    wanted = {
        s.rstrip()
        for u in x.units
        if u.block is not None
        for s in [*u.block.added, *pre[max(0, u.block.p0 - _CONTEXT) : u.block.p1 + _CONTEXT]]
        if any(c.isalnum() for c in s)
    }
    mine = {sha: (old, new) for sha, old, new in history.versions(x.fc.path)}
    theirs = {sha: (old, new) for sha, old, new in history.versions(q)}
    common = [sha for sha in mine if sha in theirs]
    files.prefetch([b for sha in common for b in (*mine[sha], *theirs[sha])])
    for sha in common:
        took = (wanted & _lines(files, mine[sha][0])) - _lines(files, mine[sha][1])
        if took & (_lines(files, theirs[sha][1]) - _lines(files, theirs[sha][0])):
            return sha
    return None


def _lines(files: Files, blob: str) -> set[str]:
    return files.stripped(blob) if not is_zero(blob) else set()


def _take(x: _Lost, q: str, mover: str, there: Containment) -> None:
    """The blocks found in ``q`` and brought by a base commit replace the missing ones."""
    found = {id(u.block): u for u in there.units if u.earned and u.block is not None}
    missing = {id(u) for u in x.units}
    units = x.content.units
    for k, u in enumerate(units):
        v = found.get(id(u.block)) if id(u) in missing else None
        if v is not None:
            v.reason = f"{v.reason} of {q} (the base moved it there from {x.fc.path} in {mover[:10]})"
            units[k] = v
            x.content.elsewhere[x.fc.path] = q
