"""The stored patches as commits on their recorded parents, what ``apply`` replays. The files are the truth: an imported
commit's tree is trusted while ``diff-tree -p`` (the slow part) checks it; a pick it does not bear out is made again."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ggstack import git
from ggstack.cache import Map
from ggstack.errors import UserError
from ggstack.model import Patch, Stack

ADAPTED = re.compile(r"^Adapted: ", re.M)  # the trailer `ggstack refresh` writes: the patch carries a resolution


@dataclass(frozen=True)
class Pick:
    patch: Patch | None  # None when picking a commit directly (check --commits)
    commit: str | None  # None: its recorded parent is missing; replayed by plain apply
    parent: str | None
    given_diff: bytes | None  # the diff, where no patch gives it (``diff``)
    name: str
    subject: str
    key: str | None = None  # what the result cache knows it by, where that is not ``commit`` (``stand_in``)

    @property
    def diff(self) -> bytes:
        """Encoded only when asked: a big patch is not held as text and as bytes."""
        if self.given_diff is not None or self.patch is None:
            return self.given_diff or b""
        return self.patch.diff.encode("utf-8", "surrogateescape")

    @property
    def known_as(self) -> str:
        return self.key or self.commit or ""


def materialize(repo: git.Repository, stack: Stack) -> list[Pick]:
    made = Materializer(repo, stack)
    return made.confirm() or made.picks


class Materializer:
    """Trusts a source commit's tree where no ``Dropped:``/``Adapted:`` says the diff changed.
    ``stand_in``: a trusted source commit on the recorded parent is the pick itself."""

    def __init__(self, repo: git.Repository, stack: Stack, *, stand_in: bool = False) -> None:
        self._repo, self._stack, self._stand_in = repo, stack, stand_in
        self._cache = Map(repo, "materialized")
        self._cached = [self._cache_hit(p) for p in stack.patches]
        # Read, not only looked up: the source commits' trees and apply's merge base are then read already.
        found = repo.read_commits(_named_commits(stack, self._cached))
        self._present = set(found)
        self._parents = {sha: info.parents for sha, info in found.items()}
        self._todo = _to_make(repo, stack, self._cached, self._present)
        self._sourced = [(p, parent) for p, parent in self._todo if p.source_commit in self._present]
        self._diffs = repo.start_source_diffs([(p.source_commit or "", parent) for p, parent in self._sourced])
        self._trusted = _source_trees(repo, [p for p, _ in self._sourced if _unchanged_since_import(p)])
        self._made: dict[str, str] = {}
        self._standing: dict[str, str] = {}  # patch name -> the source commit standing in for it
        self.changes = self._make()  # pick commit -> what it changes, where taken on trust (Replayer.prepare)
        self.picks = self._picks()

    def _cache_hit(self, patch: Patch) -> str | None:
        return (self._stand_in and self._cache.get(_stand_in_key(patch))) or self._cache.get(_materialize_key(patch))

    def _make(self) -> dict[str, list[git.TreeChange]]:
        trusted = [(p, parent) for p, parent in self._sourced if p.name in self._trusted]
        changes = self._repo.start_tree_changes([(p.source_commit or "", parent) for p, parent in trusted])
        self._standing = {p.name: p.source_commit or "" for p, parent in trusted if self._stands_in(p, parent)}
        self._made = {**self._standing, **self._commit_the_rest()}
        return {self._made[p.name]: c for (p, _), c in zip(trusted, changes())}

    def _commit_the_rest(self) -> dict[str, str]:
        todo = [(p, parent) for p, parent in self._todo if p.name not in self._standing]
        self._repo.prepare_idents(split_author(p.author) for p, _ in self._todo)  # the replay's commits need them too
        commits = _commit_patches(self._repo, self._stack, todo, self._trusted)
        return {patch.name: commit for (patch, _), commit in zip(todo, commits)}

    def _stands_in(self, patch: Patch, parent: str) -> bool:
        return self._stand_in and self._parents.get(patch.source_commit or "", ())[:1] == (parent,)

    def confirm(self) -> list[Pick] | None:
        """Cache what the check bears out; None where it bore out every pick, else the picks made again."""
        exact = _exact_trees(self._sourced, self._diffs())
        wrong = [
            (p, parent)
            for p, parent in self._todo
            if p.name in self._trusted and exact.get(p.name) != self._trusted[p.name]
        ]
        for (patch, _), commit in zip(wrong, _commit_patches(self._repo, self._stack, wrong, exact)):
            self._made[patch.name] = commit
            self._standing.pop(patch.name, None)
        for patch, _ in self._todo:
            key = _stand_in_key(patch) if patch.name in self._standing else _materialize_key(patch)
            self._cache.put(key, self._made[patch.name])
        self._cache.save()
        return self._picks() if wrong else None

    def _picks(self) -> list[Pick]:
        picks = []
        for patch, hit in zip(self._stack.patches, self._cached):
            recorded = patch.base_commit if patch.base_commit in self._present else None
            cached = hit if hit in self._present else None
            commit = (self._made.get(patch.name) or cached) if recorded else None
            key = f"{commit}+{_materialize_key(patch)}" if commit and commit == self._stood_in(patch) else None
            picks.append(Pick(patch, commit, recorded, None, patch.name, patch.subject, key))
        return picks

    def _stood_in(self, patch: Patch) -> str | None:
        return patch.source_commit if self._stand_in and patch.source_commit else None


def _named_commits(stack: Stack, cached: Sequence[str | None]) -> list[str]:
    named = [p.base_commit for p in stack.patches if p.base_commit]
    named += [p.source_commit for p in stack.patches if p.source_commit]
    return named + [c for c in cached if c]


def _to_make(
    repo: git.Repository, stack: Stack, cached: Sequence[str | None], present: set[str]
) -> list[tuple[Patch, str]]:
    """A recorded parent missing from a shallow clone is the user's to fetch."""
    todo: list[tuple[Patch, str]] = []
    for patch, hit in zip(stack.patches, cached):
        parent = patch.base_commit
        if parent is None or parent not in present:
            if parent and repo.is_shallow():
                raise UserError(
                    f"the recorded base {parent[:12]} is not in this shallow clone; run `git fetch --unshallow`",
                    path=os.path.join(stack.path, patch.name),
                )
        elif hit not in present:
            todo.append((patch, parent))
    return todo


