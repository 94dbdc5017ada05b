"""The command line: parse arguments, call one stage, render its result.

No logic lives here: each command loads its inputs, calls the
stage function, and hands the value to ``ggstack.report`` or prints JSON.
One handler turns ``UserError`` into exit 2 and ``InfraError`` into exit 3.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NoReturn, cast

import click

from ggstack import exits, git, model, replay, secrets, state
from ggstack.errors import InfraError, UserError
from ggstack.model import Run, Stack

if TYPE_CHECKING:
    from rich.console import Console


class _ErrConsole:
    """rich's console on stderr, made when something is first printed there: importing rich
    is a good part of a command's start-up, and most runs print nothing to stderr."""

    def __init__(self) -> None:
        self._console: Console | None = None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)  # a path in a message is never broken
        self._console.print(*objects, **kwargs)


err_console = _ErrConsole()


def escape(text: str) -> str:
    """rich markup escaped (rich imported only when a message is printed)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


class Ctx:
    """What every command needs: where the fork and the stored stacks are."""

    def __init__(self, repo: str, patches: str | None) -> None:
        self.repo_path = repo
        self._patches = patches or os.environ.get("GGSTACK_PATCHES")
        self._repo: git.Repository | None = None
        self.anywhere = False  # init: a stack may be made outside a repository (it warns)

    def point_at(self, *, repo: str | None = None, patches: str | None = None) -> None:
        """A subcommand's ``--repo``/``--patches``: read after the group's, so they win."""
        self.repo_path = repo or self.repo_path
        self._patches = patches or self._patches

    @property
    def patches_dir(self) -> str:
        """--patches, else $GGSTACK_PATCHES, else ``patches/`` at the top of the repository's work
        tree (as git finds its files from a subdirectory), else ``./patches``."""
        if self._patches is None:
            try:
                top = self.repo.worktree  # found by the discovery the command needs anyway
            except UserError:
                if self.repo_path != "." or not self.anywhere:
                    raise  # "not a git repository", never "no stack here" read from a ./patches of chance
                top = None  # init outside any repository: the stack is made where the command runs
            self._patches = os.path.join(top or os.getcwd(), "patches")
        return self._patches

    @property
    def repo(self) -> git.Repository:
        if self._repo is None:
            try:
                self._repo = git.Repository(self.repo_path)
            except UserError as e:
                if "not a git repository" not in str(e):
                    raise
                raise UserError(
                    f"{os.path.abspath(self.repo_path)}: not a git repository (run ggstack inside your fork's "
                    "checkout, or point at it with --repo PATH)"
                ) from None
        return self._repo

    def stack(self, name: str) -> Stack:
        from ggstack import series

        return series.load(self.patches_dir, name)

    def editing(self, name: str, command: str) -> contextlib.AbstractContextManager[state.LockInfo]:
        """The stack's lock, for a command that changes it: load, change and save under it."""
        from ggstack import series

        series.stack_dir(self.patches_dir, name)  # a bad name is bad input before any lock file is made
        return state.locked(
            self.repo, name, command=f"ggstack {command} {name}", wait=state.edit_lock_wait(), warn=warn
        )


