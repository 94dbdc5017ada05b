"""Every run of a set of jobs, from the result cache where its key allows: tree, command, its interpreter and the
distributions it sees (new pytest or torch reruns), the tests' environment, and for GPU tests whether there is a GPU."""

from __future__ import annotations

import dataclasses
import json
import platform
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ggstack import cache, git, secrets
from ggstack.errors import UserError
from ggstack.model import Progress, Stack, TestResult
from ggstack.testing import command, environment, processes, worktrees
from ggstack.testing.gpu import check_gpu_mode, detect_gpu
from ggstack.testing.plan import LABELS, Job, TestTree
from ggstack.testing.results import COULD_NOT_RUN

CACHE_VERSION = "tests-4"  # 2: harness errors classified (results.py); 3: the shared cache key; 4: code-not-under-test
_KEPT = {f.name for f in dataclasses.fields(TestResult)} - {"kind", "where", "tree", "command", "cached"}
_SHAPE = TestResult("cpu", "base", "passed")  # each kept field's type, as its default has it


def execute(
    repo: git.Repository,
    stack: Stack,
    jobs: Sequence[Job],
    *,
    gpu: str = "auto",
    progress: Progress | None = None,
    parallel: int = 1,
    use_cache: bool = True,
) -> tuple[dict[str, list[TestResult]], str | None]:
    """(results by job id, the Run's ``gpu``)."""
    check_gpu_mode(gpu)
    worktrees.prune_leftovers(repo)
    present, why, gpu_state = _gpu_here(stack, jobs, gpu)
    runner = CachingRunner(repo, stack, present, use_cache)
    steps = _Steps(sum(len(j.trees) for j in jobs), progress)
    results: dict[str, list[TestResult]] = {}
    deferred: list[tuple[Job, int, TestTree]] = []  # CPU runs for the pool
    for job in jobs:
        if job.kind == "gpu" and not present:
            steps.say(f"{job.patch} gpu: collecting (no GPU here)")
            results[job.id] = runner.without_gpu(job, why)
            steps.done += len(job.trees)
            continue
        results[job.id] = [None] * len(job.trees)  # type: ignore[list-item]
        deferred += _run_in_turn(runner, job, results[job.id], steps, to_pool=job.kind == "cpu" and parallel > 1)
    if deferred:
        _run_side_by_side(runner, deferred, parallel, results, steps)
    steps.say("done")
    return results, gpu_state


def _run_in_turn(
    runner: CachingRunner, job: Job, out: list[TestResult], steps: _Steps, *, to_pool: bool
) -> list[tuple[Job, int, TestTree]]:
    """The runs left for the pool; GPU runs go one at a time: they share the one device."""
    if to_pool:
        return [(job, i, tt) for i, tt in enumerate(job.trees)]
    for i, tt in enumerate(job.trees):
        steps.say(f"{job.patch} {job.kind} run {i + 1}/{len(job.trees)} ({LABELS[tt.where]})")
        out[i] = runner.run(job, tt)
        steps.done += 1
    return []


def _gpu_wanted(mode: str, jobs: Sequence[Job]) -> bool:
    return mode == "require" or (mode == "auto" and any(j.kind == "gpu" for j in jobs))


def _gpu_here(stack: Stack, jobs: Sequence[Job], mode: str) -> tuple[bool, str, str | None]:
    if not _gpu_wanted(mode, jobs):
        return False, "", "off" if mode == "off" else None
    present, why = detect_gpu(stack)
    if mode == "require" and not present:
        raise UserError(f"--gpu require: {why}; run on a GPU runner or use --gpu auto")
    return present, why, "present" if present else "absent"


def _run_side_by_side(
    runner: CachingRunner,
    runs: Sequence[tuple[Job, int, TestTree]],
    parallel: int,
    results: dict[str, list[TestResult]],
    steps: _Steps,
) -> None:
    # The test commands are independent processes in their own worktrees;
    # what touches git (the scratch commit, the checkout made) is serialised by worktrees.GIT_LOCK.
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [(job, i, tt, pool.submit(runner.run, job, tt)) for job, i, tt in runs]
        for job, i, tt, future in futures:
            results[job.id][i] = future.result()
            steps.done += 1
            steps.say(f"{job.patch} cpu run {i + 1}/{len(job.trees)} ({LABELS[tt.where]})")


@dataclass
class _Steps:
    total: int
    progress: Progress | None
    done: int = 0

    def say(self, what: str) -> None:
        if self.progress:
            self.progress(self.done, self.total, what)


def not_run(job: Job, tt: TestTree, reason: str, *, status: str = "not-run") -> TestResult:
    return TestResult(job.kind, tt.where, status, tree=tt.tree or "", command=job.command, reason=reason or tt.reason)


