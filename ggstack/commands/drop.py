"""``ggstack drop``: the patches the base already has out of the series, with a record."""

from __future__ import annotations

import click

from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled, load_run
from ggstack.commands.output import console, print_json, warn
from ggstack.commands.progress import StageProgress


@click.command("drop")
@click.argument("stack", shell_complete=complete_stacks)
@click.option(
    "--represented",
    is_flag=True,
    default=True,
    help="Drop the patches judged represented: what drop takes out (the default; said for clarity).",
)
@click.option(
    "--run",
    "run_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Use a saved Run (`ggstack check --json`, `test --json`, sync's) instead of running check.",
)
@click.option(
    "--onto",
    default=None,
    help="The base to check against [default: stack.toml target.base].",
    shell_complete=complete_refs,
)
@click.option(
    "--close-redundant", is_flag=True, help="Also close their open PRs with the evidence comment (needs a token)."
)
@click.option("--dry-run", is_flag=True, help="Say what would be dropped (and closed); change nothing.")
@click.option(
    "--include-human-look", is_flag=True, help='Also drop represented patches whose recommendation is "human look".'
)
@click.option(
    "--force",
    is_flag=True,
    help="Drop a patch even where the Run found lines of the fork's own in it (or says nothing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was dropped as JSON.")
@click.pass_obj
@handled
def command(
    obj: Ctx,
    stack: str,
    represented: bool,
    run_path: str | None,
    onto: str | None,
    close_redundant: bool,
    dry_run: bool,
    include_human_look: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Remove the patches the base already carries, keeping a record of why.

    Each dropped patch is written into patches/STACK/dropped.toml (subject,
    Stack-Patch-Id, provenance, the representing commits and their subjects,
    the base sha, the rule that decided, when) and its file kept as it was
    in patches/STACK/dropped/ (`git am` or `ggstack import STACK --from
    patches/STACK/dropped` brings it back), in the same atomic change that
    removes it; `ggstack list STACK --dropped` shows them. A patch in which
    the Run found lines of the fork's own is never dropped without --force. Their
    per-patch branches are deleted where ggstack wrote them and nobody moved
    them since (never one that is checked out). Without --run, check runs
    first. A represented patch whose recommendation is "human look" is kept
    and listed, unless --include-human-look.

    \b
    Examples:
      ggstack drop my-fork --onto origin/main --dry-run    # what would go; nothing changes
      ggstack drop my-fork --onto origin/main
    """
    from ggstack import drop
    from ggstack.check.stack import check_stack
    from ggstack.report.changes import drop_table

    with obj.editing(stack, "drop"):
        s = obj.stack(stack)
        if run_path:
            run = load_run(run_path)
        else:
            with StageProgress(len(s.patches), "check") as progress:
                run = check_stack(obj.repo, s, onto or s.config.target.base, progress=progress)
        result = drop.drop(
            obj.repo,
            s,
            run,
            close_redundant=close_redundant,
            dry_run=dry_run,
            include_human_look=include_human_look,
            force=force,
        )
    if as_json:
        print_json(result.to_json())
        return
    console().print(drop_table(result))
    for name, why in result.looks:
        click.echo(f"kept {name}: represented, but human look ({why}); --include-human-look drops it too")
    for line in result.branches_kept:
        warn(f"branch {'would be ' if result.dry_run else ''}kept: {line}")
