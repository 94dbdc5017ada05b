"""Verdicts kept by what decides them: a rerun on the same base costs what changed.

The bot checks the same stack on every base move and every schedule; a
judgement depends only on the base commit, the candidates (a stack's patch
files, byte for byte, or the commits) and the rules, so it is stored under
a key of exactly those, with ``VERSION`` bumped whenever a signal or a rule
changes. A lost, corrupt or foreign file only costs the time to recompute.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from typing import Any

from ggstack import git, series
from ggstack.model import Applied, Conflict, Evidence, Outcome, Recommendation, Run, Verdict

VERSION = "check-6"
_KEEP = 64  # verdict files kept per repository, newest first


def key(parts: Iterable[str | bytes]) -> str:
    h = hashlib.sha256(VERSION.encode())
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        h.update(b"%d:" % len(data) + data)
    return h.hexdigest()


def _path(repo: git.Repository, k: str) -> str:
    return os.path.join(repo.state_dir("cache", "check"), k + ".json")


def load(repo: git.Repository, k: str, run: Run) -> bool:
    """Fill ``run``'s outcomes (by name; all of them when it has none) from the
    verdicts stored under ``k``; False, and ``run`` untouched, when there are none."""
    try:
        with open(_path(repo, k), encoding="utf-8") as f:
            data = json.load(f)
        stored = {
            d["name"]: _restore(d, Outcome(d["name"], d["subject"], d["stack_patch_id"])) for d in data["outcomes"]
        }
        merge_base, subjects = data["merge_base"], dict(data["subjects"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    if any(o.name not in stored for o in run.outcomes):
        return False
    if run.outcomes:
        for o in run.outcomes:
            _copy(stored[o.name], o)
    else:
        run.outcomes = list(stored.values())
    run.merge_base = merge_base
    run.subjects.update(subjects)
    with contextlib.suppress(OSError):
        os.utime(_path(repo, k))
    return True


def save(repo: git.Repository, k: str, run: Run) -> None:
    data = {
        "merge_base": run.merge_base,
        "subjects": run.subjects,
        "outcomes": [_judged(o) for o in run.outcomes],
    }
    series.write_atomic(_path(repo, k), json.dumps(data).encode())
    _prune(os.path.dirname(_path(repo, k)))


def _judged(o: Outcome) -> dict[str, Any]:
    return {
        "name": o.name,
        "subject": o.subject,
        "stack_patch_id": o.stack_patch_id,
        "source_commit": o.source_commit,
        "verdict": o.verdict.value if o.verdict else None,
        "recommendation": o.recommendation.value if o.recommendation else None,
        "represented_by": o.represented_by,
        "represented_fraction": o.represented_fraction,
        "evidence": [e.to_json() for e in o.evidence],
        "remaining_diff": o.remaining_diff,
        "group": o.group,
        "applied": o.applied.value if o.applied else None,
        "conflict": None if o.conflict is None else vars(o.conflict),
        "note": o.note,
    }


def _restore(d: dict[str, Any], o: Outcome) -> Outcome:
    o.source_commit = d["source_commit"]
    o.verdict = Verdict(d["verdict"]) if d["verdict"] else None
    o.recommendation = Recommendation(d["recommendation"]) if d["recommendation"] else None
    o.represented_by = [str(c) for c in d["represented_by"]]
    o.represented_fraction = float(d["represented_fraction"])
    o.evidence = [Evidence.from_json(e) for e in d["evidence"]]
    o.remaining_diff = d["remaining_diff"]
    o.group = [str(n) for n in d["group"]]
    o.applied = Applied(d["applied"]) if d["applied"] else None
    o.conflict = Conflict(**d["conflict"]) if d["conflict"] else None
    o.note = str(d["note"])
    return o


def _copy(src: Outcome, o: Outcome) -> None:
    o.source_commit = o.source_commit or src.source_commit
    o.verdict, o.recommendation = src.verdict, src.recommendation
    o.represented_by, o.represented_fraction = src.represented_by, src.represented_fraction
    o.evidence, o.remaining_diff, o.group = src.evidence, src.remaining_diff, src.group
    if o.applied is None:  # ``apply``'s own facts stay where it replayed the patch
        o.applied, o.conflict, o.note = src.applied, src.conflict, src.note or o.note


def worth_keeping(run: Run) -> bool:
    """A verdict reached without the patch's pre-image may change once it is fetched: not kept."""
    return not any(e.data.get("judged") is False for o in run.outcomes for e in o.evidence)


def _prune(directory: str) -> None:
    with contextlib.suppress(OSError):
        entries = sorted(os.scandir(directory), key=lambda e: e.stat().st_mtime, reverse=True)
        for old in entries[_KEEP:]:
            os.unlink(old.path)
