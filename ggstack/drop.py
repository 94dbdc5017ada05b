"""``ggstack drop``: take out what the base now carries, keeping why in ``dropped.toml`` (a reviewer reads it in the PR
diff), in the same atomic change as the series."""

from __future__ import annotations

import datetime
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace

from ggstack import git, state
from ggstack.branches import branch_refs, remove_branches
from ggstack.errors import UserError
from ggstack.forge import Forge
from ggstack.model import Outcome, Patch, Recommendation, Run, Stack, Verdict
from ggstack.report.evidence import verdict_words
from ggstack.series import order, store

DROPPED = "dropped.toml"
DROPPED_DIR = "dropped"  # the dropped patches' own files, as they were: nothing leaves the stack's directory


@dataclass(frozen=True)
class Dropped:
    name: str
    subject: str
    stack_patch_id: str
    represented_by: tuple[str, ...]
    represented_subjects: tuple[str, ...]  # the subject of each representing commit, in the same order
    base: str  # the base sha it was judged represented on
    base_ref: str
    reason: str  # the rule that decided, in words
    dropped_at: str  # ISO 8601, UTC
    original_pr: str = ""
    cherry_picked_from: str = ""  # a pick's origin (its Cherry-picked-from trailer)
    source_commit: str = ""  # the commit it was imported from (its mbox From line)
    branch: str = ""  # its per-patch branch when dropped (removed unless someone else moved it)
    file: str = ""  # the patch file as it was, kept in the stack: "dropped/0003-….patch" (git am / import --from)

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["represented_by"] = list(self.represented_by)
        d["represented_subjects"] = list(self.represented_subjects)
        return d


@dataclass
class DropResult:
    stack: str
    base: str
    base_ref: str
    dropped: list[Dropped] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the remaining patches' new names, in merge order
    branches_deleted: list[str] = field(default_factory=list)
    branches_kept: list[str] = field(default_factory=list)  # "ref (why)"
    looks: list[tuple[str, str]] = field(default_factory=list)  # represented but "human look": (name, why), kept
    run: Run | None = None  # the Run the decision came from (with ``pr`` filled in when PRs were closed)
    dry_run: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "base": self.base,
            "base_ref": self.base_ref,
            "dry_run": self.dry_run,
            "dropped": [d.to_json() for d in self.dropped],
            "kept": self.kept,
            "branches_deleted": self.branches_deleted,
            "branches_kept": self.branches_kept,
            "kept_human_look": [{"name": n, "why": w} for n, w in self.looks],
            "closed_prs": [
                {"name": o.name, "number": o.pr.number, "url": o.pr.url, "action": o.pr.action}
                for o in (self.run.outcomes if self.run else [])
                if o.pr is not None and o.pr.number is not None
            ],
        }


# -- the record ----------------------------------------------------------------------


def record_path(stack: Stack) -> str:
    return os.path.join(stack.path, DROPPED)


