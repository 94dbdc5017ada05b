"""``ggstack list``: the patches of a stack (or every stack), or what drop took out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import console, escape, patch_json, print_json
from ggstack.model import Stack

if TYPE_CHECKING:
    from rich.table import Table


@click.command("list")
@click.argument("stack", required=False, shell_complete=complete_stacks)
@click.option("--dropped", is_flag=True, help="List the patches `ggstack drop` took out, and why.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str | None, dropped: bool, as_json: bool) -> None:
    """List the patches of a stack in merge order (or all stacks).

    \b
    Examples:
      ggstack list
      ggstack list my-fork --dropped      # what drop took out: represented by which commit, on which base
    """
    from ggstack.series.store import list_stacks

    names = [stack] if stack else list_stacks(obj.patches_dir)
    stacks = [obj.stack(n) for n in names]
    if dropped:
        _list_dropped(stacks, as_json)
        return
    if as_json:
        print_json({s.name: [patch_json(p) for p in s.patches] for s in stacks})
        return
    out = console()
    if not stacks:
        out.print(f"no stacks in {obj.patches_dir}")
    for s in stacks:
        out.print(_table(s))


def _table(s: Stack) -> Table:
    from rich.table import Table

    table = Table(title=f"{s.name} → {s.config.target.repo} {s.config.target.base}", title_justify="left")
    for col in ("#", "subject", "original PR", "source", "dropped", "Stack-Patch-Id"):
        table.add_column(col, overflow="fold")
    for i, p in enumerate(s.patches, 1):
        prov = p.provenance
        table.add_row(
            str(i),
            escape(p.subject),
            prov.original_pr or "",
            f"picked from {prov.cherry_picked_from[:10]}" if prov.cherry_picked_from else (p.source_commit or "")[:10],
            escape("\n".join(prov.dropped)),
            prov.stack_patch_id[:12],
        )
    return table


def _list_dropped(stacks: list[Stack], as_json: bool) -> None:
    from ggstack import drop
    from ggstack.report.changes import dropped_table

    records = {s.name: drop.read_record(s) for s in stacks}
    if as_json:
        print_json({name: [e.to_json() for e in entries] for name, entries in records.items()})
        return
    console().print(dropped_table(records))
