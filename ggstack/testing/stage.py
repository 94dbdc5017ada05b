"""The ``test`` stage. Text can be fooled (a squash that rewrote the code, a refactor that kept the
behaviour); a patch's own tests cannot."""

from __future__ import annotations

from collections.abc import Sequence

from ggstack import git, replay
from ggstack.model import Progress, Run, Stack
from ggstack.testing.plan import plan_jobs
from ggstack.testing.runner import execute
from ggstack.testing.verdict import fold_tests


def checked_run(repo: git.Repository, stack: Stack, base_ref: str) -> Run:
    from ggstack.check.stack import check_stack

    return check_stack(repo, stack, base_ref, run=replay.apply(repo, stack, base_ref, write=False))


def test(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    gpu: str = "auto",
    only: Sequence[str] = (),
    progress: Progress | None = None,
    jobs: int = 1,
    use_cache: bool = True,
) -> Run:
    """``jobs``: CPU test commands at once; ``use_cache`` off reruns everything."""
    planned = plan_jobs(repo, stack, run, gpu=gpu, only=only)
    results, gpu_state = execute(repo, stack, planned, gpu=gpu, progress=progress, parallel=jobs, use_cache=use_cache)
    tested = fold_tests(repo, run, planned, results, gpu_state, require_tests=stack.config.pr.require_tests)
    if not planned and not only and stack.patches:
        # Not a silent "ok": a tests.paths that matches nothing here (pytest's own tests are
        # under testing/, not tests/) is the likeliest reason, and the user can fix it.
        paths = ", ".join(stack.config.tests.paths)
        tested.stages["test"] = (
            f"ok: nothing ran — no patch changes a test file matching tests.paths ({paths}); "
            f"set [tests] paths in {stack.path}/stack.toml if its tests live elsewhere"
        )
    return tested
