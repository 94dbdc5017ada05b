"""``ggstack sync``: the bot's one command, on a terminal or in GitHub Actions."""

from __future__ import annotations

import os
import sys

import click

from ggstack import exits, state
from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import console, err_console, escape, print_json, warn
from ggstack.commands.progress import StageProgress
from ggstack.errors import UserError
from ggstack.model import Run


@click.command("sync")
@click.argument("stack", shell_complete=complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The base to sync onto [default: stack.toml target.base].",
    shell_complete=complete_refs,
)
@click.option("--fetch", is_flag=True, help="git fetch the stack's remote first.")
@click.option(
    "--gpu",
    type=click.Choice(["auto", "require", "off"]),
    default="auto",
    show_default=True,
    help="GPU tests: where there is a GPU (else inconclusive), required, or skipped.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Change nothing anywhere (no branch, push or PR); still write the Run and the report.",
)
@click.option(
    "--close-redundant", is_flag=True, help="Close open ggstack PRs whose patch the base now has, with the evidence."
)
@click.option(
    "--land",
    "land_ready",
    is_flag=True,
    help="After a green run, land what is ready (as `ggstack land`); off by default.",
)
@click.option(
    "--rebase-series",
    is_flag=True,
    help="Also propose the stored series rebased onto the base, as a PR onto the branch it lives on.",
)
@click.option(
    "--series-branch",
    default=None,
    help="The branch patches/ lives on, for --rebase-series [default: the checked-out branch].",
)
@click.option(
    "--run-json",
    "run_json",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the Run to this file [always: under the git dir, ggstack/runs/STACK.json].",
)
@click.option(
    "--no-cache", "no_cache", is_flag=True, help="Check and test everything again instead of reading earlier results."
)
@click.option(
    "--no-forge",
    "no_forge",
    is_flag=True,
    help="The untrusted stage: everything but pr, holding no credential (refused where one is in reach).",
)
@click.option(
    "--bundle",
    "bundle",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the Run's per-patch commits as a git bundle here, for `ggstack pr --run RUN --bundle FILE`.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON instead of the table.")
@click.pass_obj
@handled
def command(
    obj: Ctx,
    stack: str,
    onto: str | None,
    fetch: bool,
    gpu: str,
    dry_run: bool,
    close_redundant: bool,
    land_ready: bool,
    rebase_series: bool,
    series_branch: str | None,
    run_json: str | None,
    no_cache: bool,
    no_forge: bool,
    bundle: str | None,
    as_json: bool,
) -> None:
    """The CI rebase bot: fetch, apply, check, test and pr in one run, one Run.

    A stage that fails is recorded in the Run and the later stages carry on
    with what is still sound; PRs are only touched when every earlier stage
    succeeded. One sync at a time per repository and stack (a lock under the
    git dir). In GitHub Actions: log groups per stage, annotations on the
    patch files, the Markdown report in the step summary.

    \b
    Exit codes:
      0  nothing for a human: every patch unique with a healthy PR, or represented
      1  attention: conflict, broken, partial, inconclusive, redundant PR left open
      2  usage or input error
      3  infrastructure failure: forge or git failed, or another sync holds the lock

    On CI, split it (docs: "The bot"): `sync --no-forge --bundle FILE` in a
    job that holds no token, then `pr --run RUN --bundle FILE` in one that
    holds it and runs no patch code.

    \b
    Examples:
      ggstack sync my-fork --onto origin/main --dry-run
      ggstack sync my-fork --onto origin/main --no-forge --run-json out/run.json --bundle out/commits.bundle
    """
    from ggstack import handoff, sync

    s = obj.stack(stack)
    if no_forge:
        _refuse_what_needs_the_forge(obj, rebase_series=rebase_series, close_redundant=close_redundant)
    actions = sync.in_actions(os.environ)
    log = sys.stderr if as_json else sys.stdout  # with --json, stdout is the Run alone
    observer = sync.ActionsObserver(log) if actions else _TerminalObserver()
    with state.locked(obj.repo, s.name, command=f"ggstack sync {s.name}", warn=warn):
        run = sync.sync(
            obj.repo,
            s,
            onto or s.config.target.base,
            fetch=fetch,
            gpu=gpu,
            dry_run=dry_run,
            close_redundant=close_redundant,
            observer=observer,
            use_cache=not no_cache,
            rebase_series=rebase_series,
            series_branch=series_branch,
            forge=not no_forge,
            land=land_ready,
        )
        path = sync.save_run(obj.repo, run, run_json)
        if bundle:
            handoff.write_bundle(obj.repo, run, bundle)
    _print_run(run, as_json)
    if actions:
        sync.publish_to_actions(run, s, os.environ, log)
    err_console.print(
        f"wrote the Run to {path}" + (" (dry run: nothing else changed)" if dry_run else ""), highlight=False
    )
    sys.exit(exits.exit_code(run))


def _refuse_what_needs_the_forge(obj: Ctx, *, rebase_series: bool, close_redundant: bool) -> None:
    """--no-forge is the untrusted stage: nothing in it may want the token, nor reach one."""
    from ggstack import handoff

    if rebase_series or close_redundant:
        raise UserError(f"--no-forge does not go with {'--rebase-series' if rebase_series else '--close-redundant'}")
    handoff.refuse_credentials(obj.repo, "sync --no-forge")


def _print_run(run: Run, as_json: bool) -> None:
    from ggstack.report.text import report_table

    if as_json:
        print_json(run.to_json())
    else:
        console().print(report_table(run))
    for error in run.errors:
        err_console.print(f"[bold red]ggstack:[/] {escape(error)}", highlight=False)


class _TerminalObserver:
    """sync's stages on a terminal: a progress bar while a stage runs, its state after."""

    def stage(self, name: str, total: int) -> StageProgress:
        # Tests and the forge are slow whatever the stack's size: always a bar for them.
        return StageProgress(total, name, min_total=1 if name in ("test", "pr") else 6)

    def finished(self, name: str, state: str) -> None:
        style = (
            "green"
            if state == "ok" or state.startswith(("ok:", "dry-run"))
            else ("yellow" if state.startswith("skipped") else "red")
        )
        err_console.print(f"[{style}]{name}[/]: {escape(state)}", highlight=False)
