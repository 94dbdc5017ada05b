"""The test shards as a Buildkite pipeline (``--ci buildkite``): a step a shard (GPU: ``tests.gpu_queue``), a
merge step. The privileged step stays in the fork's pipeline (docs/bot.md): an upload never holds a token."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from ggstack import git
from ggstack.model import Run, Stack, TestConfig
from ggstack.testing import shards

RESULTS_DIR = "ggstack-results"  # where each shard step leaves its results document
RUN_DIR = "ggstack-run"  # where the merge step leaves the Run and the bundle for the privileged step
MERGE_KEY = "ggstack-merge"
_MINUTES_OVER = 30  # a step's time limit over its test runs' (install, checkout, three runs of the command)


def pipeline(
    repo: git.Repository, stack: Stack, run: Run, *, gpu: str = "auto", only: Sequence[str] = ()
) -> dict[str, Any]:
    entries = shards.matrix(repo, stack, run, gpu=gpu, only=only)["include"]
    cfg = stack.config.tests
    common = ["ggstack", "test", stack.name, "--onto", run.base, *(f"--only={o}" for o in only)]
    timeout = (3 * cfg.timeout) // 60 + _MINUTES_OVER
    shard_steps = [_shard_step(e, common, cfg, gpu, timeout) for e in entries]
    steps: list[dict[str, Any]] = []
    if shard_steps:
        steps.append(
            {"group": f":test_tube: ggstack tests of {stack.name}", "key": "ggstack-tests", "steps": shard_steps}
        )
    steps.append(_merge_step(common, cfg, gpu, [s["key"] for s in shard_steps]))
    return {"steps": steps}


def _shard_step(e: dict[str, Any], common: Sequence[str], cfg: TestConfig, gpu: str, timeout: int) -> dict[str, Any]:
    k = e["shard"].split("/")[0]
    results = f"{RESULTS_DIR}/{k}.json"
    on_gpu = e["kind"] == "gpu"
    step: dict[str, Any] = {
        "label": f":test_tube: {e['patch']} ({e['kind']})",
        "key": f"ggstack-shard-{k}",
        "command": _command(common, "--gpu", "require" if on_gpu else gpu, "--shard", e["shard"], "--results", results),
        "artifact_paths": [results],
        "timeout_in_minutes": timeout,
    }
    queue = cfg.gpu_queue if on_gpu else cfg.cpu_queue
    if queue:
        step["agents"] = {"queue": queue}
    return step


def _merge_step(common: Sequence[str], cfg: TestConfig, gpu: str, shard_keys: list[str]) -> dict[str, Any]:
    merge: dict[str, Any] = {
        "label": ":twisted_rightwards_arrows: ggstack merge",
        "key": MERGE_KEY,
        "command": [
            f"mkdir -p {RESULTS_DIR} {RUN_DIR}",
            f"buildkite-agent artifact download '{RESULTS_DIR}/*.json' .",
            # A shard that failed or never ran merges as "not run": inconclusive, never a pass.
            _command(
                common,
                "--gpu",
                gpu,
                "--merge",
                f"{RESULTS_DIR}/*.json",
                "--json",
                "--bundle",
                f"{RUN_DIR}/commits.bundle",
            )
            + f" > {RUN_DIR}/run.json || [ $$? -le 1 ]",
        ],
        "artifact_paths": [f"{RUN_DIR}/run.json", f"{RUN_DIR}/commits.bundle"],
        "timeout_in_minutes": _MINUTES_OVER,
    }
    if cfg.cpu_queue:
        merge["agents"] = {"queue": cfg.cpu_queue}
    if shard_keys:
        merge["depends_on"] = shard_keys
        merge["allow_dependency_failure"] = True
    return merge


def _command(common: Sequence[str], *args: str) -> str:
    """Every ``$`` doubled, so Buildkite's upload leaves it to the shell; the results glob unquoted."""
    words = [w if w.endswith("/*.json") else shlex.quote(w) for w in (*common, *args)]
    return " ".join(words).replace("$", "$$")
