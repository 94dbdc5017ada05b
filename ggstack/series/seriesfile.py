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
        if "/" in entry or entry.startswith("."):
            raise UserError(f"series entry {entry!r} must be a file in the stack directory", path=series_path, line=n)
        if entry not in files:
            raise UserError(f"series names {entry!r}, but there is no such file", path=series_path, line=n)
        if entry in found:
            raise UserError(f"{entry!r} is listed twice", path=series_path, line=n)
        found[entry] = Line(text.strip()[len(entry) :].strip(), tuple(pending) if found else ())
        pending = []
    return found


def render_series(stack: Stack) -> bytes:
    old = stack.series_raw.decode("utf-8", "replace").splitlines()
    entry_at = [i for i, line in enumerate(old) if line.split("#", 1)[0].strip()]
    head = old[: entry_at[0]] if entry_at else [line for line in old if line.startswith("#")]
    tail = old[entry_at[-1] + 1 :] if entry_at else []
    lines = head or [f"# ggstack series for {stack.name}: one patch a line, in merge order"]
    for p in stack.patches:
        lines += [*p.series_above, f"{p.name} {p.series_options}" if p.series_options else p.name]
    return ("\n".join(lines + tail) + "\n").encode()


def series_bytes(stack: Stack) -> bytes:
    try:
        loaded = entries(stack.series_raw, SERIES, {p.name for p in stack.patches})
    except UserError:
        return render_series(stack)
    now = [(p.name, Line(p.series_options, p.series_above)) for p in stack.patches]
    return stack.series_raw if list(loaded.items()) == now else render_series(stack)
