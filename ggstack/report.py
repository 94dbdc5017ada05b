"""Renderers of a Run: a rich table for the terminal, Markdown, JSON.

Every renderer reads only the Run, so what the terminal, the PR comment
and the bot's step summary say can never disagree.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ggstack import exits
from ggstack.model import Applied, Outcome, PRState, Recommendation, Run, Signal, TestResult, Verdict, json_text

if TYPE_CHECKING:
    from ggstack import drop, land, rebase


def short(sha: str | None) -> str:
    return sha[:10] if sha else ""


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

_NUMBERED = re.compile(r"^(\d{4})-")


def patch_label(name: str, subject: str) -> str:
    """A patch as a maintainer names it in a table: its number and subject ("0002 Fix the buffer"),
    never its file name, which folds mid-word; a commit (``check --commits``) by its id and subject."""
    m = _NUMBERED.match(name)
    return f"{m.group(1) if m else name} {subject}".strip()


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
            Text(patch_label(o.name, o.subject)),
            Text(applied.value, style=APPLIED_STYLES.get(applied, "")),
            short(o.commit),
            Text(detail),
        )
    return table


def branches_line(run: Run) -> str | None:
    """Where apply put the replayed patches: one branch a patch, named by ``branches.template``."""
    names = [o.branch.removeprefix("refs/heads/") for o in run.outcomes if o.branch]
    if not names:
        return None
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}"
    return f"{len(names)} branch{'es' if len(names) > 1 else ''}, one per applied patch: {shown}"


# -- check: the verdicts in words --------------------------------------------------


def _evidence(o: Outcome, kind: str) -> list:
    return [e for e in o.evidence if e.kind == kind]


def verdict_words(o: Outcome) -> str:
    """One line a maintainer can act on: the verdict, why, and what disagrees.

    The why is the rule of the verdict table that decided (``check`` records
    it last in the evidence); a Run from before the table is worded from its
    signals.
    """
    if o.verdict is None:
        return ""
    decided = next((e for e in o.evidence if e.kind == Signal.RULE), None)
    if decided is None:
        return _signal_words(o)
    why = decided.detail.partition(": ")[2] or decided.detail
    parts = [why]
    if o.verdict is Verdict.CONFLICT and o.conflict and "conflict" not in why:
        parts.insert(0, "conflicts in " + ", ".join(o.conflict.paths))
    rule = decided.data.get("rule")
    if o.verdict in (Verdict.REPRESENTED, Verdict.PARTIAL) and rule in ("content", "partial", "adapted pick"):
        parts += [e.detail for e in _evidence(o, "blame")]
    if o.verdict is Verdict.REPRESENTED and rule not in ("picked", "picked, then modified"):
        pid = _evidence(o, "patch-id")
        if pid and not pid[0].data.get("match"):
            parts.append("patch-id differs")
    parts += [e.detail for e in _evidence(o, "conflict") if e.data.get("spurious")]
    return f"{o.verdict.value} — " + "; ".join(dict.fromkeys(p for p in parts if p))


def _signal_words(o: Outcome) -> str:
    """The words of a Run whose evidence has no rule: from the signals themselves."""
    assert o.verdict is not None
    blame = _evidence(o, "blame")
    content = [e for e in _evidence(o, "content") if "disagreement" not in e.data]
    pid = _evidence(o, "patch-id")
    parts: list[str] = []
    if o.verdict is Verdict.REPRESENTED:
        parts.append(blame[0].detail if blame else content[0].detail if content else "the base has it")
    elif o.verdict is Verdict.PARTIAL:
        parts.append(content[0].detail if content else f"{round(100 * o.represented_fraction)}% present")
    elif o.verdict is Verdict.CONFLICT:
        paths = o.conflict.paths if o.conflict else []
        parts.append("conflicts in " + ", ".join(paths) if paths else "does not apply")
    elif o.verdict is Verdict.UNIQUE:
        parts.append("not in the base; applies")
    if pid:
        matches = pid[0].data.get("match")
        parts.append(
            "patch-id matches " + ", ".join(short(c) for c in pid[0].commits) if matches else "patch-id differs"
        )
    parts += [e.detail for e in _evidence(o, "identity") if e.data.get("match")]
    return f"{o.verdict.value} — " + "; ".join(parts)


def commit_words(sha: str, run: Run) -> str:
    """A base commit as a maintainer names it: 639aeff0c1 “subject” (the subject as the Run recorded it)."""
    subject = run.subjects.get(sha, "")
    if len(subject) > 50:
        subject = subject[:49] + "…"
    return f"{short(sha)} “{subject}”" if subject else short(sha)


def check_table(run: Run) -> Table:
    """One row a patch: its number and subject, the verdict, what to do, and why (wrapped to fit)."""
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
        by = [commit_words(c, run) for c in o.represented_by[:3]]
        more = len(o.represented_by) - len(by)
        evidence = ("by " + ", ".join(by) + (f" +{more}" if more > 0 else "") + "\n" if by else "") + (
            verdict_words(o).partition(" — ")[2] or verdict_words(o)
        )
        table.add_row(
            Text(patch_label(o.name, o.subject)),
            Text(verdict, style=VERDICT_STYLES.get(o.verdict, "")),  # Text, not markup: "[]broken[/]"
            Text(evidence),
            Text(o.recommendation.value if o.recommendation else ""),
        )
    return table


# -- pull requests (the ``pr`` stage) ------------------------------------------------
#
# The PR body and the closing comment are built here, from the Run, so that the
# forge stage, a saved Run's report and a dry run all say the same words.

PR_GATE = "Do not merge until explicitly approved."
MARKER_PREFIX = "<!-- ggstack:stack-patch-id="
CLOSED_PREFIX = "<!-- ggstack:closed stack-patch-id="

Diffstat = list[tuple[str, int | None, int | None]]  # (path, added, deleted); None: binary

_MARKER_LINE = re.compile(re.escape(MARKER_PREFIX) + r"(\S+) -->")
_CLOSED_LINE = re.compile(re.escape(CLOSED_PREFIX) + r"(\S+) base=\S* -->")


def pr_marker(stack_patch_id: str) -> str:
    """The hidden line by which a rerun finds the PR it opened: always the body's last line."""
    return f"{MARKER_PREFIX}{stack_patch_id} -->"


