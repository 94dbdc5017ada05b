"""A patch's PR body and closing comment, from the Run alone: the forge stage, a saved Run and a
dry run say the same bytes, and a rerun with nothing changed edits nothing."""

from __future__ import annotations

from collections.abc import Mapping

from ggstack.forge.marker import closed_marker, pr_marker
from ggstack.forge.order import MergeOrder, order_section
from ggstack.model import Evidence, Outcome, PRState, Run, Verdict
from ggstack.report.escape import md_code, md_fence, md_line, md_text, subject_md
from ggstack.report.words import short

PR_GATE = "Do not merge until explicitly approved."

Diffstat = list[tuple[str, int | None, int | None]]  # (path, added, deleted); None: binary


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
    """``gate``: None where the stack has none; ``onto``: the PRs' branch (default: the Run's base)."""
    onto = onto or run.base_ref
    parts = [md_text(summary.strip()) if summary.strip() else subject_md(outcome)]
    parts += _origin_sections(outcome)
    parts.append("### Changes\n\n" + _changes(run, outcome, diffstat, onto))
    parts.append("### Merge order\n\n" + order_section(run, outcome, order, onto))
    if gate is not None:
        parts.append("### Approval\n\n" + _approval(outcome.pr, gate))
    parts.append(
        f"<sub>Opened by ggstack from {md_code(f'{run.stack}/{outcome.name}')}.</sub>\n{pr_marker(outcome.stack_patch_id)}"
    )
    return "\n\n".join(parts) + "\n"


def _origin_sections(outcome: Outcome) -> list[str]:
    prov = outcome.provenance
    origin = _origin_lines(outcome)
    sections = ["### Origin\n\n" + "\n".join(origin)] if origin else []
    if prov and prov.dropped:
        dropped = "\n".join(f"- {md_line(d)}" for d in prov.dropped)
        sections.append("### Dropped\n\nLeft out of the original on purpose:\n\n" + dropped)
    return sections


def _origin_lines(outcome: Outcome) -> list[str]:
    prov = outcome.provenance
    origin = [f"- Original PR: {_pr_ref_md(prov.original_pr)}"] if prov and prov.original_pr else []
    if prov and prov.cherry_picked_from:
        origin.append(f"- Cherry-picked from: {md_line(prov.cherry_picked_from)}")
    elif outcome.source_commit:
        origin.append(f"- Source commit (the fork's own): {md_line(outcome.source_commit)}")
    return origin


def _pr_ref_md(ref: str) -> str:
    """A bare ``#N`` would link to PR N of whichever repository shows it: code, said to be a number."""
    if ref.startswith("#"):
        return f"PR number {md_code(ref)} (its repository is not recorded)"
    return md_line(ref)


def _changes(run: Run, outcome: Outcome, diffstat: Diffstat, onto: str) -> str:
    changes = f"Replayed onto {md_code(onto)} at {short(run.base)}.\n\n{md_fence(diffstat_text(diffstat))}"
    if outcome.verdict is not Verdict.PARTIAL:
        return changes
    via = f" via {', '.join(short(c) for c in outcome.represented_by)}" if outcome.represented_by else ""
    return (
        f"Part of this patch ({outcome.represented_fraction:.0%} of its lines) is already in {md_code(onto)}{via}; "
        f"this PR carries only the remaining diff.\n\n" + changes
    )


def _approval(pr: PRState | None, gate: str) -> str:
    if pr and pr.approved:
        who = ", ".join(f"@{u}" for u in pr.approved_by) or "a maintainer"
        return f"Approved by {who}; ggstack has lifted the gate ({gate})."
    return f"{PR_GATE}\n\nGate: {gate}; ggstack lifts it when a maintainer approves this PR."


def diffstat_text(diffstat: Diffstat) -> str:
    """``git diff --stat``'s lines, from the counts the Run recorded: a saved Run renders without git."""
    if not diffstat:
        return "(no changes)"
    width = max(len(path) for path, _, _ in diffstat)
    lines = [f" {path.ljust(width)} | {_counts(added, deleted)}" for path, added, deleted in diffstat]
    return "\n".join([*lines, _total_line(diffstat)])


def _total_line(diffstat: Diffstat) -> str:
    adds = sum(a or 0 for _, a, _ in diffstat)
    dels = sum(d or 0 for _, _, d in diffstat)
    return f" {_many(len(diffstat), 'file')} changed, {_many(adds, 'insertion')}(+), {_many(dels, 'deletion')}(-)"


def _counts(added: int | None, deleted: int | None) -> str:
    return "binary" if added is None or deleted is None else f"+{added} -{deleted}"


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' if n != 1 else ''}"


def closing_comment(run: Run, outcome: Outcome) -> str:
    commits = ", ".join(short(c) for c in outcome.represented_by)
    via = f" via {commits}" if commits else ""
    lines = [
        f"Closing as already represented in the current {md_code(run.base_ref)} base (checked at {short(run.base)}). "
        f"The change of this PR is present there{via}, so this branch has no unique change left to merge.",
    ]
    supporting = [e for e in outcome.evidence if _supports(e)]
    if supporting:
        lines += ["", "Evidence:", *(_evidence_item(e) for e in supporting)]
    lines += [
        "",
        f"Share of this patch's lines found in the base: {outcome.represented_fraction:.0%}.",
        "",
        f"<sub>Closed by ggstack ({md_code(f'{run.stack}/{outcome.name}')}).</sub>",
        closed_marker(outcome.stack_patch_id, run.base),
    ]
    return "\n".join(lines) + "\n"


def _supports(e: Evidence) -> bool:
    """Only what says "it is there": a patch-id that does not match is no reason to close."""
    return all(e.data.get(k) is not False for k in ("match", "empty", "applies")) and "disagreement" not in e.data


def _evidence_item(e: Evidence) -> str:
    extra = []
    named = ", ".join(short(c) for c in e.commits)
    if named and named not in e.detail:
        extra.append(named)
    if e.fraction is not None and f"{e.fraction:.0%}" not in e.detail:
        extra.append(f"{e.fraction:.0%} of lines")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"- {getattr(e.kind, 'value', e.kind)}: {md_line(e.detail + tail)}"  # "patch-id", not Signal.PATCH_ID


def writes_body(pr: PRState) -> bool:
    return any(a.startswith("open") or (a.startswith("update") and "body" in a) for a in pr.actions)


def pr_documents(run: Run, bodies: Mapping[str, str]) -> str:
    """For ``pr --dry-run``; a saved Run keeps no bodies (``pr.text.bodies`` renders them)."""
    out = []
    for o in run.outcomes:
        if o.pr and o.name in bodies and writes_body(o.pr):
            out.append(f"===== {o.name}: PR body =====\n{bodies[o.name]}")
        if o.pr and o.pr.comment is not None:
            out.append(f"===== {o.name}: closing comment =====\n{o.pr.comment}")
    return "\n".join(out)
