"""``ggstack report``: every verdict kind rendered as a maintainer reads it.

The Runs here are built from the model's values (every verdict, PR state and
provenance a real run produces); the renderers only ever read a Run, so this
is their whole input. The Markdown is parsed with markdown-it-py, as GitHub
would, and the JSON must give back the same Run. End-to-end reports from the
real stages are in test_sync.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from gitrepo import run_ggstack
from markdown_it import MarkdownIt

from ggstack import exits, model
from ggstack.forge.marker import closed_marker, is_closing_comment, pr_marker, read_marker
from ggstack.model import (
    Applied,
    Conflict,
    Evidence,
    Outcome,
    Provenance,
    PRState,
    Recommendation,
    Run,
    Verdict,
)
from ggstack.report import summary, text  # by the module: a budget to patch; a test_table pytest would collect
from ggstack.report.bodies import closing_comment
from ggstack.report.escape import md_code, md_text
from ggstack.report.evidence import evidence_words
from ggstack.report.json import run_json
from ggstack.report.summary import markdown
from ggstack.report.text import pr_plan_table, report_table
from ggstack.report.words import header_line, pr_words, provenance_words

BASE = "b" * 40
SHA_639 = "639aeff" + "0" * 33
REMAINING = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2  # uses ``` and | pipes\n"


def outcome(i: int, verdict: Verdict | None, **kw) -> Outcome:
    name = f"{i:04d}-{(verdict.value if verdict else 'unjudged')}-patch.patch"
    prov = kw.pop(
        "provenance",
        Provenance(
            f"spid-{i}",
            original_pr="voipmonitor/vllm#130",
            cherry_picked_from="ef7cae43b2" + "1" * 30,
            dropped=("CUTLASS version pin (cmake/cutlass.cmake)",),
        ),
    )
    return Outcome(
        name=name,
        subject=f"Patch {i}: fix <thing> | part {i}",
        stack_patch_id=prov.stack_patch_id,
        provenance=prov,
        applied=kw.pop("applied", Applied.APPLIED),
        verdict=verdict,
        **kw,
    )


def every_verdict_run() -> Run:
    represented_pr = PRState(
        number=7, url="http://forge.test/o/r/pull/7", state="open", draft=True, approved=False, labels=["do-not-merge"]
    )
    outcomes = [
        outcome(
            1,
            Verdict.UNIQUE,
            commit="c" * 40,
            recommendation=Recommendation.WAIT_APPROVAL,
            evidence=[Evidence("tests", "its tests fail on the base without the patch and pass with it")],
            pr=PRState(
                number=5,
                url="http://forge.test/o/r/pull/5",
                state="open",
                draft=True,
                labels=["do-not-merge"],
                position=1,
                total=2,
                diffstat=[("vllm/a.py", 3, 1), ("assets/logo.png", None, None)],
            ),
        ),
        outcome(
            2,
            Verdict.REPRESENTED,
            applied=Applied.EMPTY,
            represented_by=[SHA_639],
            represented_fraction=1.0,
            recommendation=Recommendation.CLOSE_PR,
            pr=represented_pr,
            evidence=[
                Evidence("blame", "100% of added lines come from 639aeff", [SHA_639], 1.0),
                Evidence("tests", "its tests pass on the base without the patch"),
                Evidence("patch-id", "patch-id differs"),
            ],
        ),
        outcome(
            3,
            Verdict.PARTIAL,
            represented_by=[SHA_639],
            represented_fraction=0.6,
            remaining_diff=REMAINING,
            recommendation=Recommendation.UPDATE_PR,
            evidence=[Evidence("content", "3 of 5 hunks are in the base", [SHA_639], 0.6)],
            pr=PRState(
                number=6,
                url="http://forge.test/o/r/pull/6",
                state="open",
                draft=False,
                approved=True,
                approved_by=["maint"],
            ),
        ),
        outcome(
            4,
            Verdict.CONFLICT,
            applied=Applied.CONFLICT,
            recommendation=Recommendation.REWORK,
            conflict=Conflict(
                ["vllm/a.py"], "--- vllm/a.py\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs", "CONFLICT (content)"
            ),
        ),
        outcome(
            5,
            Verdict.BROKEN,
            commit="d" * 40,
            recommendation=Recommendation.REWORK,
            tests=[
                model.TestResult(
                    "cpu", "patched", "failed", failed=["tests/test_x.py::test_y"], output_tail="AssertionError"
                )
            ],
        ),
        outcome(
            6,
            Verdict.INCONCLUSIVE,
            commit="e" * 40,
            recommendation=Recommendation.HOLD,
            tests=[model.TestResult("gpu", "patched", "skipped", reason="no GPU on this machine")],
        ),
        outcome(7, None, applied=Applied.APPLIED, provenance=Provenance("spid-7")),
    ]
    return Run(
        stack="gg-clean",
        base_ref="origin/dev/gilded-gnosis",
        base=BASE,
        merge_base="a" * 40,
        outcomes=outcomes,
        stages={"apply": "ok", "check": "ok", "test": "ok", "pr": "ok"},
        errors=["pr: a note for the maintainer"],
        repo_slug="voipmonitor/vllm",
        gpu="absent",
    )


def plain(table: object, width: int) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def parse(md: str) -> tuple[list, str]:
    parser = MarkdownIt("commonmark").enable("table")
    return parser.parse(md), parser.render(md)


def test_header_counts_every_verdict_and_names_the_base() -> None:
    line = header_line(every_verdict_run())
    assert line.startswith("gg-clean: 7 patches onto origin/dev/gilded-gnosis at bbbbbbbbbb — ")
    assert "1 unique, 1 partial, 1 represented, 1 conflict, 1 broken, 1 inconclusive, not judged 1" in line


def test_evidence_in_words() -> None:
    run = every_verdict_run()
    assert evidence_words(run.outcomes[1]) == (
        "represented: 100% of added lines come from 639aeff; its tests pass on the base without the patch; patch-id differs"
    )
    assert evidence_words(run.outcomes[3]) == "conflict: conflicts in vllm/a.py"
    assert (
        evidence_words(run.outcomes[4]) == "broken: cpu tests on base+patch: failed (1 failed: tests/test_x.py::test_y)"
    )
    assert "no GPU on this machine" in evidence_words(run.outcomes[5])
    assert provenance_words(run.outcomes[0]) == [
        "original PR voipmonitor/vllm#130",
        "cherry-picked from ef7cae43b2",
        "dropped: CUTLASS version pin (cmake/cutlass.cmake)",
    ]


def test_pr_and_approval_state_in_words() -> None:
    run = every_verdict_run()
    assert pr_words(run.outcomes[0]) == "#5 open, draft, waiting for approval"
    assert pr_words(run.outcomes[2]) == "#6 open, approved by @maint"
    assert pr_words(run.outcomes[1]) == "#7 open, draft"


def test_attention_lists_what_a_human_must_look_at() -> None:
    reasons = exits.attention(every_verdict_run())
    joined = "\n".join(reasons)
    for needle in (
        "0002-represented-patch.patch: represented, but PR #7 is still open",
        "0003-partial",
        "0004-conflict",
        "0005-broken",
        "0006-inconclusive",
    ):
        assert needle in joined
    assert "0001-unique" not in joined  # waiting for approval is the normal gate, not attention


def test_markdown_is_github_flavoured_with_a_table_and_collapsed_details() -> None:
    run = every_verdict_run()
    md = markdown(run)
    tokens, html = parse(md)
    assert [t.type for t in tokens].count("table_open") == 1
    assert "<table>" in html and html.count("<tr>") == 1 + len(run.outcomes)  # the header row and one a patch
    # Subjects with | and <...> stay inside their cell and are not HTML.
    assert "Patch 1: fix &lt;thing&gt; | part 1" in html
    assert "<thing>" not in html
    # The partial patch's remaining diff sits in a <details>, in a fence that survives its backticks.
    assert "<details>" in html and "0003-partial-patch.patch: remaining diff (40% of its lines still needed)" in html
    assert 'class="language-diff"' in html and "+y = 2  # uses ``` and | pipes" in html
    # The redundant PR's draft closing comment.
    assert "0002-represented-patch.patch: closing comment for #7 (draft)" in html
    assert "Closing as already represented in the current `origin/dev/gilded-gnosis` base" in md
    assert '<a href="http://forge.test/o/r/pull/5">#5</a>' in html
    assert "100% of added lines come from 639aeff" in html
    assert "Needs attention:" in md and "pr: a note for the maintainer" in md


def test_details_blocks_are_balanced_and_leave_the_table_intact() -> None:
    md = markdown(every_verdict_run())
    _, html = parse(md)
    assert html.count("<details>") == html.count("</details>") == 3  # partial diff, conflict hunks, closing comment
    assert html.index("</table>") < html.index("<details>")


EVIL = "</details><!-- <script>alert(1)</script> `</summary>` ```"


def _raw_html(md: str) -> list[str]:
    """The raw HTML in ``md`` as GitHub's Markdown would pass it on."""
    found = []
    for token in MarkdownIt("commonmark").enable("table").parse(md):
        if token.type == "html_block":
            found += [line for line in token.content.splitlines() if line.strip()]
        found += [c.content for c in token.children or [] if c.type == "html_inline"]
    return found


