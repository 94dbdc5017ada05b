"""The fork's own lines: what of a patch the base lacks at a place the base never touched.

A changed line missing from the base is one of two things. Either a range
commit changed that place since the merge base (the base rewrote it its own
way, or took it out), or the place is as the merge base had it, or in a file
the base never had: then the line is the fork's own. Only the first can ever
be accounted for; a patch with a line of the second kind is never
"represented", whatever names it (an adapted pick: the upstream fix plus the
fork's lines). Who changed a place is asked as attribution asks who brought
a line, in one search for every unit.
"""

from __future__ import annotations

from collections.abc import Sequence

from ggstack.check.attribution import attribute
from ggstack.check.containment import NO_FILE, UNREADABLE, Containment, Unit, carries, place
from ggstack.check.files import Files, find_run
from ggstack.check.history import BaseRange
from ggstack.diff import Block


def own_units(contents: Sequence[Containment], history: BaseRange, files: Files) -> list[list[Unit]]:
    """For each containment, its missing informative units whose place no range commit changed."""
    files.prepare_alignments(
        [(c.pre_blobs[p], c.base_blobs[p]) for c in contents for p in c.base_blobs if p in c.pre_blobs]
    )
    out: list[list[Unit]] = []
    probes: list[Containment] = []
    asked: list[list[tuple[Unit, list[Unit]]]] = []
    for c in contents:
        decided, pending = [], []
        for u in (u for u in c.counted if not u.present) if c.judged else ():
            found = _probes(c, u, history, files)
            if found is None:
                continue  # the base touched it (a file the range changed or deleted)
            if not found:
                decided.append(u)  # nothing changed at its place: own, no search needed
            else:
                pending.append((u, found))
        out.append(decided)
        asked.append(pending)
        probes.append(Containment([p for _, ps in pending for p in ps], c.base_paths, True, c.base_blobs))
    attribute(probes, history, files)
    for mine, pending in zip(out, asked, strict=True):
        mine += [u for u, ps in pending if not any(p.by for p in ps)]
    return out


def _probes(c: Containment, u: Unit, history: BaseRange, files: Files) -> list[Unit] | None:
    """What to ask of the range about ``u``'s place: [] (nothing: it is the fork's own), the
    lines there to attribute, or None (a range commit touched it, no search needed)."""
    base_path = c.base_paths.get(u.path)
    if u.reason == UNREADABLE:
        return None  # not compared: no claim either way (the Run says which file could not be read)
    if u.reason == NO_FILE or base_path is None:
        # A file the base lacks: the fork's own, unless the range deleted or moved it.
        return None if history.versions(u.path) or history.moved_to(u.path) else []
    if u.block is None:  # a whole-file fact (mode, rename, delete, binary): did the range change the file?
        return None if history.versions(base_path) else []
    blob = c.base_blobs.get(u.path)
    pre_blob = c.pre_blobs.get(u.path)
    if blob is None or pre_blob is None:
        return None
    base = files.lines(blob)
    start, end = place(u.block, files.lines_when_read(pre_blob), base, files.alignment(pre_blob, blob))
    there = base[start:end]
    found = []
    if any(carries(s) for s in there):
        found.append(Unit(u.path, u.what, 1, True, "", block=Block(start, added=there)))
    removed = [s for s in u.block.removed if carries(s)]
    if removed and find_run(there, u.block.removed, strip=True) is None:
        found.append(Unit(u.path, u.what, 1, True, "", block=Block(start, removed=u.block.removed)))
    return found


def describe(units: Sequence[Unit], limit: int = 5) -> list[str]:
    """The fork's own lines as a maintainer reads them: file, hunk, the first line it adds or removes."""
    out = []
    for u in units[:limit]:
        first = ""
        if u.block is not None:
            lines = [("+", s) for s in u.block.added if carries(s)] or [("-", s) for s in u.block.removed if carries(s)]
            first = f": {lines[0][0]}{lines[0][1].strip()[:60]}" if lines else ""
        out.append(f"{u.path} {u.what}{first}")
    if len(units) > limit:
        out.append(f"and {len(units) - limit} more")
    return out
