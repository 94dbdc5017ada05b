"""A cherry-pick merge-ort has nothing to decide, done as an edit of the tip's tree in memory:
most picks touch paths the base left alone, so only the trees on those paths change."""

from __future__ import annotations

from collections.abc import Sequence

from ggstack import git

TREE_MODE = "40000"
FAST_IMPORT_TREE = "040000"  # a whole tree, as fast-import's ``M`` takes it (for the root, path "")
_ABSENT = "0" * 6

Edits = dict[str, tuple[str, str] | None]  # path -> (mode, sha), or None: removed


class Trees:
    def __init__(self, repo: git.Repository) -> None:
        self.repo = repo
        self._entries: dict[str, dict[str, tuple[str, str]]] = {}
        self._written: dict[str, str] = {}  # placeholder tree -> the tree git wrote of it

    def entries(self, tree: str) -> dict[str, tuple[str, str]]:
        if tree not in self._entries:
            self._entries[tree] = self.repo.tree_entries(tree)
        return self._entries[tree]

    def lookup(self, tree: str, path: str) -> tuple[str, str] | None:
        *dirs, name = path.split("/")
        for d in dirs:
            entry = self.entries(tree).get(d)
            if entry is None or entry[0] != TREE_MODE:
                return None
            tree = entry[1]
        return self.entries(tree).get(name)

    def edit(self, tree: str | None, changes: Edits, *, write: bool = True) -> str:
        """Without ``write``, new trees are kept under placeholder ids for git to write."""
        return self._edit(tree, changes, write) or self._store({}, write)

    def written(self, tree: str) -> str:
        if not tree.startswith("pending-tree:"):
            return tree
        if tree not in self._written:
            entries = {
                name: (mode, self.written(sha) if mode == TREE_MODE else sha)
                for name, (mode, sha) in self.entries(tree).items()
            }
            self._written[tree] = self._store(entries, True)
        return self._written[tree]

    def _store(self, entries: dict[str, tuple[str, str]], write: bool) -> str:
        sha = self.repo.write_tree(entries) if write else f"pending-tree:{len(self._entries)}"
        self._entries[sha] = entries
        return sha

    def _edit(self, tree: str | None, changes: Edits, write: bool) -> str | None:
        entries = dict(self.entries(tree)) if tree else {}
        below: dict[str, Edits] = {}
        for path, entry in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                below.setdefault(head, {})[rest] = entry
            elif entry is None:
                entries.pop(head, None)
            else:
                entries[head] = entry
        for name, sub in below.items():
            current = entries.get(name)
            new = self._edit(current[1] if current and current[0] == TREE_MODE else None, sub, write)
            if new is None:
                entries.pop(name, None)
            else:
                entries[name] = (TREE_MODE, new)
        if not entries:
            return None
        return self._store(entries, write)


def trivial_merge(trees: Trees, tip_tree: str, changes: Sequence[git.TreeChange]) -> Edits | None:
    """None where merge-ort might have something to decide."""
    # No rename merge-ort would follow: none within the pick (it does not both add and delete).
    if {"A", "D"} <= {c.status for c in changes}:
        return None
    edits: Edits = {}
    for c in changes:
        if not _tip_as_parent(trees, tip_tree, c):
            return None
        edits[c.path] = None if c.new_mode == _ABSENT else (c.new_mode, c.new_sha)
    return edits


def _tip_as_parent(trees: Trees, tip_tree: str, change: git.TreeChange) -> bool:
    """merge-ort follows a directory rename only where the directory is gone."""
    before = None if change.old_mode == _ABSENT else (change.old_mode, change.old_sha)
    if trees.lookup(tip_tree, change.path) != before:
        return False
    parent = change.path.rpartition("/")[0]
    return change.status != "A" or not parent or (trees.lookup(tip_tree, parent) or ("",))[0] == TREE_MODE
