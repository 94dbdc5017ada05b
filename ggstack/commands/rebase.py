"""``ggstack rebase``: the stored series rewritten onto a new base."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import console, err_console, escape, print_json

if TYPE_CHECKING:
    from ggstack.rebase import Entry


@click.command("rebase")
@click.argument("stack", shell_complete=complete_stacks)
@click.option(
    "--onto", default=None, help="The new base [default: stack.toml target.base].", shell_complete=complete_refs
)
@click.option("--partial", is_flag=True, help="Rebase the patches before the first that does not apply; keep the rest.")
@click.option("--dry-run", is_flag=True, help="Say what would be rewritten; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was (or would be) rewritten as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, onto: str | None, partial: bool, dry_run: bool, as_json: bool) -> None:
    """Rewrite the stored series onto a new base (each patch's diff and base-commit).

    The replay is apply's; every patch must apply (with --partial: up to the
    first that conflicts or becomes empty). A patch whose recorded parent
    already has its replayed parent's tree is left byte for byte. One atomic
    change to patches/STACK/. Exit 0 when the whole series is on the base,
    1 when a patch stopped it (nothing written without --partial).

    \b
    Examples:
      ggstack rebase my-fork --onto origin/main --dry-run
      ggstack rebase my-fork --onto origin/main --partial
    """
    from ggstack import rebase
    from ggstack.report.changes import rebase_table

    with obj.editing(stack, "rebase"):
        s = obj.stack(stack)
        result = rebase.rebase(obj.repo, s, onto or s.config.target.base, partial=partial, dry_run=dry_run)
    if as_json:
        print_json(result.to_json())
    else:
        console().print(rebase_table(result, dry_run=dry_run))
        if result.stopped is not None:
            _say_stopped(stack, result.stopped, result.before_stop, partial=partial, dry_run=dry_run)
    sys.exit(1 if result.stopped else 0)


def _say_stopped(stack: str, stop: Entry, n: int, *, partial: bool, dry_run: bool) -> None:
    """The patch that stopped the rebase, what was kept, and the command that gets past it."""
    kept = "nothing was written"
    if partial and n:
        what, was = (f"the {n} patches before it", "were") if n > 1 else ("the patch before it", "was")
        kept = f"{what} {'would be' if dry_run else was} rebased"
    if stop.detail.startswith("conflicts in "):
        why = f"`ggstack resolve {stack} {stop.name[:4]}` resolves the conflict"
    else:  # it changes nothing on the base: the base has it
        why = f"`ggstack drop {stack}` takes it out, with a record of why"
    hint = why + ("" if partial else "; --partial rebases up to it")
    err_console.print(
        f"ggstack: {escape(stop.name)} stops the rebase: {escape(stop.detail)}; {kept} ({hint})",
        highlight=False,
    )
