"""The remaining diff of a partial patch: only the blocks it lacks, each in place in the base's file, so it applies by
construction; a block whose place the base changed is left out and named, to port by hand. Plain edits are written
in-process (``check --commits`` may hold hundreds), the rest through git's trees."""

from __future__ import annotations

import ast
import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from ggstack import git
from ggstack.check.containment import Containment, TreeEntries, Unit, carries, window
from ggstack.check.files import Files, find_run
from ggstack.diff import Block, FileChange


@dataclass
class Remaining:
    diff: str | None
    left_out: list[str]  # "path line N (hunk @@ … @@)"


@dataclass
class _Edit:
    path: str
    mode: str
    old_blob: str
    before: list[str]
    after: list[str]
    data: bytes  # the new file's bytes
    left_out: list[str]


def prepare(wanted: Sequence[tuple[str, list[FileChange], Containment]], files: Files) -> None:
    # One batch each, not a ``cat-file`` and a ``diff`` a patch: the base's blobs and git's alignment of them.
    places = _places(wanted)
    blobs = files.at_commits([(tree, path) for tree, _, path in places])
    pairs = [(old, blobs[(tree, path)]) for tree, fc, path in places if (old := fc.old_blob) and (tree, path) in blobs]
    files.prefetch([old for old, _ in pairs])
    files.prepare_alignments(pairs)


def _places(wanted: Sequence[tuple[str, list[FileChange], Containment]]) -> list[tuple[str, FileChange, str]]:
    unplaced = [{u.path for u in content.units if _unplaced(u)} for _, _, content in wanted]
    return [
        (tree, fc, content.base_paths.get(fc.path, fc.new_path))
        for (tree, change_set, content), paths in zip(wanted, unplaced, strict=True)
        if content.judged
        for fc in change_set
        if fc.new_path and fc.old_blob and fc.path in paths
    ]


def _unplaced(u: Unit) -> bool:
    return not u.present and u.block is not None and u.window is None


def remaining_diff(
    repo: git.Repository,
    tree: str,
    change_set: list[FileChange],
    content: Containment,
    files: Files,
    only: Sequence[Unit] | None = None,
) -> Remaining:
    """``only``: of just those missing units (an adapted pick's own lines, the rest being the pick's)."""
    missing = _missing(content, only)
    if not content.judged or not missing:
        return Remaining(None, [])
    plan = _plan(change_set, missing, content, _base_entries(files, tree, change_set, content), files)
    if plan.simple and plan.edits:
        return Remaining(_unified(plan.edits) or None, plan.left_out)
    edits = [e for e in plan.edits if e.before != e.after]
    return Remaining(_through_git(repo, tree, plan.changes, edits), plan.left_out)


def _plan(
    change_set: list[FileChange],
    missing: dict[str, list[Unit]],
    content: Containment,
    entries: TreeEntries,
    files: Files,
) -> _Plan:
    plan = _Plan()
    for fc in change_set:
        if missing.get(fc.path):
            plan.add(fc, missing[fc.path], content, entries, files)
    return plan


def _base_entries(files: Files, tree: str, change_set: list[FileChange], content: Containment) -> TreeEntries:
    paths = [p for fc in change_set for p in fc.paths] + [*content.base_paths.values()]
    return files.entries(tree, list(dict.fromkeys(paths)))


def _missing(content: Containment, only: Sequence[Unit] | None) -> dict[str, list[Unit]]:
    wanted = None if only is None else {id(u) for u in only}
    missing: dict[str, list[Unit]] = {}
    for u in content.units:
        if not u.present and (wanted is None or id(u) in wanted):
            missing.setdefault(u.path, []).append(u)
    return missing


