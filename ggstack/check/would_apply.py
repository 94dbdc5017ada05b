"""Would ``git apply`` (or ``-R``) take a patch, and where must a merge conflict? Answered from lines
already read, so ``check --commits`` spends no merge on a commit whose answer is clear."""

from __future__ import annotations

from ggstack.check.containment import TreeEntries, carries, removed_lines
from ggstack.check.files import Files, find_run
from ggstack.diff import FileChange


def applies(change_set: list[FileChange], entries: TreeEntries, files: Files) -> bool:
    """``git apply`` with no fuzz, at any offset."""
    return all(_file_applies(fc, entries, files) for fc in change_set)


def _file_applies(fc: FileChange, entries: TreeEntries, files: Files) -> bool:
    if fc.old_path is None:
        return fc.new_path not in entries
    entry = entries.get(fc.old_path)
    if entry is None:
        return False
    if entry[1] == fc.old_blob:
        return True  # the tree's file is the patch's own pre-image
    if fc.binary:
        return False
    return _once_in_order(files.lines(entry[1]), [h.old_lines for h in fc.hunks if h.old_lines])


def _once_in_order(base: list[str], runs: list[list[str]]) -> bool:
    at = 0
    for run in runs:
        found = find_run(base[at:], run, strip=False)
        if found is None:
            return False
        # A context found twice might be the wrong place: let the merge decide.
        if find_run(base[at + found + 1 :], run, strip=False) is not None:
            return False
        at += found + len(run)
    return True


def reverse_applies(change_set: list[FileChange], entries: TreeEntries, files: Files) -> bool:
    """``git apply -R`` with no fuzz, at any offset."""
    return all(_file_reverse_applies(fc, entries, files) for fc in change_set)


def _file_reverse_applies(fc: FileChange, entries: TreeEntries, files: Files) -> bool:
    if fc.new_path is None:
        return fc.old_path not in entries
    entry = entries.get(fc.new_path)
    if entry is None:
        return False
    if fc.old_path is None or fc.binary:
        return entry[1] == fc.new_blob
    if fc.old_path != fc.new_path and fc.old_path in entries:
        return False
    return entry[1] == fc.new_blob or _in_order(files.lines(entry[1]), [h.new_lines for h in fc.hunks])


def _in_order(lines: list[str], runs: list[list[str]]) -> bool:
    at = 0
    for run in runs:
        found = find_run(lines[at:], run, strip=False) if run else 0
        if found is None:
            return False
        at += found + len(run)
    return True


def surely_conflicts(change_set: list[FileChange], entries: TreeEntries, files: Files) -> list[str]:
    """Files where a line the patch changes is nowhere in the tree: the tree changed it too."""
    return [fc.old_path for fc in change_set if fc.old_path is not None and _surely_conflicts_in(fc, entries, files)]


def _surely_conflicts_in(fc: FileChange, entries: TreeEntries, files: Files) -> bool:
    entry = entries.get(fc.old_path or "")
    if entry is None or not _edited_in_place(fc) or entry[1] == fc.old_blob:
        return False
    have = set(files.lines(entry[1]))
    return any(s not in have and carries(s) for s in removed_lines(fc))


def _edited_in_place(fc: FileChange) -> bool:
    return not fc.binary and fc.old_path == fc.new_path