def test_raw_html_from_the_users_text_is_text_in_the_markdown_report() -> None:
    """Subjects, evidence, notes, errors, diffs and closing comments carry text from commit messages."""
    run = every_verdict_run()
    for o in run.outcomes:
        o.subject += EVIL
        o.note = EVIL
        o.evidence.append(Evidence("content", EVIL, [SHA_639], 1.0))
    run.outcomes[2].remaining_diff = REMAINING + f"+{EVIL}\n"
    run.outcomes[3].conflict.hunks += f"\n{EVIL}"
    run.errors.append(EVIL)
    md = markdown(run)
    allowed = {
        "<br>",
        "<details>",
        "</details>",
        "<code>",
        "</code>",
    }  # <code>: a span holding "<", as md_text writes it
    html_found = _raw_html(md)
    assert all(h in allowed or h.startswith("<summary>") for h in html_found), html_found
    assert "<script>" not in parse(md)[1]
    assert html_found.count("<details>") == html_found.count("</details>") == 3


@pytest.mark.parametrize(
    "text",
    [
        EVIL,
        "a `code <b>` and `more` <i>",
        "``` unclosed fence\n<!-- inside -->",
        "- item\n  ```\n<script>x</script>",  # a fence in a list item ends with it
        "a \\`<b>\\` escaped backticks",
        "`` a ` b <b> ``",
        "line one `\n<b> `",
        "~~~\n<b>\n~~~\n<i>",
    ],
)
def test_md_text_leaves_no_raw_html_and_no_open_fence(text: str) -> None:
    safe = md_text(text)
    assert [h for h in _raw_html(safe + "\n\nafter") if h not in ("<code>", "</code>")] == []
    tokens = MarkdownIt("commonmark").parse(safe + "\n\nafter")
    assert tokens[-1].type == "paragraph_close"  # what follows is not swallowed by a fence


