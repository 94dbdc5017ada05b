"""Which commits of a range ``import`` takes: the branch's own, as ``git rebase A B`` replays it.
A forge's PR merge stands for the PR's commits; what the base has is the base's."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ggstack import git
from ggstack.errors import UserError
from ggstack.model import TargetConfig


@dataclass(frozen=True)
class LeftOut:
    commit: str
    subject: str
    why: str  # MERGE_OF_BASE | MERGE_OF_RANGE | EMPTY | ON_BASE | BEHIND


MERGE_OF_BASE = "merge of the base"  # every parent but the first is already in A, or it is named for the base
MERGE_OF_RANGE = "merge of commits imported on their own"  # git rebase replays the merged commits instead
EMPTY = "empty commit"  # it changes nothing: git rebase drops it too
ON_BASE = "already on the base"  # the stack's base has this very commit (a range from before a merge of it)
BEHIND = "brought by a merge of the base"  # a merge named for the base brought it, and the local base ref lacks it

# "Merge branch 'main' into fix", "Merge remote-tracking branch 'origin/main' into fix",
# "Merge branch 'main' of https://github.com/o/r into fix": git's own words for a merge of a branch.
_BRANCH_MERGE = re.compile(r"^Merge (?:remote-tracking )?branch '([^']+)'")


@dataclass(frozen=True)
class Selection:
    commits: list[str]
    left_out: list[LeftOut]
    upstream: list[str]


def select(repo: git.Repository, revs: Sequence[str], target: TargetConfig, *, keep_merged: bool) -> Selection:
    commits: list[str] = []
    left_out: list[LeftOut] = []
    upstream: list[str] = []
    for rev in revs:
        if "..." in rev:
            raise UserError(f"{rev}: A...B (either side, not the other) has no merge order to import; use A..B")
        if ".." in rev:
            taken, skipped, known = _select_range(repo, rev, target, keep_merged=keep_merged)
            commits += taken
            left_out += skipped
            upstream += known
        else:
            commits.append(repo.resolve(rev))
    return Selection(list(dict.fromkeys(commits)), left_out, list(dict.fromkeys(upstream)))


def _select_range(
    repo: git.Repository, rev: str, target: TargetConfig, *, keep_merged: bool
) -> tuple[list[str], list[LeftOut], list[str]]:
    a, _, b = rev.partition("..")
    lo, hi = repo.resolve(a or "HEAD"), repo.resolve(b or "HEAD")
    graph = repo.range_commits(lo, hi)
    taken, skipped = _replayed(repo, graph, () if keep_merged else _base_names(target, a))
    if not keep_merged:
        taken, more = _not_the_bases(repo, target, graph, hi, taken, skipped)
        skipped += more
    return taken, skipped, _upstream(repo, lo, hi, taken)


def _upstream(repo: git.Repository, lo: str, hi: str, taken: Sequence[str]) -> list[str]:
    if not taken or repo.merge_base(lo, hi) == lo:
        return []
    found = repo.already_upstream(lo, hi)  # A moved on: it may have some of them already
    return [c for c in taken if c in found]


def _base_names(target: TargetConfig, lower: str) -> tuple[str, ...]:
    names = {target.base, f"{target.remote}/{target.base}"}
    if lower and not re.fullmatch(r"[0-9a-f]{7,64}", lower):
        names |= {lower, lower.removeprefix("refs/remotes/").removeprefix("refs/heads/")}
    return tuple(sorted(names))


def _first_parents(inside: Mapping[str, Sequence[str]], tip: str) -> set[str]:
    spine, at = set(), tip
    while at in inside and at not in spine:
        spine.add(at)
        at = inside[at][0] if inside[at] else ""
    return spine


def _brought_by_base_merges(inside: Mapping[str, Sequence[str]], skipped: Sequence[LeftOut]) -> set[str]:
    merged_in: set[str] = set()
    for m in skipped:
        parents = inside.get(m.commit, ()) if m.why == MERGE_OF_BASE else ()
        merged_in |= _ancestors_inside(inside, parents[1:]) - _ancestors_inside(inside, parents[:1])
    return merged_in


def _named_for_base(subject: str, names: Sequence[str]) -> bool:
    m = _BRANCH_MERGE.match(subject)
    return m is not None and any(m.group(1) == n or m.group(1).endswith("/" + n) for n in names)


def _not_the_bases(
    repo: git.Repository,
    target: TargetConfig,
    graph: Sequence[tuple[str, tuple[str, ...]]],
    tip: str,
    taken: Sequence[str],
    skipped: Sequence[LeftOut],
) -> tuple[list[str], list[LeftOut]]:
    """Not what a merge brought in that the base has, nor what a merge named for the base brought
    in (the local base ref is behind). Its first-parent line stays: ``check`` judges those."""
    inside = {c: parents for c, parents in graph}
    spine = _first_parents(inside, tip)
    on_base = on_the_base(repo, target, [c for c in taken if c not in spine])
    merged_in = _brought_by_base_merges(inside, skipped)
    gone = on_base | {c for c in taken if c in merged_in}
    return [c for c in taken if c not in gone], _left_out_as(repo, [c for c in taken if c in gone], on_base)


def _left_out_as(repo: git.Repository, gone: Sequence[str], on_base: set[str]) -> list[LeftOut]:
    if not gone:
        return []
    subjects = {i.sha: i.message.split("\n", 1)[0] for i in repo.commit_infos(sorted(gone))}
    return [LeftOut(c, subjects[c], ON_BASE if c in on_base else BEHIND) for c in gone]


def on_the_base(repo: git.Repository, target: TargetConfig, commits: Sequence[str]) -> set[str]:
    """Those of ``commits`` the stack's base (``target.base``, else ``<remote>/<base>``) has."""
    base = repo.try_resolve(target.base) or repo.try_resolve(f"{target.remote}/{target.base}")
    return set(commits) - repo.not_reachable(commits, base) if base and commits else set()


