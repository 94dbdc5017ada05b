"""``ggstack demo``: the whole story on a miniature fork built on the spot."""

from __future__ import annotations

import os
import sys

import click

from ggstack import exits
from ggstack.commands.context import handled
from ggstack.commands.output import console, print_json
from ggstack.commands.progress import StageProgress


@click.command("demo")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option(
    "--base",
    type=click.Choice(["current", "before"]),
    default="current",
    show_default=True,
    help="current: dev/gilded-gnosis, which already carries the fix; before: dev/before, which does not.",
)
@click.option(
    "--gpu",
    type=click.Choice(["auto", "require", "off"]),
    default="auto",
    show_default=True,
    help="Run the GPU tests where a GPU is present (auto), insist on one, or skip them.",
)
@click.option("--keep", is_flag=True, help="Keep the temporary directory (always kept when DIRECTORY is given).")
@click.option(
    "--export",
    "export_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Only write the stack gg-clean, as imported from the demo fork, into this patches directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON.")
@handled
def command(directory: str | None, base: str, gpu: str, keep: bool, export_dir: str | None, as_json: bool) -> None:
    """A reapplied fix the base already has, end to end, on a miniature vLLM fork built on the spot.

    Builds the fork deterministically (PR #130 mixing the DCP buffer fix
    with a CUTLASS pin and an MLA workaround, merged and reverted; the base
    dev/gilded-gnosis carrying the fix through one consolidating commit),
    imports the stack gg-clean with `ggstack import`, then runs apply,
    check, test and the PR plan (a dry run; no forge needed) and prints
    what a maintainer needs to decide.

    \b
    Examples:
      ggstack demo                    # on dev/gilded-gnosis: 0001 is already there
      ggstack demo --base before      # on dev/before: every patch is unique
      ggstack demo ./demo-fork        # keep the fork to explore it
    """
    import shutil
    import tempfile

    from ggstack import demo
    from ggstack.pr.text import bodies
    from ggstack.report.bodies import pr_documents
    from ggstack.report.text import pr_plan_table, report_table
    from ggstack.series.store import load

    if export_dir:
        with tempfile.TemporaryDirectory(prefix="ggstack-export-") as tmp:
            fork = demo.build_fork(os.path.join(tmp, "fork.git"))
            stack = demo.export_stack(fork, export_dir)
        click.echo(f"wrote {stack.path} ({len(stack.patches)} patches)")
        return
    out = console()
    if not as_json:
        out.print(f"Building the miniature fork and replaying gg-clean onto {demo.BASES[base]} …", highlight=False)
    run, workdir = demo.build_and_run(
        directory, base, gpu=gpu, stage=lambda name, n: StageProgress(n, name, min_total=1)
    )
    try:
        if as_json:
            print_json(run.to_json())
        else:
            out.print(report_table(run))
            out.print(pr_plan_table(run))
            gg_clean = load(os.path.join(workdir, "patches"), demo.STACK)
            documents = pr_documents(run, bodies(run, gg_clean))
            if documents:
                out.print(documents, markup=False, highlight=False, soft_wrap=True)
            if directory or keep:
                out.print(f"The fork is {workdir}/fork.git, the stack {workdir}/patches/gg-clean.", highlight=False)
            out.print(f"\n{demo.NEXT_STEPS}", markup=False, highlight=False, soft_wrap=True)
    finally:
        if not (directory or keep):
            shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(exits.exit_code(run))  # as the bot would for this Run: 1 when a patch needs a human
