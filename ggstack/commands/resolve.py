"""``ggstack resolve``: a worktree of ggstack's own to settle a patch's conflict in."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import err_console, escape, print_json


@click.command("resolve")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("patch")
@click.option(
    "--onto",
    default=None,
    help="The base to resolve it on [default: stack.toml target.base].",
    shell_complete=complete_refs,
)
@click.option("--json", "as_json", is_flag=True, help="Print the session (worktree path, conflicts) as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, patch: str, onto: str | None, as_json: bool) -> None:
    """Prepare a worktree to resolve PATCH's conflict: the patch picked onto its replayed parent.

    The worktree is ggstack's own, under the git dir (its path is printed);
    your checkout, HEAD, index and branches are not touched. The conflict
    markers are in its files and git's rerere is on there (a conflict you
    resolved before comes back resolved). Edit, then `ggstack refresh STACK
    PATCH` writes the result back into the patch file (`--abort` gives up).
    Running it again prints the same worktree.

    \b
    Examples:
      ggstack resolve my-fork 2 --onto origin/main     # prints the worktree to edit in
      ggstack resolve my-fork 2 --json                 # the same worktree, and its conflicts, as JSON
    """
    from ggstack import resolve

    with obj.editing(stack, "resolve"):
        s = obj.stack(stack)
        session = resolve.resolve(obj.repo, s, patch, onto or s.config.target.base)
    if as_json:
        print_json(session.to_json())
        return
    click.echo(session.worktree)
    if session.conflicts:
        err_console.print(f"conflicts in: {escape(', '.join(session.conflicts))}", highlight=False)
    if session.reused:
        err_console.print(f"rerere reused a recorded resolution for: {escape(', '.join(session.reused))}")
    if not session.conflicts and not session.reused:
        err_console.print(
            f"no conflict: {escape(session.name)} applies cleanly onto {escape(session.base_ref)}; it is picked "
            f"there uncommitted. Nothing to resolve: edit only to change the patch, then `ggstack refresh "
            f"{escape(stack)} {escape(patch)}` (or --abort)",
            highlight=False,
        )
        return
    err_console.print(
        f"edit the files there, then `ggstack refresh {escape(stack)} {escape(patch)}` (or --abort)", highlight=False
    )
