"""Which change blocks of a carry patch a tree holds, each sought at its place (between lines pre-image and tree still
share): a pick whose context moved is found (patch-id, ``apply -R`` miss it); the same lines elsewhere are refused."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ggstack.check.files import Files, find_run, is_text
from ggstack.diff import Block, FileChange, Hunk, paths_of

TreeEntries = dict[str, tuple[str, str]]  # path -> (mode, blob)
NO_FILE = "file is not in the base"  # the reason of a block whose file the tree does not have


def entries_of(entries: TreeEntries, paths: Iterable[str]) -> TreeEntries:
    """A tree's entries for the paths a change set judges (those the tree has)."""
    return {p: entries[p] for p in paths if p in entries}


UNREADABLE = "could not be compared: the base's version of the file is not in this clone"


# A letter or digit: ``str.isalnum`` of one character is the regex's word character but "_".
_WORD = re.compile(r"[^\W_]")


def carries(line: str) -> bool:
    """A blank line or a lone brace says nothing of where a change is."""
    return _WORD.search(line) is not None


def informative(lines: list[str]) -> int:
    return sum(1 for s in lines if _WORD.search(s))


@dataclass
class Unit:
    """A change block or a whole-file fact; evidence only once attribution sets ``by``."""

    path: str
    what: str  # "hunk @@ -12,3 +12,4 @@" | "mode" | "rename" | "add" | "delete" | "binary"
    weight: int  # informative changed lines (whole-file facts: 1, or their informative lines)
    present: bool
    reason: str
    hunk: int = -1  # index of the hunk within the file (blocks only)
    block: Block | None = None
    found: tuple[int, int] | None = None  # 0-based [start, end) of the added lines in the tree's file
    window: tuple[int, int] | None = None  # 0-based [start, end) of the block's place in the tree's file
    whitespace: bool = False  # present only when trailing whitespace is ignored
    by: list[str] = field(default_factory=list)  # base commits that brought it (attribution)
    older: bool = False  # present, but already so before the range: no evidence of anything
    blob: str = ""  # a file the patch adds: its blob (to know the same file added by a range commit)
    consumed: bool = False  # present as a file the range added, then deleted again (not there now)
    moved: tuple[str, str] | None = None  # found in another file: (the file the base took it from, that file)

    @property
    def earned(self) -> bool:
        return self.present and bool(self.by)


@dataclass
class Containment:
    units: list[Unit]
    base_paths: dict[str, str]  # the patch's file -> the tree's file it was judged against
    judged: bool = True  # False: the pre-image is not here, so nothing was compared
    base_blobs: dict[str, str] = field(default_factory=dict)  # the patch's file -> the tree's blob of it
    pre_blobs: dict[str, str] = field(default_factory=dict)  # the patch's file -> its pre-image blob
    renamed: set[str] = field(default_factory=set)  # the patch's files it adds, deletes or renames itself
    elsewhere: dict[str, str] = field(default_factory=dict)  # the patch's file -> another the base moved code into
    came_from: dict[str, str] = field(default_factory=dict)  # the patch's new file -> where the base has its code

    @property
    def counted(self) -> list[Unit]:
        return [u for u in self.units if u.weight] or self.units

    @property
    def all_present(self) -> bool:
        return self.judged and bool(self.units) and all(u.present for u in self.counted)

    @property
    def literally(self) -> bool:
        return self.all_present and not any(u.consumed for u in self.counted)

    @property
    def all_earned(self) -> bool:
        return self.all_present and all(u.earned for u in self.counted)

    @property
    def any_earned(self) -> bool:
        return self.judged and any(u.earned for u in self.counted)

    @property
    def fraction(self) -> float:
        units = self.counted
        total = sum(max(u.weight, 1) for u in units)
        return sum(max(u.weight, 1) for u in units if u.earned) / total if total else 0.0

    @property
    def adding_fraction(self) -> float:
        # A removal alone may be anyone's doing.
        units = self.counted
        total = sum(max(u.weight, 1) for u in units)
        return sum(max(u.weight, 1) for u in units if u.earned and adds(u)) / total if total else 0.0

    @property
    def commits(self) -> list[str]:
        counts: Counter[str] = Counter()
        for u in self.counted:
            for c in u.by if u.present else ():
                counts[c] += max(u.weight, 1)
        return [c for c, _ in counts.most_common()]


def adds(u: Unit) -> bool:
    if u.block is not None:
        return bool(u.block.added)
    return u.what != "delete"


