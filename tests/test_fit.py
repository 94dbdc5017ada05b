"""Output that fits: the ``check``, ``report`` and ``sync`` tables at 80 and 120 columns, at a
terminal and piped, never cropped and never wider than the width.

On an 80-column terminal ``report`` and ``sync``'s summary lost their PR column and the end of
each evidence line; piped output was 200 columns of box drawing whatever ``COLUMNS`` said. Here
every table is drawn, and each column's text, read back from the drawing, must be all of the
cell's text (folded or wrapped, never cut), on lines no wider than the width.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack
from rich.console import Console
from rich.table import Table
from rich.text import Text
from test_report import _on_a_terminal, every_verdict_run

from ggstack import git, importing
from ggstack.model import Run, Verdict
from ggstack.report import text  # its test_table by the module: pytest would collect the name
from ggstack.report.json import run_json
from ggstack.report.text import VERDICT_STYLES, check_table, pr_plan_table, report_table
from ggstack.series import store

SLUG = "owner/repo"
BOX = "│┃"


def long_run() -> Run:
    """Seven patches with the long names and subjects of a real fork's carry patches."""
    run = every_verdict_run()
    outcomes = [
        dataclasses.replace(
            o,
            name=f"{i:04d}-GG-fix-DCP-packed-A2A-buffer-lifetime-during-graph-p.patch",
            subject=f"[GG] fix(dcp): packed A2A buffer lifetime during graph capture, part {i}",
        )
        for i, o in enumerate(run.outcomes, 1)
    ]
    return dataclasses.replace(run, outcomes=outcomes)


def columns_read_back(drawn: str) -> list[str]:
    """Each column's text as drawn, its lines joined and every space taken out (a fold or a wrap
    puts spaces and line ends where the text had none, never takes a character away)."""
    rows = [line for line in drawn.splitlines() if line[:1] in BOX]
    body = [line for line in rows if line[:1] == "│"]
    cells = [re.split(f"[{BOX}]", line)[1:-1] for line in body]
    return ["".join("".join(cell.split()) for cell in column) for column in zip(*cells)]


def columns_of(table: Table) -> list[str]:
    """Each column's text as the table holds it, every space taken out."""
    texts = [
        [c.plain if isinstance(c, Text) else Text.from_markup(str(c)).plain for c in col._cells]
        for col in table.columns
    ]
    return ["".join("".join(t.split()) for t in column) for column in texts]


def assert_fits(drawn: str, table: Table, width: int) -> None:
    wide = [line for line in drawn.splitlines() if len(line) > width]
    assert not wide, f"{len(wide)} lines wider than {width}:\n" + "\n".join(wide[:3])
    assert columns_read_back(drawn) == columns_of(table), drawn


TABLES = {
    "check": check_table,
    "report": report_table,
    "sync": report_table,  # sync prints the report's table of its Run
    "pr plan": pr_plan_table,
}


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("make_run", [every_verdict_run, long_run])
def test_at_a_terminal_a_table_fits_the_width_and_loses_nothing(make_run, name: str, width: int) -> None:
    table = TABLES[name](make_run())
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=True, color_system=None, highlight=False).print(table)
    assert_fits(out.getvalue(), table, width)


@pytest.mark.parametrize("columns", ["80", "120", None])
def test_report_piped_is_plain_lines_at_columns_default_100(tmp_path: Path, columns: str | None) -> None:
    run = long_run()
    path = tmp_path / "run.json"
    path.write_text(run_json(run))
    env = {"COLUMNS": columns} if columns else {"COLUMNS": ""}
    proc = run_ggstack("report", str(path), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    width = int(columns or 100)
    table_part = proc.stdout.split("\n\n")[0]
    assert_fits(table_part, report_table(run), width)
    assert "\x1b[" not in proc.stdout
    # A patch is its number and subject, not its file name folded mid-word.
    assert "0001 [GG] fix(dcp)" in table_part and ".patch" not in table_part


@pytest.mark.parametrize("columns", [80, 120])
def test_report_at_an_80_and_120_column_terminal_keeps_its_pr_column(tmp_path: Path, columns: int) -> None:
    run = long_run()
    path = tmp_path / "run.json"
    path.write_text(run_json(run))
    shown = _on_a_terminal(["report", str(path)], {"COLUMNS": str(columns), "NO_COLOR": "1"})
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown).replace("\r", "")
    assert_fits(shown, report_table(run), columns)
    assert "#5draft" in "".join(shown.split()).replace("│", ""), shown  # the PR column, wrapped or not


