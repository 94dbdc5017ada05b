"""Who brought a present change into the base: ``git blame`` (``--reverse`` for removals) without a
process per file; every unit's versions bisected in step, one ``cat-file`` a round for all."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from collections.abc import Set as AbstractSet

from ggstack.check.containment import Containment, Unit, carries, window
from ggstack.check.files import Files, is_zero
from ggstack.check.history import BaseRange
from ggstack.diff import Block

# A search yields (blob, lines) questions, is sent "does that blob hold the lines?", and sets its unit.
Search = Generator[tuple[str, list[str]], bool, None]


def attribute(
    contents: Sequence[Containment],
    history: BaseRange,
    files: Files,
    likely: Sequence[AbstractSet[str]] = (),
    undone: Sequence[AbstractSet[str]] = (),
) -> None:
    """``older``: there before the range, no evidence. ``likely``: picks, asked first; ``undone``: their reverts."""
    searches: list[tuple[Search, bool]] = []
    for k, content in enumerate(contents):
        searches += _searches(content, history, likely[k] if k < len(likely) else frozenset())
    _drive(searches, files)
    for k, content in enumerate(contents):
        reverts = undone[k] if k < len(undone) else frozenset()
        _find_consumed(content, history, likely[k] if k < len(likely) else frozenset(), reverts)


def _find_consumed(
    content: Containment, history: BaseRange, likely: AbstractSet[str], reverts: AbstractSet[str]
) -> None:
    tied = set(likely) | {c for u in content.units for c in u.by}
    for u in content.units:
        if not u.present:
            _consumed(u, history, tied, reverts)


def _searches(content: Containment, history: BaseRange, likely: AbstractSet[str]) -> list[tuple[Search, bool]]:
    out = []
    for u in content.units:
        if not u.present:
            continue
        if u.moved is not None:  # code the base moved into another file: its lines' history runs through the move
            versions = history.versions(u.moved[1], moved_from=u.moved[0])
        else:
            versions = history.versions(content.base_paths.get(u.path, u.path))
        search = _search(u, versions, likely)
        if search is not None:
            out.append((search, u.whitespace))
        else:
            _whole_file(u, versions, history)
    return out


def changed_places(contents: Sequence[Containment], history: BaseRange, files: Files) -> list[list[str]]:
    files.prepare_alignments(
        [(c.pre_blobs[p], c.base_blobs[p]) for c in contents for p in c.base_blobs if p in c.pre_blobs]
    )
    places = [_places(c, files) for c in contents]
    attribute(places, history, files)
    return [list(dict.fromkeys(x for u in p.units for x in u.by)) for p in places]


def _places(content: Containment, files: Files) -> Containment:
    places = Containment([], content.base_paths, content.judged, content.base_blobs)
    for u in content.units:
        if u.present or u.block is None or u.path not in content.base_blobs:
            continue
        there = _what_is_there(content, u, u.block, files)
        if there is not None:
            places.units.append(there)
    return places


def _what_is_there(content: Containment, u: Unit, block: Block, files: Files) -> Unit | None:
    base_blob = content.base_blobs[u.path]
    base = files.lines(base_blob)
    if u.window is None:  # judged without aligning (its lines are nowhere): align now
        pre_blob = content.pre_blobs.get(u.path)
        u.window = window(block, files.lines_when_read(pre_blob), base, files.alignment(pre_blob, base_blob))
    start, end = u.window
    there = base[start:end]
    return (
        Unit(u.path, u.what, 1, True, "", block=Block(start, added=there)) if any(carries(s) for s in there) else None
    )


def _search(u: Unit, versions: list[tuple[str, str, str]], likely: AbstractSet[str]) -> Search | None:
    if u.block is None:
        return None
    if u.block.added:
        return _brought(u, u.block.added, versions, likely)
    return _removed(u, u.block.removed, versions)


def _brought(u: Unit, run: list[str], versions: list[tuple[str, str, str]], likely: AbstractSet[str]) -> Search:
    if not versions or not (yield versions[0][2], run):
        u.older = True  # not in the base's own version (an earlier patch's), or the file is untouched
        return
    if likely and (yield from _picked_by(u, run, versions, likely)):
        return
    lo, hi = 0, len(versions) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if (yield versions[mid][2], run):
            lo = mid
        else:
            hi = mid - 1
    if (yield versions[lo][1], run):
        u.older = True
    else:
        u.by = [versions[lo][0]]


def _picked_by(
    u: Unit, run: list[str], versions: list[tuple[str, str, str]], likely: AbstractSet[str]
) -> Generator[tuple[str, list[str]], bool, bool]:
    for sha, old, new in versions:
        if sha in likely:
            if (yield new, run) and not (yield old, run):
                u.by = [sha]
                return True
            return False
    return False


def _removed(u: Unit, run: list[str], versions: list[tuple[str, str, str]]) -> Search:
    if not versions or (yield versions[0][2], run) or not (yield versions[-1][1], run):
        u.older = True  # still somewhere in the file, or the base never had it: moot
        return
    lo, hi = 0, len(versions) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if (yield versions[mid][1], run):
            hi = mid
        else:
            lo = mid + 1
    u.by = [versions[lo][0]]


def _consumed(u: Unit, history: BaseRange, tied: AbstractSet[str], reverts: AbstractSet[str]) -> None:
    """Added by a range commit, then deleted (news fragments folded into the changelog): consumed,
    unless the deletion is a revert."""
    if u.what != "add" or not u.blob:
        return
    found = _added_then_deleted(history.versions(u.path))
    if found is None:
        return
    adder, deleter, older = found
    if deleter in reverts or deleter in history.reverted(adder):
        return
    if adder in tied or any(u.blob == b for _, _, b in older):
        u.present, u.consumed, u.by = True, True, [adder]
        u.reason = f"the same file was added by {adder[:10]}, then deleted by {deleter[:10]}"


def _added_then_deleted(versions: list[tuple[str, str, str]]) -> tuple[str, str, list[tuple[str, str, str]]] | None:
    d = next((d for d, (_, _, new) in enumerate(versions) if is_zero(new)), None)
    if d is None:
        return None
    older = versions[d + 1 :]
    adder = next((c for c, old, _ in older if is_zero(old)), None)
    return (adder, versions[d][0], older) if adder is not None else None


def _whole_file(u: Unit, versions: list[tuple[str, str, str]], history: BaseRange) -> None:
    if u.what == "rename":
        versions = versions or history.versions(u.path)
    if versions:
        u.by = [versions[0][0]]
    else:
        u.older = True


def _drive(searches: list[tuple[Search, bool]], files: Files) -> None:
    asks: list[tuple[Search, bool, tuple[str, list[str]]]] = []
    for search, strip in searches:
        with contextlib.suppress(StopIteration):
            asks.append((search, strip, next(search)))
    while asks:
        files.prefetch([blob for _, _, (blob, _) in asks])
        following = []
        for search, strip, (blob, run) in asks:
            has = files.holds(blob, run, strip=strip)
            with contextlib.suppress(StopIteration):
                following.append((search, strip, search.send(has)))
        asks = following