def closed_marker(stack_patch_id: str, base: str) -> str:
    """The hidden line by which a rerun sees that it already wrote the closing comment: its last line."""
    return f"{CLOSED_PREFIX}{stack_patch_id} base={base} -->"


def _last_line(text: str) -> str:
    lines = text.replace("\r\n", "\n").rstrip().rsplit("\n", 1)
    return lines[-1].strip()


def read_marker(body: str) -> str | None:
    """The Stack-Patch-Id of a PR body ggstack wrote, else None.

    Only the last line counts: ggstack writes its marker there, and the text
    above it (from commit messages) is escaped, so it cannot forge one.
    """
    found = _MARKER_LINE.fullmatch(_last_line(body))
    return found.group(1) if found else None


def is_closing_comment(body: str, stack_patch_id: str) -> bool:
    """Is this comment ggstack's closing comment for the patch (on whatever base)?"""
    found = _CLOSED_LINE.fullmatch(_last_line(body))
    return found is not None and found.group(1) == stack_patch_id


# -- Markdown from text ggstack did not write ----------------------------------------------------
#
# Commit messages, subjects and dropped-part notes are written by people and
# land in PR bodies, comments and reports that GitHub renders as Markdown with
# raw HTML allowed: a "</details>" closes ggstack's own section, an unclosed
# "<!--" hides the rest of the body (the approval gate included). So every "<"
# becomes "&lt;" (rendered as "<": the text reads the same), except inside a
# fenced block, where nothing is HTML; a fence the text leaves open is closed.
# An inline code span holding a "<" becomes <code> with its text as entities,
# which renders the same and is safe whether or not Markdown would have seen a
# span there. Only a fence at the start of a line is taken for one: indented,
# it may belong to a list item that ends before Markdown's fence does. Where a
# guess is needed, it errs on showing "&lt;" in code, never on letting HTML through.

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def md_text(text: str) -> str:
    """Markdown from someone else's text, with its raw HTML made text and its fences closed."""
    out, fence = [], ""
    for line in text.split("\n"):
        marks = _FENCE.match(line)
        if fence:
            if marks and marks.group(1)[0] == fence[0] and len(marks.group(1)) >= len(fence):
                fence = "" if not line[marks.end() :].strip() else fence
            out.append(line)
        elif marks and line[0] != " " and not (marks.group(1)[0] == "`" and "`" in line[marks.end() :]):
            fence = marks.group(1)
            out.append(line)
        else:
            out.append(_escape_line(line))
    if fence:
        out.append(fence)
    return "\n".join(out)


def _escape_line(line: str) -> str:
    if "\\`" in line:  # an escaped backtick changes where spans are: no spans, then
        return line.replace("<", "&lt;")
    parts, pos = [], 0
    for span in _SPAN.finditer(line):
        code = span.group(2)
        parts.append(line[pos : span.start()].replace("<", "&lt;"))
        parts.append(span.group(0) if "<" not in code else "<code>" + "".join(map(_entity, code)) + "</code>")
        pos = span.end()
    parts.append(line[pos:].replace("<", "&lt;"))
    return "".join(parts)


def _entity(c: str) -> str:
    """A character as an HTML entity when Markdown or HTML would read it as syntax."""
    return f"&#{ord(c)};" if c in "<>&\"'`*_[]()!#+-.|{}~\\" else c


def md_line(text: str) -> str:
    """One line of someone else's text (a subject, a list item): ``md_text`` without line breaks."""
    return md_text(" ".join(text.split("\n"))).split("\n")[0]


def _subject_md(o: Outcome) -> str:
    """The subject as Markdown (see ``_unlinked_pr``)."""
    return _unlinked_pr(o, md_line(o.subject))


def _unlinked_pr(o: Outcome, text: str) -> str:
    """``text`` (the subject, as Markdown) with its closing ``(#N)`` a code span when that
    PR's repository is not known: GitHub would link it to PR N of the repository showing it."""
    pr = o.provenance.original_pr if o.provenance else None
    if pr and pr.startswith("#") and text.endswith(f"({pr})"):
        return f"{text[: -len(pr) - 2]}({md_code(pr)})"
    return text


def _pr_ref_md(ref: str) -> str:
    """``owner/repo#N`` links to that PR on GitHub; a bare ``#N`` would link to the PR
    of that number in the repository showing the text, which may be another's, so
    it is shown as code (no link), said to be a number only."""
    if ref.startswith("#"):
        return f"PR number {md_code(ref)} (its repository is not recorded)"
    return md_line(ref)


