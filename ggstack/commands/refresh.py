"""``ggstack refresh``: what was settled in resolve's worktree, back into the patch file."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import done, patch_json


@click.command("refresh")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("patch")
@click.option("--abort", is_flag=True, help="Give up: remove the resolve worktree; the patch stays as it was.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, patch: str, abort: bool, as_json: bool) -> None:
    """Write the resolution made in `ggstack resolve`'s worktree back into the patch file.

    The diff becomes the change from the replayed parent to the worktree's
    files; base-commit advances to that parent; the message, author, date
    and every trailer (Stack-Patch-Id included) stay, and an Adapted: trailer
    says where it was resolved. Later applies onto this base (or a newer one
    that leaves those lines alone) then succeed with it. Refused while
    conflict markers remain. One atomic change; the worktree is removed.

    \b
    Examples:
      ggstack resolve my-fork 2 --onto origin/main     # first: a worktree with the patch picked in it
      ggstack refresh my-fork 2                        # its files go back into the patch file
    """
    from ggstack import resolve
    from ggstack.series.store import save

    with obj.editing(stack, "refresh"):
        s = obj.stack(stack)
        if abort:
            session = resolve.abort(obj.repo, s, patch)
            done(as_json, f"removed {session.worktree}", {"aborted": session.name, "worktree": session.worktree})
            return
        after, new, session = resolve.refresh(obj.repo, s, patch)
        save(after)
        resolve.finish(obj.repo, s, session)
    done(as_json, f"refreshed {new.name}: base-commit {new.base_commit}", {"refreshed": patch_json(new)})
