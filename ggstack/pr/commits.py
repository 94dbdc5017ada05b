"""``pr``'s second step, git only: each needed patch's PR branch commit, replayed onto the previous needed one (a
patch without a PR would ride along); a remote head with the same change is kept, so an unchanged branch is not
pushed (CI's fresh clone makes new commit objects)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ggstack import git, replay
from ggstack.cache import Map
from ggstack.model import Applied, Outcome, Run, Stack
from ggstack.picks import Pick, materialize
from ggstack.pr.read import Snapshot, closed_note, needs_pr
from ggstack.report.bodies import Diffstat


@dataclass(frozen=True)
class Chosen:
    commit: str | None  # None: it does not apply there; no PR action
    diffstat: Diffstat = field(default_factory=list)
    note: str = ""


def choose_commits(repo: git.Repository, stack: Stack, run: Run, snap: Snapshot) -> dict[str, Chosen]:
    alone = _Alone(repo, stack)
    previous = run.base
    chosen: dict[str, Chosen] = {}
    pairs: dict[str, tuple[str, str]] = {}  # name -> (previous, commit): diffstats read in one process
    here = repo.has_objects(snap.heads.values())  # one process for every remote head
    needed = _to_settle(run, snap)
    replayed = repo.read_commits(o.commit or "" for o in needed)  # one process, not a round trip a patch
    for o in needed:
        assert o.commit is not None
        info = replayed.get(o.commit) or _commit(repo, o.commit)
        placed, note = _on_previous(repo, alone, o.name, (o.commit, info), previous)
        if placed is None:
            chosen[o.name] = Chosen(None, note=note)
            continue
        commit, info = placed
        pairs[o.name] = (previous, commit)
        commit = _remote_if_same(snap, o.name, commit, info, previous, here)
        chosen[o.name] = Chosen(commit)
        previous = commit
    for name, diffstat in zip(pairs, _diffstats(repo, list(pairs.values())), strict=True):
        chosen[name] = dataclasses.replace(chosen[name], diffstat=diffstat)
    return chosen


def _on_previous(
    repo: git.Repository, alone: _Alone, name: str, replayed: tuple[str, git.CommitInfo], previous: str
) -> tuple[tuple[str, git.CommitInfo] | None, str]:
    """The replayed commit where it is on ``previous`` already, else the patch replayed alone onto it."""
    if replayed[1].parents[:1] == (previous,):
        return replayed, ""
    applied, picked = alone.onto(previous, name)
    if applied is not Applied.APPLIED or picked is None:
        return None, f"does not apply on the previous needed patch alone ({applied.value}): no PR action"
    return (picked, _commit(repo, picked)), ""


class _Alone:
    """Patches replayed one at a time onto another parent; the stored series materialised once, if ever."""

    def __init__(self, repo: git.Repository, stack: Stack) -> None:
        self.repo, self.stack = repo, stack
        self.picks: dict[str, Pick] | None = None

    def onto(self, parent: str, name: str) -> tuple[Applied, str | None]:
        self.picks = self.picks or {p.name: p for p in materialize(self.repo, self.stack)}
        replayer = replay.Replayer(self.repo, parent)
        try:
            step = replayer.try_pick(self.picks[name])
        finally:
            replayer.close()
        return step.applied, step.commit


def _remote_if_same(
    snap: Snapshot, name: str, commit: str, info: git.CommitInfo, previous: str, here: Mapping[str, bool]
) -> str:
    remote = snap.heads.get(snap.branches[name])
    facts = snap.commits.get(remote or "")
    same = facts and (facts.tree, facts.parents) == (info.tree, (previous,)) and _same(facts.message, info.message)
    return remote if same and remote and here.get(remote) else commit  # a head this clone could not fetch is replaced


def _diffstats(repo: git.Repository, pairs: list[tuple[str, str]]) -> list[Diffstat]:
    """Cached by commit pair: a rerun on the same base runs no diff. Only the last run's pairs are kept."""
    cache = Map(repo, "diffstats")
    keys = [f"{a}:{b}" for a, b in pairs]
    known = {k: d for k in keys if (d := _cached_diffstat(cache.get(k))) is not None}
    todo = [(k, pair) for k, pair in zip(keys, pairs, strict=True) if k not in known]
    for (key, _), diffstat in zip(todo, repo.numstats([pair for _, pair in todo]), strict=True):
        known[key] = diffstat
        cache.put(key, json.dumps(diffstat))
    cache.retain(keys)
    cache.save()
    return [known[k] for k in keys]


def _cached_diffstat(text: str | None) -> Diffstat | None:
    """None where the cache has none or not one (a corrupt file costs time only)."""
    try:
        rows = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(rows, list) or not all(_diffstat_row(r) for r in rows):
        return None
    return [(path, added, deleted) for path, added, deleted in rows]


def _diffstat_row(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and all(n is None or (isinstance(n, int) and not isinstance(n, bool)) for n in row[1:])
    )


def _to_settle(run: Run, snap: Snapshot) -> list[Outcome]:
    """The patches that may get a PR: needed, replayed, and no PR of theirs someone else merged or closed."""
    return [o for o in run.outcomes if needs_pr(o) and closed_note(o, snap) is None]


def _commit(repo: git.Repository, sha: str) -> git.CommitInfo:
    info = repo.read_commit(sha)
    return info if info is not None else repo.commit_info(sha)  # not a full id, or absent: git's own error


def _same(a: str, b: str) -> bool:
    return a.rstrip("\n") == b.rstrip("\n")