PR_MERGE = re.compile(r"^Merge pull request #\d+ from ")


def _replayed(
    repo: git.Repository, graph: Sequence[tuple[str, tuple[str, ...]]], base_names: Sequence[str] = ()
) -> tuple[list[str], list[LeftOut]]:
    """As git rebase, but a PR merge (not one named for the base) stands for the PR's commits."""
    inside = {c: parents for c, parents in graph}
    merges = [c for c, parents in graph if len(parents) > 1]
    subjects = {i.sha: i.message.split("\n", 1)[0] for i in repo.commit_infos(merges)}
    covered: set[str] = set()
    left_out = []
    for merge in reversed(merges):  # newest first: a PR merged into a PR's branch is the outer PR's
        if merge in covered:
            continue
        parents = inside[merge]
        if PR_MERGE.match(subjects[merge]):
            covered |= _ancestors_inside(inside, parents[1:]) - _ancestors_inside(inside, parents[:1])
        else:
            left_out.append(LeftOut(merge, subjects[merge], _merge_of(inside, parents, subjects[merge], base_names)))
    return _taken(graph, covered, subjects), left_out[::-1]


def _taken(graph: Sequence[tuple[str, tuple[str, ...]]], covered: set[str], subjects: Mapping[str, str]) -> list[str]:
    return [c for c, parents in graph if c not in covered and (len(parents) < 2 or PR_MERGE.match(subjects[c]))]


def _merge_of(
    inside: Mapping[str, Sequence[str]], parents: Sequence[str], subject: str, base_names: Sequence[str]
) -> str:
    of_range = any(p in inside for p in parents[1:]) and not _named_for_base(subject, base_names)
    return MERGE_OF_RANGE if of_range else MERGE_OF_BASE


def _ancestors_inside(inside: Mapping[str, Sequence[str]], starts: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = [s for s in starts if s in inside]
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo += [p for p in inside[c] if p in inside and p not in seen]
    return seen