def md_code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds (a ref name may hold them)."""
    text = " ".join(text.split("\n"))
    fence = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(body: str, lang: str = "") -> str:
    """``body`` as a fenced code block that no backtick run inside it can close."""
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    return f"{fence}{lang}\n{body.rstrip(chr(10))}\n{fence}"


def diffstat_text(diffstat: Diffstat) -> str:
    """``git diff --stat``-like lines with a summary line."""
    if not diffstat:
        return "(no changes)"
    width = max(len(path) for path, _, _ in diffstat)
    lines = []
    for path, added, deleted in diffstat:
        counts = "binary" if added is None or deleted is None else f"+{added} -{deleted}"
        lines.append(f" {path.ljust(width)} | {counts}")
    adds = sum(a or 0 for _, a, _ in diffstat)
    dels = sum(d or 0 for _, _, d in diffstat)
    n = len(diffstat)
    lines.append(
        f" {n} file{'s' if n != 1 else ''} changed, {adds} insertion{'s' if adds != 1 else ''}(+), {dels} deletion{'s' if dels != 1 else ''}(-)"
    )
    return "\n".join(lines)


def _pr_ref(o: Outcome) -> str:
    return f"#{o.pr.number}" if o.pr and o.pr.number else "(not opened yet)"


def pr_body(
    run: Run,
    outcome: Outcome,
    *,
    summary: str,
    diffstat: Diffstat,
    order: MergeOrder,
    gate: str | None,
    onto: str | None = None,
) -> str:
    """The body of the PR for ``outcome``.

    ``summary`` is the patch message without subject and trailers,
    ``diffstat`` what the PR's commit changes, ``order`` the patches that get
    PRs, in merge order (``merge_order``: their ``pr`` carries the numbers known so far),
    ``gate`` the approval gate in words ("draft, label `do-not-merge`") or
    None when the stack has none, ``onto`` the branch the PRs go onto (default:
    the Run's base as given; "origin/dev" and "dev" are one branch). Deterministic: the same inputs give the same
    bytes, so a rerun with nothing changed edits nothing.
    """
    parts = [md_text(summary.strip()) if summary.strip() else _subject_md(outcome)]
    onto = onto or run.base_ref
    prov = outcome.provenance
    origin = []
    if prov and prov.original_pr:
        origin.append(f"- Original PR: {_pr_ref_md(prov.original_pr)}")
    if prov and prov.cherry_picked_from:
        origin.append(f"- Cherry-picked from: {md_line(prov.cherry_picked_from)}")
    elif outcome.source_commit:
        origin.append(f"- Source commit (the fork's own): {md_line(outcome.source_commit)}")
    if origin:
        parts.append("### Origin\n\n" + "\n".join(origin))
    if prov and prov.dropped:
        parts.append(
            "### Dropped\n\nLeft out of the original on purpose:\n\n"
            + "\n".join(f"- {md_line(d)}" for d in prov.dropped)
        )
    changes = f"Replayed onto {md_code(onto)} at {short(run.base)}.\n\n{md_fence(diffstat_text(diffstat))}"
    if outcome.verdict is Verdict.PARTIAL:
        via = f" via {', '.join(short(c) for c in outcome.represented_by)}" if outcome.represented_by else ""
        changes = (
            f"Part of this patch ({outcome.represented_fraction:.0%} of its lines) is already in {md_code(onto)}{via}; "
            f"this PR carries only the remaining diff.\n\n" + changes
        )
    parts.append("### Changes\n\n" + changes)
    parts.append("### Merge order\n\n" + _merge_order(run, outcome, order, onto))
    if gate is not None:
        if outcome.pr and outcome.pr.approved:
            who = ", ".join(f"@{u}" for u in outcome.pr.approved_by) or "a maintainer"
            parts.append(f"### Approval\n\nApproved by {who}; ggstack has lifted the gate ({gate}).")
        else:
            parts.append(
                f"### Approval\n\n{PR_GATE}\n\nGate: {gate}; ggstack lifts it when a maintainer approves this PR."
            )
    parts.append(
        f"<sub>Opened by ggstack from {md_code(f'{run.stack}/{outcome.name}')}.</sub>\n{pr_marker(outcome.stack_patch_id)}"
    )
    return "\n\n".join(parts) + "\n"


@dataclass(frozen=True)
class MergeOrder:
    """The patches that get PRs, in merge order, with their list rendered once.

    Every body lists every PR, so a stack of n PRs renders n lists of n lines:
    built once per plan (not once per body), the rest is joining strings.
    """

    outcomes: tuple[Outcome, ...]
    lines: tuple[str, ...]  # "i. #N subject", one a PR
    position: Mapping[str, int]  # patch name -> its place, from 1


def merge_order(order: Sequence[Outcome]) -> MergeOrder:
    """``order`` as the bodies list it; build it again when a PR number becomes known."""
    return MergeOrder(
        tuple(order),
        tuple(f"{i}. {_pr_ref(o)} {_subject_md(o)}" for i, o in enumerate(order, 1)),
        {o.name: i for i, o in enumerate(order, 1)},
    )


def _merge_order(run: Run, outcome: Outcome, order: MergeOrder, onto: str) -> str:
    n, total = order.position[outcome.name], len(order.outcomes)
    lines = [
        f"This is PR {n} of {total} in the {md_code(run.stack or '')} stack onto {md_code(onto)}. Merge in this order:",
        "",
    ]
    listed = list(order.lines)
    # Its own number is not known before it is opened: naming it would cost an edit.
    listed[n - 1] = f"{n}. **this PR**: {_subject_md(outcome)}"
    lines += listed
    neighbours = []
    if n > 1:
        neighbours.append(f"Previous: {_pr_ref(order.outcomes[n - 2])}")
    if n < total:
        neighbours.append(f"Next: {_pr_ref(order.outcomes[n])}")
    if neighbours:
        lines += ["", " · ".join(neighbours)]
    return "\n".join(lines)


def closing_comment(run: Run, outcome: Outcome) -> str:
    """The comment a maintainer would write when closing a PR the base already has.

    Names the base it was checked against, the representing commits and every
    piece of evidence, with the share of the patch's lines found in the base.
    """
    commits = ", ".join(short(c) for c in outcome.represented_by)
    via = f" via {commits}" if commits else ""
    lines = [
        f"Closing as already represented in the current {md_code(run.base_ref)} base (checked at {short(run.base)}). "
        f"The change of this PR is present there{via}, so this branch has no unique change left to merge.",
    ]
    # Only the signals that say "it is there": a non-matching patch-id is no reason to close.
    supporting = [
        e
        for e in outcome.evidence
        if all(e.data.get(k) is not False for k in ("match", "empty", "applies")) and "disagreement" not in e.data
    ]
    if supporting:
        lines += ["", "Evidence:"]
        for e in supporting:
            extra = []
            named = ", ".join(short(c) for c in e.commits)
            if named and named not in e.detail:
                extra.append(named)
            if e.fraction is not None and f"{e.fraction:.0%}" not in e.detail:
                extra.append(f"{e.fraction:.0%} of lines")
            tail = f" ({'; '.join(extra)})" if extra else ""
            lines.append(
                f"- {getattr(e.kind, 'value', e.kind)}: {md_line(e.detail + tail)}"
            )  # "patch-id", not Signal.PATCH_ID
    lines += [
        "",
        f"Share of this patch's lines found in the base: {outcome.represented_fraction:.0%}.",
        "",
        f"<sub>Closed by ggstack ({md_code(f'{run.stack}/{outcome.name}')}).</sub>",
        closed_marker(outcome.stack_patch_id, run.base),
    ]
    return "\n".join(lines) + "\n"


def pr_plan_table(run: Run) -> Table:
    """One row a patch: its verdict, its PR and what ``pr`` did or would do."""
    stage = run.stages.get("pr", "")
    title = f"{run.stack}: pull requests onto {run.base_ref} ({short(run.base)})" + (
        " — plan only (dry run)" if stage.startswith("dry-run") else ""
    )
    table = Table(title=Text(title), title_justify="left")
    for col in ("patch", "verdict", "PR", "base", "gate", "actions", "to land"):
        table.add_column(col, overflow="fold", max_width=30 if col == "patch" else None)
    for o in run.outcomes:
        pr = o.pr
        verdict = o.verdict.value if o.verdict else ""
        if pr is None:
            why = {
                Verdict.REPRESENTED: "no PR: represented",
                Verdict.CONFLICT: "no PR: needs rework (conflict)",
                Verdict.BROKEN: "no PR: needs rework (broken)",
                Verdict.INCONCLUSIVE: "no PR: held (inconclusive)",
            }
            table.add_row(
                Text(patch_label(o.name, o.subject)),
                Text(verdict, style=VERDICT_STYLES.get(o.verdict, "")),
                "",
                "",
                "",
                why.get(o.verdict) or _no_pr_why(o) if o.verdict else "",
                "",
            )
            continue
        number = f"#{pr.number}" if pr.number else ("new" if pr.state == "planned" else "")
        if pr.number and pr.state and pr.state != "open":
            number += f" ({pr.state})"
        gate = "approved" if pr.approved else ", ".join((["draft"] if pr.draft else []) + pr.labels)
        actions = "\n".join(pr.actions) or (pr.action or "nothing")
        if pr.note:
            actions += f"\n({pr.note})"
        table.add_row(
            Text(patch_label(o.name, o.subject)),
            Text(verdict, style=VERDICT_STYLES.get(o.verdict, "")),
            number,
            escape(pr.base or ""),
            escape(gate),
            escape(actions),
            escape(readiness_text(pr)),
        )
    return table


def readiness_text(pr: PRState) -> str:
    """An open PR's merge readiness, a line each: approval, required checks, GitHub's mergeability, next action."""
    if not pr.next_action:
        return ""
    lines = [pr.approval]
    lines += [f"{name}: {state}" for name, state in pr.checks]
    lines += [f"GitHub: {pr.mergeable}", f"next: {pr.next_action}"]
    return "\n".join(line for line in lines if line)


def readiness_words(pr: PRState) -> str:
    """The same in one line: "checks: gpu-tests failure; GitHub: clean; next: check `gpu-tests` failing"."""
    if not pr.next_action:
        return ""
    checks = ", ".join(f"{name} {state}" for name, state in pr.checks)
    return "; ".join(
        part
        for part in (f"checks: {checks}" if checks else "", f"GitHub: {pr.mergeable}", f"next: {pr.next_action}")
        if part
    )


def _no_pr_why(o: Outcome) -> str:
    """Why a patch the plan has no PR for got none, where its verdict alone does not say."""
    if o.verdict in (Verdict.UNIQUE, Verdict.PARTIAL) and o.commit is None:
        # ``pr`` opens a PR from the replayed commit: a patch that did not replay has none.
        return f"no PR: {o.verdict.value}, but it does not replay onto the base (rework)"
    return ""


def writes_body(pr: PRState) -> bool:
    """Whether the plan opens this PR or edits its body."""
    return any(a.startswith("open") or (a.startswith("update") and "body" in a) for a in pr.actions)


def pr_documents(run: Run, bodies: Mapping[str, str]) -> str:
    """Each PR body (``pr.bodies``: a saved Run keeps none) and closing comment of the plan, for ``pr --dry-run``."""
    out = []
    for o in run.outcomes:
        if o.pr and o.name in bodies and writes_body(o.pr):
            out.append(f"===== {o.name}: PR body =====\n{bodies[o.name]}")
        if o.pr and o.pr.comment is not None:
            out.append(f"===== {o.name}: closing comment =====\n{o.pr.comment}")
    return "\n".join(out)


# -- tests (the ``test`` stage) ------------------------------------------------------

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
    """One row a patch: the verdict, each kind's base / base + patch / old base, and what the tests said.

    ``left_out``: the patches ``test --only`` did not select (not "no test files": they were not looked at)."""
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
        evidence = next((e for e in o.evidence if e.kind == "tests"), None)
        said = evidence.detail if evidence else _untested_words(o, left_out)
        # Text, not markup: names, reasons and output may hold "[...]".
        cells = [patch_label(o.name, o.subject), o.verdict.value if o.verdict else "", recommendation_words(o)]
        row = [Text(c) for c in [*cells, _test_cells(o, "cpu"), _test_cells(o, "gpu"), said]]
        row[1].stylize(VERDICT_STYLES.get(o.verdict, ""))
        table.add_row(*row)
    return table


def _untested_words(o: Outcome, left_out: Collection[str]) -> str:
    if o.name in left_out:
        return "not tested (not chosen by --only)"
    return "no test files" if o.applied is not Applied.SKIPPED else ""


def test_failures(run: Run) -> str:
    """The kept output (the tail) of the runs whose failure is a problem: with
    the patch, or a timeout or error anywhere. Failing without the patch is
    the evidence, and the Run keeps that output too."""
    parts = []
    for o in run.outcomes:
        for t in o.tests:
            if t.output_tail and (t.where == "patched" or t.status in ("error", "timeout")):
                parts.append(
                    f"--- {o.name}: {t.kind} on {t.where} ({t.status}: {t.reason or t.command})\n{t.output_tail}"
                )
    return "\n\n".join(parts)


# -- the report (``ggstack report``, the bot's step summary) --------------------------
#
# One set of "in words" functions feeds the terminal table, the Markdown and
# the exit code, so that what the maintainer reads and what the bot branches
# on are the same facts.

VERDICT_ORDER = (
    Verdict.UNIQUE,
    Verdict.PARTIAL,
    Verdict.REPRESENTED,
    Verdict.CONFLICT,
    Verdict.BROKEN,
    Verdict.INCONCLUSIVE,
)
NOT_JUDGED = "not judged"


def verdict_counts(run: Run) -> dict[str, int]:
    """Patches per verdict, in a fixed order, zero counts left out."""
    counts = {v.value: 0 for v in VERDICT_ORDER}
    counts[NOT_JUDGED] = 0
    for o in run.outcomes:
        counts[o.verdict.value if o.verdict else NOT_JUDGED] += 1
    return {k: n for k, n in counts.items() if n}


def header_line(run: Run) -> str:
    """ "gg-clean: 3 patches onto origin/dev at 1a2b3c4d5e — 1 unique, 1 represented, 1 conflict"."""
    n = len(run.outcomes)
    counts = ", ".join(f"{k} {v}" if k == NOT_JUDGED else f"{v} {k}" for k, v in verdict_counts(run).items())
    return f"{run.stack or 'commits'}: {n} patch{'es' if n != 1 else ''} onto {run.base_ref} at {short(run.base)}" + (
        f" — {counts}" if counts else ""
    )


def evidence_words(o: Outcome) -> str:
    """The verdict and why, as a sentence a maintainer can act on:
    "represented: 100% of added lines come from 639aeff; its tests pass on
    the base without the patch; patch-id differs".

    The text evidence comes as ``check`` words it (``verdict_words``), the
    judgement of the patch's own tests after its first, strongest reason.
    """
    verdict = o.verdict.value if o.verdict else (o.applied.value if o.applied else NOT_JUDGED)
    text = verdict_words(o).partition(" — ")[2].replace(" (content)", "") if o.verdict else ""
    first, _, rest = text.partition("; ")
    tests = _tests_words(o, verdict)
    if o.verdict in (Verdict.BROKEN, Verdict.INCONCLUSIVE):
        parts = [*tests, first, rest]  # the tests decided: they come first
    else:
        parts = [first, *tests, rest]
    parts = [p for p in parts if p] or _apply_words(o)
    if o.note:
        parts.append(o.note)
    parts = list(dict.fromkeys(p for p in parts if p))
    return f"{verdict}: {'; '.join(parts)}" if parts else verdict


def _tests_words(o: Outcome, verdict: str) -> list[str]:
    """What the patch's tests said: their judgement, else each telling run."""
    tests = [e.detail.removeprefix(f"{verdict}: ") for e in o.evidence if e.kind == "tests" and e.detail]
    return tests or [test_words(t) for t in o.tests if t.status != "passed" or t.where == "patched"]


def _apply_words(o: Outcome) -> list[str]:
    """Where nothing was judged: what replaying it did."""
    if o.conflict:
        return ["conflicts in " + ", ".join(o.conflict.paths)]
    if o.applied is Applied.EMPTY:
        return ["replaying it onto the base changes nothing"]
    return []


def test_words(t: TestResult) -> str:
    """One test run in words: "gpu tests on base+patch: skipped (no GPU on this machine)"."""
    where = {"patched": "base+patch", "base": "base without the patch", "old-base": "the old base"}.get(
        t.where, t.where
    )
    extra = []
    if t.failed:
        extra.append(f"{len(t.failed)} failed: {', '.join(t.failed[:3])}{' …' if len(t.failed) > 3 else ''}")
    if t.passed and t.status != "passed":
        extra.append(f"{len(t.passed)} passed")
    if t.reason:
        extra.append(t.reason)
    return f"{t.kind} tests on {where}: {t.status}" + (f" ({'; '.join(extra)})" if extra else "")


def provenance_words(o: Outcome) -> list[str]:
    """Where the patch came from and what of it was left out, one fact an item."""
    prov = o.provenance
    words = []
    if prov and prov.original_pr:
        known = not prov.original_pr.startswith("#")
        words.append(f"original PR {prov.original_pr}" + ("" if known else " (its repository is not recorded)"))
    if prov and prov.cherry_picked_from:
        words.append(f"cherry-picked from {short(prov.cherry_picked_from)}")
    elif o.source_commit:
        words.append(f"from {short(o.source_commit)}")
    if prov:
        words += [f"dropped: {d}" for d in prov.dropped]
    return words


def pr_words(o: Outcome) -> str:
    """The PR and its approval state: "#12 open, draft, waiting for approval"."""
    pr = o.pr
    if pr is None:
        return ""
    if pr.number is None:
        return "new PR planned" if pr.state == "planned" else (pr.action or "")
    words = [pr.state or "open"]
    if pr.state == "open":
        if pr.draft:
            words.append("draft")
        if pr.approved:
            words.append("approved" + (f" by {', '.join('@' + u for u in pr.approved_by)}" if pr.approved_by else ""))
        elif o.verdict in (Verdict.UNIQUE, Verdict.PARTIAL, None):
            words.append("waiting for approval")
    text = f"#{pr.number} " + ", ".join(words)
    if pr.state == "open" and pr.next_action:
        text += f"; {readiness_words(pr)}"
    return f"{text} ({pr.note})" if pr.note else text


def recommendation_words(o: Outcome) -> str:
    """What the maintainer should do now; where ``pr`` has run, its PR's state
    says it better than ``check``'s recommendation made before any PR existed."""
    pr = o.pr
    if (
        pr is not None
        and pr.number is not None
        and pr.state == "open"
        and o.verdict in (Verdict.UNIQUE, Verdict.PARTIAL)
    ):
        if pr.next_action:  # what ``land`` would decide, as the forge said when ``pr`` read it
            return "land (`ggstack land`)" if pr.next_action == "ready to land" else pr.next_action
        return "merge (approved)" if pr.approved else Recommendation.WAIT_APPROVAL.value
    if pr is not None and pr.number is not None and pr.state == "open" and o.verdict is Verdict.REPRESENTED:
        return Recommendation.CLOSE_PR.value
    words = o.recommendation.value if o.recommendation else "—"
    settle = settle_words(o)
    return f"{words} — to settle it: {settle}" if settle else words


def settle_words(o: Outcome) -> str:
    """When the patch's tests could not decide: what would let them (install pytest, run on a GPU)."""
    for e in o.evidence:
        if e.kind == "tests" and (
            e.data.get("judgement") in ("could-not-run", "inconclusive") or e.data.get("pending")
        ):
            return str(e.data.get("settle") or "")
    return ""


def report_table(run: Run, *, verbose: bool = False) -> Table:
    """``ggstack report --format table``: one row a patch, in merge order.

    The main table fits the terminal (or ``COLUMNS`` piped): the patch's
    number and subject, its verdict and recommendation, one short evidence
    line (wrapped), the PR. ``verbose`` adds the whole evidence in words and
    the provenance (as ``show``, Markdown and JSON have them)."""
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
            Text(patch_label(o.name, o.subject)),
            Text.assemble((verdict, style), "\n", rec),  # Text, not markup: names and evidence may hold "[...]"
            Text(short_evidence(o, run)),
            Text(_pr_short(o)),
        )
    return table