def contain(
    change_set: list[FileChange], entries: TreeEntries, files: Files, moved: Mapping[str, str] | None = None
) -> Containment:
    units: list[Unit] = []
    base_paths: dict[str, str] = {}
    base_blobs: dict[str, str] = {}
    pre_blobs = {fc.path: fc.old_blob for fc in change_set if fc.old_blob}
    judged = True
    for fc in change_set:
        base_path, in_base = _in_base(fc, entries, moved or {})
        if _pre_image_missing(fc, files):
            judged = False  # its blocks have no place to look at
            units += _blocks_not_there(fc, "its pre-image is not here")
            continue
        if base_path and in_base:
            base_paths[fc.path] = base_path
            base_blobs[fc.path] = in_base[1]
        units += _file_units(fc, in_base, entries, files)
    renamed = {fc.path for fc in change_set if fc.old_path != fc.new_path}
    return Containment(units, base_paths, judged, base_blobs, pre_blobs, renamed)


def _pre_image_missing(fc: FileChange, files: Files) -> bool:
    return bool(fc.old_path and fc.old_blob and files.blob(fc.old_blob) is None)


def _blocks_not_there(fc: FileChange, reason: str) -> list[Unit]:
    return [
        Unit(fc.path, h.label, informative(b.removed + b.added), False, reason, i, b)
        for i, h in enumerate(fc.hunks)
        for b in h.blocks
    ]


def _in_base(
    fc: FileChange, entries: TreeEntries, moved: Mapping[str, str]
) -> tuple[str | None, tuple[str, str] | None]:
    in_base = entries.get(fc.new_path or "") or (entries.get(fc.old_path or "") if fc.new_path else None)
    if in_base:
        return (fc.new_path if fc.new_path in entries else fc.old_path), in_base
    there = moved.get(fc.path) if fc.old_path == fc.new_path else None
    return (there, entries[there]) if there and there in entries else (None, None)


def contained_at(files: Files, todo: Sequence[tuple[list[FileChange], str]]) -> list[Containment]:
    if not todo:
        return []
    blobs = files.at_commits([(at, p) for changes, at in todo for p in paths_of(changes)])
    files.prepare_alignments(_to_align(files, todo, blobs))
    return [contain(changes, _entries_at(changes, at, blobs), files) for changes, at in todo]


def _to_align(
    files: Files, todo: Sequence[tuple[list[FileChange], str]], blobs: dict[tuple[str, str], str]
) -> list[tuple[str, str]]:
    # A file lacking every block's added lines is judged without an alignment (a diff of two big files).
    return [
        (fc.old_blob, blobs[(at, p)])
        for changes, at in todo
        for fc in changes
        if fc.old_blob and not fc.binary
        for p in fc.paths
        if (at, p) in blobs and is_text(files.blob(blobs[(at, p)])) and needs_alignment(fc, blobs[(at, p)], files)
    ]


def _entries_at(changes: list[FileChange], at: str, blobs: dict[tuple[str, str], str]) -> TreeEntries:
    # The mode is the pre-image's (cat-file does not say it): a mode change alone is judged on the base.
    modes = {p: fc.new_mode or fc.old_mode or "100644" for fc in changes for p in fc.paths}
    return {p: (modes[p], blobs[(at, p)]) for p in paths_of(changes) if (at, p) in blobs}


def added_lines(fc: FileChange) -> list[str]:
    return [s for h in fc.hunks for b in h.blocks for s in b.added]


def removed_lines(fc: FileChange) -> list[str]:
    return [s for h in fc.hunks for b in h.blocks for s in b.removed]


def _file_units(fc: FileChange, in_base: tuple[str, str] | None, entries: TreeEntries, files: Files) -> list[Unit]:
    whole = _whole_file_unit(fc, in_base, entries)
    if whole is not None:
        return [whole]
    units = [u for u in (_rename_unit(fc, entries), _mode_unit(fc, in_base)) if u is not None]
    if in_base is None:
        return units + _not_in_base(fc)
    base_data = files.blob(in_base[1])
    if base_data is None and not fc.binary:  # an object this clone lacks (a degraded mirror): not compared
        return units + _blocks_not_there(fc, UNREADABLE)
    if fc.binary or not is_text(base_data):
        return [*units, _binary_unit(fc, in_base)]
    return units + _block_units(fc, in_base[1], files)


def _not_in_base(fc: FileChange) -> list[Unit]:
    binary = [Unit(fc.path, "binary", 1, False, "binary file is not in the base")] if fc.binary else []
    return _blocks_not_there(fc, NO_FILE) + binary


