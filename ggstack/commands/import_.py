"""``ggstack import``: commits, a branch's range or an existing series into the stack."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import patch_json, print_json
from ggstack.errors import UserError

if TYPE_CHECKING:
    from ggstack.importing import Imported


@click.command("import")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("revs", nargs=-1)
@click.option(
    "--from",
    "from_path",
    default=None,
    help="An existing series instead of commits: a directory of format-patch files, an mbox, or a quilt series.",
)
@click.option(
    "--onto",
    default=None,
    help="With --from: the commit the series applies to [default: the stack's base].",
    shell_complete=complete_refs,
)
@click.option(
    "--original-pr",
    default=None,
    help="owner/repo#N (or #N) of the PR the commits came from [default: parsed from '(#N)' or a merge commit].",
)
@click.option("--only", multiple=True, help="Import only these paths (repeatable; a directory or a glob).")
@click.option("--exclude", multiple=True, help="Leave these paths out (repeatable).")
@click.option(
    "--dropped",
    multiple=True,
    help="Describe a left-out part for its Dropped: trailer, e.g. 'CUTLASS pin (cmake/cutlass.cmake)'.",
)
@click.option(
    "--keep-merged",
    is_flag=True,
    help="Of a range, also import the commits the base has, or that a merge of the base brought in.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the imported patches as JSON.")
@click.pass_obj
@handled
def command(
    obj: Ctx,
    stack: str,
    revs: tuple[str, ...],
    from_path: str | None,
    onto: str | None,
    original_pr: str | None,
    only: tuple[str, ...],
    exclude: tuple[str, ...],
    dropped: tuple[str, ...],
    keep_merged: bool,
    as_json: bool,
) -> None:
    """Append commits (a sha, or a range A..B) — or an existing series
    (--from) — to the series, with provenance.

    Cherry-picked-from is the source commit (for a `cherry-pick -x` copy, the
    commit its line names); Original-PR comes from
    --original-pr or the subject's "(#N)" (target.repo's PR with a
    target.fork, else the bare number: whose it is is not known); every path
    left out by --only/--exclude gets a Dropped: trailer; Stack-Patch-Id is
    assigned once.

    \b
    Examples:
      ggstack import my-fork origin/main..my-fork     # the branch's own commits, as git rebase replays them
      ggstack import my-fork my-fork~1 --only src/ --dropped 'the CI tweak (ci/)' --original-pr upstream/project#130
      ggstack import my-fork --from ../old-patches     # format-patch files, an mbox, or a quilt series
    """
    from ggstack import importing
    from ggstack.series.store import save

    _refuse_mixed_sources(revs, from_path, onto, keep_merged, (only, exclude, dropped, original_pr))
    with obj.editing(stack, "import"):
        if from_path:
            done = importing.from_series(obj.repo, obj.stack(stack), from_path, onto=onto)
        else:
            done = importing.commits(
                obj.repo,
                obj.stack(stack),
                revs,
                original_pr=original_pr,
                only=only,
                exclude=exclude,
                dropped=dropped,
                keep_merged=keep_merged,
            )
        save(done.stack)
    _say_imported(done, as_json)


def _refuse_mixed_sources(
    revs: tuple[str, ...],
    from_path: str | None,
    onto: str | None,
    keep_merged: bool,
    commit_options: tuple[object, ...],
) -> None:
    """Commits or an existing series, each with only the options that mean something for it."""
    if bool(revs) == bool(from_path):
        raise UserError("give commits (a sha or a range A..B) or --from PATH")
    if from_path and any(commit_options):
        raise UserError("--only, --exclude, --dropped and --original-pr are for commits, not --from")
    if from_path and keep_merged:
        raise UserError("--keep-merged is for a range of commits, not --from")
    if onto and not from_path:
        raise UserError("--onto is for --from (commits already have their parents)")


def _say_imported(done: Imported, as_json: bool) -> None:
    from ggstack import importing

    if as_json:
        print_json([patch_json(p) for p in done.added])
    else:
        for p in done.added:
            click.echo(f"imported {p.name}  {p.subject}")
    for line in importing.notes(done):
        click.echo(line, err=as_json)  # with --json, stdout is the JSON alone