def _pr_short(o: Outcome) -> str:
    """The PR in a word or two: "#12 draft", "new PR planned", "#9 closed"."""
    pr = o.pr
    if pr is None:
        return ""
    if pr.number is None:
        return "new PR planned" if pr.state == "planned" else ""
    text = f"#{pr.number} " + ("draft" if pr.state == "open" and pr.draft else pr.state or "open")
    return f"{text}\n{pr.next_action}" if pr.state == "open" and pr.next_action else text


def _verbose_table(run: Run) -> Table:
    """The table with everything in words: the whole evidence and the provenance."""
    table = Table(title=Text(header_line(run)), title_justify="left")
    for col in ("#", "patch", "verdict", "recommendation", "evidence", "provenance", "PR"):
        table.add_column(col, overflow="fold")
    for i, o in enumerate(run.outcomes, 1):
        verdict = o.verdict.value if o.verdict else NOT_JUDGED
        pr = pr_words(o) + (f"\n{o.pr.url}" if o.pr and o.pr.url else "")
        cells = [
            patch_label(o.name, o.subject),
            verdict,
            recommendation_words(o),
            evidence_words(o).partition(": ")[2],
            "\n".join(provenance_words(o)),
            pr,
        ]
        table.add_row(
            str(i), *(Text(c, style=VERDICT_STYLES.get(o.verdict, "") if c is verdict else "") for c in cells)
        )
    return table


