"""``ggstack land``: the approved, green PRs merged in merge order."""

from __future__ import annotations

import sys

import click

from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import err_console, escape, print_json


@click.command("land")
@click.argument("stack", shell_complete=complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The branch to land on [default: stack.toml target.base].",
    shell_complete=complete_refs,
)
@click.option("--dry-run", is_flag=True, help="Print what would be merged, closed or waited for; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done (or planned) as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, onto: str | None, dry_run: bool, as_json: bool) -> None:
    """Merge the stack's approved PRs in merge order, each checked again against the base first.

    From the bottom, a PR is merged only when a reviewer with write access (or
    one of stack.toml's land.approvers) approved its latest push, its required
    checks pass, GitHub says it can merge, and a fresh check says the base
    still needs it; one the base took meanwhile is closed with the evidence
    instead. It stops at the first PR that is not ready, saying why. Safe to
    rerun after a kill or a forge failure: nothing is merged twice. Where the
    repository has stacked pull requests, the ready PRs merge as one stack.
    Exit 0 when nothing is left waiting, 1 when a PR is not ready.

    \b
    Examples:
      ggstack land my-fork --onto main --dry-run
      ggstack land my-fork --onto main
    """
    from ggstack import land

    s = obj.stack(stack)
    say = None if as_json or dry_run else (lambda line: err_console.print(escape(line), highlight=False))
    result = land.land(obj.repo, s, onto=onto, dry_run=dry_run, say=say)
    if as_json:
        print_json(result.to_json())
    else:
        from ggstack.report.changes import landing_text

        click.echo(landing_text(result))
    sys.exit(result.exit_code)
