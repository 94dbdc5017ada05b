"""Verdicts kept by what decides them (base, candidates, ``VERDICTS_VERSION``): a rerun costs what changed. A base
that moved on only by commits none of which can change a verdict keeps the last base's verdicts."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ggstack import git
from ggstack.cache import Entries
from ggstack.cache import key as hashed
from ggstack.check.history import CHANGE_ID, PICKED_FROM, REVERTS, SPID, normal_subject, pr_numbers
from ggstack.model import Outcome, Run, Stack, outcome_from_json, outcome_json

VERDICTS_VERSION = "check-30"  # bump when a signal or a rule changes
_KEEP = 64  # verdict files kept per repository, newest first


def verdicts_key(parts: Iterable[str | bytes]) -> str:
    return hashed(VERDICTS_VERSION, parts)


def candidates_key(stack: Stack, repo: git.Repository | None = None) -> str:
    """A stack's candidates, and which recorded bases ``repo`` has: a fetch bringing one judges again."""
    have = _bases_here(stack, repo) if repo else []
    return verdicts_key(["stack", stack.name, *(x for p in stack.patches for x in (p.name, p.raw)), *have])


def _bases_here(stack: Stack, repo: git.Repository) -> list[str]:
    # Through the persistent reader (no process of its own); the judgement reads these commits anyway.
    here = repo.read_commits(p.base_commit for p in stack.patches if p.base_commit)
    return ["+" if (p.base_commit or "") in here else "-" for p in stack.patches]


def _verdicts(repo: git.Repository, read: bool = True) -> Entries:
    return Entries(repo, "check", version=VERDICTS_VERSION, keep=_KEEP, read=read)


def _last_bases(repo: git.Repository, read: bool = True) -> Entries:
    return Entries(repo, "check-last-base", version=VERDICTS_VERSION, keep=_KEEP, read=read)


def load_verdicts(repo: git.Repository, k: str, run: Run, *, read: bool = True) -> bool:
    """Fill ``run``'s outcomes from the verdicts under ``k``; False, ``run`` untouched, where none."""
    data = _verdicts(repo, read).get(k)
    parsed = _parsed(data) if data is not None else None
    if parsed is None:
        return False
    stored, merge_base, subjects = parsed
    if any(o.name not in stored for o in run.outcomes):
        return False
    _fill(run, stored)
    run.merge_base = merge_base
    run.subjects.update(subjects)
    return True


def _fill(run: Run, stored: dict[str, Outcome]) -> None:
    # By name; all of them where ``run`` has none.
    if not run.outcomes:
        run.outcomes = list(stored.values())
        return
    for o in run.outcomes:
        _copy(stored[o.name], o)


def _parsed(data: Any) -> tuple[dict[str, Outcome], Any, dict[str, str]] | None:
    try:
        stored = {o.name: o for o in (outcome_from_json(d) for d in data["outcomes"])}
        return stored, data["merge_base"], dict(data["subjects"])
    except (ValueError, KeyError, TypeError, AttributeError):  # not of this shape: judged again
        return None


def save_verdicts(repo: git.Repository, k: str, run: Run, *, candidates: str | None = None) -> None:
    data = {
        "merge_base": run.merge_base,
        "subjects": run.subjects,
        "outcomes": [outcome_json(o) for o in run.outcomes],  # the Run's own codec
    }
    _verdicts(repo).put(k, data)
    if candidates:  # the last base these candidates were judged on
        _last_bases(repo).put(candidates, {"base": run.base, "key": k})


# -- a base that moved on ----------------------------------------------------------------


def carry_over(repo: git.Repository, stack: Stack, candidates: str, run: Run, *, read: bool = True) -> bool:
    """The last base's verdicts, where the base only moved past it by commits that cannot change one."""
    last = _last_bases(repo, read).get(candidates)
    old_base, old_key = (last.get("base"), last.get("key")) if last else (None, None)
    if not (isinstance(old_base, str) and isinstance(old_key, str)):
        return False
    return _carried(repo, stack, old_base, old_key, run)