def _restored(job: Job, tt: TestTree, stored: dict[str, Any] | None) -> TestResult | None:
    """None where the stored entry is not a result: it is run again."""
    if stored is None or not isinstance(stored.get("status"), str) or not stored.keys() <= _KEPT:
        return None
    if misfit(stored) is not None:
        return None
    return TestResult(job.kind, tt.where, tree=tt.tree or "", command=job.command, cached=True, **stored)


def misfit(fields: dict[str, Any]) -> str | None:
    """The first of a test result's fields whose value is not of its type (a cache entry or a results
    file edited by hand); None where all fit. Unknown fields are ``TestResult``'s to refuse."""
    return next((k for k, v in fields.items() if hasattr(_SHAPE, k) and not _fits(getattr(_SHAPE, k), v)), None)


def _fits(want: object, v: object) -> bool:
    if isinstance(want, list):
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    return isinstance(v, type(want)) or (isinstance(want, float) and type(v) is int)


class CachingRunner:
    def __init__(self, repo: git.Repository, stack: Stack, gpu_present: bool, use_cache: bool) -> None:
        self.repo, self.stack, self.gpu_present = repo, stack, gpu_present
        self.results = cache.Entries(repo, "tests", version=CACHE_VERSION, read=use_cache)
        self._digests: dict[str, str] = {}  # by interpreter: read once an execute
        self._lock = threading.Lock()
        self._git_config: dict[str, str] | None = None

    def git_config(self) -> dict[str, str]:
        with self._lock:
            if self._git_config is None:
                self._git_config = environment.own_git_config()
            return self._git_config

    def run(self, job: Job, tt: TestTree, *, collect_only: bool = False) -> TestResult:
        if tt.tree is None:
            return not_run(job, tt, tt.reason)
        key = self.key(job, tt.tree, collect_only)
        stored = _restored(job, tt, self.results.get(key))
        if stored is not None:
            return stored
        # What the tests print is the patch's code speaking: no secret it found goes into the cache or the Run.
        ran = command.run_on_tree(self.repo, self.stack, job, tt, self.git_config(), collect_only)
        result = secrets.Secrets.from_env().scrub_all(ran)
        if result.status != "timeout":  # a hang may be the machine's load: try it again next time
            self.results.put(key, {k: v for k, v in dataclasses.asdict(result).items() if k in _KEPT})
        return result

    def without_gpu(self, job: Job, why: str) -> list[TestResult]:
        """Collected, not run: "skipped" (inconclusive) where the patch has GPU tests, "no-tests" where
        it has none, so that it is not held for want of a GPU."""
        tt = _probed_tree(job)
        if tt is None:
            return [not_run(job, t, t.reason) for t in job.trees]
        probe = self.run(job, tt, collect_only=True)
        if probe.status in COULD_NOT_RUN:  # not even collectable: a harness error, not a missing GPU
            return [dataclasses.replace(probe, where=t.where, tree=t.tree or "") for t in job.trees]
        return _not_run_for_gpu(job, probe, why)

    def key(self, job: Job, tree: str, collect_only: bool) -> str:
        env = environment.base_env(self.stack)
        python = environment.interpreter(job.command, env)
        fingerprint = {
            "python": python,
            "distributions": self.distributions(python, env),
            "machine": f"{sys.platform}-{platform.machine()}",
            "env": list(self.stack.config.tests.env),
            "gpu": self.gpu_present if job.kind == "gpu" else None,
            "collect_only": collect_only,
        }
        return self.results.key([tree, job.command, json.dumps(fingerprint, sort_keys=True)])

    def distributions(self, python: str, env: dict[str, str]) -> str:
        with self._lock:
            if python not in self._digests:
                self._digests[python] = distributions_digest(python, env)
            return self._digests[python]


def _not_run_for_gpu(job: Job, probe: TestResult, why: str) -> list[TestResult]:
    if probe.status == "no-tests":
        why, status = "no GPU tests among the patch's test files (collected without a GPU)", "no-tests"
    else:
        status = "skipped"
    out = [not_run(job, t, why, status=status) for t in job.trees]
    for r in out:
        r.cached = probe.cached
    return out


def _probed_tree(job: Job) -> TestTree | None:
    return next((t for t in job.trees if t.where == "patched" and t.tree), None) or next(
        (t for t in job.trees if t.tree), None
    )


_DISTRIBUTIONS_PROBE = (
    "import hashlib, importlib.metadata as m, json, sys; "
    "ds = sorted({(d.metadata['Name'] or '', d.version) for d in m.distributions()}); "
    "print(hashlib.sha256(json.dumps([sys.version, ds]).encode()).hexdigest())"
)


def distributions_digest(python: str, env: dict[str, str]) -> str:
    try:
        proc = processes.ask([python, "-c", _DISTRIBUTIONS_PROBE], env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not readable: {type(e).__name__}"
    return proc.stdout.strip() if proc.returncode == 0 else f"not readable: exit code {proc.returncode}"
