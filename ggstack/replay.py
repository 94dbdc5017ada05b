"""``ggstack apply``: replay a stack onto a base in memory, through every conflict, by merge-ort (``merge-tree``): trees
are git's byte for byte. Processes cost: trivial picks edited in memory, one ``fast-import``, cached, refs last."""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ggstack import conflicts, git, state
from ggstack.branches import BranchReads, branch_namespace, branch_refs, write_branches
from ggstack.cache import Map
from ggstack.errors import UserError
from ggstack.model import Applied, Conflict, Outcome, Patch, Progress, Run, Stack
from ggstack.picks import ADAPTED, Materializer, Pick, split_author
from ggstack.trees import FAST_IMPORT_TREE, Edits, Trees, trivial_merge

_Author = tuple[str, str, str, str, str | None]  # name, email, date, message, git's ident line (None: refused)


@dataclass(frozen=True)
class Step:
    applied: Applied
    tree: str  # the merged tree (with conflict markers for a conflict)
    commit: str | None = None  # the new commit when applied
    conflict: Conflict | None = None
    note: str = ""


@dataclass(frozen=True)
class _Pending:
    parent: str  # the tip it goes on: a written commit or the placeholder before it
    pick: str  # the pick as the result cache knows it (``Pick.known_as``)
    commit: str  # its placeholder id
    chained: git.ChainCommit


