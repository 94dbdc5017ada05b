"""The merge order of a stack's PRs, as every PR body lists it: n bodies of n lines each,
so the list is built once a plan, not once a body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ggstack.model import Outcome, Run
from ggstack.report.escape import md_code, subject_md


@dataclass(frozen=True)
class MergeOrder:
    outcomes: tuple[Outcome, ...]  # the patches that get PRs, in merge order
    lines: tuple[str, ...]  # "i. #N subject", one a PR
    position: Mapping[str, int]  # patch name -> its place, from 1


def merge_order(order: Sequence[Outcome]) -> MergeOrder:
    """Build it again when a PR number becomes known."""
    return MergeOrder(
        tuple(order),
        tuple(f"{i}. {pr_ref(o)} {subject_md(o)}" for i, o in enumerate(order, 1)),
        {o.name: i for i, o in enumerate(order, 1)},
    )


def pr_ref(o: Outcome) -> str:
    return f"#{o.pr.number}" if o.pr and o.pr.number else "(not opened yet)"


def order_section(run: Run, outcome: Outcome, order: MergeOrder, onto: str) -> str:
    n, total = order.position[outcome.name], len(order.outcomes)
    lines = [
        f"This is PR {n} of {total} in the {md_code(run.stack or '')} stack onto {md_code(onto)}. Merge in this order:",
        "",
    ]
    listed = list(order.lines)
    # Its own number is not known before it is opened: naming it would cost an edit.
    listed[n - 1] = f"{n}. **this PR**: {subject_md(outcome)}"
    lines += listed
    neighbours = []
    if n > 1:
        neighbours.append(f"Previous: {pr_ref(order.outcomes[n - 2])}")
    if n < total:
        neighbours.append(f"Next: {pr_ref(order.outcomes[n])}")
    if neighbours:
        lines += ["", " · ".join(neighbours)]
    return "\n".join(lines)
