"""What a PR says: its summary (the patch message), its gate in words, its body.
``bodies`` renders the same from a saved Run, for ``pr --dry-run`` and ``report``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ggstack.forge.order import MergeOrder, merge_order
from ggstack.model import Patch, PRState, Run, Stack
from ggstack.report.bodies import pr_body, writes_body
from ggstack.report.escape import md_code

if TYPE_CHECKING:
    from ggstack.pr.plan import Plan, Slot

# Read here, not by `git interpret-trailers`: a PR body is rendered without a git process.
_TRAILER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*: .*|\(cherry picked from commit [0-9a-f]+\))$")


def summary_of(patch: Patch) -> str:
    paragraphs = patch.body.split("\n\n")
    if paragraphs and all(_TRAILER.match(line) for line in paragraphs[-1].strip().splitlines()):
        paragraphs = paragraphs[:-1]
    text = "\n\n".join(paragraphs)
    return "\n".join(line for line in text.splitlines() if not line.startswith("(cherry picked from commit ")).strip()


def gate_words(stack: Stack) -> str | None:
    policy = stack.config.pr
    if not policy.approval_gate:
        return None
    words = (["draft"] if policy.draft else []) + [f"label {md_code(label)}" for label in policy.labels]
    return ", ".join(words) or "approval"


def merge_order_of(plan: Plan) -> MergeOrder:
    return merge_order([x.outcome for x in plan.needed])


def body_of(run: Run, plan: Plan, s: Slot, order: MergeOrder | None = None) -> str:
    order = order or merge_order_of(plan)
    return pr_body(
        run,
        s.outcome,
        summary=s.summary,
        diffstat=s.diffstat,
        order=order,
        gate=plan.gate,
        onto=plan.base,
    )


def bodies(run: Run, stack: Stack) -> dict[str, str]:
    """What the plan sent, from the Run: PRs ordered by position, the recorded diffstat, the first PR's base."""
    states = _positioned(run)
    planned = sorted((o for o in run.outcomes if o.name in states), key=lambda o: states[o.name].position or 0)
    if not planned:
        return {}
    order, gate, onto = merge_order(planned), gate_words(stack), states[planned[0].name].base
    patches = {p.name: p for p in stack.patches}
    written = [o for o in planned if o.name in patches and writes_body(states[o.name])]
    return {
        o.name: pr_body(
            run,
            o,
            summary=summary_of(patches[o.name]),
            diffstat=states[o.name].diffstat,
            order=order,
            gate=gate,
            onto=onto,
        )
        for o in written
    }


def _positioned(run: Run) -> dict[str, PRState]:
    return {o.name: o.pr for o in run.outcomes if o.pr and o.pr.position}