def read_record(stack: Stack) -> list[Dropped]:
    """A malformed ``dropped.toml`` names its line."""
    path = record_path(stack)
    try:
        with open(os.path.join(state.readable_dir(stack.path), DROPPED), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UserError("not valid UTF-8 (TOML is UTF-8)", path=path, line=raw[: e.start].count(b"\n") + 1) from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"invalid TOML: {e}", path=path) from None
    entries = data.get("dropped", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UserError("expected [[dropped]] tables", path=path)
    return [_entry(e, i, path) for i, e in enumerate(entries, 1)]


_REQUIRED = ("name", "subject", "stack_patch_id", "base")
_LISTS = ("represented_by", "represented_subjects")


def _entry(d: dict[str, object], number: int, path: str) -> Dropped:
    values: dict[str, object] = {}
    for f in fields(Dropped):
        value = d.get(f.name, [] if f.name in _LISTS else "")
        if f.name in _REQUIRED and f.name not in d:
            raise UserError(f"[[dropped]] entry {number}: no {f.name}", path=path)
        if f.name in _LISTS:
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                raise UserError(f"[[dropped]] entry {number}: {f.name} must be a list of strings", path=path)
            value = tuple(value)
        elif not isinstance(value, str):
            raise UserError(f"[[dropped]] entry {number}: {f.name} must be a string", path=path)
        values[f.name] = value
    return Dropped(**values)  # type: ignore[arg-type]  # each value checked against its field above


def render_record(stack_name: str, entries: Sequence[Dropped]) -> bytes:
    lines = [
        f"# Patches dropped from the stack {stack_name} because the base carries them",
        f"# (written by `ggstack drop`; shown by `ggstack list {stack_name} --dropped`).",
    ]
    for e in entries:
        lines.append("")
        lines.append("[[dropped]]")
        for key, value in e.to_json().items():
            if value in ("", []) and key not in _REQUIRED:
                continue
            lines.append(f"{key} = {_toml(value)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _toml(value: object) -> str:
    # The stdlib reads TOML but writes none. A JSON string is a TOML basic string (the same
    # escapes); ASCII-only keeps every control character escaped.
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


# -- deciding --------------------------------------------------------------------------


def represented(stack: Stack, run: Run) -> list[tuple[Patch, Outcome]]:
    _refuse_unjudged(stack, run)
    by_id = {o.stack_patch_id: o for o in run.outcomes if o.verdict is Verdict.REPRESENTED}
    return [(p, by_id[p.provenance.stack_patch_id]) for p in stack.patches if p.provenance.stack_patch_id in by_id]


def _refuse_unjudged(stack: Stack, run: Run) -> None:
    if run.stack is not None and run.stack != stack.name:
        raise UserError(f"the Run is of stack {run.stack!r}, not {stack.name!r}")
    missing = [o.name for o in run.outcomes if o.verdict is None]
    if missing:
        raise UserError(
            f"no verdict for {', '.join(missing)}: drop needs the Run of `check` (or `test`), not of `apply`"
        )


def entry_of(patch: Patch, o: Outcome, run: Run, branch: str, now: str, file: str = "") -> Dropped:
    return Dropped(
        name=patch.name,
        subject=patch.subject,
        stack_patch_id=patch.provenance.stack_patch_id,
        represented_by=tuple(o.represented_by),
        represented_subjects=tuple(run.subjects.get(c, "") for c in o.represented_by),
        base=run.base,
        base_ref=run.base_ref,
        reason=verdict_words(o),
        dropped_at=now,
        original_pr=patch.provenance.original_pr or "",
        cherry_picked_from=patch.provenance.cherry_picked_from or "",
        source_commit=patch.source_commit or "",
        branch=branch,
        file=file,
    )


def would_lose(victims: Sequence[tuple[Patch, Outcome]]) -> list[str]:
    """The fork's own lines in it, or no word on them (an older Run)."""
    out = []
    for p, o in victims:
        if o.text is None:
            out.append(f"{p.name}: the Run does not say which of its lines are the fork's own (run check again)")
        elif o.text.own_lines:
            out.append(f"{p.name}: the fork's own lines {'; '.join(o.text.own_lines[:5])}")
    return out


def keep_file(patch: Patch, number: int) -> str:
    return f"{DROPPED_DIR}/{number:04d}-{patch.slug}.patch"


def now_utc() -> str:
    """``SOURCE_DATE_EPOCH`` when set, as other build tools honour it."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        moment = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
    else:
        moment = datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the command -----------------------------------------------------------------------


def drop(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    close_redundant: bool = False,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    client: Forge | None = None,
    include_human_look: bool = False,
    force: bool = False,
) -> DropResult:
    """Under the caller's lock; a "human look" or the fork's own lines stay unless asked."""
    # The order leaves the stack as it was on any failure: all checks first; then the PRs closed
    # (pr's own plan: its comment, never twice); then the stack in one step; then only ggstack's
    # own branches (where apply put them, not checked out). A kill's leftover branch is in the
    # record, and the next drop removes it.
    victims, looks = _chosen(stack, run, include_human_look, force)
    earlier, entries = _records(stack, run, victims)
    after = _without(stack, victims)
    result = DropResult(stack.name, run.base, run.base_ref, entries, [p.name for p in after.patches], dry_run=dry_run)
    result.looks = looks
    candidates = _branches_left(after, [*earlier, *entries])
    if close_redundant and victims:
        result.run = _close_prs(repo, stack, run, [o for _, o in victims], dry_run=dry_run, env=env, client=client)
    if not dry_run:
        _save(after, [p for p, _ in victims], earlier, entries)
    # A dry run says which branches would go and which would stay, as the real one would.
    result.branches_deleted, result.branches_kept = remove_branches(repo, stack, candidates, write=not dry_run)
    return result


def _without(stack: Stack, victims: list[tuple[Patch, Outcome]]) -> Stack:
    gone = {p.name for p, _ in victims}
    return order.renumbered(stack, [p for p in stack.patches if p.name not in gone])


def _records(stack: Stack, run: Run, victims: list[tuple[Patch, Outcome]]) -> tuple[list[Dropped], list[Dropped]]:
    refs = dict(zip((p.name for p in stack.patches), branch_refs(stack), strict=True))
    now = now_utc()
    earlier = read_record(stack)
    files = [keep_file(p, len(earlier) + k) for k, (p, _) in enumerate(victims, 1)]
    return earlier, [entry_of(p, o, run, refs[p.name], now, f) for (p, o), f in zip(victims, files, strict=True)]


def _save(after: Stack, gone: list[Patch], earlier: list[Dropped], entries: list[Dropped]) -> None:
    """Saved even when nothing goes: the save is what tidies up after a killed change."""
    kept = {e.file: p.raw for p, e in zip(gone, entries, strict=True)}
    store.save(after, also={DROPPED: render_record(after.name, [*earlier, *entries]), **kept} if entries else None)


def _branches_left(after: Stack, record: list[Dropped]) -> list[str]:
    kept_refs = set(branch_refs(after))
    return list(dict.fromkeys(e.branch for e in record if e.branch and e.branch not in kept_refs))


def _chosen(
    stack: Stack, run: Run, include_human_look: bool, force: bool
) -> tuple[list[tuple[Patch, Outcome]], list[tuple[str, str]]]:
    victims, looks = [], []
    for p, o in represented(stack, run):
        if o.recommendation is Recommendation.HUMAN_LOOK and not include_human_look:
            looks.append((p.name, verdict_words(o)))
        else:
            victims.append((p, o))
    own = would_lose(victims)
    if own and not force:
        raise UserError(
            "not dropped: a patch with lines of the fork's own (changed lines the base lacks where it never "
            "touched) would lose them:\n  " + "\n  ".join(own) + "\n(--force drops them anyway; the files stay "
            f"in patches/{stack.name}/{DROPPED_DIR}/)"
        )
    return victims, looks


def _close_prs(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    outcomes: Sequence[Outcome],
    *,
    dry_run: bool,
    env: Mapping[str, str] | None,
    client: Forge | None,
) -> Run:
    from ggstack import pr as pr_stage

    only = replace(run, outcomes=list(outcomes))
    return pr_stage.pr(repo, stack, only, dry_run=dry_run, close_redundant=True, env=env, client=client)