def remember_materialized(repo: git.Repository, made: Sequence[tuple[Patch, str]]) -> None:
    cache = Map(repo, "materialized")
    for patch, commit in made:
        cache.put(_materialize_key(patch), commit)
    cache.save()


def _materialize_key(patch: Patch) -> str:
    return hashlib.sha1(patch.raw).hexdigest()


def _stand_in_key(patch: Patch) -> str:
    return "stand-in:" + _materialize_key(patch)


def _unchanged_since_import(patch: Patch) -> bool:
    return not patch.provenance.dropped and not ADAPTED.search(patch.message)


def _source_trees(repo: git.Repository, patches: Sequence[Patch]) -> dict[str, str]:
    infos = repo.read_commits(p.source_commit or "" for p in patches)
    return {p.name: infos[p.source_commit].tree for p in patches if p.source_commit in infos}


def _exact_trees(sourced: Sequence[tuple[Patch, str]], diffs: Sequence[tuple[str, memoryview]]) -> dict[str, str]:
    """Where the stored diff is exactly the source commit's, applying it can only give its tree."""
    trees = {}
    for (patch, _), (tree, diff) in zip(sourced, diffs):
        if _same_diff(diff, patch.diff):
            trees[patch.name] = tree
    return trees


_COMPARED = 1 << 20  # characters of a stored diff encoded at a time to be compared


def _same_diff(data: memoryview, text: str) -> bool:
    """A piece at a time: a big diff is neither encoded whole nor stripped."""
    n, t = data.nbytes, len(text)
    while n and data[n - 1] == 10:
        n -= 1
    while t and text[t - 1] == "\n":
        t -= 1
    at = 0
    for i in range(0, t, _COMPARED):
        piece = text[i : min(i + _COMPARED, t)].encode("utf-8", "surrogateescape")
        if data[at : at + len(piece)] != piece:
            return False
        at += len(piece)
    return at == n


def _commit_patches(
    repo: git.Repository, stack: Stack, todo: Sequence[tuple[Patch, str]], trees: dict[str, str]
) -> list[str]:
    ready: list[git.TreeCommit] = []
    refused: dict[int, str] = {}
    repo.prepare_idents(split_author(patch.author) for patch, _ in todo)
    for n, (patch, parent) in enumerate(todo):
        tree = trees.get(patch.name) or _tree_of_patch(repo, stack, patch, parent)
        name, email = split_author(patch.author)
        author = repo.ident(name, email, patch.date)
        if author is None:  # git refuses it: commit-tree says why
            refused[n] = repo.commit_tree(tree, [parent], patch.message, author=(name, email, patch.date), scratch=True)
        else:
            ready.append(git.TreeCommit(tree, parent, patch.message, author, git.SCRATCH_IDENT))
    written = iter(_write_tree_commits(repo, ready))
    return [refused[n] if n in refused else next(written) for n in range(len(todo))]


def _write_tree_commits(repo: git.Repository, ready: Sequence[git.TreeCommit]) -> list[str]:
    """fast-import might not write an ident as it is: then the persistent writer."""
    if all(git.importable(c.author) and git.importable(c.committer) for c in ready):
        return repo.write_tree_commits(ready)
    return repo.write_commits([(c.tree, [c.parent], c.message, c.author, c.committer) for c in ready])


def _tree_of_patch(repo: git.Repository, stack: Stack, patch: Patch, parent: str) -> str:
    parent_tree = repo.resolve(parent, "tree")
    tree, message = repo.apply_to_tree(parent_tree, patch.diff.encode("utf-8", "surrogateescape"))
    if tree is None:
        raise UserError(
            f"does not apply to its recorded base {parent[:12]}: {message.strip()}",
            path=os.path.join(stack.path, patch.name),
        )
    return tree


def split_author(author: str) -> tuple[str, str]:
    name, _, rest = author.rpartition(" <")
    return name.strip().strip('"'), rest.rstrip(">")
