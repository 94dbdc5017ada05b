"""Which tests of a patch run, on which trees: a job a kind (cpu, gpu) on the base without the patch, with it and on its
old base (the control), trees made in memory. Local and CI's shards plan alike, so a sharded run tests the same."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ggstack import diff, git
from ggstack.model import Applied, Outcome, Patch, Run, Stack, Verdict
from ggstack.picks import Pick, materialize
from ggstack.testing.environment import expand
from ggstack.testing.gpu import check_gpu_mode

WHERE = ("base", "patched", "old-base")
LABELS = {"base": "base + tests", "patched": "base + patch", "old-base": "old base + tests"}


@dataclass(frozen=True)
class TestTree:
    where: str  # base | patched | old-base
    tree: str | None  # None where it cannot be made: ``reason`` says why
    parent: str | None  # the commit the worktree's scratch commit sits on
    reason: str = ""


@dataclass(frozen=True)
class Job:
    """A matrix entry: one patch, one kind of tests."""

    id: str  # "0001-fix-add-cpu"
    patch: str  # the Outcome's name
    kind: str  # cpu | gpu
    command: str  # with {tests} expanded
    tests: tuple[str, ...]
    trees: tuple[TestTree, ...]
    code_paths: tuple[str, ...]  # the patch's other paths: where represented-by candidates are looked for
    own: tuple[str, ...] = ()  # the test functions the patch adds or changes: never "pre-existing"


# -- which files are tests -----------------------------------------------------------


@functools.cache  # asked for every path of every patch, of a few patterns
def _glob(pattern: str) -> re.Pattern[str]:
    """A git-style glob: ``**/`` is any number of directories, ``*`` stays in one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    if pattern.endswith("/"):
        out.append(".*")
    return re.compile("".join(out) + r"\Z")


def is_test_path(path: str, patterns: Sequence[str]) -> bool:
    return any(_glob(p).match(path) for p in patterns)


