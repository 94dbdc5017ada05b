"""``ggstack init``: a new, empty stack."""

from __future__ import annotations

import os

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import print_json, warn
from ggstack.errors import UserError


@click.command("init")
@click.argument("stack", shell_complete=complete_stacks)
@click.option("--repo-slug", required=True, help="owner/name of the target repository on the forge.")
@click.option("--base", required=True, help="The upstream branch the stack is replayed onto and PRs go to (e.g. main).")
@click.option("--remote", default="origin", show_default=True, help="The git remote branches are pushed to.")
@click.option(
    "--fork",
    default=None,
    metavar="OWNER/NAME",
    help="The fork holding the PR heads, when PRs go to --repo-slug from it (then --repo-slug is upstream).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, repo_slug: str, base: str, remote: str, fork: str | None, as_json: bool) -> None:
    """Create an empty stack directory: patches/STACK/{stack.toml,series}.

    \b
    Examples:
      ggstack init my-fork --repo-slug you/your-fork --base main
      ggstack init upstream-fixes --repo-slug upstream/project --fork you/project --base main
    """
    from ggstack.series.store import init

    obj.anywhere = True
    path = init(obj.patches_dir, stack, repo_slug, base, remote, fork=fork)
    if as_json:
        print_json({"stack": stack, "path": path})
    else:
        click.echo(f"created {path}")
    try:
        _ = obj.repo.worktree
    except UserError:  # made where it was asked for; but import, apply and check need the fork's checkout
        warn(
            f"{os.path.abspath(obj.repo_path)} is not a git repository: the stack was created there, "
            "but import, apply and check need the fork checkout (run them inside it, or with --repo)"
        )
