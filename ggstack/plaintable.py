"""A rich Table as plain lines for piped output, as rich draws it: rich's cell by cell made 1,000 rows 1.4 s
of a bot rerun costing two. Anything else (another box, overflow, a non-text cell) is left to rich."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text


class PlainConsole(Console):
    def print(self, *objects: Any, **kwargs: Any) -> None:
        if len(objects) == 1 and isinstance(objects[0], Table) and drawable(objects[0], self.width) and not kwargs:
            lines = render(objects[0], self.width)
            if lines is not None:
                self.file.write(lines)
                return
        super().print(*objects, **kwargs)


def drawable(table: Table, width: int) -> bool:
    return (
        bool(table.columns)
        and (table.width or 0) <= width
        and _plain_layout(table)
        and all(_plain_column(c) for c in table.columns)
        and all(x is None or isinstance(x, (str, Text)) for x in (table.title, table.caption))
    )


_PLAIN_LAYOUT = {  # the one layout render draws: a report's tables, as they are made
    "box": box.HEAVY_HEAD,
    "show_header": True,
    "show_edge": True,
    "show_footer": False,
    "show_lines": False,
    "leading": 0,
    "padding": (0, 1, 0, 1),
    "pad_edge": True,
    "collapse_padding": False,
    "min_width": None,
    "title_justify": "left",
}


def _plain_layout(table: Table) -> bool:
    laid_out = all(getattr(table, name) == value for name, value in _PLAIN_LAYOUT.items())
    return laid_out and (not table.caption or table.caption_justify == "left")


def _plain_column(c: Column) -> bool:
    return (
        c.justify == "left"
        and c.vertical == "top"
        and c.overflow == "fold"
        and not c.no_wrap
        and all(isinstance(x, (str, Text)) for x in (c.header, *c.cells))
    )


def render(table: Table, width: int) -> str | None:
    """Without styles or trailing spaces, rich's widths and wrapping; None when even the narrowest
    layout is wider (rich then breaks its lines)."""
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    cells = [[_plain(c.header), *(_plain(x) for x in c.cells)] for c in table.columns]
    widths = _widths(table, cells, console)
    if widths is None:
        return None
    total = sum(widths) + len(widths) + 1
    out = _wrap(console, _plain(table.title), total) if table.title else []
    out += _grid(console, cells, widths)
    if table.caption:
        out += _wrap(console, _plain(table.caption), total)
    return "".join(line.rstrip(" ") + "\n" for line in out)


def _grid(console: Console, cells: list[list[str]], widths: list[int]) -> list[str]:
    heavy = [w * "━" for w in widths]
    out = ["┏" + "┳".join(heavy) + "┓"]
    out += _row(console, [col[0] for col in cells], widths, "┃", bottom=True)
    out.append("┡" + "╇".join(heavy) + "┩")
    for i in range(1, len(cells[0]) if cells else 0):
        out += _row(console, [col[i] for col in cells], widths, "│", bottom=False)
    out.append("└" + "┴".join(w * "─" for w in widths) + "┘")
    return out


def _plain(x: object) -> str:
    if isinstance(x, Text):
        return x.plain
    s = str(x)
    return Text.from_markup(s).plain if "[" in s else s  # a str cell is markup, as rich reads it


def _widths(table: Table, cells: list[list[str]], console: Console) -> list[int] | None:
    """Widths depend only on each column's widest line and longest word: rich lays out just those rows."""
    columns = [dataclasses.replace(c, header=Text(cells[i][0]), _cells=[]) for i, c in enumerate(table.columns)]
    proxy = Table(*columns, width=table.width, expand=table.expand)
    for i in sorted(_deciding_rows(cells) - {0}):
        proxy.add_row(*(Text(col[i]) for col in cells))
    console.print(proxy)
    top = console.file.getvalue().split("\n", 1)[0]  # type: ignore[attr-defined]
    console.file = io.StringIO()
    if not (top.startswith("┏") and top.endswith("┓")) or len(top) > console.width:
        return None  # wider than the console
    return [len(part) for part in top[1:-1].split("┳")]


def _deciding_rows(cells: list[list[str]]) -> set[int]:
    rows = {0}  # the header
    for col in cells:
        rows.add(max(range(len(col)), key=lambda i: max((_len(line) for line in col[i].splitlines()), default=0)))
        rows.add(max(range(len(col)), key=lambda i: max((_len(w) for w in col[i].split()), default=0)))
    return rows


def _row(console: Console, texts: list[str], widths: list[int], bar: str, *, bottom: bool) -> list[str]:
    wrapped = [_wrap(console, t, w - 2) for t, w in zip(texts, widths, strict=True)]
    height = max(len(lines) for lines in wrapped)
    cols = []
    for lines, w in zip(wrapped, widths, strict=True):
        fill = [""] * (height - len(lines))
        cols.append(
            [" " + line + " " * (w - 2 - _len(line)) + " " for line in (fill + lines if bottom else lines + fill)]
        )
    return [bar + bar.join(parts) + bar for parts in zip(*cols, strict=True)]


def _wrap(console: Console, text: str, width: int) -> list[str]:
    lines = text.split("\n")
    if "\t" not in text and all(_len(line) <= width for line in lines):
        return lines
    wrapped = Text(text).wrap(console, max(width, 1), justify="left", overflow="fold")
    return [line.plain.rstrip(" ") for line in wrapped]


def _len(s: str) -> int:
    return len(s) if s.isascii() else cell_len(s)
