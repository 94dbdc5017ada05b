"""Renderers of a Run: a rich table for the terminal, Markdown, JSON.

Every renderer reads only the Run, so what the terminal, the PR comment
and the bot's step summary say can never disagree.
"""

from __future__ import annotations

from rich.table import Table

from ggstack.model import Applied, Outcome, Run, Verdict


def short(sha: str | None) -> str:
    return sha[:10] if sha else ""


def apply_table(run: Run) -> Table:
    table = Table(title=f"{run.stack} onto {run.base_ref} ({short(run.base)})", title_justify="left")
    for col in ("patch", "outcome", "new commit", "conflicting paths / note"):
        table.add_column(col, overflow="fold")
    styles = {Applied.APPLIED: "green", Applied.EMPTY: "yellow", Applied.CONFLICT: "bold red"}
    for o in run.outcomes:
        applied = o.applied or Applied.SKIPPED
        detail = ", ".join(o.conflict.paths) if o.conflict else ""
        if o.note:
            detail = f"{detail} ({o.note})" if detail else o.note
        table.add_row(o.name, f"[{styles.get(applied, '')}]{applied.value}[/]", short(o.commit), detail)
    return table


# -- pull requests (the ``pr`` stage) ------------------------------------------------
#
# The PR body and the closing comment are built here, from the Run, so that the
# forge stage, a saved Run's report and a dry run all say the same words.

PR_GATE = "Do not merge until explicitly approved."
MARKER_PREFIX = "<!-- ggstack:stack-patch-id="
CLOSED_PREFIX = "<!-- ggstack:closed stack-patch-id="

Diffstat = list[tuple[str, int | None, int | None]]  # (path, added, deleted); None: binary


def pr_marker(stack_patch_id: str) -> str:
    """The hidden line by which a rerun finds the PR it opened."""
    return f"{MARKER_PREFIX}{stack_patch_id} -->"


def closed_marker(stack_patch_id: str, base: str) -> str:
    """The hidden line by which a rerun sees that it already wrote the closing comment."""
    return f"{CLOSED_PREFIX}{stack_patch_id} base={base} -->"


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
    lines.append(f" {n} file{'s' if n != 1 else ''} changed, {adds} insertion{'s' if adds != 1 else ''}(+), {dels} deletion{'s' if dels != 1 else ''}(-)")
    return "\n".join(lines)


def _pr_ref(o: Outcome) -> str:
    return f"#{o.pr.number}" if o.pr and o.pr.number else "(not opened yet)"


def pr_body(
    run: Run,
    outcome: Outcome,
    *,
    summary: str,
    diffstat: Diffstat,
    order: list[Outcome],
    gate: str | None,
) -> str:
    """The body of the PR for ``outcome``.

    ``summary`` is the patch message without subject and trailers,
    ``diffstat`` what the PR's commit changes, ``order`` the patches that get
    PRs, in merge order (their ``pr`` carries the numbers known so far),
    ``gate`` the approval gate in words ("draft, label `do-not-merge`") or
    None when the stack has none. Deterministic: the same inputs give the same
    bytes, so a rerun with nothing changed edits nothing.
    """
    parts = [summary.strip() or outcome.subject]
    prov = outcome.provenance
    origin = []
    if prov and prov.original_pr:
        origin.append(f"- Original PR: {prov.original_pr}")
    if prov and prov.cherry_picked_from:
        origin.append(f"- Original commit, cherry-picked with provenance: {prov.cherry_picked_from}")
    elif outcome.source_commit:
        origin.append(f"- Source commit: {outcome.source_commit}")
    if origin:
        parts.append("### Original PR\n\n" + "\n".join(origin))
    if prov and prov.dropped:
        parts.append("### Dropped\n\nLeft out of the original on purpose:\n\n" + "\n".join(f"- {d}" for d in prov.dropped))
    changes = f"Replayed onto `{run.base_ref}` at {short(run.base)}.\n\n```\n{diffstat_text(diffstat)}\n```"
    if outcome.verdict is Verdict.PARTIAL:
        via = f" via {', '.join(short(c) for c in outcome.represented_by)}" if outcome.represented_by else ""
        changes = (
            f"Part of this patch ({outcome.represented_fraction:.0%} of its lines) is already in `{run.base_ref}`{via}; "
            f"this PR carries only the remaining diff.\n\n" + changes
        )
    parts.append("### Changes\n\n" + changes)
    parts.append("### Merge order\n\n" + _merge_order(run, outcome, order))
    if gate is not None:
        if outcome.pr and outcome.pr.approved:
            who = ", ".join(f"@{u}" for u in outcome.pr.approved_by) or "a maintainer"
            parts.append(f"### Approval\n\nApproved by {who}; ggstack has lifted the gate ({gate}).")
        else:
            parts.append(f"### Approval\n\n{PR_GATE}\n\nGate: {gate}; ggstack lifts it when a maintainer approves this PR.")
    parts.append(f"<sub>Opened by ggstack from `{run.stack}/{outcome.name}`.</sub>\n{pr_marker(outcome.stack_patch_id)}")
    return "\n\n".join(parts) + "\n"


