"""The report as GitHub-flavoured Markdown, for a PR comment or the bot's step summary: a row a
patch, then what is long (a remaining diff, a conflict, a closing comment) collapsed."""

from __future__ import annotations

import html

from ggstack import exits
from ggstack.model import Outcome, Run, Verdict
from ggstack.report.bodies import closing_comment
from ggstack.report.escape import md_cell, md_code, md_fence, unlinked_pr
from ggstack.report.evidence import evidence_words
from ggstack.report.words import NOT_JUDGED, header_line, pr_words, provenance_words, recommendation_words, stage_words

# GitHub takes 65,536 characters in a comment and 1 MiB in a step summary; one lock file's
# conflict hunks were 287 kB (pydantic's uv.lock). Each section is cut to MD_DETAILS_LINES
# lines, and sections that would pass MD_DETAILS_BUDGET in all are left out and counted.
MD_DETAILS_LINES = 400
MD_DETAILS_BUDGET = 600_000


def markdown(run: Run) -> str:
    lines = [f"## ggstack: {md_code(run.stack or 'commits')} onto {md_code(run.base_ref)}", ""]
    lines += [f"**{md_cell(header_line(run))}**", ""]
    if run.stages:
        lines += [f"Stages: {md_cell(stage_words(run))}", ""]
    reasons = exits.attention(run)
    lines += [f"Needs attention: {md_cell('; '.join(reasons))}" if reasons else "Nothing needs a human.", ""]
    lines += ["| # | patch | verdict | recommendation | evidence | provenance | PR |", "|---|---|---|---|---|---|---|"]
    lines += [_row(i, o) for i, o in enumerate(run.outcomes, 1)]
    lines.append("")
    lines += _collapsed(run)
    if run.errors:
        lines += ["### Errors", ""] + [f"- {md_cell(e)}" for e in run.errors] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _row(i: int, o: Outcome) -> str:
    pr = md_cell(pr_words(o))
    if o.pr and o.pr.url and o.pr.number:
        pr = pr.replace(f"#{o.pr.number}", f"[#{o.pr.number}]({o.pr.url})", 1)
    cells = [
        str(i),
        f"`{md_cell(o.name)}`<br>{unlinked_pr(o, md_cell(o.subject))}",
        f"**{o.verdict.value}**" if o.verdict else NOT_JUDGED,
        md_cell(recommendation_words(o)),
        md_cell(evidence_words(o).partition(": ")[2]),
        "<br>".join(md_cell(w) for w in provenance_words(o)),
        pr,
    ]
    return "| " + " | ".join(cells) + " |"


def _collapsed(run: Run) -> list[str]:
    lines, budget, left_out = [], MD_DETAILS_BUDGET, 0
    for o in run.outcomes:
        details = _remaining(o) + _conflict(o) + _closing(run, o)
        size = sum(len(line) + 1 for line in details)
        if size > budget:
            left_out += sum(line == "<details>" for line in details)
            continue
        budget -= size
        lines += details
    if left_out:
        lines += [f"_{left_out} more collapsed section(s) left out to keep the report under GitHub's size limits;_", ""]
        lines += ["_The Run's JSON has them (`ggstack report RUN.json --format json`)._", ""]
    return lines


def _remaining(o: Outcome) -> list[str]:
    if o.verdict is not Verdict.PARTIAL or not o.remaining_diff:
        return []
    still = f"{1 - o.represented_fraction:.0%} of its lines still needed"
    return _details(f"{o.name}: remaining diff ({still})", o.remaining_diff, "diff")


def _conflict(o: Outcome) -> list[str]:
    # A represented patch's conflict is the base having the change already: nothing to read there.
    if not (o.conflict and o.conflict.hunks) or o.verdict is Verdict.REPRESENTED:
        return []
    return _details(f"{o.name}: conflict in {', '.join(o.conflict.paths)}", o.conflict.hunks, "diff")


def _closing(run: Run, o: Outcome) -> list[str]:
    if o.verdict is not Verdict.REPRESENTED or o.pr is None or o.pr.number is None:
        return []
    comment = o.pr.comment or closing_comment(run, o)
    posted = " (posted)" if o.pr.state == "closed" else " (draft)"
    return _details(f"{o.name}: closing comment for #{o.pr.number}{posted}", comment, "markdown")


def _details(summary: str, body: str, lang: str) -> list[str]:
    shown = body.split("\n")
    cut = ""
    if len(shown) > MD_DETAILS_LINES:
        cut = f"_{len(shown) - MD_DETAILS_LINES} more lines not shown (the Run's JSON has them all)._"
        body = "\n".join(shown[:MD_DETAILS_LINES])
    return [
        "<details>",
        f"<summary>{html.escape(summary, quote=False)}</summary>",
        "",
        md_fence(body, lang),
        *(["", cut] if cut else []),
        "",
        "</details>",
        "",
    ]
