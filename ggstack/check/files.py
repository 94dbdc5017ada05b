"""Tree entries and blob contents for the judgement, read in batches.

A check of hundreds of commits reads thousands of file versions; one
``cat-file --batch`` for many objects (and a cache, since the same versions
come back for every signal) is what keeps it near ``git cherry``'s time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ggstack import git

_FEW = 64  # fewer objects than this are read through the persistent cat-file, not a new process


class Files:
    def __init__(self, repo: git.Repository) -> None:
        self.repo = repo
        self._blobs: dict[str, bytes | None] = {}
        self._lines: dict[str, list[str]] = {}
        self._entries: dict[str, dict[str, tuple[str, str]]] = {}

    def entries(self, tree: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
        """path -> (mode, blob) in ``tree``, for the paths that are there."""
        known = self._entries.setdefault(tree, {})
        missing = [p for p in dict.fromkeys(paths) if p not in known]
        if missing:
            got = self.repo.ls_tree(tree, missing)
            for p in missing:
                known[p] = got.get(p, ("", ""))
        return {p: known[p] for p in paths if known.get(p, ("", ""))[1]}

    def prefetch(self, shas: Sequence[str | None]) -> None:
        want = [s for s in dict.fromkeys(shas) if s and not is_zero(s) and s not in self._blobs]
        if len(want) <= _FEW:
            for sha in want:
                self._blobs[sha] = self.repo.read_object(sha)
            return
        for sha, obj in zip(want, self.repo.cat_file_batch(want), strict=True):
            self._blobs[sha] = obj[2] if obj else None

    def blob(self, sha: str | None) -> bytes | None:
        if not sha or is_zero(sha):
            return None
        if sha not in self._blobs:
            self.prefetch([sha])
        return self._blobs[sha]

    def lines(self, sha: str | None) -> list[str]:
        """The blob as lines (no line ends); [] for none."""
        if not sha or is_zero(sha):
            return []
        if sha not in self._lines:
            self._lines[sha] = split_lines(self.blob(sha))
        return self._lines[sha]


def is_zero(sha: str) -> bool:
    return not sha.strip("0")


def split_lines(data: bytes | None) -> list[str]:
    if not data:
        return []
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def is_text(data: bytes | None) -> bool:
    return data is None or b"\0" not in data[:8000]
