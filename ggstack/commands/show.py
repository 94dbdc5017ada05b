"""``ggstack show``: one patch, its message, trailers and diffstat."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import patch_json, print_json


@click.command("show")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("patch")
@click.option("--patch", "with_diff", is_flag=True, help="Also print the diff.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, patch: str, with_diff: bool, as_json: bool) -> None:
    """Show one patch: message, trailers, diffstat (--patch: the diff).

    PATCH is an index (1, 0001) or a file name.

    \b
    Examples:
      ggstack show my-fork 1 --patch
    """
    p = obj.stack(stack).find(patch)
    if as_json:
        print_json(patch_json(p, with_diff=True))
        return
    click.echo(f"{p.name}\nAuthor: {p.author}\nDate:   {p.date}\n")
    click.echo(p.message)
    click.echo(_diffstat(p.diff))
    if with_diff:
        click.echo(p.diff)


def _diffstat(text: str) -> str:
    from ggstack import diff

    added_removed: dict[str, list[int]] = {}
    for change in diff.parse(text):
        counts = added_removed.setdefault(change.path, [0, 0])
        for hunk in change.hunks:
            for block in hunk.blocks:
                counts[0] += len(block.added)
                counts[1] += len(block.removed)
    return "\n".join(f" {path} | +{a} -{d}" for path, (a, d) in added_removed.items())
