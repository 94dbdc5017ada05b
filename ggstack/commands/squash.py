"""``ggstack squash``: two neighbouring patches as one."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import done, patch_json


@click.command("squash")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("first")
@click.argument("second")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, first: str, second: str, as_json: bool) -> None:
    """Make two neighbouring patches one: the earlier one's place, name and Stack-Patch-Id.

    The message is the first's, then the second's; the provenance trailers of
    both are kept (Original-PR, Cherry-picked-from, Dropped), and a Squashed:
    trailer names the second's Stack-Patch-Id and subject. Refused when the
    second does not apply on the first alone. The rest are renumbered.

    \b
    Examples:
      ggstack squash my-fork 2 3
    """
    from ggstack import edit
    from ggstack.series.store import save

    with obj.editing(stack, "squash"):
        after, new, folded = edit.squash(obj.repo, obj.stack(stack), first, second)
        save(after)
    done(as_json, f"squashed {folded.name} into {new.name}", {"squashed": folded.name, "into": patch_json(new)})
