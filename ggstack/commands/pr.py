"""``ggstack pr``: the stacked PRs opened, updated or closed."""

from __future__ import annotations

import sys

import click

from ggstack import exits, replay
from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled, load_run
from ggstack.commands.output import console, err_console, print_json
from ggstack.commands.progress import StageProgress
from ggstack.errors import UserError


@click.command("pr")
@click.argument("stack", shell_complete=complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The branch to replay onto and open the PRs against [default: stack.toml target.base].",
    shell_complete=complete_refs,
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan and every PR body; change nothing, locally or remotely (no token: planned offline).",
)
@click.option(
    "--close-redundant", is_flag=True, help="Close open ggstack PRs whose patch the base now has, with the evidence."
)
@click.option(
    "--stacked/--flat",
    "stacked",
    default=None,
    help="Each PR on the previous one's branch, or all on the target base [default: as opened, else stack.toml].",
)
@click.option(
    "--run",
    "run_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Use a saved Run (e.g. `ggstack test --json`) instead of running apply and check; "
    "every commit it names is checked against the stack first.",
)
@click.option(
    "--bundle",
    "bundle",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="With --run: the Run's commits, as the stage that ran the tests wrote them (sync --no-forge --bundle).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the Run (with the plan) as JSON.")
@click.pass_obj
@handled
def command(
    obj: Ctx,
    stack: str,
    onto: str | None,
    dry_run: bool,
    close_redundant: bool,
    stacked: bool | None,
    run_path: str | None,
    bundle: str | None,
    as_json: bool,
) -> None:
    """Open or update stacked PRs for the patches the base still needs.

    Only unique and partial patches that replay onto the base get PRs
    (one that conflicts needs rework first); represented ones never do
    (with --close-redundant their open PRs are closed, with a comment naming
    the representing commits). New PRs carry the approval gate of stack.toml
    (draft and/or label) until a maintainer approves. The PRs go onto the
    --onto branch. Token: GITHUB_TOKEN or GH_TOKEN; API: GITHUB_API_URL.
    Nothing is ever merged. Exit 1 when a patch needs a human, as sync.

    With --run (and --bundle) this is the bot's privileged stage: it runs no
    patch code, and refuses (exit 2) a Run whose commits are not the stack's
    own patches replayed on its base.

    \b
    Examples:
      ggstack pr my-fork --onto origin/main --dry-run    # the plan and every PR body; nothing changes
      ggstack pr my-fork --onto origin/main              # with GITHUB_TOKEN: push, open, update, in merge order
      ggstack pr my-fork --onto origin/main --close-redundant
    """
    from ggstack import handoff, pr
    from ggstack.check.stack import check_stack
    from ggstack.pr.text import bodies
    from ggstack.report.bodies import pr_documents
    from ggstack.report.text import pr_plan_table

    s = obj.stack(stack)
    if bundle and not run_path:
        raise UserError("--bundle goes with --run (the Run whose commits it carries)")
    if run_path:
        run = handoff.receive(obj.repo, s, load_run(run_path), bundle=bundle, run_path=run_path)
    else:
        base = onto or s.config.target.base
        with StageProgress(len(s.patches), "apply") as progress:
            run = replay.apply(obj.repo, s, base, write=not dry_run, progress=progress)
        with StageProgress(len(s.patches), "check") as progress:
            run = check_stack(obj.repo, s, base, run=run, progress=progress)
    with StageProgress(len(s.patches), "pr") as progress:
        run = pr.pr(
            obj.repo, s, run, dry_run=dry_run, close_redundant=close_redundant, stacked=stacked, progress=progress
        )
    if pr.OFFLINE in run.stages.get("pr", ""):
        err_console.print(f"ggstack: no GITHUB_TOKEN or GH_TOKEN: {pr.OFFLINE}", highlight=False, markup=False)
    if as_json:
        print_json(run.to_json())
    else:
        console().print(pr_plan_table(run))
        if dry_run:
            click.echo(pr_documents(run, bodies(run, s)))
    sys.exit(exits.exit_code(run))