def _carried(repo: git.Repository, stack: Stack, old_base: str, old_key: str, run: Run) -> bool:
    if old_base == run.base or not repo.is_ancestor(old_base, run.base):
        return False
    loaded = Run(stack=run.stack, base_ref=run.base_ref, base=run.base)
    loaded.outcomes = [Outcome(o.name, o.subject, o.stack_patch_id) for o in run.outcomes]
    if not load_verdicts(repo, old_key, loaded) or not _inert(repo, stack, old_base, run.base, loaded.merge_base):
        return False
    return load_verdicts(repo, old_key, run)


def _inert(repo: git.Repository, stack: Stack, old_base: str, base: str, merge_base: str | None) -> bool:
    """No new commit touches the stack's paths or deletes beside one, names a candidate, moves the merge base."""
    if _touches(repo, stack, old_base, base):
        return False
    messages = repo.range_messages([base], [old_base])
    if _sources(stack) & {sha for sha, _, _ in messages}:
        return False
    named = _candidate_names(stack)
    if any(_names_a_candidate(named, message) for _, _, message in messages):
        return False
    return _merge_base(repo, stack, base) == merge_base


def _merge_base(repo: git.Repository, stack: Stack, base: str) -> str | None:
    present = list(repo.read_commits([p.base_commit for p in stack.patches if p.base_commit]))
    return repo.merge_base(base, present[0]) if present else None


def _touches(repo: git.Repository, stack: Stack, old_base: str, base: str) -> bool:
    # A deleted directory above a path: git may see it renamed, and move a file a patch adds.
    paths = {p for patch in stack.patches for p in patch.paths}
    changed, deleted_dirs = _changed(repo, old_base, base)
    return bool(changed & paths) or any(_under(p, d) for p in paths for d in deleted_dirs)


def _changed(repo: git.Repository, old_base: str, base: str) -> tuple[set[str], set[str]]:
    changed = {path for _, files in repo.log_raw([base], [old_base], ()) for path, _, _ in files}
    net = repo.tree_changes([(base, old_base)])[0]  # a merge's own resolution is in no commit's changes
    changed |= {c.path for c in net}
    return changed, {os.path.dirname(c.path) for c in net if c.status == "D"}


def _sources(stack: Stack) -> set[str]:
    return {s for patch in stack.patches for s in (patch.provenance.cherry_picked_from, patch.source_commit) if s}


def _under(path: str, directory: str) -> bool:
    return bool(directory) and path.startswith(directory + "/")  # the root is never renamed


def _candidate_names(stack: Stack) -> tuple[set[str], set[str]]:
    subjects = {normal_subject(p.subject) for p in stack.patches} - {""}
    numbers: set[str] = set()
    for p in stack.patches:
        pr = p.provenance.original_pr
        numbers |= {pr.rpartition("#")[2]} if pr else set(pr_numbers(p.subject))
    return subjects, numbers


def _names_a_candidate(named: tuple[set[str], set[str]], message: str) -> bool:
    if any(rx.search(message) for rx in (PICKED_FROM, SPID, CHANGE_ID, REVERTS)):
        return True
    subjects, numbers = named
    return normal_subject(message.split("\n", 1)[0]) in subjects or bool(numbers & set(pr_numbers(message)))


def _copy(src: Outcome, o: Outcome) -> None:
    o.source_commit = o.source_commit or src.source_commit
    o.verdict, o.recommendation = src.verdict, src.recommendation
    o.represented_by, o.represented_fraction = src.represented_by, src.represented_fraction
    o.evidence, o.remaining_diff, o.group, o.text = src.evidence, src.remaining_diff, src.group, src.text
    if o.applied is None:  # ``apply``'s own facts stay where it replayed the patch
        o.applied, o.conflict, o.note = src.applied, src.conflict, src.note or o.note


def worth_keeping(run: Run) -> bool:
    """A verdict reached without the patch's pre-image may change once it is fetched."""
    return not any(e.data.get("judged") is False for o in run.outcomes for e in o.evidence)