_TESTS_SHORT = {
    "broken": "tests fail with it",
    "needed": "tests fail without it",
    "represented": "tests pass on the base without it",
    "none": "",
}


def short_evidence(o: Outcome, run: Run) -> str:
    """One short line: "represented by 6eaa67e5b9 “subject” — 100% of added lines; tests pass on base without it"."""
    parts = [_text_short(o, run)]
    tests = next((e for e in o.evidence if e.kind == "tests"), None)
    if tests is not None:
        judgement = str(tests.data.get("judgement", ""))
        if judgement in ("could-not-run", "inconclusive"):
            cause = tests.detail.rsplit(": ", 1)[-1] if ": " in tests.detail else tests.detail
            parts.append(("tests could not run: " if judgement == "could-not-run" else "tests inconclusive: ") + cause)
        else:
            parts.append(_TESTS_SHORT.get(judgement, ""))
        pending = tests.data.get("pending") or []
        if pending:
            parts.append(f"{', '.join(pending)} tests pending")
    return "; ".join(p for p in parts if p)


def _text_short(o: Outcome, run: Run) -> str:
    if o.verdict in (Verdict.REPRESENTED, Verdict.PARTIAL) and o.represented_by:
        by = commit_words(o.represented_by[0], run) + (
            f" +{len(o.represented_by) - 1}" if len(o.represented_by) > 1 else ""
        )
        if o.verdict is Verdict.PARTIAL:  # the share its PR body says: of the patch's lines, not of blame's
            return f"{o.represented_fraction:.0%} of its lines, by {by}"
        blame = next((e.detail for e in o.evidence if e.kind == "blame"), "")
        m = re.match(r"(\d+% of added lines)", blame)
        share = m.group(1) if m else f"{o.represented_fraction:.0%} of its lines" if o.represented_fraction else ""
        return f"by {by}" + (f" — {share}" if share else "")
    if o.conflict:
        return "conflicts in " + ", ".join(o.conflict.paths[:2]) + (" …" if len(o.conflict.paths) > 2 else "")
    if o.verdict is Verdict.UNIQUE:
        return "not in the base"
    if o.recommendation is Recommendation.HUMAN_LOOK:
        return "the signals disagree (see --verbose)"
    return ""