def _whole_file_unit(fc: FileChange, in_base: tuple[str, str] | None, entries: TreeEntries) -> Unit | None:
    if fc.new_path is None:
        return _deleted_unit(fc, entries)
    if fc.old_path is None:
        return _added_unit(fc, in_base)
    return None


def _deleted_unit(fc: FileChange, entries: TreeEntries) -> Unit:
    weight = max(1, informative(removed_lines(fc)))
    if fc.old_path not in entries:
        return Unit(fc.path, "delete", weight, True, "file already deleted in the base")
    same = entries[fc.old_path][1] == fc.old_blob
    return Unit(fc.path, "delete", weight, False, "file still in the base" + ("" if same else " (with other content)"))


def _added_unit(fc: FileChange, in_base: tuple[str, str] | None) -> Unit | None:
    """None: the base has another file there, judged block by block."""
    weight = max(1, informative(added_lines(fc)))
    if in_base and in_base[1] == fc.new_blob:
        return Unit(
            fc.path, "add", weight, True, "file added by the patch already exists in the base with the same content"
        )
    if not in_base:
        return Unit(fc.path, "add", weight, False, "file added by the patch is not in the base", blob=fc.new_blob or "")
    return None


def _rename_unit(fc: FileChange, entries: TreeEntries) -> Unit | None:
    if not (fc.old_path and fc.new_path and fc.old_path != fc.new_path):
        return None
    done = fc.new_path in entries and fc.old_path not in entries
    reason = (
        f"renamed {fc.old_path} → {fc.new_path} in the base"
        if done
        else f"the base does not rename {fc.old_path} → {fc.new_path}"
    )
    return Unit(fc.path, "rename", 1, done, reason)


def _mode_unit(fc: FileChange, in_base: tuple[str, str] | None) -> Unit | None:
    if not (fc.old_mode and fc.new_mode and fc.old_mode != fc.new_mode):
        return None
    mode = in_base[0] if in_base else None
    reason = (
        f"mode {fc.new_mode} in the base"
        if mode == fc.new_mode
        else f"the base has mode {mode or 'none'}, the patch sets {fc.new_mode}"
    )
    return Unit(fc.path, "mode", 1, mode == fc.new_mode, reason)


def _binary_unit(fc: FileChange, in_base: tuple[str, str]) -> Unit:
    if fc.new_blob == in_base[1]:
        return Unit(fc.path, "binary", 1, True, "binary file in the base is identical to the patch's")
    if fc.old_blob == in_base[1]:
        return Unit(fc.path, "binary", 1, False, "binary file in the base is still the pre-patch version")
    return Unit(
        fc.path, "binary", 1, False, "binary file in the base differs from both the patch's versions: cannot tell"
    )


def needs_alignment(fc: FileChange, base_blob: str, files: Files) -> bool:
    anywhere = files.stripped(base_blob)
    return any(not b.added or all(a.rstrip() in anywhere for a in b.added) for h in fc.hunks for b in h.blocks)


def _block_units(fc: FileChange, base_blob: str, files: Files) -> list[Unit]:
    base = files.lines(base_blob)
    units: list[Unit] = []
    pmap: list[int | None] | None = None
    pre: Sequence[str] = []
    anywhere = files.stripped(base_blob)
    # Lines the patch takes out at one place and puts in at another (a sort, a move):
    # that they are still in the file says nothing; their new place is judged with the added lines.
    moved = set(removed_lines(fc)) & set(added_lines(fc))
    for i, hunk in enumerate(fc.hunks):
        for block in hunk.blocks:
            weight = informative(block.removed + block.added)
            if block.added and any(a.rstrip() not in anywhere for a in block.added):
                # Not even somewhere in the file: no alignment needed to say no.
                units.append(Unit(fc.path, hunk.label, weight, False, "its added lines are not in the base", i, block))
                continue
            if pmap is None:
                pmap = files.alignment(fc.old_blob, base_blob)
                pre = files.lines_when_read(fc.old_blob)
            units.append(judge_block(fc.path, hunk, i, block, pre, base, pmap, moved))
    return units


# -- the place of a block ----------------------------------------------------------------------


