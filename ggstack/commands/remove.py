"""``ggstack remove``: a patch out of the series."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import done


@click.command("remove")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("patch")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, patch: str, as_json: bool) -> None:
    """Remove a patch from the series; the rest are renumbered.

    \b
    Examples:
      ggstack remove my-fork 2
    """
    from ggstack.series.order import remove
    from ggstack.series.store import save

    with obj.editing(stack, "remove"):
        after, victim = remove(obj.stack(stack), patch)
        save(after)
    done(as_json, f"removed {victim.name}", {"removed": victim.name, "patches": [p.name for p in after.patches]})