@dataclass
class _Plan:
    changes: dict[str, tuple[str, str] | None] = field(default_factory=dict)  # whole files, by path
    edits: list[_Edit] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    simple: bool = True  # the in-process writer can say all of it

    @property
    def left_out(self) -> list[str]:
        return self.lost + [x for e in self.edits for x in e.left_out]

    def add(
        self,
        fc: FileChange,
        gone: list[Unit],
        content: Containment,
        entries: dict[str, tuple[str, str]],
        files: Files,
    ) -> None:
        if _gone_from_base(fc, content.base_paths.get(fc.path), entries):
            self.lost.append(f"{fc.path} (the base has no such file any more: renamed or deleted)")
            return
        whole = _whole_file_change(fc, gone, entries)
        if whole is not None:
            self.changes.update(whole)
            self.simple = False
            return
        edit, renamed_from = _edit(fc, gone, content, entries, files)
        if renamed_from:
            self.changes[renamed_from] = None
        self.simple = self.simple and not renamed_from and _plain(edit, entries, files)
        self.edits.append(edit)


def _gone_from_base(fc: FileChange, here: str | None, entries: dict[str, tuple[str, str]]) -> bool:
    return bool(fc.old_path) and fc.old_path not in entries and fc.new_path not in entries and here not in entries


def _through_git(
    repo: git.Repository, tree: str, changes: dict[str, tuple[str, str] | None], edits: list[_Edit]
) -> str | None:
    shas = repo.hash_blobs([e.data for e in edits])
    for e, sha in zip(edits, shas, strict=True):
        changes[e.path] = (e.mode, sha)
    if not changes:
        return None
    diff = repo.diff_trees(tree, repo.edit_tree(tree, changes)).decode("utf-8", "surrogateescape")
    return diff or None


def _whole_file_change(
    fc: FileChange, gone: list[Unit], entries: dict[str, tuple[str, str]]
) -> dict[str, tuple[str, str] | None] | None:
    kinds = {u.what for u in gone}
    if "delete" in kinds and fc.old_path:
        return {fc.old_path: None}
    if "add" in kinds or "binary" in kinds:
        return _added_whole(fc)
    return None


def _added_whole(fc: FileChange) -> dict[str, tuple[str, str] | None]:
    return {fc.new_path: (fc.new_mode, fc.new_blob)} if fc.new_blob and fc.new_mode and fc.new_path else {}


def _edit(
    fc: FileChange, gone: list[Unit], content: Containment, entries: dict[str, tuple[str, str]], files: Files
) -> tuple[_Edit, str | None]:
    assert fc.new_path is not None
    base_path = content.base_paths.get(fc.path, fc.new_path)
    mode, blob = entries[base_path]
    lines = list(files.lines(blob))
    data = files.blob(blob) or b""
    _place(fc, gone, blob, files)
    after, left_out = _unless_it_breaks(gone, base_path, lines, *_put_back(gone, lines, _moved(fc)))
    mode = _mode_after(fc, gone, mode)
    new = _file_bytes(after, data)
    if fc.old_path == fc.new_path:  # changed in place: where the base has the file now (it may have moved it)
        return _Edit(base_path, mode, blob, lines, after, new, left_out), None
    edit = _Edit(fc.new_path, mode, blob, lines, after, new, left_out)
    return edit, base_path if base_path != fc.new_path else None


def _mode_after(fc: FileChange, gone: list[Unit], mode: str) -> str:
    return fc.new_mode if "mode" in {u.what for u in gone} and fc.new_mode else mode


def _unless_it_breaks(
    gone: list[Unit], path: str, lines: list[str], after: list[str], left_out: list[str]
) -> tuple[list[str], list[str]]:
    """A splice that breaks the file is no diff anyone wrote: every block of it is left to port by hand."""
    if after == lines or _still_parses(path, lines, after):
        return after, left_out
    placed = {_named_block(u) for u in gone if u.block is not None}
    left_out = [*left_out, *(f"{x}: with it {path} would not parse" for x in sorted(placed - set(left_out)))]
    return list(lines), left_out


def _file_bytes(lines: list[str], old: bytes) -> bytes:
    text = "\n".join(lines) + ("\n" if lines and (old.endswith(b"\n") or not old) else "")
    return text.encode("utf-8", "surrogateescape")


def _still_parses(path: str, before: list[str], after: list[str]) -> bool:
    """Asked only of a Python file whose base version parses."""
    if not path.endswith((".py", ".pyi")):
        return True
    # The splice first: where it parses (most do), the base's version need not be parsed at all.
    return _parses("\n".join(after) + "\n", path) or not _parses("\n".join(before) + "\n", path)


