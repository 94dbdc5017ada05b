"""Renderers of a Run: a rich table for the terminal, Markdown, JSON.

Every renderer reads only the Run, so what the terminal, the PR comment
and the bot's step summary say can never disagree.
"""

from __future__ import annotations

from rich.table import Table

from ggstack.model import Applied, Run


def short(sha: str | None) -> str:
    return sha[:10] if sha else ""


def apply_table(run: Run) -> Table:
    table = Table(title=f"{run.stack} onto {run.base_ref} ({short(run.base)})", title_justify="left")
    for col in ("patch", "outcome", "new commit", "conflicting paths / note"):
        table.add_column(col, overflow="fold")
    styles = {Applied.APPLIED: "green", Applied.EMPTY: "yellow", Applied.CONFLICT: "bold red"}
    for o in run.outcomes:
        applied = o.applied or Applied.SKIPPED
        detail = ", ".join(o.conflict.paths) if o.conflict else ""
        if o.note:
            detail = f"{detail} ({o.note})" if detail else o.note
        table.add_row(o.name, f"[{styles.get(applied, '')}]{applied.value}[/]", short(o.commit), detail)
    return table
