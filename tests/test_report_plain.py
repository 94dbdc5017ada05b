"""Piped tables: drawn as plain lines by ``plaintable``, line for line what rich draws.

rich's layout of a 1,000-row table cost a bot's rerun more than a second;
``plaintable`` draws the same lines from the cells' text. These tests hold
the two equal on every report table and on the cells that make a layout
hard (wrapping, folding, wide characters, markup, a fixed width shared by
ratio), and check that what it cannot draw is left to rich.
"""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from test_report import every_verdict_run

from ggstack import plaintable
from ggstack.commands.output import _NoTrailingSpace
from ggstack.model import Run
from ggstack.report import text  # its test_table by the module: pytest would collect the name
from ggstack.report.text import apply_table, check_table, pr_plan_table, report_table


def drawn_by_rich(table: Table, width: int) -> str:
    out = io.StringIO()
    console = Console(file=_NoTrailingSpace(out), highlight=False, soft_wrap=False, width=width)
    console.print(table)
    console.file.flush()
    return out.getvalue()


def drawn_by_rich_as_is(table: Table, width: int) -> str:
    out = io.StringIO()
    Console(file=out, highlight=False, soft_wrap=False, width=width).print(table)
    return out.getvalue()


def long_run() -> Run:
    """Thirty patches with long names, subjects and evidence: cells that wrap and fold."""
    run = every_verdict_run()
    outcomes = []
    for i in range(30):
        o = run.outcomes[i % len(run.outcomes)]
        outcomes.append(
            dataclasses.replace(
                o,
                name=f"{i:04d}-" + "a-very-long-patch-name-" * (1 + i % 3) + ".patch",
                subject=("fix “the” thing " * (i % 5)) + "[bold]not markup[/bold] 中文字符" * (i % 2),
            )
        )
    return dataclasses.replace(run, outcomes=outcomes)


TABLES = {
    "report": report_table,
    "verbose": lambda run: report_table(run, verbose=True),
    "pr plan": pr_plan_table,
    "apply": apply_table,
    "check": check_table,
    "test": text.test_table,
}


@pytest.mark.parametrize("width", [200, 120, 100])
@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("make_run", [every_verdict_run, long_run])
def test_every_report_table_is_drawn_as_rich_draws_it(make_run, name: str, width: int) -> None:
    table = TABLES[name](make_run())
    assert plaintable.drawable(table, width) and plaintable.render(table, width) == drawn_by_rich(table, width)


def awkward_table(**kw) -> Table:
    table = Table(title="a title [b]with markup[/b] that is long " * 3, title_justify="left", **kw)
    table.add_column("n", overflow="fold", max_width=6)
    table.add_column("multi-line\nheader", overflow="fold", min_width=12)
    table.add_column("text", overflow="fold", ratio=1)
    table.add_column("fixed", overflow="fold", width=9)
    table.add_row("1", "", "short", "x")
    table.add_row("22222222222", Text("a\n\nthree lines"), "word " * 40, "a" * 30)
    table.add_row("3", "wide 中文字符中文字符中文字符", "tab\there " + "b" * 80, "[red]red[/red]")
    table.add_row("4", "trailing spaces   ", "  leading spaces and  double  spaces", "")
    return table


@pytest.mark.parametrize("width", [200, 80, 50])
@pytest.mark.parametrize("fixed", [None, 70])
def test_wrapping_folding_wide_characters_and_ratios_are_drawn_as_rich_draws_them(width: int, fixed) -> None:
    table = awkward_table(width=fixed, caption="a caption under it", caption_justify="left")
    if not plaintable.drawable(table, width):
        assert fixed is not None and fixed > width  # a fixed width wider than the console
        return
    drawn = plaintable.render(table, width)
    if drawn is None:  # narrowest layout wider than the console: rich breaks its lines
        assert width == 50  # its minimum widths (min_width, width, longest words) are 52 columns and more
        out = io.StringIO()
        plaintable.PlainConsole(file=out, width=width, highlight=False, soft_wrap=False).print(table)
        assert out.getvalue() == drawn_by_rich_as_is(table, width)
        return
    assert drawn == drawn_by_rich(table, width)


@pytest.mark.parametrize(
    "kw", [{"show_lines": True}, {"box": box.SIMPLE}, {"caption": "centred"}, {"width": 300}, {"padding": (0, 2)}]
)
def test_what_it_cannot_draw_is_left_to_rich(kw) -> None:
    table = awkward_table(**kw)
    assert not plaintable.drawable(table, 200)
    out = io.StringIO()
    plaintable.PlainConsole(file=out, width=200, highlight=False, soft_wrap=False).print(table)
    assert out.getvalue() == drawn_by_rich_as_is(table, 200)


def test_a_column_right_justified_or_a_cell_that_is_not_text_is_left_to_rich() -> None:
    table = awkward_table()
    table.columns[0].justify = "right"
    assert not plaintable.drawable(table, 200)
    table = awkward_table()
    table.add_row("5", Table(), "", "")
    assert not plaintable.drawable(table, 200)
