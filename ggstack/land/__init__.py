"""``ggstack land``: merge the approved PRs in order, each checked again last-moment (the base may take a change while
its PR waits). In rounds: read the forge, check text only against the base's tip (no patch code near the token), plan,
do the first write, read again: a rerun starts from the forge as it is, nothing is merged twice."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ggstack import git
from ggstack.errors import InfraError, UserError
from ggstack.forge import Forge, open_forge
from ggstack.land.act import Timing, take_step
from ggstack.land.plan import LandEntry, LandPlan, plan_landing
from ggstack.land.read import LandSnapshot, fresh_check, read_landing
from ggstack.model import Run, Stack
from ggstack.secrets import TOKEN_VARS

METHODS = ("merge", "squash", "rebase")  # GitHub's default order: a merge commit where allowed


@dataclass
class Landing:
    """What ``land`` did (or, dry run, would do): ``land --json`` prints it."""

    stack: str
    base: str
    dry_run: bool
    method: str = ""
    base_sha: str = ""
    native: bool = False  # the forge's native stacks were used
    done: list[str] = field(default_factory=list)  # each write, in order
    merged: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    plan: list[LandEntry] = field(default_factory=list)  # the last plan read (a dry run's whole answer)
    stopped: str | None = None  # the first PR that may not land, in one line
    queued: str | None = None  # the forge put the stack in its merge queue

    @property
    def exit_code(self) -> int:
        """1 when a PR is not ready (a human's turn), else 0."""
        return 1 if self.stopped else 0

    def to_json(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "base": self.base,
            "base_sha": self.base_sha,
            "dry_run": self.dry_run,
            "method": self.method,
            "native": self.native,
            "done": self.done,
            "merged": self.merged,
            "closed": self.closed,
            "stopped": self.stopped,
            "queued": self.queued,
            "plan": [e.to_json() for e in self.plan],
        }


def land(
    repo: git.Repository,
    stack: Stack,
    *,
    onto: str | None = None,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    client: Forge | None = None,
    say: Callable[[str], None] | None = None,
) -> Landing:
    """Rounds until the plan has no write left; a dry run plans once (a token that may read is enough)."""
    env = os.environ if env is None else env
    base = land_base(stack, onto)
    forge = client or _open_forge(stack, env)
    result = Landing(stack.name, base, dry_run)
    try:
        result.method = choose_method(stack, forge.merge_methods())
        timing = Timing.from_env(env)
        checked: dict[str, Run] = {}
        for _ in range(8 * len(stack.patches) + 8):  # every write moves the plan on: a bound, never reached
            plan, run, snap = _round(repo, stack, forge, base, result, checked)
            nxt = plan.next_step()
            if dry_run or nxt is None:
                result.stopped = plan.stop.line() if plan.stop is not None else None
                return result
            words, stop = take_step(forge, run, snap, plan, *nxt, result, timing)
            if _done(result, nxt[0], words, stop, say):
                return result
        raise InfraError("land: the forge kept changing under every step; nothing more was done (rerun it)")
    finally:
        forge.close()


def _done(result: Landing, entry: LandEntry, words: str, stop: str | None, say: Callable[[str], None] | None) -> bool:
    """One write recorded (and said); True where land stops after it: refused, or in the merge queue."""
    result.done.append(f"{entry.label}: {words}")
    if say:
        say(result.done[-1])
    if stop is not None or result.queued:
        result.stopped = f"{entry.label}: {stop}" if stop else None
        return True
    return False


def _round(
    repo: git.Repository, stack: Stack, forge: Forge, base: str, result: Landing, checked: dict[str, Run]
) -> tuple[LandPlan, Run, LandSnapshot]:
    """One read of the forge and a check against the base's tip as it is now (once a tip), and the plan."""
    base_sha = forge.branch_sha(base)
    if base_sha is None:
        raise UserError(f"{base!r} is not a branch of {stack.config.target.repo} on the forge (pass --onto a branch)")
    if base_sha not in checked:
        checked[base_sha] = fresh_check(repo, stack, base, base_sha)
    run = checked[base_sha]
    snap = read_landing(forge, repo, stack, run, base, base_sha)
    plan = plan_landing(run, stack, snap, base=base, method=result.method)
    result.base_sha, result.plan = base_sha, plan.entries
    result.native = result.native or plan.native is not None
    return plan, run, snap


def land_base(stack: Stack, onto: str | None) -> str:
    target = stack.config.target
    base = onto or target.base
    for prefix in ("refs/heads/", f"refs/remotes/{target.remote}/", f"{target.remote}/"):
        if base.startswith(prefix):
            return base.removeprefix(prefix)
    return base


def choose_method(stack: Stack, allowed: Sequence[str]) -> str:
    """stack.toml's ``land.method`` where the repository allows it; else the first it allows."""
    wanted, repo = stack.config.land.method, stack.config.target.repo
    if wanted:
        if wanted not in allowed:
            raise UserError(
                f"land.method = {wanted!r} in stack.toml, but {repo} allows only {', '.join(allowed) or 'no merge method'}"
            )
        return wanted
    for method in METHODS:
        if method in allowed:
            return method
    raise UserError(f"{repo} allows no merge method (merge commits, squash and rebase are all off)")


def _open_forge(stack: Stack, env: Mapping[str, str]) -> Forge:
    if not any(env.get(var, "").strip() for var in TOKEN_VARS):
        raise UserError(
            f"`land` needs GITHUB_TOKEN (or GH_TOKEN): one that may read {stack.config.target.repo} for --dry-run, "
            f"one that may merge its PRs otherwise"
        )
    return open_forge(stack, env, dry_run=False)
