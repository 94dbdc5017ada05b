"""The fork's own lines: what the base lacks at a place no range commit changed (one it changed may
be the base's own way of it). A patch with one is never "represented", whatever names it."""

from __future__ import annotations

from collections.abc import Sequence

from ggstack.check.attribution import attribute
from ggstack.check.containment import NO_FILE, UNREADABLE, Containment, Unit, carries, place
from ggstack.check.files import Files, find_run
from ggstack.check.history import BaseRange
from ggstack.diff import Block


def own_units(contents: Sequence[Containment], history: BaseRange, files: Files) -> list[list[Unit]]:
    files.prepare_alignments(_pairs(contents))
    out: list[list[Unit]] = []
    probes: list[Containment] = []
    asked: list[list[tuple[Unit, list[Unit]]]] = []
    for c in contents:
        decided, pending = _own_or_asked(c, history, files)
        out.append(decided)
        asked.append(pending)
        probes.append(Containment([p for _, ps in pending for p in ps], c.base_paths, True, c.base_blobs))
    attribute(probes, history, files)
    for mine, pending in zip(out, asked, strict=True):
        mine += [u for u, ps in pending if not any(p.by for p in ps)]
    return out


def _pairs(contents: Sequence[Containment]) -> list[tuple[str, str]]:
    return [(c.pre_blobs[p], c.base_blobs[p]) for c in contents for p in c.base_blobs if p in c.pre_blobs]


def _own_or_asked(c: Containment, history: BaseRange, files: Files) -> tuple[list[Unit], list[tuple[Unit, list[Unit]]]]:
    decided, pending = [], []
    for u in (u for u in c.counted if not u.present) if c.judged else ():
        found = _probes(c, u, history, files)
        if found is None:
            continue  # the base touched it (a file the range changed or deleted)
        if not found:
            decided.append(u)
        else:
            pending.append((u, found))
    return decided, pending


def _probes(c: Containment, u: Unit, history: BaseRange, files: Files) -> list[Unit] | None:
    """[]: nothing to ask, it is the fork's own; None: a range commit touched it, no search needed."""
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
    return _at_its_place(u, u.block, blob, pre_blob, files)


def _at_its_place(u: Unit, block: Block, blob: str, pre_blob: str, files: Files) -> list[Unit]:
    base = files.lines(blob)
    start, end = place(block, files.lines_when_read(pre_blob), base, files.alignment(pre_blob, blob))
    there = base[start:end]
    found = []
    if any(carries(s) for s in there):
        found.append(Unit(u.path, u.what, 1, True, "", block=Block(start, added=there)))
    removed = [s for s in block.removed if carries(s)]
    if removed and find_run(there, block.removed, strip=True) is None:
        found.append(Unit(u.path, u.what, 1, True, "", block=Block(start, removed=block.removed)))
    return found


def describe(units: Sequence[Unit], limit: int = 5) -> list[str]:
    out = [f"{u.path} {u.what}{_first_line(u)}" for u in units[:limit]]
    if len(units) > limit:
        out.append(f"and {len(units) - limit} more")
    return out


def _first_line(u: Unit) -> str:
    if u.block is None:
        return ""
    lines = [("+", s) for s in u.block.added if carries(s)] or [("-", s) for s in u.block.removed if carries(s)]
    return f": {lines[0][0]}{lines[0][1].strip()[:60]}" if lines else ""
