"""What every command is given: where the fork and its stored stacks are, the stack's lock for a
command that changes it, the shell completion of stacks and refs, and the one error handler."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from ggstack import git, secrets, state
from ggstack.commands.output import err_console, escape, warn
from ggstack.errors import InfraError, UserError
from ggstack.model import Run, Stack


class Ctx:
    """Where the fork and the stored stacks are."""

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
        from ggstack.series.store import load

        return load(self.patches_dir, name)

    def editing(self, name: str, command: str) -> contextlib.AbstractContextManager[state.LockInfo]:
        """The stack's lock, for a command that changes it: load, change and save under it."""
        from ggstack.series.store import stack_dir

        stack_dir(self.patches_dir, name)  # a bad name is bad input before any lock file is made
        return state.locked(
            self.repo, name, command=f"ggstack {command} {name}", wait=state.edit_lock_wait(), warn=warn
        )


def complete_stacks(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a STACK argument: the stacks where the command would look for them."""
    from ggstack.series.store import list_stacks

    root, meta = ctx.find_root().params, ctx.meta  # meta: a --repo/--patches after the command's name
    repo, where = (
        meta.get("ggstack.repo") or root.get("repo") or ".",
        meta.get("ggstack.patches") or root.get("patches"),
    )
    patches = Ctx(repo, where).patches_dir
    return [name for name in list_stacks(patches) if name.startswith(incomplete)]


def complete_refs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of --onto: the branches, remote-tracking branches and tags of the fork checkout."""
    root, meta = ctx.find_root().params, ctx.meta
    try:
        repo = git.Repository(meta.get("ggstack.repo") or root.get("repo") or ".")
        refs = repo.refs("refs/heads/") | repo.refs("refs/remotes/") | repo.refs("refs/tags/")
    except (UserError, InfraError):
        return []
    names = (re.sub(r"^refs/(heads|remotes|tags)/", "", r) for r in refs)
    return sorted(n for n in names if n.startswith(incomplete) and not n.endswith("/HEAD"))


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


def load_run(path: str) -> Run:
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