def window(block: Block, pre: Sequence[str], base: list[str], pmap: list[int | None]) -> tuple[int, int]:
    lo = next((pmap[i] for i in range(min(block.p0, len(pre)) - 1, -1, -1) if pmap[i] is not None), -1)
    hi = next((pmap[i] for i in range(block.p1, len(pre)) if pmap[i] is not None), len(base))
    assert lo is not None and hi is not None
    return lo + 1, max(lo + 1, hi)


def place(block: Block, pre: Sequence[str], base: list[str], pmap: list[int | None]) -> tuple[int, int]:
    """``window`` between informative lines only: git pairs blank lines either way, so a blank
    line lined up beside a rewritten function is no anchor."""
    lo = next(
        (pmap[i] for i in range(min(block.p0, len(pre)) - 1, -1, -1) if pmap[i] is not None and carries(pre[i])), -1
    )
    hi = next((pmap[i] for i in range(block.p1, len(pre)) if pmap[i] is not None and carries(pre[i])), len(base))
    assert lo is not None and hi is not None
    return lo + 1, max(lo + 1, hi)


def judge_block(
    path: str,
    hunk: Hunk,
    index: int,
    block: Block,
    pre: Sequence[str],
    base: list[str],
    pmap: list[int | None],
    moved: AbstractSet[str] = frozenset(),
) -> Unit:
    start, end = window(block, pre, base, pmap)
    unit = Unit(path, hunk.label, informative(block.removed + block.added), False, "", index, block)
    unit.window = (start, end)
    unit.reason = _removal_not_there(block, pre, base[start:end], pmap, moved)
    if unit.reason:
        return unit
    if not block.added:
        unit.present, unit.reason = True, "the lines it removes are gone from their place in the base"
        return unit
    _look_for_added(unit, block, base, start, end)
    return unit


def _removal_not_there(
    block: Block, pre: Sequence[str], place: list[str], pmap: list[int | None], moved: AbstractSet[str]
) -> str:
    still = _still_paired(block, pre, pmap, moved)
    if still:
        return f"its removed lines are still in the base (line {(still[0] or 0) + 1})"
    gone = [s for s in block.removed if s not in moved]
    if gone and len(gone) == len(block.removed) and find_run(place, block.removed, strip=True) is not None:
        return "its removed lines are still at its place in the base"
    return ""


def _still_paired(
    block: Block, pre: Sequence[str], pmap: list[int | None], moved: AbstractSet[str]
) -> list[int | None]:
    # Only lines that carry information count (all, where it removes no other): git pairs blank lines either way.
    kept = [i for i in range(block.p0, min(block.p1, len(pre))) if pmap[i] is not None and pre[i] not in moved]
    telling = [i for i in kept if carries(pre[i])]
    return [pmap[i] for i in (telling if informative(block.removed) else kept)]


def _look_for_added(unit: Unit, block: Block, base: list[str], start: int, end: int) -> None:
    at, unit.whitespace = _find_added(block, base[start:end])
    if at is None:
        # Repeated lines ("showcontent = true", blank lines) are weak anchors: the diff may tie
        # them one copy off. The place reaches to the nearest lines the file has only once.
        start, end = _widen(start, end, base, set(block.added))
        at, unit.whitespace = _find_added(block, base[start:end])
    if at is None:
        elsewhere = find_run(base, block.added, strip=False) is not None
        unit.reason = "its added lines are not in the base" + (
            " at its place (they are elsewhere in the file)" if elsewhere else ""
        )
        return
    unit.present = True
    unit.found = (start + at, start + at + len(block.added))
    unit.reason = f"added lines present at base line {start + at + 1}" + (
        " (ignoring trailing whitespace)" if unit.whitespace else ""
    )


def _find_added(block: Block, place: list[str]) -> tuple[int | None, bool]:
    at = find_run(place, block.added, strip=False)
    whitespace_only = [s.rstrip() for s in block.removed] == [s.rstrip() for s in block.added]
    if at is None and not whitespace_only:
        at = find_run(place, block.added, strip=True)
        return at, at is not None
    return at, False


_WIDEST = 200  # lines a place may grow over repeated lines, each way


def _widen(start: int, end: int, base: list[str], sought: AbstractSet[str]) -> tuple[int, int]:
    counts = Counter(base[max(0, start - _WIDEST) : end + _WIDEST])
    weak = lambda s: counts[s] > 1 or s in sought or not carries(s)  # noqa: E731
    lo, hi = start, end
    while lo > 0 and start - lo < _WIDEST and weak(base[lo - 1]):
        lo -= 1
    while hi < len(base) and hi - end < _WIDEST and weak(base[hi]):
        hi += 1
    return lo, hi
