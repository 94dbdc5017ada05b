"""Who brought a present change into the base: the range commit whose version
of the file has it and whose parent's does not (what ``git blame`` answers
for added lines, and ``git blame --reverse`` for removed ones), without a
process per file.

Each file's versions through the range are searched by bisection, newest to
oldest, every unit of every candidate in step, so that each round is one
``cat-file`` for all of them and a file with a long history costs a few
reads, not one per version. A change already there before the range is
marked ``older``: it is no evidence that the base took the patch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence

from ggstack.check.containment import Containment, Unit, find_run
from ggstack.check.files import Files, is_zero
from ggstack.check.history import History

# A search yields (blob, lines) questions, is sent "does that blob hold the lines?", and sets its unit.
Search = Generator[tuple[str, list[str]], bool, None]


def attribute(contents: Sequence[Containment], history: History, files: Files) -> None:
    """Set ``by``/``older`` on every present unit of every containment."""
    searches: list[tuple[Search, bool]] = []
    for content in contents:
        for u in content.units:
            if not u.present:
                continue
            versions = history.versions(content.base_paths.get(u.path, u.path))
            search = _search(u, versions)
            if search is not None:
                searches.append((search, u.whitespace))
            else:
                _whole_file(u, versions, history)
    _drive(searches, files)


def _search(u: Unit, versions: list[tuple[str, str, str]]) -> Search | None:
    if u.block is None:
        return None
    if u.block.added:
        return _brought(u, u.block.added, versions)
    return _removed(u, u.block.removed, versions)


def _brought(u: Unit, run: list[str], versions: list[tuple[str, str, str]]) -> Search:
    """The oldest version in an unbroken line from the base that has ``run``."""
    if not versions or not (yield versions[0][2], run):
        u.older = True  # not in the base's own version (an earlier patch's), or the file is untouched
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


def _removed(u: Unit, run: list[str], versions: list[tuple[str, str, str]]) -> Search:
    """The newest version whose parent still had ``run``: the commit that took it out."""
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


def _whole_file(u: Unit, versions: list[tuple[str, str, str]], history: History) -> None:
    """A file added, deleted, renamed, re-moded: the newest range commit that touched it."""
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
            has = not is_zero(blob) and find_run(files.lines(blob), run, strip=strip) is not None
            with contextlib.suppress(StopIteration):
                following.append((search, strip, search.send(has)))
        asks = following