def _complete_stacks(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a STACK argument: the stacks where the command would look for them."""
    from ggstack import series

    root, meta = ctx.find_root().params, ctx.meta  # meta: a --repo/--patches after the command's name
    repo, where = (
        meta.get("ggstack.repo") or root.get("repo") or ".",
        meta.get("ggstack.patches") or root.get("patches"),
    )
    patches = Ctx(repo, where).patches_dir
    return [name for name in series.list_stacks(patches) if name.startswith(incomplete)]


def _complete_refs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of --onto: the branches, remote-tracking branches and tags of the fork checkout."""
    root, meta = ctx.find_root().params, ctx.meta
    try:
        repo = git.Repository(meta.get("ggstack.repo") or root.get("repo") or ".")
        refs = repo.refs("refs/heads/") | repo.refs("refs/remotes/") | repo.refs("refs/tags/")
    except (UserError, InfraError):
        return []
    names = (re.sub(r"^refs/(heads|remotes|tags)/", "", r) for r in refs)
    return sorted(n for n in names if n.startswith(incomplete) and not n.endswith("/HEAD"))


def warn(message: str) -> None:
    err_console.print(f"[yellow]ggstack: warning:[/] {escape(message)}", highlight=False)


PIPED_WIDTH = 100  # the width of piped output where COLUMNS does not say


def piped_width() -> int:
    """Piped output's width: ``COLUMNS`` (a number from 40 to 1000), else 100."""
    text = os.environ.get("COLUMNS", "")
    return min(int(text), 1000) if text.isascii() and text.isdigit() and int(text) >= 40 else PIPED_WIDTH


def console() -> Console:
    """stdout: rich at a terminal (its width; tables fit it), plain lines at ``COLUMNS`` when piped."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(highlight=False, soft_wrap=False)
    from ggstack.plaintable import PlainConsole  # tables as plain lines: rich's layout, not its cost

    return PlainConsole(
        file=cast(IO[str], _NoTrailingSpace(sys.stdout)), highlight=False, soft_wrap=False, width=piped_width()
    )


class _NoTrailingSpace(io.TextIOBase):
    """Piped output as plain lines: rich pads a table's title and cells to their width."""

    def __init__(self, out: Any) -> None:
        self.out, self.pending = out, ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.out.write(self.pending.rstrip(" "))
            self.pending = ""
        self.out.flush()

    def isatty(self) -> bool:
        return False


def handled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The one place user-facing failures become a message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            err_console.print(f"[bold red]ggstack:[/] {escape(secrets.scrub(str(e)))}", highlight=False)
            sys.exit(e.exit_code)
        except InfraError as e:
            _infra_failure(e)
        except OSError as e:  # a write no stage expected to fail: a full disk, a read-only git dir
            machine = state.machine_error(e, None, after="ggstack's refs and stacks change all at once or not at all")
            if machine is None:
                raise
            _infra_failure(machine)

    return wrapper


def _infra_failure(e: InfraError) -> NoReturn:
    err_console.print(f"[bold red]ggstack: infrastructure failure:[/] {escape(secrets.scrub(str(e)))}", highlight=False)
    sys.exit(e.exit_code)


def print_json(data: Any) -> None:
    click.echo(model.json_text(data))


def _done(as_json: bool, words: str, data: dict[str, Any]) -> None:
    """What a command that changed the stack did: a line, or (--json) its JSON."""
    if as_json:
        print_json(data)
    else:
        click.echo(words)


_REPO_HELP = "The fork checkout (any path inside it)."
_PATCHES_HELP = "Directory holding the stacks [default: $GGSTACK_PATCHES, else patches/ at the top of the repository]."


def _set_where(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A subcommand's --repo/--patches: the same setting as before the subcommand
    (kept in ``ctx.meta`` too, for shell completion, which runs no command)."""
    if value is not None:
        ctx.meta[f"ggstack.{param.name}"] = value
        if isinstance(ctx.obj, Ctx):
            ctx.obj.point_at(**{str(param.name): value})


class _Main(click.Group):
    """The group whose commands that read the fork take ``--repo`` and ``--patches``
    after their name too (``ggstack check --repo X`` as ``ggstack --repo X check``)."""

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


# -- the series ------------------------------------------------------------------


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.option("--repo-slug", required=True, help="owner/name of the target repository on the forge.")
@click.option("--base", required=True, help="The upstream branch the stack is replayed onto and PRs go to (e.g. main).")
@click.option("--remote", default="origin", show_default=True, help="The git remote branches are pushed to.")
@click.option(
    "--fork",
    default=None,
    metavar="OWNER/NAME",
    help="The fork holding the PR heads, when PRs go to --repo-slug from it (then --repo-slug is upstream).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def init(obj: Ctx, stack: str, repo_slug: str, base: str, remote: str, fork: str | None, as_json: bool) -> None:
    """Create an empty stack directory: patches/STACK/{stack.toml,series}.

    \b
    Examples:
      ggstack init my-fork --repo-slug you/your-fork --base main
      ggstack init upstream-fixes --repo-slug upstream/project --fork you/project --base main
    """
    from ggstack import series

    obj.anywhere = True
    path = series.init(obj.patches_dir, stack, repo_slug, base, remote, fork=fork)
    if as_json:
        print_json({"stack": stack, "path": path})
    else:
        click.echo(f"created {path}")
    try:
        _ = obj.repo.worktree
    except UserError:  # made where it was asked for; but import, apply and check need the fork's checkout
        warn(
            f"{os.path.abspath(obj.repo_path)} is not a git repository: the stack was created there, "
            "but import, apply and check need the fork checkout (run them inside it, or with --repo)"
        )


@main.command("import")
@click.argument("stack", shell_complete=_complete_stacks)
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
    shell_complete=_complete_refs,
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
def import_(
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
    from ggstack import importing, series

    if bool(revs) == bool(from_path):
        raise UserError("give commits (a sha or a range A..B) or --from PATH")
    if from_path and (only or exclude or dropped or original_pr):
        raise UserError("--only, --exclude, --dropped and --original-pr are for commits, not --from")
    if from_path and keep_merged:
        raise UserError("--keep-merged is for a range of commits, not --from")
    if onto and not from_path:
        raise UserError("--onto is for --from (commits already have their parents)")
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
        series.save(done.stack)
    if as_json:
        print_json([_patch_json(p) for p in done.added])
    else:
        for p in done.added:
            click.echo(f"imported {p.name}  {p.subject}")
    for line in importing.notes(done):
        click.echo(line, err=as_json)  # with --json, stdout is the JSON alone


@main.command("list")
@click.argument("stack", required=False, shell_complete=_complete_stacks)
@click.option("--dropped", is_flag=True, help="List the patches `ggstack drop` took out, and why.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_obj
@handled
def list_(obj: Ctx, stack: str | None, dropped: bool, as_json: bool) -> None:
    """List the patches of a stack in merge order (or all stacks).

    \b
    Examples:
      ggstack list
      ggstack list my-fork --dropped      # what drop took out: represented by which commit, on which base
    """
    from ggstack import series

    names = [stack] if stack else series.list_stacks(obj.patches_dir)
    stacks = [obj.stack(n) for n in names]
    if dropped:
        _list_dropped(stacks, as_json)
        return
    if as_json:
        print_json({s.name: [_patch_json(p) for p in s.patches] for s in stacks})
        return
    from rich.table import Table

    out = console()
    if not stacks:
        out.print(f"no stacks in {obj.patches_dir}")
    for s in stacks:
        table = Table(title=f"{s.name} → {s.config.target.repo} {s.config.target.base}", title_justify="left")
        for col in ("#", "subject", "original PR", "source", "dropped", "Stack-Patch-Id"):
            table.add_column(col, overflow="fold")
        for i, p in enumerate(s.patches, 1):
            prov = p.provenance
            table.add_row(
                str(i),
                escape(p.subject),
                prov.original_pr or "",
                f"picked from {prov.cherry_picked_from[:10]}"
                if prov.cherry_picked_from
                else (p.source_commit or "")[:10],
                escape("\n".join(prov.dropped)),
                prov.stack_patch_id[:12],
            )
        out.print(table)


def _list_dropped(stacks: list[Stack], as_json: bool) -> None:
    from ggstack import drop as dropping
    from ggstack import report

    records = {s.name: dropping.read_record(s) for s in stacks}
    if as_json:
        print_json({name: [e.to_json() for e in entries] for name, entries in records.items()})
        return
    console().print(report.dropped_table(records))


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
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
    shell_complete=_complete_refs,
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
def drop(
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
    from ggstack import drop as dropping
    from ggstack import report
    from ggstack.check.stack import check_stack

    with obj.editing(stack, "drop"):
        s = obj.stack(stack)
        if run_path:
            run = _load_run(run_path)
        else:
            with StageProgress(len(s.patches), "check") as progress:
                run = check_stack(obj.repo, s, onto or s.config.target.base, progress=progress)
        result = dropping.drop(
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
    console().print(report.drop_table(result))
    for name, why in result.looks:
        click.echo(f"kept {name}: represented, but human look ({why}); --include-human-look drops it too")
    for line in result.branches_kept:
        warn(f"branch {'would be ' if result.dry_run else ''}kept: {line}")


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.option(
    "--onto", default=None, help="The new base [default: stack.toml target.base].", shell_complete=_complete_refs
)
@click.option("--partial", is_flag=True, help="Rebase the patches before the first that does not apply; keep the rest.")
@click.option("--dry-run", is_flag=True, help="Say what would be rewritten; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was (or would be) rewritten as JSON.")
@click.pass_obj
@handled
def rebase(obj: Ctx, stack: str, onto: str | None, partial: bool, dry_run: bool, as_json: bool) -> None:
    """Rewrite the stored series onto a new base (each patch's diff and base-commit).

    The replay is apply's; every patch must apply (with --partial: up to the
    first that conflicts or becomes empty). A patch whose recorded parent
    already has its replayed parent's tree is left byte for byte. One atomic
    change to patches/STACK/. Exit 0 when the whole series is on the base,
    1 when a patch stopped it (nothing written without --partial).

    \b
    Examples:
      ggstack rebase my-fork --onto origin/main --dry-run
      ggstack rebase my-fork --onto origin/main --partial
    """
    from ggstack import rebase as rebasing
    from ggstack import report

    with obj.editing(stack, "rebase"):
        s = obj.stack(stack)
        result = rebasing.rebase(obj.repo, s, onto or s.config.target.base, partial=partial, dry_run=dry_run)
    if as_json:
        print_json(result.to_json())
    else:
        console().print(report.rebase_table(result, dry_run=dry_run))
        stop, n = result.stopped, result.before_stop
        if stop is not None:
            kept = "nothing was written"
            if partial and n:
                what, was = (f"the {n} patches before it", "were") if n > 1 else ("the patch before it", "was")
                kept = f"{what} {'would be' if dry_run else was} rebased"
            if stop.detail.startswith("conflicts in "):
                why = f"`ggstack resolve {stack} {stop.name[:4]}` resolves the conflict"
            else:  # it changes nothing on the base: the base has it
                why = f"`ggstack drop {stack}` takes it out, with a record of why"
            hint = why + ("" if partial else "; --partial rebases up to it")
            err_console.print(
                f"ggstack: {escape(stop.name)} stops the rebase: {escape(stop.detail)}; {kept} ({hint})",
                highlight=False,
            )
    sys.exit(1 if result.stopped else 0)


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("patch")
@click.option(
    "--onto",
    default=None,
    help="The base to resolve it on [default: stack.toml target.base].",
    shell_complete=_complete_refs,
)
@click.option("--json", "as_json", is_flag=True, help="Print the session (worktree path, conflicts) as JSON.")
@click.pass_obj
@handled
def resolve(obj: Ctx, stack: str, patch: str, onto: str | None, as_json: bool) -> None:
    """Prepare a worktree to resolve PATCH's conflict: the patch picked onto its replayed parent.

    The worktree is ggstack's own, under the git dir (its path is printed);
    your checkout, HEAD, index and branches are not touched. The conflict
    markers are in its files and git's rerere is on there (a conflict you
    resolved before comes back resolved). Edit, then `ggstack refresh STACK
    PATCH` writes the result back into the patch file (`--abort` gives up).
    Running it again prints the same worktree.

    \b
    Examples:
      ggstack resolve my-fork 2 --onto origin/main     # prints the worktree to edit in
      ggstack resolve my-fork 2 --json                 # the same worktree, and its conflicts, as JSON
    """
    from ggstack import resolve as resolving

    with obj.editing(stack, "resolve"):
        s = obj.stack(stack)
        session = resolving.resolve(obj.repo, s, patch, onto or s.config.target.base)
    if as_json:
        print_json(session.to_json())
        return
    click.echo(session.worktree)
    if session.conflicts:
        err_console.print(f"conflicts in: {escape(', '.join(session.conflicts))}", highlight=False)
    if session.reused:
        err_console.print(f"rerere reused a recorded resolution for: {escape(', '.join(session.reused))}")
    if not session.conflicts and not session.reused:
        err_console.print(
            f"no conflict: {escape(session.name)} applies cleanly onto {escape(session.base_ref)}; it is picked "
            f"there uncommitted. Nothing to resolve: edit only to change the patch, then `ggstack refresh "
            f"{escape(stack)} {escape(patch)}` (or --abort)",
            highlight=False,
        )
        return
    err_console.print(
        f"edit the files there, then `ggstack refresh {escape(stack)} {escape(patch)}` (or --abort)", highlight=False
    )


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("patch")
@click.option("--abort", is_flag=True, help="Give up: remove the resolve worktree; the patch stays as it was.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def refresh(obj: Ctx, stack: str, patch: str, abort: bool, as_json: bool) -> None:
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
    from ggstack import resolve as resolving
    from ggstack import series

    with obj.editing(stack, "refresh"):
        s = obj.stack(stack)
        if abort:
            session = resolving.abort(obj.repo, s, patch)
            _done(as_json, f"removed {session.worktree}", {"aborted": session.name, "worktree": session.worktree})
            return
        after, new, session = resolving.refresh(obj.repo, s, patch)
        series.save(after)
        resolving.finish(obj.repo, s, session)
    _done(as_json, f"refreshed {new.name}: base-commit {new.base_commit}", {"refreshed": _patch_json(new)})


@main.command("edit")
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("patch")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def edit_(obj: Ctx, stack: str, patch: str, as_json: bool) -> None:
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
    from ggstack import edit as editing
    from ggstack import series

    before = obj.stack(stack).find(patch)
    try:
        text = click.edit(editing.editable(before), extension=".txt", require_save=False)
    except click.ClickException as e:
        raise UserError(f"the editor did not run: {e.message} (set VISUAL or EDITOR)") from None
    if text is None:
        _done(as_json, f"{before.name}: unchanged", {"patch": before.name, "changed": False})
        return
    with obj.editing(stack, "edit"):
        s = obj.stack(stack)
        current = s.find(patch)
        if current.raw != before.raw or current.name != before.name:
            raise UserError(f"{before.name} changed while it was being edited; nothing was written (edit it again)")
        try:
            after, new = editing.edit(obj.repo, s, patch, text)
        except UserError as e:
            kept = os.path.join(obj.repo.state_dir("edit"), before.name.removesuffix(".patch") + ".txt")
            state.write_atomic(kept, text.encode("utf-8", "surrogateescape"))
            raise UserError(f"{e}; your message is kept in {kept}") from None
        changed = series.save(after)
    _done(
        as_json, f"{new.name}: {'message changed' if changed else 'unchanged'}", {"patch": new.name, "changed": changed}
    )


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("first")
@click.argument("second")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def squash(obj: Ctx, stack: str, first: str, second: str, as_json: bool) -> None:
    """Make two neighbouring patches one: the earlier one's place, name and Stack-Patch-Id.

    The message is the first's, then the second's; the provenance trailers of
    both are kept (Original-PR, Cherry-picked-from, Dropped), and a Squashed:
    trailer names the second's Stack-Patch-Id and subject. Refused when the
    second does not apply on the first alone. The rest are renumbered.

    \b
    Examples:
      ggstack squash my-fork 2 3
    """
    from ggstack import edit as editing
    from ggstack import series

    with obj.editing(stack, "squash"):
        after, new, folded = editing.squash(obj.repo, obj.stack(stack), first, second)
        series.save(after)
    _done(as_json, f"squashed {folded.name} into {new.name}", {"squashed": folded.name, "into": _patch_json(new)})


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("patch")
@click.option("--patch", "with_diff", is_flag=True, help="Also print the diff.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
@handled
def show(obj: Ctx, stack: str, patch: str, with_diff: bool, as_json: bool) -> None:
    """Show one patch: message, trailers, diffstat (--patch: the diff).

    PATCH is an index (1, 0001) or a file name.

    \b
    Examples:
      ggstack show my-fork 1 --patch
    """
    p = obj.stack(stack).find(patch)
    if as_json:
        print_json(_patch_json(p, with_diff=True))
        return
    click.echo(f"{p.name}\nAuthor: {p.author}\nDate:   {p.date}\n")
    click.echo(p.message)
    click.echo(_diffstat(p.diff))
    if with_diff:
        click.echo(p.diff)


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("patch")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def remove(obj: Ctx, stack: str, patch: str, as_json: bool) -> None:
    """Remove a patch from the series; the rest are renumbered.

    \b
    Examples:
      ggstack remove my-fork 2
    """
    from ggstack import series

    with obj.editing(stack, "remove"):
        after, victim = series.remove(obj.stack(stack), patch)
        series.save(after)
    _done(as_json, f"removed {victim.name}", {"removed": victim.name, "patches": [p.name for p in after.patches]})


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("patch")
@click.option("--to", "to", type=int, required=True, help="The new 1-based position in merge order.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handled
def move(obj: Ctx, stack: str, patch: str, to: int, as_json: bool) -> None:
    """Move a patch to another place in merge order (files renumbered).

    \b
    Examples:
      ggstack move my-fork 3 --to 1
    """
    from ggstack import series

    with obj.editing(stack, "move"):
        after = series.move(obj.stack(stack), patch, to)
        series.save(after)
    _done(as_json, "\n".join(p.name for p in after.patches), {"patches": [p.name for p in after.patches]})


# -- the stages --------------------------------------------------------------------


class StageProgress:
    """How far a stage is, on stderr: a rich bar at a terminal (for stacks of more than a handful of
    patches), and plain lines where stderr is piped or a log — the stage and its count when it starts,
    how far it is every ``EVERY`` seconds, and how long it took when that was long."""

    EVERY = 10.0

    def __init__(self, total: int, what: str, *, min_total: int = 6) -> None:
        import time

        self._bar = None
        self._what, self._total, self._done = what, total, 0
        self._lines = not sys.stderr.isatty() and total >= min_total
        self._start = self._said = time.monotonic()
        if sys.stderr.isatty() and total >= min_total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn(what),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                transient=True,
                console=Console(stderr=True),
            )
            self._task = self._bar.add_task("", total=total)

    def __enter__(self) -> StageProgress:
        if self._bar:
            self._bar.start()
        elif self._lines:
            self._say(f"{self._what}: {_count(self._total, 'patch')} …")
        return self

    def __exit__(self, *exc: object) -> None:
        import time

        if self._bar:
            self._bar.stop()
        elif self._lines and time.monotonic() - self._start >= self.EVERY:
            self._say(f"{self._what}: {self._done}/{self._total} in {time.monotonic() - self._start:.0f} s")

    def __call__(self, done: int, total: int, name: str) -> None:
        import time

        self._done, self._total = done, total
        if self._bar:
            self._bar.update(self._task, completed=done, total=total, description=name)
        elif self._lines and time.monotonic() - self._said >= self.EVERY:
            self._said = time.monotonic()
            self._say(f"{self._what}: {done}/{total} {name}")

    @staticmethod
    def _say(line: str) -> None:
        sys.stderr.write(f"ggstack: {line}\n")
        sys.stderr.flush()


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'es' if word.endswith('ch') and n != 1 else 's' if n != 1 else ''}"


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The base to replay onto [default: stack.toml target.base].",
    shell_complete=_complete_refs,
)
@click.option(
    "--branch-prefix",
    default=None,
    help="Write the per-patch branches under this ref prefix instead of branches.template.",
)
@click.option("--force", is_flag=True, help="Overwrite ggstack branches that someone else moved.")
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON.")
@click.pass_obj
@handled
def apply(obj: Ctx, stack: str, onto: str | None, branch_prefix: str | None, force: bool, as_json: bool) -> None:
    """Replay the stack onto a base, in memory, and write one branch per patch.

    Never touches the working tree, index, HEAD or your branches. A patch
    that conflicts is recorded (paths and hunks) and the rest carry on.
    Exit 0 when every patch applied or was empty, 1 when any conflicted.

    \b
    Examples:
      ggstack apply my-fork --onto origin/main
      ggstack apply my-fork --onto origin/main --branch-prefix refs/ggstack/try   # no branch under refs/heads
    """
    s = obj.stack(stack)
    with StageProgress(len(s.patches), "apply") as progress:
        run = replay.apply(
            obj.repo, s, onto or s.config.target.base, prefix=branch_prefix, force=force, progress=progress
        )
    if as_json:
        print_json(run.to_json())
    else:
        from ggstack import report  # rich's tables: not for --json

        console().print(report.apply_table(run))
        where = report.branches_line(run)
        if where:
            click.echo(where)
    sys.exit(exits.exit_code(run))


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


@main.command()
@click.argument("stack", required=False, shell_complete=_complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The base to judge against [default: stack.toml target.base; required with --commits].",
    shell_complete=_complete_refs,
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
def check(
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
    from ggstack.check.commits import check_commits
    from ggstack.check.stack import check_stack

    if commits:
        revs = [r for r in (stack, *more) if r]
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
        run = check_commits(obj.repo, revs, onto, use_cache=not no_cache, jobs=jobs)
    else:
        if not stack:
            raise UserError("name a stack (see `ggstack list`), or judge commits with --commits")
        if more:
            raise UserError(f"unexpected arguments {' '.join(more)} (did you mean --commits?)")
        s = obj.stack(stack)
        with StageProgress(len(s.patches), "check") as progress:
            run = check_stack(obj.repo, s, onto or s.config.target.base, progress=progress, use_cache=not no_cache)
        for note in replay.say_merge_drivers(obj.repo, s, run):
            err_console.print(f"ggstack: note: {note}", highlight=False, markup=False)
    if as_json:
        print_json(run.to_json())
    else:
        from ggstack import report  # rich: not imported for --json

        console().print(report.check_table(run))
    sys.exit(exits.exit_code(run))


@main.command("test")
@click.argument("stack", shell_complete=_complete_stacks)
@click.argument("results_files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--onto", default=None, help="The base to test on [default: stack.toml target.base].", shell_complete=_complete_refs
)
@click.option(
    "--gpu",
    type=click.Choice(["auto", "require", "off"]),
    default="auto",
    show_default=True,
    help="auto: GPU tests where there is a GPU, else inconclusive; require: fail without one; off: skip them.",
)
@click.option("--only", multiple=True, help="Test only this patch (index or file name; repeatable).")
@click.option(
    "--matrix",
    is_flag=True,
    help="Print the job list for the CI (--ci) and run nothing: GitHub Actions strategy.matrix, or a Buildkite pipeline.",
)
@click.option(
    "--ci",
    type=click.Choice(["actions", "buildkite"]),
    default="actions",
    show_default=True,
    help="With --matrix: actions prints the matrix JSON; buildkite a pipeline for `buildkite-agent pipeline upload`.",
)
@click.option(
    "--shard",
    default=None,
    metavar="K/N",
    help="Run every N-th job of the matrix, starting at the K-th, into --results.",
)
@click.option("--job", "job_id", default=None, help="Run one job of the matrix (its id) into --results.")
@click.option(
    "--results",
    "results_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Where --shard/--job write their results [default: ggstack-test-<shard or job>.json].",
)
@click.option("--merge", is_flag=True, help="Fold the RESULTS_FILES written by --shard/--job into the Run.")
@click.option(
    "--bundle",
    "bundle",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the Run's per-patch commits as a git bundle here, for `ggstack pr --run RUN --bundle FILE`.",
)
@click.option(
    "--jobs",
    "-j",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Run this many CPU test commands at once (each in its own worktree); GPU commands always run one at a time.",
)
@click.option(
    "--no-cache",
    "no_cache",
    is_flag=True,
    help="Run every test again instead of reading earlier results (and store the new ones).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON.")
@click.pass_obj
@handled
def test_(
    obj: Ctx,
    stack: str,
    results_files: tuple[str, ...],
    onto: str | None,
    gpu: str,
    only: tuple[str, ...],
    matrix: bool,
    ci: str,
    shard: str | None,
    job_id: str | None,
    results_path: str | None,
    merge: bool,
    bundle: str | None,
    jobs: int,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Run each patch's own tests on the base without it, with it, and on its
    old base, and fold what they say into the verdict.

    The tests are the files the patch adds or changes that match
    stack.toml tests.paths; {tests} in tests.cpu/tests.gpu expands to them,
    {python} to the interpreter running ggstack. Each run is a temporary
    checkout of its own under the git dir (its own config, refs, stash); per-test results come from JUnit XML; a run
    that could not run (command missing, module missing, collection error,
    crash, timeout) is a harness error, never evidence. Results are cached by
    tree, command, interpreter and its installed distributions, and GPU
    presence (--no-cache reruns). Exit 1 when a patch is broken.

    \b
    Examples:
      ggstack test my-fork --onto origin/main
      ggstack test my-fork --onto origin/main --matrix                 # a job list for GitHub Actions
      ggstack test my-fork --onto origin/main --shard 1/2 --results results/1.json
      ggstack test my-fork --onto origin/main --merge results/*.json --json
      ggstack test my-fork --onto origin/main --matrix --ci buildkite > pipeline.json

    --shard and --job are the CI's untrusted jobs: they refuse to run where a
    credential is in reach (docs: "The bot").
    """
    from ggstack import handoff, testing

    _check_test_modes(results_files, matrix, shard, job_id, merge, bundle)
    part = _parse_shard(shard) if shard else None
    s = obj.stack(stack)
    if part or job_id:
        handoff.refuse_credentials(obj.repo, "test --shard" if part else "test --job")
    base = onto or s.config.target.base
    run = testing.prepare(obj.repo, s, base)
    if matrix:
        if ci == "buildkite":
            from ggstack import buildkite

            print_json(buildkite.pipeline(obj.repo, s, run, gpu=gpu, only=only))
        else:
            print_json(testing.matrix(obj.repo, s, run, gpu=gpu, only=only))
        return
    if part or job_id:
        with StageProgress(1, "test", min_total=1) as progress:
            doc = testing.shard(
                obj.repo,
                s,
                run,
                part=part,
                job_id=job_id,
                gpu=gpu,
                only=only,
                progress=progress,
                use_cache=not no_cache,
            )
        _write_results(doc, results_path or f"ggstack-test-{job_id or (shard or '').replace('/', '-of-')}.json")
        return
    if merge:
        run = testing.merge(obj.repo, s, run, testing.load_results(results_files), gpu=gpu, only=only)
    else:
        with StageProgress(1, "test", min_total=1) as progress:
            run = testing.test(
                obj.repo, s, run, gpu=gpu, only=only, progress=progress, jobs=jobs, use_cache=not no_cache
            )
    if bundle:
        handoff.write_bundle(obj.repo, run, bundle)
    if as_json:
        print_json(run.to_json())
    else:
        _print_tested(s, run, only)
    sys.exit(exits.exit_code(run))


def _print_tested(s: Stack, run: Run, only: tuple[str, ...]) -> None:
    from ggstack import report

    out = console()
    chosen = {s.find(key).name for key in only}
    out.print(report.test_table(run, [p.name for p in s.patches if only and p.name not in chosen]))
    failures = report.test_failures(run)
    if failures:
        out.print(failures, markup=False, highlight=False, soft_wrap=True)
    if run.stages.get("test", "").startswith("ok: "):
        warn(run.stages["test"].removeprefix("ok: "))


def _check_test_modes(
    results_files: tuple[str, ...], matrix: bool, shard: str | None, job_id: str | None, merge: bool, bundle: str | None
) -> None:
    modes = [m for m, on in (("--matrix", matrix), ("--shard", shard), ("--job", job_id), ("--merge", merge)) if on]
    if bundle and (matrix or shard or job_id):
        raise UserError("--bundle goes with --merge (or a whole test run): the Run whose commits it carries")
    if len(modes) > 1:
        raise UserError(f"{' and '.join(modes)} do not go together")
    if results_files and not merge:
        raise UserError(f"unexpected arguments {' '.join(results_files)} (results files go with --merge)")
    if merge and not results_files:
        raise UserError("--merge needs the results files written by --shard/--job")


def _write_results(doc: dict, path: str) -> None:
    if os.path.dirname(path):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as e:
            raise UserError(f"--results: cannot create its directory: {e.strerror}", path=path) from None
    state.write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())
    click.echo(f"wrote {path} ({len(doc['jobs'])} job(s))")


