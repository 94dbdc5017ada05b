"""``land``'s one write a round: a gate lifted, a PR retargeted or closed, or merged. A refusal is a stop
in the maintainer's words, not a failure; a native stack's asynchronous merge is polled within ``Timing``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ggstack.errors import InfraError, UserError
from ggstack.forge import Forge, MergeAnswer, RemotePR
from ggstack.land.plan import LandEntry, LandPlan
from ggstack.land.read import LandSnapshot
from ggstack.model import Run
from ggstack.pr.plan import ForgeStep
from ggstack.report.bodies import closing_comment
from ggstack.report.words import short

if TYPE_CHECKING:
    from ggstack.land import Landing


@dataclass(frozen=True)
class Timing:
    """How often and how long ``land`` polls an asynchronous merge (GGSTACK_MERGE_*_SECONDS)."""

    poll: float = 2.0
    wait: float = 600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Timing:
        def seconds(var: str, default: float) -> float:
            raw = env.get(var, "")
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise UserError(f"{var}={raw!r} is not a number of seconds") from None
            if not 0 <= value < 10**6:
                raise UserError(f"{var}={raw!r} is not a usable number of seconds")
            return value

        return cls(seconds("GGSTACK_MERGE_POLL_SECONDS", cls.poll), seconds("GGSTACK_MERGE_WAIT_SECONDS", cls.wait))


def take_step(
    forge: Forge,
    run: Run,
    snap: LandSnapshot,
    plan: LandPlan,
    entry: LandEntry,
    step: ForgeStep,
    result: Landing,
    timing: Timing,
) -> tuple[str, str | None]:
    """Carry out one step; its words, and the stop line when the forge refused it."""
    pull = snap.pulls[entry.name]
    if step.kind == "merge":
        return _merged(result, [pull.number], step, forge.merge(pull, method=plan.method, sha=step.fields["sha"]))
    if step.kind == "merge-stack":
        first = forge.merge_async(pull, method=plan.method, sha=step.fields["sha"])
        numbers = _stack_numbers(plan, pull.number)
        return _merged(result, numbers, step, _poll(forge, pull, first, timing), stack=step.fields["stack"])
    _before_merge(forge, run, plan, entry.name, pull, step)
    if step.kind == "close":
        result.closed.append(pull.number)
    return step.words, None


def _before_merge(forge: Forge, run: Run, plan: LandPlan, name: str, pull: RemotePR, step: ForgeStep) -> None:
    if step.kind == "ready":
        forge.mark_ready(pull)
    elif step.kind == "unlabel":
        forge.remove_label(pull, step.fields["label"])
    elif step.kind == "comment":
        forge.comment(pull, closing_comment(run, next(o for o in run.outcomes if o.name == name)))
    elif step.kind == "close":
        forge.edit_pull(pull, state="closed")
    elif step.kind == "retarget":
        forge.edit_pull(pull, base=plan.base)
    elif step.kind == "unstack":
        forge.unstack(int(step.fields["stack"]))


def _stack_numbers(plan: LandPlan, top: int) -> list[int]:
    assert plan.native is not None
    below = [n for n in plan.native.pulls if n not in plan.native.merged]
    return below[: below.index(top) + 1]


def _merged(
    result: Landing, numbers: list[int], step: ForgeStep, answer: MergeAnswer, stack: str = ""
) -> tuple[str, str | None]:
    what = f"stack {stack} up to #{numbers[-1]}" if stack else f"#{numbers[-1]}"
    label = step.words
    if answer.status == "merged":
        result.merged += numbers
        return f"{label}: merged" + (f" as {short(answer.sha)}" if answer.sha else ""), None
    if answer.status == "enqueued":
        result.queued = f"{what} is in the merge queue of {result.base}: rerun `ggstack land` once it merged"
        return f"{label}: added to the merge queue", None
    said = "; ".join(line.strip() for line in answer.message.splitlines() if line.strip())  # one line
    refusal = f"GitHub refused to merge {what}: {said or answer.status}"
    return f"{label}: refused", refusal


def _poll(forge: Forge, pull: RemotePR, answer: MergeAnswer, timing: Timing) -> MergeAnswer:
    """The asynchronous merge's answer once it is no longer pending (bounded by ``timing.wait``)."""
    deadline = time.monotonic() + timing.wait
    while answer.status == "pending":
        if not answer.uuid:
            raise InfraError(f"the merge of #{pull.number} is pending, but GitHub gave no request id to follow")
        if time.monotonic() >= deadline:
            raise InfraError(
                f"the merge of #{pull.number} is still pending after {timing.wait:g} s (GGSTACK_MERGE_WAIT_SECONDS); "
                f"rerun `ggstack land` to follow it (GitHub keeps the request 24 hours)"
            )
        time.sleep(timing.poll)
        answer = forge.merge_result(pull, answer.uuid)
    return answer
