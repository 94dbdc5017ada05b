"""The ``series`` file as quilt reads it: a move or drop keeps each entry's comments and ``-p1``."""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from ggstack.errors import UserError
from ggstack.model import Stack

SERIES = "series"


class Line(NamedTuple):
    options: str  # "-p1", "-p1 # why"
    above: tuple[str, ...]  # comment and blank lines since the entry before (none for the first)


def series_line(text: str, series_path: str, n: int) -> str | None:
    """Only ``-p1``, the one strip level ggstack stores, may follow the name."""
    fields = text.split("#", 1)[0].split()
    if not fields:
        return None
    if fields[1:] not in ([], ["-p1"]):
        raise UserError(
            f"unsupported patch options {' '.join(fields[1:])!r} (ggstack stores -p1 patches)",
            path=series_path,
            line=n,
        )
    return fields[0]


def entries(raw: bytes, series_path: str, files: Collection[str]) -> dict[str, Line]:
    found: dict[str, Line] = {}
    pending: list[str] = []
    for n, text in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        entry = series_line(text, series_path, n)
        if entry is None:
            pending.append(text.rstrip())
            continue
        problem = _entry_problem(entry, files, found)
        if problem:
            raise UserError(problem, path=series_path, line=n)
        found[entry] = Line(text.strip()[len(entry) :].strip(), tuple(pending) if found else ())
        pending = []
    return found


def _entry_problem(entry: str, files: Collection[str], found: Collection[str]) -> str | None:
    if "/" in entry or entry.startswith("."):
        return f"series entry {entry!r} must be a file in the stack directory"
    if entry not in files:
        return f"series names {entry!r}, but there is no such file"
    return f"{entry!r} is listed twice" if entry in found else None


def render_series(stack: Stack) -> bytes:
    head, tail = _around_entries(stack.series_raw.decode("utf-8", "replace").splitlines())
    lines = head or [f"# ggstack series for {stack.name}: one patch a line, in merge order"]
    for p in stack.patches:
        lines += [*p.series_above, f"{p.name} {p.series_options}" if p.series_options else p.name]
    return ("\n".join(lines + tail) + "\n").encode()


def _around_entries(old: list[str]) -> tuple[list[str], list[str]]:
    """The lines before the first entry and after the last; with no entry, the comments."""
    entry_at = [i for i, line in enumerate(old) if line.split("#", 1)[0].strip()]
    if not entry_at:
        return [line for line in old if line.startswith("#")], []
    return old[: entry_at[0]], old[entry_at[-1] + 1 :]


def series_bytes(stack: Stack) -> bytes:
    try:
        loaded = entries(stack.series_raw, SERIES, {p.name for p in stack.patches})
    except UserError:
        return render_series(stack)
    now = [(p.name, Line(p.series_options, p.series_above)) for p in stack.patches]
    return stack.series_raw if list(loaded.items()) == now else render_series(stack)