def stage_words(run: Run) -> str:
    return " · ".join(f"{stage} {state}" for stage, state in run.stages.items())


def markdown(run: Run) -> str:
    """The report as GitHub-flavoured Markdown: the PR comment and the bot's step summary.

    A table (one row a patch, in merge order), then collapsible sections for
    what is long: the remaining diff of each partial patch and the draft
    closing comment of each redundant PR.
    """
    lines = [f"## ggstack: {md_code(run.stack or 'commits')} onto {md_code(run.base_ref)}", ""]
    lines += [f"**{_md(header_line(run))}**", ""]
    if run.stages:
        lines += [f"Stages: {_md(stage_words(run))}", ""]
    reasons = exits.attention(run)
    lines += [f"Needs attention: {_md('; '.join(reasons))}" if reasons else "Nothing needs a human.", ""]
    lines += ["| # | patch | verdict | recommendation | evidence | provenance | PR |", "|---|---|---|---|---|---|---|"]
    lines += [_markdown_row(i, o) for i, o in enumerate(run.outcomes, 1)]
    lines.append("")
    budget, left_out = MD_DETAILS_BUDGET, 0
    for o in run.outcomes:
        details = _markdown_details(run, o)
        size = sum(len(line) + 1 for line in details)
        if size > budget:
            left_out += sum(line == "<details>" for line in details)
            continue
        budget -= size
        lines += details
    if left_out:
        lines += [f"_{left_out} more collapsed section(s) left out to keep the report under GitHub's size limits;_", ""]
        lines += ["_The Run's JSON has them (`ggstack report RUN.json --format json`)._", ""]
    if run.errors:
        lines += ["### Errors", ""] + [f"- {_md(e)}" for e in run.errors] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _markdown_row(i: int, o: Outcome) -> str:
    pr = _md(pr_words(o))
    if o.pr and o.pr.url and o.pr.number:
        pr = pr.replace(f"#{o.pr.number}", f"[#{o.pr.number}]({o.pr.url})", 1)
    cells = [
        str(i),
        f"`{_md(o.name)}`<br>{_unlinked_pr(o, _md(o.subject))}",
        f"**{o.verdict.value}**" if o.verdict else NOT_JUDGED,
        _md(recommendation_words(o)),
        _md(evidence_words(o).partition(": ")[2]),
        "<br>".join(_md(w) for w in provenance_words(o)),
        pr,
    ]
    return "| " + " | ".join(cells) + " |"


