"""``ggstack report``: a saved Run as a table, Markdown or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ggstack.commands.context import handled, load_run
from ggstack.commands.output import console
from ggstack.errors import UserError

if TYPE_CHECKING:
    from ggstack.model import Run


@click.command("report")
@click.argument("run_file", metavar="RUN.json", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "json"]),
    default="table",
    show_default=True,
    help="table for the terminal, markdown for GitHub (PR comment, step summary), json for the Run itself.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the Run as JSON (as every command's --json; --format json)."
)
@click.option("--verbose", "-v", is_flag=True, help="The table with the whole evidence in words and the provenance.")
@handled
def command(run_file: str, fmt: str, as_json: bool, verbose: bool) -> None:
    """Render a saved Run for the maintainer deciding merge or close.

    Per patch, in merge order: verdict, recommendation, the evidence in words,
    provenance, the PR and its approval state; the remaining diff of partial
    patches and the draft closing comment of each redundant PR. A Run is what
    --json of apply, check, test or pr prints, and what sync saves (also
    under <git dir>/ggstack/runs/STACK.json).

    \b
    Examples:
      ggstack check my-fork --onto origin/main --json > run.json
      ggstack report run.json --verbose
      ggstack report run.json --format markdown > summary.md     # for a PR comment or CI's step summary
    """
    from ggstack.report.json import run_json
    from ggstack.report.summary import markdown

    run = load_run(run_file)
    if as_json and fmt not in ("table", "json"):
        raise UserError(f"--json and --format {fmt} do not go together")
    if as_json or fmt == "json":
        click.echo(run_json(run), nl=False)
    elif fmt == "markdown":
        click.echo(markdown(run), nl=False)
    else:
        _print_table(run, verbose=verbose)


def _print_table(run: Run, *, verbose: bool) -> None:
    from ggstack.report.text import report_table

    out = console()
    out.print(report_table(run, verbose=verbose))
    for o in run.outcomes:
        if o.verdict and o.verdict.value == "partial" and o.remaining_diff:
            out.print(f"\n{o.name}: remaining diff", markup=False, soft_wrap=True)
            out.print(o.remaining_diff, markup=False, highlight=False, soft_wrap=True)
