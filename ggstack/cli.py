"""The ``ggstack`` command group over ``ggstack.commands``; every command that reads the fork takes
``--repo``/``--patches`` after its name too (``ggstack check --repo X``), setting the same ``Ctx``."""

from __future__ import annotations

import sys

import click

from ggstack import secrets
from ggstack.commands import (
    apply,
    check,
    demo,
    drop,
    edit,
    import_,
    init,
    land,
    list_,
    move,
    pr,
    rebase,
    refresh,
    remove,
    report,
    resolve,
    show,
    squash,
    sync,
    test,
)
from ggstack.commands.context import Ctx

_REPO_HELP = "The fork checkout (any path inside it)."
_PATCHES_HELP = "Directory holding the stacks [default: $GGSTACK_PATCHES, else patches/ at the top of the repository]."


def _set_where(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    # Kept in ctx.meta too, for shell completion, which runs no command.
    if value is not None:
        ctx.meta[f"ggstack.{param.name}"] = value
        if isinstance(ctx.obj, Ctx):
            ctx.obj.point_at(**{str(param.name): value})


class _Main(click.Group):
    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if cmd.name not in _NOT_IN_A_FORK:
            cmd.params += [
                click.Option(["--repo"], metavar="PATH", expose_value=False, callback=_set_where, help=_REPO_HELP),
                click.Option(["--patches"], metavar="DIR", expose_value=False, callback=_set_where, help=_PATCHES_HELP),
            ]
        super().add_command(cmd, name)


_NOT_IN_A_FORK = ("report", "demo")  # a saved Run; a fork of its own


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--repo", default=".", show_default=True, metavar="PATH", help=_REPO_HELP)
@click.option("--patches", default=None, metavar="DIR", help=_PATCHES_HELP)
@click.version_option(package_name="ggstack")
@click.pass_context
def main(ctx: click.Context, repo: str, patches: str | None) -> None:
    """Keep a fork's carry patches as a series with provenance, replay it onto
    a moving base, find which patches the base already has, and only then
    open stacked PRs.

    \b
    First run:   ggstack demo
    Typical:     ggstack init my-fork --repo-slug you/your-fork --base main
                 ggstack import my-fork origin/main..my-fork
                 ggstack check my-fork --onto origin/main
    Completion:  eval "$(_GGSTACK_COMPLETE=bash_source ggstack)"  in ~/.bashrc
                 (zsh_source in ~/.zshrc, fish_source for fish): commands, options,
                 stack names and --onto refs complete
    """
    # A patch's tests must not reach the forge token, not even through /proc/<ggstack>/environ.
    secrets.keep_out_of_environ(sys.argv[1:], release=ctx.invoked_subcommand not in _NO_FORGE_UNTIL_TESTED)
    secrets.scrub_output()  # whatever prints from here on (a test's output in a table too) shows no secret
    ctx.obj = Ctx(repo, patches)


# Commands that run a patch's tests: the token stays out of os.environ (sync releases it for its pr stage).
_NO_FORGE_UNTIL_TESTED = ("test", "demo", "sync")

for _module in (init, import_, list_, show, move, remove, edit, squash, drop, rebase, resolve, refresh):  # the series
    main.add_command(_module.command)
for _module in (apply, check, test, pr, land, sync, report, demo):  # the stages
    main.add_command(_module.command)
