"""The terminal's tables of a Run, by patch number and subject, wrapped to the console's width, never cropped; cells
are ``Text``, never markup (names, reasons and output may hold "[...]")."""

from __future__ import annotations

from collections.abc import Collection

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ggstack.model import Applied, Outcome, PRState, Run, Verdict
from ggstack.report.evidence import evidence_words, short_evidence, verdict_words
from ggstack.report.words import (
    NOT_JUDGED,
    commit_words,
    header_line,
    patch_label,
    pr_words,
    provenance_words,
    recommendation_words,
    short,
)

# The one colour map: what a verdict (or a replay's outcome) asks of the maintainer. Green: nothing
# to do but open or keep its PR; cyan: the base has it; yellow: look at it; red: it needs work.
VERDICT_STYLES: dict[Verdict | None, str] = {
    Verdict.UNIQUE: "green",
    Verdict.REPRESENTED: "cyan",
    Verdict.PARTIAL: "yellow",
    Verdict.CONFLICT: "bold red",
    Verdict.BROKEN: "bold red",
    Verdict.INCONCLUSIVE: "yellow",
}
APPLIED_STYLES: dict[Applied, str] = {
    Applied.APPLIED: VERDICT_STYLES[Verdict.UNIQUE],
    Applied.EMPTY: VERDICT_STYLES[Verdict.REPRESENTED],
    Applied.CONFLICT: VERDICT_STYLES[Verdict.CONFLICT],
}


def _label(o: Outcome) -> Text:
    return Text(patch_label(o.name, o.subject))


def _verdict(o: Outcome, text: str) -> Text:
    return Text(text, style=VERDICT_STYLES.get(o.verdict, ""))


def apply_table(run: Run) -> Table:
    table = Table(title=Text(f"{run.stack} onto {run.base_ref} ({short(run.base)})"), title_justify="left")
    table.add_column("patch", overflow="fold", max_width=40)
    table.add_column("outcome", overflow="fold")
    table.add_column("new commit", overflow="fold")
    table.add_column("conflicting paths / note", overflow="fold")
    for o in run.outcomes:
        applied = o.applied or Applied.SKIPPED
        detail = ", ".join(o.conflict.paths) if o.conflict else ""
        if o.note:
            detail = f"{detail} ({o.note})" if detail else o.note
        table.add_row(
            _label(o), Text(applied.value, style=APPLIED_STYLES.get(applied, "")), short(o.commit), Text(detail)
        )
    return table


def branches_line(run: Run) -> str | None:
    names = [o.branch.removeprefix("refs/heads/") for o in run.outcomes if o.branch]
    if not names:
        return None
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}"
    return f"{len(names)} branch{'es' if len(names) > 1 else ''}, one per applied patch: {shown}"


def check_table(run: Run) -> Table:
    title = f"{run.stack or 'commits'} on {run.base_ref} ({short(run.base)}), merge-base {short(run.merge_base)}"
    table = Table(title=Text(title), title_justify="left")
    table.add_column("patch", overflow="fold", max_width=48)
    table.add_column("verdict", overflow="fold", max_width=16)
    table.add_column("evidence", overflow="fold")
    table.add_column("recommendation", overflow="fold", max_width=16)
    for o in run.outcomes:
        verdict = o.verdict.value if o.verdict else ""
        if o.verdict is Verdict.PARTIAL:
            verdict += f" {round(100 * o.represented_fraction)}%"
        words = verdict_words(o)
        why = words.partition(" — ")[2] or words
        table.add_row(
            _label(o),
            _verdict(o, verdict),
            Text(_represented_by(o, run) + why),
            Text(o.recommendation.value if o.recommendation else ""),
        )
    return table


def _represented_by(o: Outcome, run: Run) -> str:
    by = [commit_words(c, run) for c in o.represented_by[:3]]
    more = len(o.represented_by) - len(by)
    return "by " + ", ".join(by) + (f" +{more}" if more > 0 else "") + "\n" if by else ""