def _markdown_details(run: Run, o: Outcome) -> list[str]:
    """The long parts of one patch, each collapsed: remaining diff, conflict hunks, closing comment."""
    lines = []
    if o.verdict is Verdict.PARTIAL and o.remaining_diff:
        lines += _details(
            f"{o.name}: remaining diff ({1 - o.represented_fraction:.0%} of its lines still needed)",
            o.remaining_diff,
            "diff",
        )
    if o.conflict and o.conflict.hunks and o.verdict is not Verdict.REPRESENTED:
        # A represented patch's conflict is the base having the change already: nothing to read there.
        lines += _details(f"{o.name}: conflict in {', '.join(o.conflict.paths)}", o.conflict.hunks, "diff")
    if o.verdict is Verdict.REPRESENTED and o.pr is not None and o.pr.number is not None:
        comment = o.pr.comment or closing_comment(run, o)
        posted = " (posted)" if o.pr.state == "closed" else " (draft)"
        lines += _details(f"{o.name}: closing comment for #{o.pr.number}{posted}", comment, "markdown")
    return lines


# GitHub takes 65,536 characters in a comment and 1 MiB in a step summary; one lock file's
# conflict hunks were 287 kB (pydantic's uv.lock). Each section is cut to MD_DETAILS_LINES
# lines, and sections that would pass MD_DETAILS_BUDGET in all are left out and counted.
MD_DETAILS_LINES = 400
MD_DETAILS_BUDGET = 600_000


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


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell: no HTML, no cell breaks, no line breaks.

    Each line as ``md_text`` makes it (its ``<`` made text, a code span holding
    one written as ``<code>`` with entities): entities are not read inside a
    code span, so escaping the whole text would show a subject's
    `` `>=2.10.6` `` as ``&gt;=2.10.6``. A ``|`` is escaped even in a span, as
    GitHub's tables ask."""
    lines = text.replace("\r", "").split("\n")
    return "<br>".join(_escape_line(line) for line in lines).replace("|", "\\|")