_PARSED: dict[bytes, bool] = {}  # a text's digest -> whether it parses (by content: true for the process)


def _parses(text: str, path: str) -> bool:
    # Kept by content: the base's version of a big module is asked about for every patch to it, and
    # parsing thousands of lines costs more than everything else a patch needs.
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
    if key not in _PARSED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape's SyntaxWarning is not ours to print
            try:
                ast.parse(text, path)
                _PARSED[key] = True
            except (SyntaxError, ValueError):
                _PARSED[key] = False
    return _PARSED[key]


def _place(fc: FileChange, gone: list[Unit], blob: str, files: Files) -> None:
    if not any(u.block is not None and u.window is None for u in gone):
        return
    pre, lines = files.lines_when_read(fc.old_blob), files.lines(blob)
    pmap = files.alignment(fc.old_blob, blob)
    for u in gone:
        if u.block is not None and u.window is None:
            u.window = window(u.block, pre, lines, pmap)


def _moved(fc: FileChange) -> set[str]:
    """Lines the patch moves: a block removing one has no sure place (the base's may be the new copy)."""
    blocks = [b for h in fc.hunks for b in h.blocks]
    removed = {s for b in blocks for s in b.removed}
    added = {s for b in blocks for s in b.added}
    return {s for s in removed & added if carries(s)}


def _put_back(gone: list[Unit], lines: list[str], moved: set[str]) -> tuple[list[str], list[str]]:
    """``lines`` with every missing block's added lines at its place, from the bottom up; and those left out."""
    out = list(lines)
    last = None
    left_out = []
    for u in sorted((u for u in gone if u.block is not None), key=lambda u: u.window or (0, 0), reverse=True):
        assert u.block is not None
        place = _clean_place(u, u.block, out, moved, last)
        if place is None:
            left_out.append(_named_block(u))
            continue
        start, end = place
        out[start:end] = u.block.added
        last = start
    return out, left_out[::-1]


def _named_block(u: Unit) -> str:
    return f"{u.path} line {(u.window or (0, 0))[0] + 1} ({u.what})"


def _clean_place(u: Unit, block: Block, out: list[str], moved: set[str], last: int | None) -> tuple[int, int] | None:
    place = None if moved.intersection(block.removed) else _replacement(u, out)
    return None if place is None or (last is not None and place[1] > last) else place


def _plain(e: _Edit, entries: dict[str, tuple[str, str]], files: Files) -> bool:
    """Can the in-process writer say it exactly (git would quote the path, or mind the file's end)?"""
    if not _unquoted(e.path) or e.path not in entries or e.mode != entries[e.path][0]:
        return False
    data = files.blob(entries[e.path][1])
    return bool(data) and (data or b"").endswith(b"\n") and bool(e.after)


def _unquoted(path: str) -> bool:
    return path.isascii() and path.isprintable() and '"' not in path


def _unified(edits: list[_Edit]) -> str:
    import difflib  # here: only a partial has a remaining diff, and every check imports this module

    out: list[str] = []
    for e in edits:
        if e.before == e.after:
            continue
        algorithm = hashlib.sha256 if len(e.old_blob) == 64 else hashlib.sha1
        new_sha = algorithm(b"blob %d\0" % len(e.data) + e.data).hexdigest()
        out.append(f"diff --git a/{e.path} b/{e.path}\nindex {e.old_blob}..{new_sha} {e.mode}\n")
        hunks = list(difflib.unified_diff(e.before, e.after, f"a/{e.path}", f"b/{e.path}", n=3, lineterm=""))
        out.append("\n".join(hunks) + "\n")
    return "".join(out)


def _replacement(u: Unit, base: list[str]) -> tuple[int, int] | None:
    """In place of its removed lines, or an insertion where the base has nothing there; None: changed."""
    start, end = u.window or (0, 0)
    block = u.block
    if block and block.removed:
        at = find_run(base[start:end], block.removed, strip=False)
        return (start + at, start + at + len(block.removed)) if at is not None else None
    return (start, start) if end == start else None