# -- pull requests (the ``pr`` stage) ------------------------------------------------

_NO_PR = {
    Verdict.REPRESENTED: "no PR: represented",
    Verdict.CONFLICT: "no PR: needs rework (conflict)",
    Verdict.BROKEN: "no PR: needs rework (broken)",
    Verdict.INCONCLUSIVE: "no PR: held (inconclusive)",
}


def pr_plan_table(run: Run) -> Table:
    dry_run = run.stages.get("pr", "").startswith("dry-run")
    title = f"{run.stack}: pull requests onto {run.base_ref} ({short(run.base)})" + (
        " — plan only (dry run)" if dry_run else ""
    )
    table = Table(title=Text(title), title_justify="left")
    for col in ("patch", "verdict", "PR", "base", "gate", "actions", "to land"):
        table.add_column(col, overflow="fold", max_width=30 if col == "patch" else None)
    for o in run.outcomes:
        verdict = _verdict(o, o.verdict.value if o.verdict else "")
        table.add_row(_label(o), verdict, *(_pr_cells(o.pr) if o.pr else _no_pr_cells(o)))
    return table


def _no_pr_cells(o: Outcome) -> list[str]:
    why = (_NO_PR.get(o.verdict) or _no_pr_why(o)) if o.verdict else ""
    return ["", "", "", why, ""]


def _no_pr_why(o: Outcome) -> str:
    """Why a patch the plan has no PR for got none, where its verdict alone does not say."""
    if o.verdict in (Verdict.UNIQUE, Verdict.PARTIAL) and o.commit is None:
        # ``pr`` opens a PR from the replayed commit: a patch that did not replay has none.
        return f"no PR: {o.verdict.value}, but it does not replay onto the base (rework)"
    return ""


def _pr_number(pr: PRState) -> str:
    if not pr.number:
        return "new" if pr.state == "planned" else ""
    return f"#{pr.number}" + (f" ({pr.state})" if pr.state and pr.state != "open" else "")


def _pr_cells(pr: PRState) -> list[str]:
    gate = "approved" if pr.approved else ", ".join((["draft"] if pr.draft else []) + pr.labels)
    actions = "\n".join(pr.actions) or (pr.action or "nothing")
    if pr.note:
        actions += f"\n({pr.note})"
    return [_pr_number(pr), escape(pr.base or ""), escape(gate), escape(actions), escape(readiness_text(pr))]


def readiness_text(pr: PRState) -> str:
    if not pr.next_action:
        return ""
    lines = [pr.approval]
    lines += [f"{name}: {state}" for name, state in pr.checks]
    lines += [f"GitHub: {pr.mergeable}", f"next: {pr.next_action}"]
    return "\n".join(line for line in lines if line)


# -- the tests (the ``test`` stage) ------------------------------------------------------

_TEST_STATUS = {
    "passed": "pass",
    "failed": "FAIL",
    "error": "could not run",
    "timeout": "timeout",
    "skipped": "skip",
    "no-tests": "none",
    "not-run": "—",
}


def _test_cells(o: Outcome, kind: str) -> str:
    by_where = {t.where: t for t in o.tests if t.kind == kind}
    if not by_where:
        return ""
    cells = []
    for where in ("base", "patched", "old-base"):
        t = by_where.get(where)
        cells.append(_TEST_STATUS.get(t.status, t.status) + ("*" if t.cached else "") if t else "—")
    return " / ".join(cells)


