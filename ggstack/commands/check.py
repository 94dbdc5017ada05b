"""``ggstack check``: which patches (or commits) the base already has, and on what evidence."""

from __future__ import annotations

import sys
from typing import Any

import click

from ggstack import exits, replay
from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import console, err_console, print_json
from ggstack.commands.progress import StageProgress
from ggstack.errors import UserError
from ggstack.model import Run


class _JobsType(click.ParamType):
    """A number of processes, 1 to 1024; a bad ``GGSTACK_JOBS`` is named as such, not as ``--jobs``."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        text = str(value)
        if text.isascii() and text.isdigit() and 1 <= int(text) <= 1024:
            return int(text)
        from click.core import ParameterSource

        if (
            ctx is not None
            and param is not None
            and ctx.get_parameter_source(param.name or "") is ParameterSource.ENVIRONMENT
        ):
            self.fail(f"GGSTACK_JOBS={value!r}: expected a whole number of processes from 1 to 1024", param, ctx)
        self.fail(f"{value!r}: expected a whole number of processes from 1 to 1024", param, ctx)


@click.command("check")
@click.argument("stack", required=False, shell_complete=complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The base to judge against [default: stack.toml target.base; required with --commits].",
    shell_complete=complete_refs,
)
@click.option(
    "--commits",
    "commits",
    is_flag=True,
    help="Judge the commits given as arguments (STACK is then the first of them), each on its own.",
)
@click.argument("more", nargs=-1)
@click.option(
    "--no-cache",
    "no_cache",
    is_flag=True,
    help="Judge again even where verdicts for this base and these patches are kept under the git dir.",
)
@click.option(
    "--jobs",
    "-j",
    type=_JobsType(),
    envvar="GGSTACK_JOBS",
    help="With --commits: judge in at most this many processes (a few dozen commits or more are split "
    "over them) [default: $GGSTACK_JOBS, else one a core].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON (the documented shape).")
@click.pass_obj
@handled
def command(
    obj: Ctx,
    stack: str | None,
    onto: str | None,
    commits: bool,
    more: tuple[str, ...],
    no_cache: bool,
    jobs: int | None,
    as_json: bool,
) -> None:
    """Is each patch already represented in the base — by which commits, on what evidence?

    A stack is judged cumulatively in merge order (each patch on the base plus
    the earlier patches still needed); --commits judges commits directly, each
    independently, like git cherry. Verdicts: unique, conflict, represented,
    partial. Exit 0 when every patch is unique or represented, 1 when any is
    a conflict or partial.

    \b
    Examples:
      ggstack check my-fork --onto origin/main
      ggstack check my-fork --onto origin/main --json > run.json
      ggstack check --onto origin/main --commits my-fork~1 my-fork    # commits, each on its own
    """
    if commits:
        run = _judge_commits(obj, [r for r in (stack, *more) if r], onto, use_cache=not no_cache, jobs=jobs)
    else:
        run = _judge_stack(obj, stack, more, onto, use_cache=not no_cache)
    if as_json:
        print_json(run.to_json())
    else:
        from ggstack.report.text import check_table  # rich: not imported for --json

        console().print(check_table(run))
    sys.exit(exits.exit_code(run))


def _judge_commits(obj: Ctx, revs: list[str], onto: str | None, *, use_cache: bool, jobs: int | None) -> Run:
    from ggstack.check.commits import check_commits

    if not revs:
        raise UserError("--commits needs at least one commit")
    if not onto:
        raise UserError("--commits needs --onto <base ref>")
    ranges = [r for r in revs if ".." in r]
    if ranges:  # git cherry's habit; each commit is judged on its own, so name them
        raise UserError(
            f"--commits takes commits, not a range: {ranges[0]} (give its commits, e.g. "
            f"$(git rev-list --no-merges --reverse {ranges[0]}), or import the range into a stack)"
        )
    return check_commits(obj.repo, revs, onto, use_cache=use_cache, jobs=jobs)


def _judge_stack(obj: Ctx, stack: str | None, more: tuple[str, ...], onto: str | None, *, use_cache: bool) -> Run:
    from ggstack.check.stack import check_stack

    if not stack:
        raise UserError("name a stack (see `ggstack list`), or judge commits with --commits")
    if more:
        raise UserError(f"unexpected arguments {' '.join(more)} (did you mean --commits?)")
    s = obj.stack(stack)
    with StageProgress(len(s.patches), "check") as progress:
        run = check_stack(obj.repo, s, onto or s.config.target.base, progress=progress, use_cache=use_cache)
    for note in replay.say_merge_drivers(obj.repo, s, run):
        err_console.print(f"ggstack: note: {note}", highlight=False, markup=False)
    return run