def run_json(run: Run) -> str:
    """``ggstack report --format json``: the Run itself, which round-trips."""
    return json_text(run.to_json()) + "\n"


# -- keeping the stack: drop ---------------------------------------------------------


def _represented_words(shas: Sequence[str], subjects: Sequence[str]) -> str:
    return "\n".join(
        f"{short(sha)} “{subject}”" if subject else short(sha)
        for sha, subject in zip(shas, [*subjects, *[""] * len(shas)])
    )


def drop_table(result: drop.DropResult) -> Table:
    """What ``ggstack drop`` took out (or would), with the representing commits and the closed PRs."""
    verb = "would drop" if result.dry_run else "dropped"
    title = f"{result.stack}: {verb} {len(result.dropped)} on {result.base_ref} ({short(result.base)})"
    table = Table(title=Text(title), title_justify="left")
    for col in ("patch", "represented by", "why", "PR", "branch"):
        table.add_column(col, overflow="fold")
    prs = {o.name: o.pr for o in (result.run.outcomes if result.run else []) if o.pr is not None}
    for e in result.dropped:
        pull = prs.get(e.name)
        pr = f"#{pull.number} {pull.action or ''}".strip() if pull and pull.number else ""
        branch = e.branch.removeprefix("refs/heads/")
        if e.branch in result.branches_deleted:
            branch += " (would be deleted)" if result.dry_run else " (deleted)"
        cells = [patch_label(e.name, e.subject), _represented_words(e.represented_by, e.represented_subjects), e.reason]
        table.add_row(*(Text(c) for c in [*cells, pr, branch]))
    if not result.dropped:
        table.add_row(Text("nothing is represented: nothing to drop"), "", "", "", "")
    return table


def dropped_table(records: Mapping[str, Sequence[drop.Dropped]]) -> Table:
    """``ggstack list --dropped``: each stack's record of what was dropped, and why."""
    table = Table(title="dropped patches", title_justify="left")
    for col in ("stack", "patch", "Stack-Patch-Id", "represented by", "on base", "when", "why"):
        table.add_column(col, overflow="fold")
    for stack, entries in records.items():
        for e in entries:
            cells = [
                stack,
                patch_label(e.name, e.subject),
                e.stack_patch_id[:12],
                _represented_words(e.represented_by, e.represented_subjects),
                f"{e.base_ref} ({short(e.base)})",
                e.dropped_at,
                e.reason,
            ]
            table.add_row(*(Text(c) for c in cells))
    if not any(records.values()):
        table.add_row(Text("nothing was dropped"), "", "", "", "", "", "")
    return table


def rebase_table(result: rebase.Result, *, dry_run: bool = False) -> Table:
    """What ``ggstack rebase`` did to each patch: its recorded parent before and after."""
    stop, n = result.stopped, result.before_stop
    will = "would rebase" if dry_run else "rebased"
    if stop is None:
        done = f"{will} onto {result.base_ref} ({short(result.base)})"
    elif result.partial and n:
        done = f"{will} {n} of {len(result.entries)} patches onto {result.base_ref} ({short(result.base)}); {stop.name} stops the rest"
    else:
        done = f"not rebased onto {result.base_ref} ({short(result.base)}): {stop.name} stops it"
    title = f"{result.stack}: {done}"
    table = Table(title=Text(title), title_justify="left")
    for col in ("patch", "status", "base-commit before", "after", "detail"):
        table.add_column(col, overflow="fold")
    for e in result.entries:
        status = e.status
        if status == "rewritten" and not result.written:  # a dry run, or stopped without --partial
            status = "would rewrite" if dry_run else "not written"
        cells = [patch_label(e.name, e.subject), status, short(e.old_base), short(e.new_base), e.detail]
        table.add_row(*(Text(c) for c in cells))
    return table


def landing_text(result: land.Landing) -> str:
    """What ``ggstack land`` did, or (dry run) would do: the plan in merge order, each write, where it stopped."""
    how = result.method + (", through the native stack" if result.native else "")
    head = f"{result.stack}: landing onto {result.base} at {short(result.base_sha)} ({how})"
    lines = [head + (" — plan only (dry run)" if result.dry_run else "")]
    if result.dry_run or not result.done:
        for e in result.plan:
            pr = f" #{e.number}" if e.number else ""
            lines.append(f"  {e.label}{pr}: {e.action}: {e.why}")
            lines += [f"      - {'would ' if result.dry_run else ''}{s.words}" for s in e.steps]
    lines += [f"  {line}" for line in result.done]
    if result.merged or result.closed:
        merged = ", ".join(f"#{n}" for n in result.merged) or "none"
        closed = f"; closed as already in {result.base}: " + ", ".join(f"#{n}" for n in result.closed)
        lines.append(f"merged: {merged}" + (closed if result.closed else ""))
    if result.queued:
        lines.append(result.queued)
    if result.stopped:
        lines.append(f"stopped at {result.stopped}")
    elif not result.queued and not result.dry_run:
        lines.append("nothing left to land")
    return "\n".join(lines)
