"""What a pick that does not apply leaves for a maintainer to read in the report."""

from __future__ import annotations

from ggstack import git
from ggstack.diff import paths as diff_paths
from ggstack.model import Conflict
from ggstack.picks import Pick

_CONTEXT = 3  # lines of context kept around a conflict region


def of_merge(repo: git.Repository, merged: git.MergeResult) -> Conflict:
    """One request to the persistent cat-file: an ``ls-tree`` a conflict was most of a far apply's time."""
    paths = list(merged.conflicted_paths)
    hunks = []
    for path, obj in zip(paths, repo.cat_file_batch([f"{merged.tree}:{p}" for p in paths]), strict=True):
        if obj is None or obj[1] != "blob":
            continue
        found = regions(obj[2].decode("utf-8", "surrogateescape"))
        if found:
            hunks.append(f"--- {path}\n{found}")
    return Conflict(paths, "\n".join(hunks), merged.messages)


def of_apply(pick: Pick, message: str) -> Conflict:
    failures = git.apply_failures(message)
    if not failures:
        named = list(pick.patch.paths) if pick.patch is not None else diff_paths(pick.diff.decode("utf-8", "replace"))
        return Conflict(named or ["?"], "", message.strip())
    hunks = [
        f"--- {f.path}\n" + (f"git apply: {f.reason} at line {f.line}" if f.line else f"git apply: {f.reason}")
        for f in failures
    ]
    return Conflict([f.path for f in failures], "\n".join(hunks), message.strip())


def regions(text: str) -> str:
    lines = text.split("\n")
    keep: set[int] = set()
    start = None
    for i, line in enumerate(lines):
        if line.startswith("<<<<<<< "):
            start = i
        elif line.startswith(">>>>>>> ") and start is not None:
            keep.update(range(max(0, start - _CONTEXT), min(len(lines), i + 1 + _CONTEXT)))
            start = None
    out, last = [], None
    for i in sorted(keep):
        if last is not None and i != last + 1:
            out.append("...")
        out.append(lines[i])
        last = i
    return "\n".join(out)
