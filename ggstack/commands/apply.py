"""``ggstack apply``: the stack replayed onto a base, one branch a patch."""

from __future__ import annotations

import sys

import click

from ggstack import exits, replay
from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import console, print_json
from ggstack.commands.progress import StageProgress


@click.command("apply")
@click.argument("stack", shell_complete=complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The base to replay onto [default: stack.toml target.base].",
    shell_complete=complete_refs,
)
@click.option(
    "--branch-prefix",
    default=None,
    help="Write the per-patch branches under this ref prefix instead of branches.template.",
)
@click.option("--force", is_flag=True, help="Overwrite ggstack branches that someone else moved.")
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, onto: str | None, branch_prefix: str | None, force: bool, as_json: bool) -> None:
    """Replay the stack onto a base, in memory, and write one branch per patch.

    Never touches the working tree, index, HEAD or your branches. A patch
    that conflicts is recorded (paths and hunks) and the rest carry on.
    Exit 0 when every patch applied or was empty, 1 when any conflicted.

    \b
    Examples:
      ggstack apply my-fork --onto origin/main
      ggstack apply my-fork --onto origin/main --branch-prefix refs/ggstack/try   # no branch under refs/heads
    """
    s = obj.stack(stack)
    with StageProgress(len(s.patches), "apply") as progress:
        run = replay.apply(
            obj.repo, s, onto or s.config.target.base, prefix=branch_prefix, force=force, progress=progress
        )
    if as_json:
        print_json(run.to_json())
    else:
        from ggstack.report.text import apply_table, branches_line  # rich's tables: not for --json

        console().print(apply_table(run))
        where = branches_line(run)
        if where:
            click.echo(where)
    sys.exit(exits.exit_code(run))