def test_table(run: Run, left_out: Collection[str] = ()) -> Table:
    """``left_out``: the patches ``test --only`` did not choose: "not tested", never "no test files"."""
    gpu = f", GPU {run.gpu}" if run.gpu else ""
    table = Table(
        title=Text(f"{run.stack} tests on {run.base_ref} ({short(run.base)}{gpu})"),
        title_justify="left",
        caption="runs: base + tests / base + patch / old base + tests   * cached",
        caption_justify="left",
    )
    for col in ("patch", "verdict", "recommendation", "cpu", "gpu", "tests say"):
        table.add_column(col, overflow="fold", max_width=30 if col == "patch" else None)
    for o in run.outcomes:
        row = [Text(c) for c in _test_row(o, left_out)]
        row[1].stylize(VERDICT_STYLES.get(o.verdict, ""))
        table.add_row(*row)
    return table


def _test_row(o: Outcome, left_out: Collection[str]) -> list[str]:
    evidence = next((e for e in o.evidence if e.kind == "tests"), None)
    said = evidence.detail if evidence else _untested_words(o, left_out)
    verdict = o.verdict.value if o.verdict else ""
    return [
        patch_label(o.name, o.subject),
        verdict,
        recommendation_words(o),
        _test_cells(o, "cpu"),
        _test_cells(o, "gpu"),
        said,
    ]


def _untested_words(o: Outcome, left_out: Collection[str]) -> str:
    if o.name in left_out:
        return "not tested (not chosen by --only)"
    return "no test files" if o.applied is not Applied.SKIPPED else ""


def test_failures(run: Run) -> str:
    """Failing without the patch is the evidence, not a problem: that output is left to the Run."""
    parts = []
    for o in run.outcomes:
        for t in o.tests:
            if t.output_tail and (t.where == "patched" or t.status in ("error", "timeout")):
                parts.append(
                    f"--- {o.name}: {t.kind} on {t.where} ({t.status}: {t.reason or t.command})\n{t.output_tail}"
                )
    return "\n\n".join(parts)


# -- ``ggstack report --format table`` -----------------------------------------------------


def report_table(run: Run, *, verbose: bool = False) -> Table:
    """One short evidence line a patch; ``verbose``: all of it in words, and the provenance."""
    if verbose:
        return _verbose_table(run)
    table = Table(title=Text(header_line(run)), title_justify="left")
    table.add_column("patch", overflow="fold", max_width=40)
    table.add_column("verdict, recommendation", overflow="fold", max_width=20)
    table.add_column("evidence", overflow="fold")
    table.add_column("PR", overflow="fold", max_width=16)
    for o in run.outcomes:
        verdict = o.verdict.value if o.verdict else NOT_JUDGED
        rec = recommendation_words(o).split(" — ")[0]
        style = VERDICT_STYLES.get(o.verdict, "")
        table.add_row(
            _label(o), Text.assemble((verdict, style), "\n", rec), Text(short_evidence(o, run)), Text(_pr_short(o.pr))
        )
    return table


def _pr_short(pr: PRState | None) -> str:
    if pr is None:
        return ""
    if pr.number is None:
        return "new PR planned" if pr.state == "planned" else ""
    if pr.state != "open":
        return f"#{pr.number} {pr.state or 'open'}"
    text = f"#{pr.number} " + ("draft" if pr.draft else "open")
    return f"{text}\n{pr.next_action}" if pr.next_action else text


def _verbose_table(run: Run) -> Table:
    table = Table(title=Text(header_line(run)), title_justify="left")
    for col in ("#", "patch", "verdict", "recommendation", "evidence", "provenance", "PR"):
        table.add_column(col, overflow="fold")
    for i, o in enumerate(run.outcomes, 1):
        verdict = Text(o.verdict.value if o.verdict else NOT_JUDGED, style=VERDICT_STYLES.get(o.verdict, ""))
        cells = [evidence_words(o).partition(": ")[2], "\n".join(provenance_words(o)), _pr_and_url(o)]
        table.add_row(str(i), _label(o), verdict, Text(recommendation_words(o)), *(Text(c) for c in cells))
    return table


def _pr_and_url(o: Outcome) -> str:
    return pr_words(o) + (f"\n{o.pr.url}" if o.pr and o.pr.url else "")