class Replayer:
    """The caller keeps what it wants (``advance``), so ``check`` can leave out patches the base has."""

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
        self._chain = chain
        self._pending: list[_Pending] = []
        self._settled: dict[str, tuple[str, str]] = {}  # placeholder commit -> (commit, tree)
        self._empty: list[tuple[str, str]] = []  # (tip, pick) of the empty picks a flush is to record

    def prepare(self, picks: Sequence[Pick], known: Mapping[str, list[git.TreeChange]] | None = None) -> None:
        """In one process, so a trivial merge needs no merge-tree; not for picks the cache answers."""
        self._deferred |= self._read_ahead(picks)
        todo = [p for p in picks if p.commit and p.parent and p.commit not in self._deferred]
        if todo:  # commits will be made: their committer asked meanwhile
            self._start_committer()
        self._read_changes(todo, known or {})

    def _read_changes(self, picks: Sequence[Pick], known: Mapping[str, list[git.TreeChange]]) -> None:
        self._changes.update((p.commit or "", known[p.commit or ""]) for p in picks if p.commit in known)
        pairs = [(p.commit or "", p.parent or "") for p in picks if p.commit not in self._changes]
        for (commit, _), changes in zip(pairs, self.repo.tree_changes(pairs)):
            self._changes[commit] = changes

    def _read_ahead(self, picks: Sequence[Pick]) -> set[str]:
        """Read in one process: one at a time was a round trip a patch on every rerun."""
        chain = self._cached_chain(picks)
        self._cached.update(self.repo.read_commits(hit for _, hit, _ in chain if hit != "empty"))
        answered = set()
        for commit, hit, parent in chain:  # a hit that is gone, or not on its tip, ends what the cache answers
            info = self._cached.get(hit)
            if hit != "empty" and (info is None or info.parents != (parent,)):
                break
            answered.add(commit)
        return answered

    def _cached_chain(self, picks: Sequence[Pick]) -> list[tuple[str, str, str]]:
        tip, chain = self.tip, []
        for pick in picks:
            hit = self._results.get(f"{tip}:{pick.known_as}") if pick.commit else None
            if not hit:
                break
            chain.append((pick.commit or "", hit, tip))
            tip = tip if hit == "empty" else hit
        return chain

    def _changes_of(self, pick: Pick) -> list[git.TreeChange] | None:
        if pick.commit and pick.commit not in self._changes and pick.commit in self._deferred and pick.parent:
            self._changes[pick.commit] = self.repo.tree_changes([(pick.commit, pick.parent)])[0]
        return self._changes.get(pick.commit or "")

    def try_pick(self, pick: Pick) -> Step:
        if pick.commit is None:
            self.flush()
            return self._apply_fallback(pick)
        step = self._from_cache(self._results.get(f"{self.tip}:{pick.known_as}"))  # a placeholder tip is in no key
        if step is not None:
            return step
        changes = self._changes_of(pick)
        edits = trivial_merge(self._trees, self.tip_tree, changes) if changes else None
        who = self._author_of(pick) if self._chain else None
        if who is not None:
            kept = self._keep_back(pick, edits, who) if edits is not None else self._merge_kept_back(pick, who)
            if kept is not None:
                return kept
        self.flush()  # this pick's commit goes on a written tip
        if edits is not None:
            return self._committed(pick, self._trees.edit(self.tip_tree, edits), who)
        return self._merged(pick, who)

    def _merged(self, pick: Pick, who: _Author | None) -> Step:
        merged = self.repo.cherry_pick_tree(pick.commit or "", pick.parent or "", self.tip_tree)
        if not merged.clean:
            return Step(Applied.CONFLICT, merged.tree, conflict=conflicts.of_merge(self.repo, merged))
        if merged.tree == self.tip_tree:
            self._results.put(f"{self.tip}:{pick.known_as}", "empty")
            return Step(Applied.EMPTY, merged.tree)
        return self._committed(pick, merged.tree, who)

    def _committed(self, pick: Pick, tree: str, who: _Author | None) -> Step:
        key = f"{self.tip}:{pick.known_as}"
        commit = self._commit(pick, tree, who)
        self._results.put(key, commit)
        return Step(Applied.APPLIED, tree, commit)

    def advance(self, step: Step) -> None:
        if step.applied is Applied.APPLIED and step.commit:
            self.tip = step.commit
            self.tip_tree = step.tree

    def close(self) -> None:
        self._results.save()

    def _keep_back(self, pick: Pick, edits: Edits, who: _Author) -> Step | None:
        """None where fast-import might not write its idents as they are."""
        idents = self._chainable(who)
        if idents is None:
            return None
        tree = self._trees.edit(self.tip_tree, edits, write=False)
        return Step(Applied.APPLIED, tree, self._pend(pick, edits, idents))

    def _merge_kept_back(self, pick: Pick, who: _Author) -> Step | None:
        """A round trip to ``mktree`` a tree, not a ``fast-import`` a merge."""
        idents = self._chainable(who)
        if idents is None:
            return None
        tip_tree = self._trees.written(self.tip_tree)
        merged = self.repo.cherry_pick_tree(pick.commit or "", pick.parent or "", tip_tree)
        if not merged.clean:
            return Step(Applied.CONFLICT, merged.tree, conflict=conflicts.of_merge(self.repo, merged))
        if merged.tree == tip_tree:
            self._empty.append((self.tip, pick.known_as))
            return Step(Applied.EMPTY, merged.tree)
        root: Edits = {"": (FAST_IMPORT_TREE, merged.tree)}
        return Step(Applied.APPLIED, merged.tree, self._pend(pick, root, idents))

    def _chainable(self, who: _Author) -> tuple[str, str, str] | None:
        _, _, _, message, author = who
        committer = self._committer_ident()
        if author is None or not git.importable(author) or not git.importable(committer):
            return None
        return message, author, committer

    def _pend(self, pick: Pick, edits: Edits, idents: tuple[str, str, str]) -> str:
        commit = f"pending-commit:{len(self._settled) + len(self._pending)}"
        self._pending.append(_Pending(self.tip, pick.known_as, commit, git.ChainCommit(edits, *idents)))
        return commit

    def flush(self) -> None:
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
        if step.commit not in self._settled:
            return step
        commit, tree = self._settled[step.commit]
        return dataclasses.replace(step, commit=commit, tree=tree)

    def _from_cache(self, hit: str | None) -> Step | None:
        if not hit:
            return None
        if hit == "empty":
            return Step(Applied.EMPTY, self.tip_tree)
        info = self._cached.get(hit) or self.repo.read_commit(hit)
        if info is None or info.parents != (self.tip,):
            return None  # pruned by gc, or not ours: redo the merge
        return Step(Applied.APPLIED, info.tree, hit)

    def _commit(self, pick: Pick, tree: str, who: _Author | None = None) -> str:
        name, email, date, message, author = who or self._author_of(pick)
        if author is None:  # git refuses it: commit-tree says why
            return self.repo.commit_tree(tree, [self.tip], message, author=(name, email, date))
        return self.repo.write_commit(tree, [self.tip], message, author, self._committer_ident())

    def _author_of(self, pick: Pick) -> _Author:
        if pick.patch is not None:
            name, email = split_author(pick.patch.author)
            date, message = pick.patch.date, pick.patch.message
        else:
            info = self.repo.commit_infos([pick.commit or ""])[0]
            name, email, date, message = info.author_name, info.author_email, info.author_date, info.message
        return name, email, date, message, self.repo.ident(name, email, date)

    def _start_committer(self) -> Callable[[], str]:
        if self._committer is None:
            self._committer = functools.cache(self.repo.start_committer_ident())
        return self._committer

    def _committer_ident(self) -> str:
        return self._start_committer()()

    def _apply_fallback(self, pick: Pick) -> Step:
        """No recorded parent: ``git apply --3way`` where the index lines' blobs exist, else plain."""
        tree, message = self.repo.apply_to_tree(self.tip_tree, pick.diff, three_way=True)
        note = "recorded base missing: applied with git apply --3way"
        if tree is not None and "Falling back to direct application" in message:
            note = "recorded base and blobs missing: applied with plain git apply"
        if tree is None:
            tree, message = self.repo.apply_to_tree(self.tip_tree, pick.diff)
            note = "recorded base and blobs missing: applied with plain git apply"
        if tree is None:
            return Step(Applied.CONFLICT, self.tip_tree, conflict=conflicts.of_apply(pick, message), note=note)
        if tree == self.tip_tree:
            return Step(Applied.EMPTY, tree, note=note)
        return Step(Applied.APPLIED, tree, self._commit(pick, tree), note=note)