_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(")


def own_tests(patch_diff: str, tests: Collection[str]) -> tuple[str, ...]:
    """A ``def`` among the patch's added lines in ``tests``, or the function a hunk's header names."""
    found = [name for fc in diff.parse(patch_diff) if fc.new_path in tests for h in fc.hunks for name in _defs(h)]
    return tuple(dict.fromkeys(found))


def _defs(h: diff.Hunk) -> list[str]:
    named = _DEF.search(h.header.split("@@")[-1])
    added = [m.group(1) for b in h.blocks for line in b.added if (m := _DEF.match(line))]
    return [named.group(1), *added] if named else added


# -- the jobs -----------------------------------------------------------------------


def plan_jobs(
    repo: git.Repository, stack: Stack, run: Run, *, gpu: str = "auto", only: Sequence[str] = ()
) -> list[Job]:
    check_gpu_mode(gpu)
    cfg = stack.config.tests
    wanted = {stack.find(key).name for key in only} if only else None
    patches = {p.name: p for p in stack.patches}
    originals = {pick.name: pick for pick in materialize(repo, stack)}
    kinds = [("cpu", cfg.cpu)] + ([("gpu", cfg.gpu)] if gpu != "off" else [])
    chosen = _testable(run, patches, wanted)
    jobs: list[Job] = []
    for o, start in _starts(repo, run, chosen):
        jobs += _jobs(repo, stack, patches[o.name], o, start, originals.get(o.name), kinds)
    return jobs


def _testable(run: Run, patches: Mapping[str, Patch], wanted: set[str] | None) -> set[str]:
    return {
        o.name
        for o in run.outcomes
        if o.name in patches
        and o.applied in (Applied.APPLIED, Applied.EMPTY, Applied.CONFLICT)
        and (wanted is None or o.name in wanted)
    }


def _replayed(o: Outcome) -> str | None:
    return o.commit if o.applied is Applied.APPLIED and o.commit else None


def _starts(repo: git.Repository, run: Run, chosen: set[str]) -> list[tuple[Outcome, str]]:
    """Where each chosen patch's trees start: its replayed parent, or apply's tip where it did not replay."""
    commits = _replayed_commits(repo, run, chosen)
    starts = []
    tip = run.base  # the tree each patch was replayed onto, as apply advanced it
    for o in run.outcomes:
        replayed = _replayed(o)
        if o.name in chosen:
            starts.append((o, _parent(repo, commits, replayed) if replayed else tip))
        if replayed and o.verdict is not Verdict.REPRESENTED:
            tip = replayed  # check leaves represented patches out of the tip it judges on
    return starts


def _replayed_commits(repo: git.Repository, run: Run, chosen: set[str]) -> Mapping[str, git.CommitInfo]:
    # The replayed commits' parents in one process (not a round trip a patch).
    return repo.read_commits(c for o in run.outcomes if o.name in chosen and (c := _replayed(o)))


def _jobs(
    repo: git.Repository,
    stack: Stack,
    patch: Patch,
    o: Outcome,
    start: str,
    original: Pick | None,
    kinds: Sequence[tuple[str, str]],
) -> list[Job]:
    trees, tests = _trees(repo, stack, patch, o, start, original)
    if not tests:
        return []
    code = tuple(p for p in patch.paths if not is_test_path(p, stack.config.tests.paths))
    stem = o.name.removesuffix(".patch")
    own = own_tests(patch.diff, tests)
    return [
        Job(f"{stem}-{kind}", o.name, kind, expand(command, tests), tests, trees, code, own)
        for kind, command in kinds
        if command.strip()
    ]


def _parent(repo: git.Repository, commits: Mapping[str, git.CommitInfo], commit: str) -> str:
    parents = (commits.get(commit) or repo.commit_info(commit)).parents  # absent: git's own error
    return parents[0] if parents else commit


# -- the three trees ----------------------------------------------------------------


def _trees(
    repo: git.Repository, stack: Stack, patch: Patch, o: Outcome, start: str, original: Pick | None
) -> tuple[tuple[TestTree, ...], tuple[str, ...]]:
    replayed = o.commit if o.applied is Applied.APPLIED else None
    patched = replayed or (start if o.applied is Applied.EMPTY else None)
    entries = _test_entries(repo, stack, patch, replayed or _original_commit(original) or patched)
    tests = tuple(sorted(entries))
    if not tests:
        return (), ()
    base = TestTree("base", _base_tree(repo, start, entries, None if replayed else original), start)
    return (base, _patched_tree(repo, patched, start), _old_base_tree(repo, patch, original, tests)), tests


def _original_commit(original: Pick | None) -> str | None:
    return original.commit if original else None


def _test_entries(repo: git.Repository, stack: Stack, patch: Patch, source: str | None) -> dict[str, tuple[str, str]]:
    candidates = [p for p in patch.paths if is_test_path(p, stack.config.tests.paths)]
    if source is None or not candidates:
        return {}
    entries = repo.ls_tree(repo.resolve(source, "tree"), candidates)
    return {p: entries[p] for p in sorted(candidates) if p in entries}


def _patched_tree(repo: git.Repository, patched: str | None, start: str) -> TestTree:
    if patched:
        return TestTree("patched", repo.resolve(patched, "tree"), start)
    return TestTree("patched", None, None, "the patch does not apply to this base")


def _old_base_tree(repo: git.Repository, patch: Patch, original: Pick | None, tests: tuple[str, ...]) -> TestTree:
    if original and original.commit and original.parent:
        old_entries = repo.ls_tree(repo.resolve(original.commit, "tree"), list(tests))
        return TestTree("old-base", _overlay(repo, original.parent, old_entries), original.parent)
    if patch.base_commit:
        return TestTree(
            "old-base", None, None, f"its original parent {patch.base_commit[:12]} is not in this repository"
        )
    return TestTree("old-base", None, None, "the patch records no original parent (base-commit:)")


def _base_tree(repo: git.Repository, start: str, tests: dict[str, tuple[str, str]], original: Pick | None) -> str:
    """From the patch's own commit (its replay conflicted), the test files are merged onto the base as a
    cherry-pick would, the base's file kept where they conflict: a stale whole file fails newer tests."""
    if original is None or not original.commit or not original.parent:
        return _overlay(repo, start, tests)
    only_tests = repo.edit_tree(repo.resolve(original.parent, "tree"), dict(tests))
    ident = git.SCRATCH_IDENT
    theirs = repo.write_commit(only_tests, [original.parent], "ggstack scratch\n", ident, ident)
    merged = repo.cherry_pick_tree(theirs, original.parent, repo.resolve(start, "tree"))
    return merged.tree if merged.clean else _base_kept(repo, merged, start, tests)


def _base_kept(repo: git.Repository, merged: git.MergeResult, start: str, tests: dict[str, tuple[str, str]]) -> str:
    conflicted = [p for p in merged.conflicted_paths if p in tests]
    kept = repo.ls_tree(repo.resolve(start, "tree"), conflicted)
    return repo.edit_tree(merged.tree, {p: kept.get(p) or tests[p] for p in conflicted})


def _overlay(repo: git.Repository, commit: str, entries: dict[str, tuple[str, str]]) -> str:
    return repo.edit_tree(repo.resolve(commit, "tree"), dict(entries))