class Fork:
    """A fork with three carry patches of long subjects: one the base took, one half, one its own."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        lines = {f"{n}.py": "".join(f"{n}_{i} = {i}\n" for i in range(30)) for n in "abc"}
        self.repo.commit("base", lines)
        self.repo.git("checkout", "-q", "-b", "my-fork")
        subjects = [
            "[GG] fix(dcp): packed A2A buffer lifetime during graph capture and replay",
            "[GG clean] dcp: release_graph_buffers() and a strict fp32 LSE check everywhere",
            "[GG clean] fix(dcp): free retained A2A pairs on graph pool teardown, always",
        ]
        self.picks = []
        for n, subject in zip("abc", subjects):
            changed = lines[f"{n}.py"].replace(f"{n}_3 = 3", f"{n}_3 = 33").replace(f"{n}_20 = 20", f"{n}_20 = 220")
            self.picks.append(self.repo.commit(subject, {f"{n}.py": changed}))
        self.repo.git("checkout", "-q", "main")
        self.repo.git("cherry-pick", self.picks[0])
        half = lines["b.py"].replace("b_3 = 3", "b_3 = 33")
        self.repo.commit("upstream: part of b", {"b.py": half})
        self.patches = tmp / "patches"
        store.init(str(self.patches), "s", SLUG, "main")
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(git.Repository(str(self.repo.path)), stack, self.picks).stack)

    def gg(self, *args: str, columns: str) -> tuple[int, str, str]:
        argv = ["--repo", str(self.repo.path), "--patches", str(self.patches), *args]
        proc = run_ggstack(*argv, cwd=self.tmp, env={"COLUMNS": columns})
        return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("columns", ["80", "120", ""])
def test_check_and_sync_piped_fit_columns_with_every_word(tmp_path: Path, columns: str) -> None:
    fork = Fork(tmp_path)
    width = int(columns or 100)
    rc, out, err = fork.gg("check", "s", "--onto", "main", columns=columns)
    assert rc in (0, 1), err
    rc, as_json, err = fork.gg("check", "s", "--onto", "main", "--json", columns=columns)
    run = Run.from_json(json.loads(as_json))
    assert [o.verdict for o in run.outcomes] == [Verdict.REPRESENTED, Verdict.PARTIAL, Verdict.UNIQUE]
    assert_fits(out, check_table(run), width)
    assert "0001 [GG] fix(dcp)" in out
    rc, out, err = fork.gg("sync", "s", "--onto", "main", "--dry-run", columns=columns)
    assert rc in (0, 1), err
    saved = Run.from_json(json.loads((fork.repo.path / ".git" / "ggstack" / "runs" / "s.json").read_text()))
    assert_fits(out, report_table(saved), width)
    # The stages said how far they were on stderr, piped too: a slow stage (test) its count as it
    # starts, a quick one (check, 3 patches) only its state.
    assert re.search(r"^ggstack: test: \d+ patch", err, re.M) and "check: ok" in err, err


def test_one_colour_map_for_the_verdicts_in_every_table() -> None:
    """check's table had its own colours (represented yellow), the report's another (cyan)."""
    import ggstack.report

    source = "".join(p.read_text() for p in sorted(Path(ggstack.report.__path__[0]).glob("*.py")))
    styles = re.findall(r'"(?:bold )?(?:green|cyan|yellow|magenta|red)"', source)
    assert len(styles) == len(VERDICT_STYLES), styles  # each written once: in VERDICT_STYLES
    run = every_verdict_run()
    for make in (check_table, report_table, pr_plan_table, text.test_table):
        table = make(run)
        column = next(c for c in table.columns if "verdict" in str(c.header))
        for o, cell in zip(run.outcomes, column._cells):
            spans = [str(s.style) for s in cell.spans] if isinstance(cell, Text) else []
            style = cell.style if isinstance(cell, Text) else ""
            if o.verdict is not None:
                assert VERDICT_STYLES[o.verdict] in [*spans, str(style)], (make.__name__, o.verdict)