def _merge_order(run: Run, outcome: Outcome, order: list[Outcome]) -> str:
    names = [o.name for o in order]
    n = names.index(outcome.name) + 1
    lines = [f"This is PR {n} of {len(order)} in the `{run.stack}` stack onto `{run.base_ref}`. Merge in this order:", ""]
    for i, o in enumerate(order, 1):
        # Its own number is not known before it is opened: naming it would cost an edit.
        lines.append(f"{i}. **this PR**: {o.subject}" if o.name == outcome.name else f"{i}. {_pr_ref(o)} {o.subject}")
    neighbours = []
    if n > 1:
        neighbours.append(f"Previous: {_pr_ref(order[n - 2])}")
    if n < len(order):
        neighbours.append(f"Next: {_pr_ref(order[n])}")
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
        f"Closing as already represented in the current `{run.base_ref}` base (checked at {short(run.base)}). "
        f"The change of this PR is present there{via}, so this branch has no unique change left to merge.",
    ]
    if outcome.evidence:
        lines += ["", "Evidence:"]
        for e in outcome.evidence:
            extra = []
            if e.commits:
                extra.append(", ".join(short(c) for c in e.commits))
            if e.fraction is not None:
                extra.append(f"{e.fraction:.0%} of lines")
            tail = f" ({'; '.join(extra)})" if extra else ""
            lines.append(f"- {e.kind}: {e.detail}{tail}")
    lines += [
        "",
        f"Share of this patch's lines found in the base: {outcome.represented_fraction:.0%}.",
        "",
        f"<sub>Closed by ggstack (`{run.stack}/{outcome.name}`).</sub>",
        closed_marker(outcome.stack_patch_id, run.base),
    ]
    return "\n".join(lines) + "\n"


def pr_plan_table(run: Run) -> Table:
    """One row a patch: its verdict, its PR and what ``pr`` did or would do."""
    stage = run.stages.get("pr", "")
    title = f"{run.stack}: pull requests onto {run.base_ref} ({short(run.base)})" + (" — plan only (dry run)" if stage == "dry-run" else "")
    table = Table(title=title, title_justify="left")
    for col in ("patch", "verdict", "PR", "base", "gate", "actions"):
        table.add_column(col, overflow="fold")
    for o in run.outcomes:
        pr = o.pr
        verdict = o.verdict.value if o.verdict else ""
        if pr is None:
            why = {Verdict.REPRESENTED: "no PR: represented", Verdict.CONFLICT: "no PR: needs rework (conflict)",
                   Verdict.BROKEN: "no PR: needs rework (broken)", Verdict.INCONCLUSIVE: "no PR: held (inconclusive)"}
            table.add_row(o.name, verdict, "", "", "", why.get(o.verdict, "") if o.verdict else "")
            continue
        number = f"#{pr.number}" if pr.number else ("new" if pr.state == "planned" else "")
        if pr.number and pr.state and pr.state != "open":
            number += f" ({pr.state})"
        gate = "approved" if pr.approved else ", ".join((["draft"] if pr.draft else []) + pr.labels)
        actions = "\n".join(pr.actions) or (pr.action or "nothing")
        if pr.note:
            actions += f"\n({pr.note})"
        table.add_row(o.name, verdict, number, pr.base or "", gate, actions)
    return table


def pr_documents(run: Run) -> str:
    """Each PR body and closing comment of the plan, for ``pr --dry-run``."""
    out = []
    for o in run.outcomes:
        if o.pr and o.pr.body is not None and any(a.startswith(("open", "update body")) for a in o.pr.actions):
            out.append(f"===== {o.name}: PR body =====\n{o.pr.body}")
        if o.pr and o.pr.comment is not None:
            out.append(f"===== {o.name}: closing comment =====\n{o.pr.comment}")
    return "\n".join(out)
