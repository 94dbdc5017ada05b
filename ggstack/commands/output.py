"""Where a command prints: rich at a terminal, plain lines when piped, JSON for ``--json``.
rich is imported only to print: it is a good part of start-up, and most runs print nothing to stderr."""

from __future__ import annotations

import io
import os
import sys
from typing import IO, TYPE_CHECKING, Any, cast

import click

from ggstack import model

if TYPE_CHECKING:
    from rich.console import Console

    from ggstack.model import Patch


class _ErrConsole:
    """rich's console on stderr, made when something is first printed there."""

    def __init__(self) -> None:
        self._console: Console | None = None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)  # a path in a message is never broken
        self._console.print(*objects, **kwargs)


err_console = _ErrConsole()


def escape(text: str) -> str:
    from rich import markup

    return markup.escape(text)


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


def print_json(data: Any) -> None:
    click.echo(model.json_text(data))


def done(as_json: bool, words: str, data: dict[str, Any]) -> None:
    """What a command that changed the stack did: a line, or (--json) its JSON."""
    if as_json:
        print_json(data)
    else:
        click.echo(words)


def patch_json(p: Patch, with_diff: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {
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