def _parse_shard(text: str) -> tuple[int, int]:
    k, sep, n = text.partition("/")
    if not sep or not k.isdigit() or not n.isdigit() or not 1 <= int(k) <= int(n):
        raise UserError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


@main.command("pr")
@click.argument("stack", shell_complete=_complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The branch to replay onto and open the PRs against [default: stack.toml target.base].",
    shell_complete=_complete_refs,
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
def pr(
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
    from ggstack import handoff, report
    from ggstack import pr as pr_stage
    from ggstack.check.stack import check_stack
    from ggstack.pr import text as pr_text

    s = obj.stack(stack)
    if bundle and not run_path:
        raise UserError("--bundle goes with --run (the Run whose commits it carries)")
    if run_path:
        run = handoff.receive(obj.repo, s, _load_run(run_path), bundle=bundle, run_path=run_path)
    else:
        base = onto or s.config.target.base
        with StageProgress(len(s.patches), "apply") as progress:
            run = replay.apply(obj.repo, s, base, write=not dry_run, progress=progress)
        with StageProgress(len(s.patches), "check") as progress:
            run = check_stack(obj.repo, s, base, run=run, progress=progress)
    with StageProgress(len(s.patches), "pr") as progress:
        run = pr_stage.pr(
            obj.repo, s, run, dry_run=dry_run, close_redundant=close_redundant, stacked=stacked, progress=progress
        )
    if pr_stage.OFFLINE in run.stages.get("pr", ""):
        err_console.print(f"ggstack: no GITHUB_TOKEN or GH_TOKEN: {pr_stage.OFFLINE}", highlight=False, markup=False)
    if as_json:
        print_json(run.to_json())
    else:
        console().print(report.pr_plan_table(run))
        if dry_run:
            click.echo(report.pr_documents(run, pr_text.bodies(run, s)))
    sys.exit(exits.exit_code(run))


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The branch to land on [default: stack.toml target.base].",
    shell_complete=_complete_refs,
)
@click.option("--dry-run", is_flag=True, help="Print what would be merged, closed or waited for; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done (or planned) as JSON.")
@click.pass_obj
@handled
def land(obj: Ctx, stack: str, onto: str | None, dry_run: bool, as_json: bool) -> None:
    """Merge the stack's approved PRs in merge order, each checked again against the base first.

    From the bottom, a PR is merged only when a reviewer with write access (or
    one of stack.toml's land.approvers) approved its latest push, its required
    checks pass, GitHub says it can merge, and a fresh check says the base
    still needs it; one the base took meanwhile is closed with the evidence
    instead. It stops at the first PR that is not ready, saying why. Safe to
    rerun after a kill or a forge failure: nothing is merged twice. Where the
    repository has stacked pull requests, the ready PRs merge as one stack.
    Exit 0 when nothing is left waiting, 1 when a PR is not ready.

    \b
    Examples:
      ggstack land my-fork --onto main --dry-run
      ggstack land my-fork --onto main
    """
    from ggstack import land as landing

    s = obj.stack(stack)
    say = None if as_json or dry_run else (lambda line: err_console.print(escape(line), highlight=False))
    result = landing.land(obj.repo, s, onto=onto, dry_run=dry_run, say=say)
    if as_json:
        print_json(result.to_json())
    else:
        from ggstack import report

        click.echo(report.landing_text(result))
    sys.exit(result.exit_code)


@main.command()
@click.argument("stack", shell_complete=_complete_stacks)
@click.option(
    "--onto",
    default=None,
    help="The base to sync onto [default: stack.toml target.base].",
    shell_complete=_complete_refs,
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
def sync(
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
    from ggstack import handoff, report
    from ggstack import sync as sync_stage

    s = obj.stack(stack)
    if no_forge and (rebase_series or close_redundant):
        raise UserError(f"--no-forge does not go with {'--rebase-series' if rebase_series else '--close-redundant'}")
    if no_forge:
        handoff.refuse_credentials(obj.repo, "sync --no-forge")
    actions = sync_stage.in_actions(os.environ)
    log = sys.stderr if as_json else sys.stdout  # with --json, stdout is the Run alone
    observer = sync_stage.ActionsObserver(log) if actions else _TerminalObserver()
    with state.locked(obj.repo, s.name, command=f"ggstack sync {s.name}", warn=warn):
        run = sync_stage.sync(
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
        path = sync_stage.save_run(obj.repo, run, run_json)
        if bundle:
            handoff.write_bundle(obj.repo, run, bundle)
    if as_json:
        print_json(run.to_json())
    else:
        console().print(report.report_table(run))
    for error in run.errors:
        err_console.print(f"[bold red]ggstack:[/] {escape(error)}", highlight=False)
    if actions:
        sync_stage.publish_to_actions(run, s, os.environ, log)
    err_console.print(
        f"wrote the Run to {path}" + (" (dry run: nothing else changed)" if dry_run else ""), highlight=False
    )
    sys.exit(exits.exit_code(run))


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


@main.command("report")
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
def report_(run_file: str, fmt: str, as_json: bool, verbose: bool) -> None:
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
    from ggstack import report

    run = _load_run(run_file)
    if as_json and fmt not in ("table", "json"):
        raise UserError(f"--json and --format {fmt} do not go together")
    if as_json or fmt == "json":
        click.echo(report.run_json(run), nl=False)
    elif fmt == "markdown":
        click.echo(report.markdown(run), nl=False)
    else:
        out = console()
        out.print(report.report_table(run, verbose=verbose))
        for o in run.outcomes:
            if o.verdict and o.verdict.value == "partial" and o.remaining_diff:
                out.print(f"\n{o.name}: remaining diff", markup=False, soft_wrap=True)
                out.print(o.remaining_diff, markup=False, highlight=False, soft_wrap=True)


def _load_run(path: str) -> Run:
    """A saved Run, or a UserError naming the file (report and pr --run read hand-made files too)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise TypeError(f"the top level is {json.dumps(data)[:40]}, not a JSON object")
        return Run.from_json(data)
    except KeyError as e:
        raise UserError(
            f"not a ggstack Run (written by `ggstack sync --run-json` or `--json`): no key {e}", path=path
        ) from None
    except (ValueError, TypeError, AttributeError, RecursionError) as e:
        # UnicodeDecodeError and JSONDecodeError are ValueErrors; the others are a wrong shape
        # (RecursionError: nested deeper than any Run, which the parser cannot follow).
        raise UserError(
            f"not a ggstack Run (written by `ggstack sync --run-json` or `--json`): {e}", path=path
        ) from None


@main.command()
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
def demo(directory: str | None, base: str, gpu: str, keep: bool, export_dir: str | None, as_json: bool) -> None:
    """The seed's story end to end, on a miniature vLLM fork built on the spot.

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

    from ggstack import demo as demo_
    from ggstack import report, series
    from ggstack.pr import text as pr_text

    if export_dir:
        with tempfile.TemporaryDirectory(prefix="ggstack-export-") as tmp:
            fork = demo_.build_fork(os.path.join(tmp, "fork.git"))
            stack = demo_.export_stack(fork, export_dir)
        click.echo(f"wrote {stack.path} ({len(stack.patches)} patches)")
        return
    out = console()
    if not as_json:
        out.print(f"Building the miniature fork and replaying gg-clean onto {demo_.BASES[base]} …", highlight=False)
    run, workdir = demo_.run(directory, base, gpu=gpu, stage=lambda name, n: StageProgress(n, name, min_total=1))
    try:
        if as_json:
            print_json(run.to_json())
        else:
            out.print(report.report_table(run))
            out.print(report.pr_plan_table(run))
            gg_clean = series.load(os.path.join(workdir, "patches"), demo_.STACK)
            documents = report.pr_documents(run, pr_text.bodies(run, gg_clean))
            if documents:
                out.print(documents, markup=False, highlight=False, soft_wrap=True)
            if directory or keep:
                out.print(f"The fork is {workdir}/fork.git, the stack {workdir}/patches/gg-clean.", highlight=False)
            out.print(f"\n{demo_.NEXT_STEPS}", markup=False, highlight=False, soft_wrap=True)
    finally:
        if not (directory or keep):
            shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(exits.exit_code(run))  # as the bot would for this Run: 1 when a patch needs a human


def _patch_json(p, with_diff: bool = False) -> dict[str, Any]:
    d = {
        "name": p.name,
        "subject": p.subject,
        "author": p.author,
        "date": p.date,
        "source_commit": p.source_commit,
        "base_commit": p.base_commit,
        "original_pr": p.provenance.original_pr,
        "cherry_picked_from": p.provenance.cherry_picked_from,
        "dropped": list(p.provenance.dropped),
        "stack_patch_id": p.provenance.stack_patch_id,
        "paths": list(p.paths),
    }
    if with_diff:
        d["message"] = p.message
        d["diff"] = p.diff
    return d


def _diffstat(diff: str) -> str:
    from ggstack import series

    counts: dict[str, list[int]] = {}
    current = None
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            current = series.diff_paths(line)[-1]
            counts[current] = [0, 0]
        elif current and line.startswith("+") and not line.startswith("+++ "):
            counts[current][0] += 1
        elif current and line.startswith("-") and not line.startswith("--- "):
            counts[current][1] += 1
    return "\n".join(f" {path} | +{a} -{d}" for path, (a, d) in counts.items())
