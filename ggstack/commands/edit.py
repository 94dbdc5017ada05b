"""``ggstack edit``: a patch's message in the maintainer's editor."""

from __future__ import annotations

import os

import click

from ggstack import state
from ggstack.commands.context import Ctx, complete_stacks, handled
from ggstack.commands.output import done
from ggstack.errors import UserError


@click.command("edit")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("patch")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def command(obj: Ctx, stack: str, patch: str, as_json: bool) -> None:
    """Edit a patch's message in $EDITOR (VISUAL, EDITOR, else vi); the file is regenerated.

    The trailers are checked before anything is written: the one
    Stack-Patch-Id must stay as it is, Original-PR is owner/repo#N,
    Cherry-picked-from a full sha. The stack is not locked while the editor
    is open; a patch changed meanwhile is not overwritten. A message that
    fails the checks is kept under the git dir (the error names the file).

    \b
    Examples:
      ggstack edit my-fork 2                 # in $VISUAL or $EDITOR (else vi)
    """
    from ggstack import edit
    from ggstack.series.store import save

    before = obj.stack(stack).find(patch)
    try:
        text = click.edit(edit.editable(before), extension=".txt", require_save=False)
    except click.ClickException as e:
        raise UserError(f"the editor did not run: {e.message} (set VISUAL or EDITOR)") from None
    if text is None:
        done(as_json, f"{before.name}: unchanged", {"patch": before.name, "changed": False})
        return
    with obj.editing(stack, "edit"):
        s = obj.stack(stack)
        current = s.find(patch)
        if current.raw != before.raw or current.name != before.name:
            raise UserError(f"{before.name} changed while it was being edited; nothing was written (edit it again)")
        try:
            after, new = edit.edit(obj.repo, s, patch, text)
        except UserError as e:
            kept = os.path.join(obj.repo.state_dir("edit"), before.name.removesuffix(".patch") + ".txt")
            state.write_atomic(kept, text.encode("utf-8", "surrogateescape"))
            raise UserError(f"{e}; your message is kept in {kept}") from None
        changed = save(after)
    done(
        as_json, f"{new.name}: {'message changed' if changed else 'unchanged'}", {"patch": new.name, "changed": changed}
    )
