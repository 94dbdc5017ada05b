"""What the commands that change a stack or its PRs did, or would do: drop, rebase, land."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ggstack.model import PRState
from ggstack.report.words import patch_label, short

if TYPE_CHECKING:
    from ggstack import drop, land, rebase


def _represented_words(shas: Sequence[str], subjects: Sequence[str]) -> str:
    return "\n".join(
        f"{short(sha)} “{subject}”" if subject else short(sha)
        for sha, subject in zip(shas, [*subjects, *[""] * len(shas)])
    )


def drop_table(result: drop.DropResult) -> Table:
    verb = "would drop" if result.dry_run else "dropped"
    title = f"{result.stack}: {verb} {len(result.dropped)} on {result.base_ref} ({short(result.base)})"
    table = Table(title=Text(title), title_justify="left")
    for col in ("patch", "represented by", "why", "PR", "branch"):
        table.add_column(col, overflow="fold")
    prs = _prs(result)
    for e in result.dropped:
        table.add_row(*(Text(c) for c in _drop_cells(e, prs.get(e.name), result)))
    if not result.dropped:
        table.add_row(Text("nothing is represented: nothing to drop"), "", "", "", "")
    return table


def _prs(result: drop.DropResult) -> dict[str, PRState]:
    return {o.name: o.pr for o in (result.run.outcomes if result.run else []) if o.pr is not None}


def _drop_cells(e: drop.Dropped, pull: PRState | None, result: drop.DropResult) -> list[str]:
    represented = _represented_words(e.represented_by, e.represented_subjects)
    return [patch_label(e.name, e.subject), represented, e.reason, _closed(pull), _branch(e.branch, result)]


def _closed(pull: PRState | None) -> str:
    return f"#{pull.number} {pull.action or ''}".strip() if pull and pull.number else ""


def _branch(ref: str, result: drop.DropResult) -> str:
    branch = ref.removeprefix("refs/heads/")
    if ref not in result.branches_deleted:
        return branch
    return branch + (" (would be deleted)" if result.dry_run else " (deleted)")


def dropped_table(records: Mapping[str, Sequence[drop.Dropped]]) -> Table:
    """``ggstack list --dropped``."""
    table = Table(title="dropped patches", title_justify="left")
    for col in ("stack", "patch", "Stack-Patch-Id", "represented by", "on base", "when", "why"):
        table.add_column(col, overflow="fold")
    for stack, entries in records.items():
        for e in entries:
            cells = [
                stack,
                patch_label(e.name, e.subject),
                e.stack_patch_id[:12],
                _represented_words(e.represented_by, e.represented_subjects),
                f"{e.base_ref} ({short(e.base)})",
                e.dropped_at,
                e.reason,
            ]
            table.add_row(*(Text(c) for c in cells))
    if not any(records.values()):
        table.add_row(Text("nothing was dropped"), "", "", "", "", "", "")
    return table


def rebase_table(result: rebase.Result, *, dry_run: bool = False) -> Table:
    table = Table(title=Text(f"{result.stack}: {_rebased(result, dry_run)}"), title_justify="left")
    for col in ("patch", "status", "base-commit before", "after", "detail"):
        table.add_column(col, overflow="fold")
    for e in result.entries:
        status = e.status
        if status == "rewritten" and not result.written:  # a dry run, or stopped without --partial
            status = "would rewrite" if dry_run else "not written"
        cells = [patch_label(e.name, e.subject), status, short(e.old_base), short(e.new_base), e.detail]
        table.add_row(*(Text(c) for c in cells))
    return table


def _rebased(result: rebase.Result, dry_run: bool) -> str:
    stop, n = result.stopped, result.before_stop
    will = "would rebase" if dry_run else "rebased"
    onto = f"{result.base_ref} ({short(result.base)})"
    if stop is None:
        return f"{will} onto {onto}"
    if result.partial and n:
        return f"{will} {n} of {len(result.entries)} patches onto {onto}; {stop.name} stops the rest"
    return f"not rebased onto {onto}: {stop.name} stops it"


def landing_text(result: land.Landing) -> str:
    how = result.method + (", through the native stack" if result.native else "")
    head = f"{result.stack}: landing onto {result.base} at {short(result.base_sha)} ({how})"
    lines = [head + (" — plan only (dry run)" if result.dry_run else "")]
    if result.dry_run or not result.done:
        lines += _plan_lines(result)
    lines += [f"  {line}" for line in result.done]
    return "\n".join([*lines, *_landed(result), *_end(result)])


def _plan_lines(result: land.Landing) -> list[str]:
    lines = []
    for e in result.plan:
        pr = f" #{e.number}" if e.number else ""
        lines.append(f"  {e.label}{pr}: {e.action}: {e.why}")
        lines += [f"      - {'would ' if result.dry_run else ''}{s.words}" for s in e.steps]
    return lines


def _landed(result: land.Landing) -> list[str]:
    if not (result.merged or result.closed):
        return []
    merged = ", ".join(f"#{n}" for n in result.merged) or "none"
    closed = f"; closed as already in {result.base}: " + ", ".join(f"#{n}" for n in result.closed)
    return [f"merged: {merged}" + (closed if result.closed else "")]


def _end(result: land.Landing) -> list[str]:
    lines = [result.queued] if result.queued else []
    if result.stopped:
        lines.append(f"stopped at {result.stopped}")
    elif not result.queued and not result.dry_run:
        lines.append("nothing left to land")
    return lines