def test_md_text_keeps_text_without_html_as_it_is() -> None:
    plain = "Fix the `buf` lifetime (see #130).\n\n```python\nx = a < b\n```\n\n- one\n- two"
    assert md_text(plain) == plain
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"


def test_only_the_last_line_of_a_body_is_its_marker() -> None:
    spid = "I" + "1" * 40
    assert read_marker(f"text\n\n{pr_marker(spid)}\n") == spid
    assert read_marker(f"text\r\n{pr_marker(spid)}\r\n") == spid  # as GitHub may store it
    assert read_marker(f"{pr_marker(spid)}\n\nedited by a maintainer below it") is None
    assert read_marker("no marker") is None and read_marker("") is None
    comment = closing_comment(every_verdict_run(), every_verdict_run().outcomes[1])
    assert is_closing_comment(comment, "spid-2") and not is_closing_comment(comment, "spid-1")
    assert not is_closing_comment(f"quoting it:\n\n{closed_marker('spid-2', BASE)}\n\nno", "spid-2")


def test_json_round_trips_to_the_same_run() -> None:
    run = every_verdict_run()
    again = Run.from_json(json.loads(run_json(run)))
    assert again == run
    assert run_json(again) == run_json(run)


def test_a_run_an_older_ggstack_wrote_with_pr_bodies_loads_and_renders(tmp_path: Path) -> None:
    data = every_verdict_run().to_json()
    for p in data["patches"]:
        if p["pr"]:
            p["pr"]["body"] = "the body an older ggstack kept\n" + pr_marker(p["stack_patch_id"])
            del p["pr"]["diffstat"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    proc = run_ggstack("report", str(path), "--format", "markdown", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    old = Run.from_json(data)
    assert old.outcome("0001-unique-patch.patch").pr.diffstat == []  # type: ignore[union-attr]
    assert '"body":' not in run_json(old) and proc.stdout == markdown(old)


def test_table_shows_every_patch_in_merge_order() -> None:
    from rich.console import Console

    console = Console(width=250, record=True, color_system=None)
    console.print(report_table(every_verdict_run()))
    text = console.export_text()
    positions = [text.index(f"{i:04d} Patch {i}") for i in range(1, 8)]
    assert positions == sorted(positions)
    assert "waiting for approval" in text and "close PR" in text and "not judged" in text


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_report_command_renders_a_saved_run(tmp_path: Path, fmt: str) -> None:
    run = every_verdict_run()
    path = tmp_path / "run.json"
    path.write_text(run_json(run))
    proc = run_ggstack("report", str(path), "--format", fmt, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    if fmt == "json":
        assert Run.from_json(json.loads(proc.stdout)) == run
    elif fmt == "markdown":
        assert proc.stdout == markdown(run)
    else:
        assert "0003-partial-patch.patch: remaining diff" in proc.stdout and "represented" in proc.stdout


def test_report_of_a_file_that_is_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    path.write_text('{"hello": 1}')
    proc = run_ggstack("report", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "nope.json" in proc.stderr and "not a ggstack Run" in proc.stderr


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run ggstack with a pseudo-terminal as stdout, as a maintainer at a terminal does."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ggstack", *args],
        stdout=follower,
        stderr=follower,
        env={**base, "COLUMNS": "200", "TERM": "xterm-256color", **env},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_on_a_terminal_none_with_no_color_none_when_piped(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(run_json(every_verdict_run()))
    colour = "\x1b[3"  # an SGR foreground colour, e.g. ESC[31m
    assert colour in _on_a_terminal(["report", str(path)], {})
    assert colour not in _on_a_terminal(["report", str(path)], {"NO_COLOR": "1"})
    piped = run_ggstack("report", str(path), cwd=tmp_path)
    assert "\x1b[" not in piped.stdout and "0005 Patch 5" in piped.stdout


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (["base"], 42, "base: expected a string, got 42"),
        (["patches"], {}, "patches: expected a list of objects, got an object"),
        (["patches", 0, "subject"], ["x"], "patches[0].subject: expected a string, got a list"),
        (["patches", 2, "remaining_diff"], 5, "patches[2].remaining_diff: expected a string or null, got 5"),
        (["patches", 0, "verdict"], "maybe", "patches[0].verdict: expected one of 'unique'"),
        (["patches", 1, "evidence", 0], "x", "patches[1].evidence[0]: expected an object, got a string"),
        (["patches", 4, "tests", 0, "failed"], "t", "patches[4].tests[0].failed: expected a list of strings"),
        (["patches", 0, "pr", "number"], "5", 'patches[0].pr.number: expected an integer or null, got "5"'),
        (["patches", 0, "represented_fraction"], True, "patches[0].represented_fraction: expected a number"),
        (["stages"], {"pr": 1}, "stages.pr: expected a string, got 1"),
    ],
)
def test_a_run_with_a_wrong_type_is_a_usage_error_naming_where(tmp_path: Path, path: list, value, words: str) -> None:
    data = every_verdict_run().to_json()
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    (tmp_path / "run.json").write_text(json.dumps(data))
    for args in (["report", "run.json"], ["report", "run.json", "--format", "markdown"]):
        proc = run_ggstack(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "run.json" in proc.stderr and words in proc.stderr and "Traceback" not in proc.stderr


def test_a_run_without_its_required_keys_names_them_and_tolerates_unknown_ones(tmp_path: Path) -> None:
    data = every_verdict_run().to_json()
    del data["base_ref"]
    with pytest.raises(KeyError, match="base_ref"):
        Run.from_json(data)
    data = every_verdict_run().to_json()
    data["written_by"] = "a newer ggstack"
    data["patches"][0]["new_field"] = 1
    assert Run.from_json(data) == every_verdict_run()


def test_json_text_is_json_dumps_indented_for_every_plain_value() -> None:
    """``model.json_text`` writes a Run's JSON itself (the library's indented encoder is its slow
    pure-Python one): the text is ``json.dumps(indent=2, ensure_ascii=False)``'s, with a lone
    surrogate written as its escape; what it does not know is left to ``json.dumps``."""
    import enum

    class Word(str, enum.Enum):
        A = "a"

    values = [
        {},
        [],
        (),
        {"a": [], "b": {}, "c": [{}], "d": [[[]]]},
        {"x": 1.5, "nan": float("nan"), "neg": -0.0, "big": 10**20, "t": True, "f": False, "n": None},
        {"s": 'é "quoted"\\ \n\t\x01 \u2028', "w": Word.A, "pair": (1, "2")},
        {1: "an int key"},
        "text",
        7,
    ]
    for value in values:
        assert model.json_text(value) == json.dumps(value, indent=2, ensure_ascii=False), value
    assert model.json_text({"b": "\udcff"}) == '{\n  "b": "\\udcff"\n}'


def test_a_needed_patch_that_did_not_replay_says_why_it_gets_no_pr() -> None:
    run = Run(
        stack="s",
        base=BASE,
        base_ref="main",
        outcomes=[
            outcome(1, Verdict.PARTIAL, applied=Applied.CONFLICT, recommendation=Recommendation.REWORK),
            outcome(2, Verdict.UNIQUE, commit="c" * 40, recommendation=Recommendation.OPEN_PR),
        ],
        stages={"pr": "dry-run (offline: no forge was read)"},
    )
    shown = plain(pr_plan_table(run), width=200)
    (row,) = [line for line in shown.splitlines() if "0001 Patch 1" in line]
    assert "no PR: partial, but it does not replay onto the base (rework)" in row
    (row,) = [line for line in shown.splitlines() if "0002 Patch 2" in line]
    assert "no PR" not in row  # it has a commit: the plan's own words (here none yet) are its


def test_markdown_cells_show_code_spans_as_written_and_still_no_html() -> None:
    run = every_verdict_run()
    run.outcomes[0] = dataclasses.replace(
        run.outcomes[0], subject="Bump `dep` to `>=2.10.6` & `a|b`; not <b>bold</b>, `<i>` shown"
    )
    _, html = parse(markdown(run))
    assert "<code>&gt;=2.10.6</code>" in html and "&amp;gt;" not in html  # not "&gt;" shown in the code
    assert "<code>a|b</code>" in html  # the pipe stays in its cell
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>" not in html and "<i>" not in html
    assert "<code>&lt;i&gt;</code>" in html


def test_the_test_table_says_which_patches_only_left_out_rather_than_no_test_files() -> None:
    run = every_verdict_run()
    shown = plain(text.test_table(run, [run.outcomes[2].name]), width=250)
    (row,) = [line for line in shown.splitlines() if "0003 Patch 3" in line]
    assert "not tested (not chosen by --only)" in row
    assert "no test files" in shown  # the others without tests still say so


def test_markdown_leaves_out_a_represented_patchs_conflict_and_cuts_long_sections() -> None:
    """pydantic's uv.lock: 287 kB of conflict hunks of a patch the base already has, in a 675 kB step summary."""
    run = every_verdict_run()
    big = "\n".join(f"+line {i}" for i in range(summary.MD_DETAILS_LINES + 50))
    represented = run.outcomes[1]
    represented.conflict = Conflict(["uv.lock"], big, "CONFLICT (content)")
    run.outcomes[3].conflict = Conflict(["vllm/a.py"], big, "CONFLICT (content)")
    md = markdown(run)
    assert f"{represented.name}: conflict in uv.lock" not in md  # the change is in the base: nothing to read
    assert f"+line {summary.MD_DETAILS_LINES - 1}\n" in md and f"+line {summary.MD_DETAILS_LINES}\n" not in md
    assert "_50 more lines not shown (the Run's JSON has them all)._" in md
    _, html = parse(md)
    assert html.count("<details>") == html.count("</details>") == 3


def test_markdown_sections_past_the_budget_are_counted_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary, "MD_DETAILS_BUDGET", 10)
    md = markdown(every_verdict_run())
    assert "<details>" not in md and "_3 more collapsed section(s) left out" in md


def test_the_rules_the_evidence_words_name_are_rules_of_the_verdict_table() -> None:
    """The words add blame or a differing patch-id by the deciding rule's name: a renamed rule must not drop them."""
    from ggstack.check import rules

    assert set(rules.BY_LINES) | set(rules.BY_PICK) <= {name for name, *_ in rules.RULES}