def replay(
    repo: git.Repository,
    picks: Sequence[Pick],
    onto: str,
    progress: Progress | None = None,
    changes: Mapping[str, list[git.TreeChange]] | None = None,
) -> list[Step]:
    """A conflict is recorded and skipped. ``changes``: what some picks change, known already."""
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
    base = resolve_base(repo, stack, base_ref)
    refs = branch_refs(stack, prefix)
    reads = BranchReads(repo, stack, refs) if write else None  # answered while the stack replays
    made = Materializer(repo, stack, stand_in=True)
    merge_base = _start_merge_base(repo, stack, base)
    steps = replay(repo, made.picks, base, progress, made.changes)
    remade = made.confirm()
    if remade is not None:  # a stored diff is not its source commit's (edited by hand): replay what it is
        steps = replay(repo, remade, base, progress, made.changes)
    branches: list[str | None] = [None] * len(steps)
    if reads:
        commits = [s.commit if s.applied is Applied.APPLIED else None for s in steps]
        namespace = branch_namespace(stack, prefix)
        branches = write_branches(repo, stack, commits, refs, force=force, namespace=namespace, reads=reads)
    run = Run(stack=stack.name, base_ref=base_ref, base=base, repo_slug=stack.config.target.repo)
    run.merge_base = merge_base()
    for patch, step, branch in zip(stack.patches, steps, branches):
        run.outcomes.append(outcome_of(patch, step, branch))
    say_merge_drivers(repo, stack, run)
    run.stages["apply"] = "ok"
    return run


def say_merge_drivers(repo: git.Repository, stack: Stack, run: Run) -> list[str]:
    """ggstack used git's text merge where the user's ``git rebase`` would run their merge driver."""
    if not repo.merge_drivers()[0]:
        return []  # the usual case: no path of any patch to ask git about
    changed = {p.name: list(p.paths) for p in stack.patches}
    driven = repo.driven_paths(sorted({path for paths in changed.values() for path in paths}))
    said = []
    for o in run.outcomes if driven else ():
        hit = [f"{path} (merge={driven[path]})" for path in changed.get(o.name, ()) if path in driven]
        if hit:
            said.append(f"{o.name}: {_note_driver(o, hit)}")
    return said


def _note_driver(o: Outcome, hit: Sequence[str]) -> str:
    note = (
        "merged with git's own text merge, not your merge driver, for " + ", ".join(hit) + ": ggstack runs "
        "none of your programs, and `git rebase` here would run it, so the two may differ"
    )
    if note not in o.note:
        o.note = _noted(o.note, note)
    return note


def _noted(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more


def outcome_of(patch: Patch, step: Step, branch: str | None = None) -> Outcome:
    note = step.note
    if step.applied is Applied.APPLIED and ADAPTED.search(patch.message):
        note = _noted(note, "reused the resolution recorded by `ggstack refresh` (its Adapted: trailer)")
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
    present = repo.read_commits(p.base_commit for p in stack.patches if p.base_commit)
    for patch in stack.patches:
        if patch.base_commit in present:
            return repo.start_merge_base(base, patch.base_commit)
    return lambda: None
