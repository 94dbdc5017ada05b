"""Replay a stack onto a base, in memory, through every conflict (``ggstack apply``).

Each stored patch becomes the commit ``git rebase`` would pick: the patch on
the parent it records (``materialize``). Replaying it is cherry-pick's merge
with that parent as the merge base, done by ``git merge-tree --write-tree``
(merge-ort, what rebase uses), so result trees are git's byte for byte; the
differential test against ``git rebase`` holds every shortcut here to that.
Processes are the cost: a step merge-ort has nothing to decide in edits the
tip's tree in memory (``trivial_merge``), one it has to decide is merged onto
that tree (its new subtrees written for it), and the commits of all of them
are written by one ``git fast-import`` at the end (``flush``); other objects
go to git's persistent writers, results are cached by their inputs, and refs
are written at the end in one transaction, so a run killed midway leaves
every ref as it was.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ggstack import git, state
from ggstack.cache import Map
from ggstack.diff import paths as diff_paths
from ggstack.errors import UserError
from ggstack.model import Applied, Conflict, Outcome, Patch, Progress, Run, Stack
from ggstack.series import branchnames, config

_CONTEXT = 3  # lines of context kept around a conflict region
_Author = tuple[str, str, str, str, str | None]  # name, email, date, message, git's ident line (None: refused)
ADAPTED = re.compile(r"^Adapted: ", re.M)  # the trailer `ggstack refresh` writes: the patch carries a resolution


@dataclass(frozen=True)
class Pick:
    """A patch as a commit on the parent it was recorded against."""

    patch: Patch | None  # None when picking a commit directly (check --commits)
    commit: str | None  # None: its recorded parent is missing; replayed by plain apply
    parent: str | None
    given_diff: bytes | None  # the diff, where no patch gives it (``diff``)
    name: str
    subject: str
    key: str | None = None  # what the result cache knows it by, where that is not ``commit`` (``stand_in``)

    @property
    def diff(self) -> bytes:
        """The diff as git reads it (the plain-apply fallback, check's reading of it): the patch's,
        encoded when asked, so a big patch is not held as text and as bytes all the way."""
        if self.given_diff is not None or self.patch is None:
            return self.given_diff or b""
        return self.patch.diff.encode("utf-8", "surrogateescape")

    @property
    def known_as(self) -> str:
        """The pick in the result cache's keys."""
        return self.key or self.commit or ""


@dataclass(frozen=True)
class _Pending:
    """A trivial pick kept back: its commit is written with the others of its run."""

    parent: str  # the tip it goes on: a written commit or the placeholder before it
    pick: str  # the pick as the result cache knows it (``Pick.known_as``)
    commit: str  # its placeholder id
    chained: git.ChainCommit


@dataclass(frozen=True)
class Step:
    """The result of replaying one pick onto a tip."""

    applied: Applied
    tree: str  # the merged tree (with conflict markers for a conflict)
    commit: str | None = None  # the new commit when applied
    conflict: Conflict | None = None
    note: str = ""


# -- materialising the stored patches ---------------------------------------------


def materialize(repo: git.Repository, stack: Stack) -> list[Pick]:
    """Each stored patch as a commit on its recorded parent (cached by content)."""
    made = Materializer(repo, stack)
    return made.confirm() or made.picks


class Materializer:
    """Each stored patch as a commit on its recorded parent, made before the check that
    says whether its source commit's tree may stand for it.

    The stored files are the truth. When the commit a patch was imported from is here and its
    diff from the recorded parent is the stored diff byte for byte, its tree is that commit's;
    only a patch edited by hand or imported with ``--only`` needs ``git apply`` on a temporary
    index. Making the diffs to compare (``diff-tree -p``) is the slow part, so they are made
    while the caller replays: ``picks`` takes each source commit's tree on trust (where no
    ``Dropped:``/``Adapted:`` trailer says the diff was changed), and ``confirm`` waits for
    the comparison; a pick it does not bear out is made again and the caller replays again.
    Nothing is cached before ``confirm``.

    With ``stand_in`` (apply, which reads a pick's tree and parent, never its message), a
    trusted pick whose source commit has the recorded parent as its first parent is that commit
    itself: it has the tree the patch's commit would have, on that parent, and a merge of it
    onto a commit of that parent has that parent as its one merge base whatever the source's
    other parents (a PR's merge) are. So there is no commit to write, and the result cache
    knows it by that commit and the patch file (``Pick.key``).
    """

    def __init__(self, repo: git.Repository, stack: Stack, *, stand_in: bool = False) -> None:
        self._repo, self._stack, self._stand_in = repo, stack, stand_in
        self._cache = Map(repo, "materialized")
        self._cached = [
            (stand_in and self._cache.get(_stand_in_key(p))) or self._cache.get(_materialize_key(p))
            for p in stack.patches
        ]
        wanted = [p.base_commit for p in stack.patches if p.base_commit]
        wanted += [p.source_commit for p in stack.patches if p.source_commit] + [c for c in self._cached if c]
        # Read, not only looked up: the persistent reader answers, and the source commits' trees
        # (``_source_trees``) and the merge base's question (``apply``) are then read already.
        found = repo.read_commits(wanted)
        self._present = {sha: sha in found for sha in wanted}
        self._parents = {sha: info.parents for sha, info in found.items()}
        self._todo = _to_make(repo, stack, self._cached, self._present)
        self._sourced = [
            (p, parent) for p, parent in self._todo if p.source_commit and self._present.get(p.source_commit)
        ]
        self._diffs = repo.start_source_diffs([(p.source_commit or "", parent) for p, parent in self._sourced])
        self._trusted = _source_trees(repo, [p for p, _ in self._sourced if _unchanged_since_import(p)])
        self._made: dict[str, str] = {}
        self._standing: dict[str, str] = {}  # patch name -> the source commit standing in for it
        self.changes = self._make()
        """pick commit -> what it changes, for the picks made from their source commit's tree
        (``Replayer.prepare`` takes them); none for a pick ``confirm`` makes again."""
        self.picks = self._picks()

    def _make(self) -> dict[str, list[git.TreeChange]]:
        """Write the commits to make; what the trusted ones change. That is what the source commit
        changes from the recorded parent (the same tree on the same parent): read while the commits
        are written, not after."""
        trusted = [(p, parent) for p, parent in self._sourced if p.name in self._trusted]
        changes = self._repo.start_tree_changes([(p.source_commit or "", parent) for p, parent in trusted])
        self._standing = {
            p.name: p.source_commit or ""
            for p, parent in trusted
            if self._stand_in and self._parents.get(p.source_commit or "", ())[:1] == (parent,)
        }
        todo = [(p, parent) for p, parent in self._todo if p.name not in self._standing]
        self._repo.prepare_idents(split_author(p.author) for p, _ in self._todo)  # the replay's commits need them too
        commits = _commit_patches(self._repo, self._stack, todo, self._trusted)
        self._made = {**self._standing, **{patch.name: commit for (patch, _), commit in zip(todo, commits)}}
        return {self._made[p.name]: c for (p, _), c in zip(trusted, changes())}

    def confirm(self) -> list[Pick] | None:
        """Wait for the comparison; cache what it bears out. None when it bore out every pick,
        else the picks with those it did not made again by ``git apply``."""
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
            recorded = patch.base_commit if patch.base_commit and self._present.get(patch.base_commit) else None
            cached = hit if hit and self._present.get(hit) else None
            commit = (self._made.get(patch.name) or cached) if recorded else None
            key = f"{commit}+{_materialize_key(patch)}" if commit and commit == self._stood_in(patch) else None
            picks.append(Pick(patch, commit, recorded, None, patch.name, patch.subject, key))
        return picks

    def _stood_in(self, patch: Patch) -> str | None:
        """The source commit standing in for ``patch`` (see ``stand_in``), if one does."""
        return patch.source_commit if self._stand_in and patch.source_commit else None


def _to_make(
    repo: git.Repository, stack: Stack, cached: Sequence[str | None], present: dict[str, bool]
) -> list[tuple[Patch, str]]:
    """The patches to make a commit of: their recorded parent is here, their cached commit is not.
    A parent missing from a shallow clone is the user's to fetch."""
    todo: list[tuple[Patch, str]] = []
    for patch, hit in zip(stack.patches, cached):
        parent = patch.base_commit
        if parent is None or not present.get(parent):
            if parent and repo.is_shallow():
                raise UserError(
                    f"the recorded base {parent[:12]} is not in this shallow clone; run `git fetch --unshallow`",
                    path=os.path.join(stack.path, patch.name),
                )
        elif not (hit and present.get(hit)):
            todo.append((patch, parent))
    return todo


def remember_materialized(repo: git.Repository, made: Sequence[tuple[Patch, str]]) -> None:
    """Record commits that are these patch files on their recorded parents (a command that just
    wrote the files from them: rebase, refresh, edit), so the next apply need not rebuild them."""
    cache = Map(repo, "materialized")
    for patch, commit in made:
        cache.put(_materialize_key(patch), commit)
    cache.save()


def _materialize_key(patch: Patch) -> str:
    return hashlib.sha1(patch.raw).hexdigest()


def _stand_in_key(patch: Patch) -> str:
    """The cache's record that ``patch``'s source commit stands in for it (``Materializer``)."""
    return "stand-in:" + _materialize_key(patch)


def authored_commit(repo: git.Repository, patch: Patch, tree: str, parent: str, message: str) -> str:
    """``tree`` on ``parent`` as ``patch``'s commit, committer = author (as ``git rebase
    --committer-date-is-author-date``): the same patch on the same parent is the same commit on
    every machine (rebase's ``base-commit`` ids, the files edit and refresh write)."""
    name, email = split_author(patch.author)
    ident = repo.ident(name, email, patch.date)
    if ident is None:  # git refuses it: commit-tree says why
        who = (name, email, patch.date)
        return repo.commit_tree(tree, [parent], message, author=who, committer=who)
    return repo.write_commit(tree, [parent], message, ident, ident)


def patch_file(
    repo: git.Repository, stack: Stack, patch: Patch, commit: str, parent: str, number: int, total: int
) -> Patch:
    """The file ``format-patch`` writes for ``commit`` on ``parent`` (``number`` of ``total``),
    read back as ``patch``'s new file: its name, and the mbox "From " line naming its source
    commit as at import. Its provenance is the caller's to settle."""
    from ggstack.series import patchfile  # the stored series' parser: not for check, which reads commits

    _, data = repo.format_patch(commit, parent, number=number, total=total)
    if patch.source_commit:
        data = data.replace(commit.encode(), patch.source_commit.encode(), 1)
    return dataclasses.replace(patchfile.parse_patch(data, os.path.join(stack.path, patch.name)), name=patch.name)


def _unchanged_since_import(patch: Patch) -> bool:
    """Whether the stored diff is likely its source commit's: no path was left out at import
    (``Dropped:``) and no resolution was written into it (``Adapted:``)."""
    return not patch.provenance.dropped and not ADAPTED.search(patch.message)


def _source_trees(repo: git.Repository, patches: Sequence[Patch]) -> dict[str, str]:
    """patch name -> its source commit's tree (one request to the persistent reader)."""
    infos = repo.read_commits(p.source_commit or "" for p in patches)
    return {p.name: infos[p.source_commit].tree for p in patches if p.source_commit in infos}


def _exact_trees(sourced: Sequence[tuple[Patch, str]], diffs: Sequence[tuple[str, memoryview]]) -> dict[str, str]:
    """patch name -> the tree its source commit has, for the patches whose
    stored diff is exactly the source commit's diff from the recorded
    parent: applying that diff to the parent can only give that tree."""
    trees = {}
    for (patch, _), (tree, diff) in zip(sourced, diffs):
        if _same_diff(diff, patch.diff):
            trees[patch.name] = tree
    return trees


_COMPARED = 1 << 20  # characters of a stored diff encoded at a time to be compared


def _same_diff(data: memoryview, text: str) -> bool:
    """git's diff ``data`` is the stored diff ``text`` but for newlines at their ends: compared
    a piece at a time where they are (a big diff is neither encoded whole nor stripped: copies)."""
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
    """Each patch of ``todo`` as a commit on its parent; the commits need not wait on each
    other, so they are written together (one ``fast-import``, or one request to the
    persistent writer where fast-import might not write an ident as it is)."""
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
    if all(git.importable(c.author) and git.importable(c.committer) for c in ready):
        written = iter(repo.write_tree_commits(ready))
    else:
        written = iter(repo.write_commits([(c.tree, [c.parent], c.message, c.author, c.committer) for c in ready]))
    return [refused[n] if n in refused else next(written) for n in range(len(todo))]


def _tree_of_patch(repo: git.Repository, stack: Stack, patch: Patch, parent: str) -> str:
    """The recorded parent's tree with the stored diff applied (a temporary index)."""
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


# -- replaying ----------------------------------------------------------------------


class Replayer:
    """Replays picks one at a time onto a moving tip; the caller decides
    which results to keep (``advance``), so ``check`` can leave out patches
    the base already has."""

    def __init__(self, repo: git.Repository, onto: str, *, chain: bool = False) -> None:
        self.repo = repo
        self.tip = onto
        read = repo.read_commits([onto]).get(onto)  # a commit's id, as apply gives it: no rev-parse
        self.tip_tree = read.tree if read else repo.resolve(onto, "tree")
        self._results = Map(repo, "replayed")
        self._committer: Callable[[], str] | None = None  # git var, started once a commit is to be made
        self._changes: dict[str, list[git.TreeChange]] = {}
        self._trees = Trees(repo)
        self._cached: dict[str, git.CommitInfo] = {}  # the replayed commits the cache names, read ahead
        self._deferred: set[str] = set()  # picks the cache should answer: their changes read only if it does not
        # chain: trivial picks are kept back and written together (``flush``); their steps name
        # placeholder ids until then (``settled``). Only for a caller that keeps every step.
        self._chain = chain
        self._pending: list[_Pending] = []
        self._settled: dict[str, tuple[str, str]] = {}  # placeholder commit -> (commit, tree)
        self._empty: list[tuple[str, str]] = []  # (tip, pick) of the empty picks a flush is to record

    def prepare(self, picks: Sequence[Pick], known: Mapping[str, list[git.TreeChange]] | None = None) -> None:
        """Read what every pick changes, in one process, so that picks whose
        merge is trivial need no merge-tree (see ``trivial_merge``); not for
        the picks the result cache answers (a rerun reads none), nor for those
        ``known`` already says (pick commit -> its changes)."""
        self._deferred |= self._read_ahead(picks)
        todo = [p for p in picks if p.commit and p.parent and p.commit not in self._deferred]
        if todo and self._committer is None:  # commits will be made: their committer asked meanwhile
            self._committer = functools.cache(self.repo.start_committer_ident())
        known = known or {}
        self._changes.update((p.commit, known[p.commit]) for p in todo if p.commit and p.commit in known)
        pairs = [(p.commit or "", p.parent or "") for p in todo if p.commit not in self._changes]
        for (commit, _), changes in zip(pairs, self.repo.tree_changes(pairs)):
            self._changes[commit] = changes

    def _read_ahead(self, picks: Sequence[Pick]) -> set[str]:
        """The commits the result cache names along the chain from this tip, read in one process;
        the picks they answer.

        A rerun replays from the cache: each hit is checked (its parent must be
        the tip), and asking for them one at a time was a round trip a patch.
        The chain is followed as if every pick were kept; where the caller
        leaves one out, the later hits are read one at a time, as before, and
        a pick the cache then does not answer reads its changes alone.
        """
        tip, chain = self.tip, []
        for pick in picks:
            hit = self._results.get(f"{tip}:{pick.known_as}") if pick.commit else None
            if not hit:
                break
            chain.append((pick.commit or "", hit, tip))
            tip = tip if hit == "empty" else hit
        self._cached.update(self.repo.read_commits(hit for _, hit, _ in chain if hit != "empty"))
        answered = set()
        for commit, hit, parent in chain:  # a hit that is gone, or not on its tip, ends what the cache answers
            info = self._cached.get(hit)
            if hit != "empty" and (info is None or info.parents != (parent,)):
                break
            answered.add(commit)
        return answered

    def _changes_of(self, pick: Pick) -> list[git.TreeChange] | None:
        """What the pick changes: read by ``prepare``, or now for one it left to the cache."""
        if pick.commit and pick.commit not in self._changes and pick.commit in self._deferred and pick.parent:
            self._changes[pick.commit] = self.repo.tree_changes([(pick.commit, pick.parent)])[0]
        return self._changes.get(pick.commit or "")

    def try_pick(self, pick: Pick) -> Step:
        if pick.commit is None:
            self.flush()
            return self._apply_fallback(pick)
        hit = self._results.get(f"{self.tip}:{pick.known_as}")  # a placeholder tip is in no key
        if hit:
            step = self._from_cache(hit)
            if step is not None:
                return step
        changes = self._changes_of(pick)
        edits = trivial_merge(self._trees, self.tip_tree, changes) if changes else None
        who = None
        if self._chain:
            who = self._author_of(pick)
            kept = self._keep_back(pick, edits, who) if edits is not None else self._merge_kept_back(pick, who)
            if kept is not None:
                return kept
        self.flush()
        key = f"{self.tip}:{pick.known_as}"
        if edits is not None:
            tree = self._trees.edit(self.tip_tree, edits)
            commit = self._commit(pick, tree, who)
            self._results.put(key, commit)
            return Step(Applied.APPLIED, tree, commit)
        merged = self.repo.cherry_pick_tree(pick.commit, pick.parent or "", self.tip_tree)
        if not merged.clean:
            return Step(Applied.CONFLICT, merged.tree, conflict=self._conflict(merged))
        if merged.tree == self.tip_tree:
            self._results.put(key, "empty")
            return Step(Applied.EMPTY, merged.tree)
        commit = self._commit(pick, merged.tree, who)
        self._results.put(key, commit)
        return Step(Applied.APPLIED, merged.tree, commit)

    def advance(self, step: Step) -> None:
        if step.applied is Applied.APPLIED and step.commit:
            self.tip = step.commit
            self.tip_tree = step.tree

    def close(self) -> None:
        self._results.save()

    def _keep_back(self, pick: Pick, edits: dict[str, tuple[str, str] | None], who: _Author) -> Step | None:
        """A trivial pick's step, its commit left for ``flush`` to write with the picks around
        it; None where fast-import might not write its idents as they are."""
        idents = self._chainable(who)
        if idents is None:
            return None
        tree = self._trees.edit(self.tip_tree, edits, write=False)
        return Step(Applied.APPLIED, tree, self._pend(pick, edits, idents))

    def _merge_kept_back(self, pick: Pick, who: _Author) -> Step | None:
        """A pick merge-ort has to decide, merged onto the tip's tree (the trees of the picks
        kept back are written for it, a round trip to ``mktree`` each, not a ``fast-import`` a
        merge) and its commit kept back too, as the tree it merged to; None where fast-import
        might not write its idents as they are."""
        idents = self._chainable(who)
        if idents is None:
            return None
        tip_tree = self._trees.written(self.tip_tree)
        merged = self.repo.cherry_pick_tree(pick.commit or "", pick.parent or "", tip_tree)
        if not merged.clean:
            return Step(Applied.CONFLICT, merged.tree, conflict=self._conflict(merged))
        if merged.tree == tip_tree:
            self._empty.append((self.tip, pick.known_as))
            return Step(Applied.EMPTY, merged.tree)
        root: dict[str, tuple[str, str] | None] = {"": (_FAST_IMPORT_TREE, merged.tree)}
        return Step(Applied.APPLIED, merged.tree, self._pend(pick, root, idents))

    def _chainable(self, who: _Author) -> tuple[str, str, str] | None:
        """A pick's message, author and committer for a commit kept back; None where
        fast-import might not write its idents as they are."""
        _, _, _, message, author = who
        committer = self._committer_ident()
        if author is None or not git.importable(author) or not git.importable(committer):
            return None
        return message, author, committer

    def _pend(self, pick: Pick, edits: dict[str, tuple[str, str] | None], idents: tuple[str, str, str]) -> str:
        """A pick's commit kept back for ``flush``, named by a placeholder until it is written."""
        commit = f"pending-commit:{len(self._settled) + len(self._pending)}"
        self._pending.append(_Pending(self.tip, pick.known_as, commit, git.ChainCommit(edits, *idents)))
        return commit

    def flush(self) -> None:
        """Write the picks kept back, as one chain on the last written tip."""
        pending, self._pending = self._pending, []
        written = self.repo.write_chain(pending[0].parent, [p.chained for p in pending]) if pending else []
        parent = pending[0].parent if pending else ""
        for p, (commit, tree) in zip(pending, written):
            self._settled[p.commit] = (commit, tree)
            self._results.put(f"{parent}:{p.pick}", commit)
            parent = commit
        for tip, pick in self._empty:  # a pick that changed nothing on a tip written only now
            self._results.put(f"{self._settled.get(tip, (tip,))[0]}:{pick}", "empty")
        self._empty = []
        if self.tip in self._settled:
            self.tip, self.tip_tree = self._settled[self.tip]

    def settled(self, step: Step) -> Step:
        """``step`` with the ids ``flush`` wrote in place of its placeholders."""
        if step.commit not in self._settled:
            return step
        commit, tree = self._settled[step.commit]
        return dataclasses.replace(step, commit=commit, tree=tree)

    def _from_cache(self, hit: str) -> Step | None:
        if hit == "empty":
            return Step(Applied.EMPTY, self.tip_tree)
        info = self._cached.get(hit) or self.repo.read_commit(hit)
        if info is None or info.parents != (self.tip,):
            return None  # pruned by gc, or not ours: redo the merge
        return Step(Applied.APPLIED, info.tree, hit)

    def _commit(self, pick: Pick, tree: str, who: _Author | None = None) -> str:
        """The replayed commit: the patch's author and message, the committer
        from the environment (as ``git rebase`` does)."""
        name, email, date, message, author = who or self._author_of(pick)
        if author is None:  # git refuses it: commit-tree says why
            return self.repo.commit_tree(tree, [self.tip], message, author=(name, email, date))
        return self.repo.write_commit(tree, [self.tip], message, author, self._committer_ident())

    def _author_of(self, pick: Pick) -> _Author:
        """(name, email, date, message, ident line or None where git refuses it) of the replayed commit."""
        if pick.patch is not None:
            name, email = split_author(pick.patch.author)
            date, message = pick.patch.date, pick.patch.message
        else:
            info = self.repo.commit_infos([pick.commit or ""])[0]
            name, email, date, message = info.author_name, info.author_email, info.author_date, info.message
        return name, email, date, message, self.repo.ident(name, email, date)

    def _committer_ident(self) -> str:
        if self._committer is None:
            self._committer = functools.cache(self.repo.start_committer_ident())
        return self._committer()

    def _apply_fallback(self, pick: Pick) -> Step:
        """The recorded parent is not here: ``git apply --3way`` from the
        index lines' blobs where they exist, else a plain apply; said so."""
        tree, message = self.repo.apply_to_tree(self.tip_tree, pick.diff, three_way=True)
        note = "recorded base missing: applied with git apply --3way"
        if tree is not None and "Falling back to direct application" in message:
            note = "recorded base and blobs missing: applied with plain git apply"
        if tree is None:
            tree, message = self.repo.apply_to_tree(self.tip_tree, pick.diff)
            note = "recorded base and blobs missing: applied with plain git apply"
        if tree is None:
            return Step(Applied.CONFLICT, self.tip_tree, conflict=_apply_conflict(pick, message), note=note)
        if tree == self.tip_tree:
            return Step(Applied.EMPTY, tree, note=note)
        return Step(Applied.APPLIED, tree, self._commit(pick, tree), note=note)

    def _conflict(self, merged: git.MergeResult) -> Conflict:
        """The conflicted files' marker regions, read as ``tree:path`` in one request to the
        persistent cat-file: a stack of hundreds of patches onto a far base conflicts hundreds
        of times, and an ``ls-tree`` process each was most of such an apply's time."""
        paths = list(merged.conflicted_paths)
        hunks = []
        for path, obj in zip(paths, self.repo.cat_file_batch([f"{merged.tree}:{p}" for p in paths]), strict=True):
            if obj is None or obj[1] != "blob":
                continue
            regions = conflict_regions(obj[2].decode("utf-8", "surrogateescape"))
            if regions:
                hunks.append(f"--- {path}\n{regions}")
        return Conflict(list(merged.conflicted_paths), "\n".join(hunks), merged.messages)


def _apply_conflict(pick: Pick, message: str) -> Conflict:
    """A failed ``git apply`` as a conflict: the files git names, with the line
    of the hunk that failed; when it names none (a corrupt patch), the patch's
    own files. There are no merge markers: the hunks say what git said."""
    failures = git.apply_failures(message)
    if not failures:
        named = list(pick.patch.paths) if pick.patch is not None else diff_paths(pick.diff.decode("utf-8", "replace"))
        return Conflict(named or ["?"], "", message.strip())
    hunks = [
        f"--- {f.path}\n" + (f"git apply: {f.reason} at line {f.line}" if f.line else f"git apply: {f.reason}")
        for f in failures
    ]
    return Conflict([f.path for f in failures], "\n".join(hunks), message.strip())


class Trees:
    """Trees by path, read through the persistent cat-file and written through
    one long-lived hash-object: editing a few paths of a big tree rewrites
    only the trees on those paths, with no index and no process."""

    def __init__(self, repo: git.Repository) -> None:
        self.repo = repo
        self._entries: dict[str, dict[str, tuple[str, str]]] = {}
        self._written: dict[str, str] = {}  # placeholder tree -> the tree git wrote of it

    def entries(self, tree: str) -> dict[str, tuple[str, str]]:
        if tree not in self._entries:
            self._entries[tree] = self.repo.tree_entries(tree)
        return self._entries[tree]

    def lookup(self, tree: str, path: str) -> tuple[str, str] | None:
        """(mode, sha) at ``path`` (a blob, link, submodule or tree), None if absent."""
        *dirs, name = path.split("/")
        for d in dirs:
            entry = self.entries(tree).get(d)
            if entry is None or entry[0] != TREE_MODE:
                return None
            tree = entry[1]
        return self.entries(tree).get(name)

    def edit(self, tree: str | None, changes: dict[str, tuple[str, str] | None], *, write: bool = True) -> str:
        """``tree`` with each path set to (mode, sha), or removed for None;
        a directory left empty goes, as in git. Without ``write`` the new
        trees are only read here, under placeholder ids: git writes them
        (``write_chain``)."""
        return self._edit(tree, changes, write) or self._store({}, write)

    def written(self, tree: str) -> str:
        """``tree`` as git has it: a placeholder (``edit`` without ``write``) is written now, the
        placeholders below it first; the rest of it is git's already."""
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

    def _edit(self, tree: str | None, changes: dict[str, tuple[str, str] | None], write: bool) -> str | None:
        entries = dict(self.entries(tree)) if tree else {}
        below: dict[str, dict[str, tuple[str, str] | None]] = {}
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


TREE_MODE = "40000"
_FAST_IMPORT_TREE = "040000"  # a whole tree, as fast-import's ``M`` takes it (for the root, path "")
_ABSENT = "0" * 6


def trivial_merge(
    trees: Trees, tip_tree: str, changes: Sequence[git.TreeChange]
) -> dict[str, tuple[str, str] | None] | None:
    """The edits that turn the tip into the cherry-pick's result, where
    merge-ort provably has nothing to decide; None where it might.

    Trivial means: every path the pick changes is, on the tip, exactly as it
    was in the pick's parent (so the tip's side made no change, no rename
    from or onto it), and no rename can arise that merge-ort would follow:
    the pick does not both add and delete (no rename within the pick, so no
    directory of its is renamed), and each file it adds goes into a
    directory the tip still has (merge-ort only follows a directory rename
    when the directory is gone). Then merge-ort takes the pick's side for
    each path, which is what the edits say.
    """
    kinds = {c.status for c in changes}
    if "A" in kinds and "D" in kinds:
        return None
    edits: dict[str, tuple[str, str] | None] = {}
    for c in changes:
        before = None if c.old_mode == _ABSENT else (c.old_mode, c.old_sha)
        if trees.lookup(tip_tree, c.path) != before:
            return None
        if c.status == "A":
            parent = c.path.rpartition("/")[0]
            if parent and (trees.lookup(tip_tree, parent) or ("",))[0] != TREE_MODE:
                return None
        edits[c.path] = None if c.new_mode == _ABSENT else (c.new_mode, c.new_sha)
    return edits


def conflict_regions(text: str) -> str:
    """The ``<<<<<<< ... >>>>>>>`` regions of a conflicted file, with a little context."""
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


def replay(
    repo: git.Repository,
    picks: Sequence[Pick],
    onto: str,
    progress: Progress | None = None,
    changes: Mapping[str, list[git.TreeChange]] | None = None,
) -> list[Step]:
    """Every pick in order onto ``onto``; a conflict is recorded and skipped. ``changes``: what
    some picks change, known already (``Materializer.changes``)."""
    kill_after = state.env_count("GGSTACK_DEBUG_KILL_AFTER")  # a bad value is refused before anything is made
    replayer = Replayer(repo, onto, chain=True)
    replayer.prepare(picks, changes)
    steps = []
    try:
        for i, pick in enumerate(picks, 1):
            step = replayer.try_pick(pick)
            replayer.advance(step)
            steps.append(step)
            if progress:
                progress(i, len(picks), pick.name)
            if kill_after and i >= kill_after:
                # A test hook: die as a crash would, between two patches.
                replayer.flush()
                replayer.close()
                os.kill(os.getpid(), signal.SIGKILL)
        replayer.flush()
    finally:
        replayer.close()
    return [replayer.settled(step) for step in steps]


# -- branches -------------------------------------------------------------------------


def branch_refs(stack: Stack, prefix: str | None = None) -> list[str]:
    """The ref each patch's branch lives at."""
    refs = []
    if prefix and prefix != prefix.encode("utf-8", "replace").decode("utf-8"):
        raise UserError(f"--branch-prefix {prefix!r} is not UTF-8")  # a surrogate-escaped byte from the command line
    if prefix and not prefix.startswith(branchnames.BRANCH_NAMESPACES):  # also: never a value git reads as an option
        raise UserError(
            f"--branch-prefix must be a full ref prefix under refs/heads/ or refs/ggstack/ "
            f"such as refs/heads/try, not {prefix!r}"
        )
    toml = os.path.join(stack.path, config.STACK_TOML)
    for i, p in enumerate(stack.patches, 1):
        if prefix:
            name = f"{prefix.rstrip('/')}/{i:02d}-{_ref_part(p.slug)}"
        else:
            try:
                name = stack.config.branch_template.format(
                    stack=stack.name, index=i, slug=_ref_part(p.slug), name=_ref_part(p.name.removesuffix(".patch"))
                )
            except (KeyError, IndexError, ValueError) as e:
                raise UserError(f"branches.template: {e} (fields: stack, index, slug, name)", path=toml) from None
        ref = name if name.startswith("refs/") else "refs/heads/" + name
        problem = branchnames.branch_ref_problem(ref)
        if problem:
            raise UserError(
                f"--branch-prefix {prefix!r} {problem}" if prefix else f"branches.template {problem}",
                path=None if prefix else toml,
            )
        refs.append(ref)
    if len(set(refs)) < len(refs):
        raise UserError("branches.template names one ref for two patches (use {index}, {slug} or {name})", path=toml)
    return refs


def branch_namespace(stack: Stack, prefix: str | None) -> str | None:
    """The part of the branch refs no patch changes (``refs/heads/gg/<stack>/``): where a branch
    of a patch that left the series (squashed, removed) is still ggstack's to remove. None where
    the template begins with a patch's own field, or leaves only ``refs/heads/`` (too wide)."""
    if prefix:
        return prefix.rstrip("/") + "/"
    template = stack.config.branch_template
    cut = min((i for i in (template.find("{" + f) for f in ("index", "slug", "name")) if i >= 0), default=-1)
    if cut <= 0:
        return None
    try:
        head = template[:cut].format(stack=stack.name)
    except (KeyError, IndexError, ValueError):
        return None
    full = head if head.startswith("refs/") else "refs/heads/" + head
    full = full[: full.rfind("/") + 1]
    return full if full.count("/") > 2 else None


def _ref_part(stem: str) -> str:
    """A patch file's name as a part of a ref name: format-patch cuts a long subject
    wherever it falls (``…-in-CONTRIBUTING..patch``), and git refuses a ref name
    with ``..``, or one part that starts with ``.`` or ends in ``.`` or ``.lock``."""
    part = re.sub(r"\.{2,}", ".", stem).lstrip(".")
    while part.endswith((".", ".lock")):
        part = part.removesuffix(".lock").rstrip(".")
    return part or "patch"


def _record_ref(stack: Stack) -> str:
    """Where ggstack remembers what it last wrote to each branch: one ref to a
    blob of ``<sha> <ref>`` lines, moved in the same transaction as the
    branches (one ref, not one shadow ref a branch: every ref is a file write)."""
    return f"refs/ggstack/{stack.name}/last-apply"


def _read_record(repo: git.Repository, sha: str | None) -> dict[str, str]:
    if sha is None:
        return {}
    lines = repo.read_blob(sha).decode("utf-8", "surrogateescape").splitlines()
    return {ref: value for value, _, ref in (line.partition(" ") for line in lines if line)}


class BranchReads:
    """What ``write_branches`` asks git before it writes: the refs' values and the branches
    that worktrees have checked out. ``apply`` starts both before it replays (``early``), so
    they are answered by the time the branches are written, not a process after another then;
    a ref moved in between makes the transaction fail as it would have (compare-and-swap)."""

    def __init__(self, repo: git.Repository, stack: Stack, refs: Sequence[str], *, early: bool = True) -> None:
        self._values = repo.start_ref_values([*refs, _record_ref(stack)])
        self._worktrees = repo.start_checked_out_branches() if early else repo.checked_out_branches
        self._checked_out: dict[str, str] | None = None

    def values(self) -> dict[str, str]:
        return self._values()

    def checked_out(self) -> dict[str, str]:
        if self._checked_out is None:
            self._checked_out = self._worktrees()
        return self._checked_out


def write_branches(
    repo: git.Repository,
    stack: Stack,
    steps: Sequence[Step],
    refs: Sequence[str],
    *,
    force: bool = False,
    namespace: str | None = None,
    reads: BranchReads | None = None,
) -> list[str | None]:
    """Point each applied patch's ref at its commit, in one transaction.

    A ref that someone else moved since ggstack last wrote it is not
    overwritten (unless ``force``); refs of patches that no longer apply
    are removed, if ggstack wrote them, and so are those under ``namespace``
    of patches that left the series (squashed, removed). ``reads``: what
    ``BranchReads`` started for these ``refs`` earlier.
    """
    record_ref = _record_ref(stack)
    reads = reads or BranchReads(repo, stack, refs, early=False)
    values = reads.values()
    last_written = _read_record(repo, values.get(record_ref))
    record = dict(last_written)
    updates: list[tuple[str, str | None, str | None]] = []
    moved, theirs = [], []
    result: list[str | None] = []
    for ref, step in zip(refs, steps):
        value = values.get(ref)
        last = last_written.get(ref)
        target = step.commit if step.applied is Applied.APPLIED else None
        result.append(ref if target else None)
        if value is not None and last is None:
            # Not ggstack's: a branch, tag or record of the user's that the name happens to match.
            # Never moved, not even with --force, nor taken into the record when it already agrees.
            if value != target:
                theirs.append(ref)
            continue
        if value is not None and value != last and value != target and not force:
            moved.append(ref)
            continue
        if value != target:
            updates.append((ref, target, value))
        if target:
            record[ref] = target
        else:
            record.pop(ref, None)
    _refuse_not_own(stack, theirs, moved)
    _refuse_checked_out([ref for ref, _, _ in updates], reads.checked_out)
    updates += _orphans(repo, refs, last_written, record, namespace, reads.checked_out)
    if record != last_written:
        blob = repo.hash_blob(
            "".join(f"{sha} {ref}\n" for ref, sha in sorted(record.items())).encode("utf-8", "surrogateescape")
        )
        updates.append((record_ref, blob, values.get(record_ref)))
    repo.update_refs(updates, f"ggstack apply {stack.name}")
    return result


def _refuse_not_own(stack: Stack, theirs: Sequence[str], moved: Sequence[str]) -> None:
    """Exit 2, nothing written, where a branch ggstack would write is not its own to move:
    one it never wrote (``theirs``: no --force moves it) or one moved since it did (``moved``)."""
    if theirs:
        raise UserError(
            "these refs exist and were not written by ggstack, which never moves them, not even with --force: "
            + ", ".join(theirs)
            + "; name other refs (branches.template, or --branch-prefix) or rename those; nothing was written",
            path=os.path.join(stack.path, config.STACK_TOML),
        )
    if moved:
        raise UserError(
            "someone else moved these branches since ggstack wrote them (use --force to overwrite): " + ", ".join(moved)
        )


def _orphans(
    repo: git.Repository,
    refs: Sequence[str],
    last_written: dict[str, str],
    record: dict[str, str],
    namespace: str | None,
    worktrees: Callable[[], dict[str, str]],
) -> list[tuple[str, str | None, str | None]]:
    """Deletions of the branches ggstack wrote under ``namespace`` for patches no longer in the
    series, where they still are what it wrote and no worktree has them checked out (``record``
    forgets them)."""
    stale = [r for r in last_written if namespace and r.startswith(namespace) and r not in refs]
    if not stale:
        return []
    values = repo.ref_values(stale)
    checked_out = worktrees()
    out: list[tuple[str, str | None, str | None]] = []
    for ref in stale:
        if values.get(ref) is None:
            record.pop(ref, None)
        elif values[ref] == last_written[ref] and ref not in checked_out:
            out.append((ref, None, values[ref]))
            record.pop(ref, None)
    return out


def remove_branches(
    repo: git.Repository, stack: Stack, refs: Sequence[str], *, write: bool = True
) -> tuple[list[str], list[str]]:
    """Delete those of ``refs`` that are ggstack's own, in one transaction; (deleted, kept with why).

    Own means: still where ``apply`` last put it (``last-apply``). A branch
    someone else moved, or one checked out in a worktree, is kept and said so;
    one that is not there is neither. The record forgets what was deleted.
    ``write`` off: what it would delete and keep (``drop --dry-run``), nothing written.
    """
    record_ref = _record_ref(stack)
    values = repo.ref_values([*refs, record_ref])
    last_written = _read_record(repo, values.get(record_ref))
    checked_out = repo.checked_out_branches() if refs else {}
    record = dict(last_written)
    updates: list[tuple[str, str | None, str | None]] = []
    kept = []
    for ref in refs:
        value = values.get(ref)
        if value is None:
            record.pop(ref, None)
        elif value != last_written.get(ref):
            why = "moved since ggstack wrote it" if ref in last_written else "not written by ggstack"
            kept.append(f"{ref} ({why})")
        elif ref in checked_out:
            kept.append(f"{ref} (checked out in {checked_out[ref]})")
        else:
            updates.append((ref, None, value))
            record.pop(ref, None)
    if not write:  # a dry run: not even the record's blob is written
        return [ref for ref, _, _ in updates], kept
    if record != last_written:
        text = "".join(f"{sha} {ref}\n" for ref, sha in sorted(record.items()))
        blob = repo.hash_blob(text.encode("utf-8", "surrogateescape")) if record else None
        updates.append((record_ref, blob, values.get(record_ref)))
    repo.update_refs(updates, f"ggstack drop {stack.name}")
    return [ref for ref, new, _ in updates if ref != record_ref], kept


def _refuse_checked_out(refs: Sequence[str], worktrees: Callable[[], dict[str, str]]) -> None:
    """As ``git branch -f``: a branch checked out in a worktree is never moved or deleted
    under it (its HEAD would move and its index show a phantom change); not even with --force."""
    checked_out = worktrees() if refs else {}
    busy = [
        f"{ref.removeprefix('refs/heads/')} (checked out in {checked_out[ref]})" for ref in refs if ref in checked_out
    ]
    if busy:
        raise UserError(
            "will not move a branch that is checked out; switch that worktree to another branch "
            "(or apply with --branch-prefix), nothing was written: " + ", ".join(busy)
        )


# -- the stage -----------------------------------------------------------------------


def apply(
    repo: git.Repository,
    stack: Stack,
    base_ref: str,
    *,
    prefix: str | None = None,
    force: bool = False,
    write: bool = True,
    progress: Progress | None = None,
) -> Run:
    """``ggstack apply``: replay the stack onto ``base_ref``; one Outcome a patch."""
    base = resolve_base(repo, stack, base_ref)
    refs = branch_refs(stack, prefix)
    reads = BranchReads(repo, stack, refs) if write else None  # answered while the stack replays
    made = Materializer(repo, stack, stand_in=True)
    merge_base = _start_merge_base(repo, stack, base)
    steps = replay(repo, made.picks, base, progress, made.changes)
    remade = made.confirm()
    if remade is not None:  # a stored diff is not its source commit's (edited by hand): replay what it is
        steps = replay(repo, remade, base, progress, made.changes)
    if reads:
        namespace = branch_namespace(stack, prefix)
        branches = write_branches(repo, stack, steps, refs, force=force, namespace=namespace, reads=reads)
    else:
        branches = [None] * len(steps)
    run = Run(stack=stack.name, base_ref=base_ref, base=base, repo_slug=stack.config.target.repo)
    run.merge_base = merge_base()
    for patch, step, branch in zip(stack.patches, steps, branches):
        run.outcomes.append(outcome_of(patch, step, branch))
    say_merge_drivers(repo, stack, run)
    run.stages["apply"] = "ok"
    return run


def say_merge_drivers(repo: git.Repository, stack: Stack, run: Run) -> list[str]:
    """Note on each Outcome whose patch changes a path that the user's config gives to a merge
    driver of theirs: ggstack merged it with git's own text merge (``Runner.merge_config``), where
    their ``git rebase`` would run their program, so the two may differ. Returns the notes."""
    if not repo.merge_drivers()[0]:
        return []  # the usual case: no path of any patch to ask git about
    changed = {p.name: list(p.paths) for p in stack.patches}
    driven = repo.driven_paths(sorted({path for paths in changed.values() for path in paths}))
    said = []
    for o in run.outcomes if driven else ():
        hit = [f"{path} (merge={driven[path]})" for path in changed.get(o.name, ()) if path in driven]
        if not hit:
            continue
        note = (
            "merged with git's own text merge, not your merge driver, for " + ", ".join(hit) + ": ggstack runs "
            "none of your programs, and `git rebase` here would run it, so the two may differ"
        )
        if note not in o.note:
            o.note = f"{o.note}; {note}" if o.note else note
        said.append(f"{o.name}: {note}")
    return said


def outcome_of(patch: Patch, step: Step, branch: str | None = None) -> Outcome:
    note = step.note
    if step.applied is Applied.APPLIED and ADAPTED.search(patch.message):
        reused = "reused the resolution recorded by `ggstack refresh` (its Adapted: trailer)"
        note = f"{note}; {reused}" if note else reused
    return Outcome(
        name=patch.name,
        subject=patch.subject,
        stack_patch_id=patch.provenance.stack_patch_id,
        source_commit=patch.provenance.cherry_picked_from or patch.source_commit,
        provenance=patch.provenance,
        applied=step.applied,
        commit=step.commit,
        branch=branch,
        conflict=step.conflict,
        note=note,
    )


def resolve_base(repo: git.Repository, stack: Stack | None, base_ref: str) -> str:
    """The base commit: the ref as given, else the stack's remote-tracking branch."""
    sha = repo.try_resolve(base_ref)
    also = f" nor {stack.config.target.remote}/{base_ref}" if stack is not None else ""
    if sha is None and stack is not None:
        sha = repo.try_resolve(f"{stack.config.target.remote}/{base_ref}")
    if sha is None:
        # Given with --onto or taken from target.base: say both ways out, not "pass --onto" to one who did.
        raise UserError(
            f"unknown base ref {base_ref!r}: not a commit here{also} "
            "(fetch it, or name another with --onto; the default is target.base in stack.toml)"
        )
    return sha


def _start_merge_base(repo: git.Repository, stack: Stack, base: str) -> Callable[[], str | None]:
    """The merge base of ``base`` and the first recorded parent that is here, started now;
    calling what this returns waits for it. The parents were read by ``Materializer``."""
    present = repo.read_commits(p.base_commit for p in stack.patches if p.base_commit)
    for patch in stack.patches:
        if patch.base_commit in present:
            return repo.start_merge_base(base, patch.base_commit)
    return lambda: None
