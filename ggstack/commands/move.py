"""``ggstack move``: a patch to another place in merge order."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import done


@click.command("move")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("patch")
@click.option("--to", "to", type=int, required=True, help="The new 1-based position in merge order.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, patch: str, to: int, as_json: bool) -> None:
    """Move a patch to another place in merge order (files renumbered).

    \b
    Examples:
      ggstack move my-fork 3 --to 1
    """
    from ggstack.series.order import move
    from ggstack.series.store import save

    with obj.editing(stack, "move"):
        after = move(obj.stack(stack), patch, to)
        save(after)
    done(as_json, "\n".join(p.name for p in after.patches), {"patches": [p.name for p in after.patches]})
