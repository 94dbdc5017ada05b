"""Run each patch's own tests on the base with and without it (``ggstack test``).

Text can be fooled — a squash that rewrote the code, a refactor that kept
the behaviour — a patch's own tests cannot. For every patch that adds or
changes test files (stack.toml ``tests.paths``) three trees are built in
memory, through a temporary index (nothing of the user's is touched):

1. *base*: the tree the patch was replayed onto, plus only its test files;
2. *patched*: the replayed commit (base + the whole patch);
3. *old-base*: the patch's original parent plus its test files — the
   control: a test that passes everywhere proves nothing.

Each tree is checked out in its own temporary ``git worktree`` under the git
dir (removed afterwards; a crashed run's leftovers are pruned by the next).
The stack's command runs there in a process group of its own, so a timeout
kills everything the tests started, and per-test results are read from
pytest's JUnit XML, not guessed from exit codes. Results are cached by (tree,
command, environment), so a rerun on an unchanged base runs nothing.

Beyond one machine this module schedules nothing: ``matrix`` lists jobs for
the CI system, ``shard`` runs some into a results document, and ``merge``
folds documents into the Run. ``test``, ``shard`` and ``merge`` all go
through ``plan`` and ``fold``, which is why a sharded run and a local one
give the same Run.

Verdict rules (README "Tests"), per test kind (cpu, gpu):

- fails with the patch → ``broken``;
- skipped, collection error or timeout with the patch → ``inconclusive``;
- fails (or cannot be collected) on the base without the patch, passes
  with it → needed;
- passes on the base without the patch and fails on the old base →
  represented by behaviour (evidence ``tests``, listing the tests);
- passes on the old base too, or the control could not run → no behaviour
  evidence.

Kinds combine as broken, then needed, then represented, then inconclusive:
GPU tests skipped for want of a GPU do not overrule CPU tests that decided;
they are recorded as ``pending`` (never as a pass) and keep the Run in need
of attention. Then, with the text verdict of ``check``: broken wins; inconclusive holds
(unless the text already says represented or conflict); needed keeps the
text's verdict, except where the text says represented — then the signals
disagree: ``inconclusive``, recommendation ``human look``; represented by
behaviour makes the verdict ``represented`` (agreeing with the text, or
overruling a text ``unique``/``partial``/``conflict``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ggstack import git, replay, state
from ggstack.errors import UserError
from ggstack.model import Applied, Evidence, Outcome, Patch, Progress, Recommendation, Run, Stack, TestResult, Verdict

GPU_MODES = ("auto", "require", "off")
CPU_RUNNER = "ubuntu-latest"  # runs-on of CPU matrix entries
WHERE = ("base", "patched", "old-base")
LABELS = {"base": "base + tests", "patched": "base + patch", "old-base": "old base + tests"}
RESULTS_FORMAT = "ggstack-test-results"

_CACHE_VERSION = 1
_TAIL_LINES = 80
_TAIL_CHARS = 8000
_KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a timed-out group
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX")
_FAILING = ("failed", "error", "timeout")
_SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN")
_GPU_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd")


@dataclass(frozen=True)
class TestTree:
    """One of a job's three trees; ``tree`` None when it cannot be made (``reason``)."""

    where: str  # base | patched | old-base
    tree: str | None
    parent: str | None  # the commit the worktree's scratch commit sits on
    reason: str = ""


@dataclass(frozen=True)
class Job:
    """One patch × one test kind: a matrix entry, run as up to three runs."""

    id: str  # "0001-fix-add-cpu"
    patch: str  # the Outcome's name
    kind: str  # cpu | gpu
    command: str  # with {tests} expanded
    tests: tuple[str, ...]
    trees: tuple[TestTree, ...]
    code_paths: tuple[str, ...]  # the patch's other paths: where represented-by candidates are looked for


@dataclass(frozen=True)
class Judgement:
    kind: str  # broken | inconclusive | needed | represented | none
    tests: tuple[str, ...]
    detail: str


# -- which tests -------------------------------------------------------------------


def _glob(pattern: str) -> re.Pattern[str]:
    """A git-style glob: ``**/`` is any number of directories, ``*`` stays in one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    if pattern.endswith("/"):
        out.append(".*")
    return re.compile("".join(out) + r"\Z")


def is_test_path(path: str, patterns: Sequence[str]) -> bool:
    return any(_glob(p).match(path) for p in patterns)


def expand(command: str, tests: Sequence[str]) -> str:
    return command.replace("{tests}", " ".join(shlex.quote(t) for t in tests))


# -- planning -----------------------------------------------------------------------


def prepare(repo: git.Repository, stack: Stack, base_ref: str) -> Run:
    """The Run ``test`` builds on: ``apply`` (no refs written), then ``check``."""
    from ggstack import check

    return check.stack(repo, stack, base_ref, run=replay.apply(repo, stack, base_ref, write=False))


def plan(repo: git.Repository, stack: Stack, run: Run, *, gpu: str = "auto", only: Sequence[str] = ()) -> list[Job]:
    """The jobs of a run: each tested patch × {cpu, gpu}, in stack order."""
    check_gpu_mode(gpu)
    cfg = stack.config.tests
    wanted = {stack.find(key).name for key in only} if only else None
    patches = {p.name: p for p in stack.patches}
    originals = {pick.name: pick for pick in replay.materialize(repo, stack)}
    kinds = [("cpu", cfg.cpu)] + ([("gpu", cfg.gpu)] if gpu != "off" else [])
    jobs: list[Job] = []
    tip = run.base  # the tree each patch was replayed onto, as apply advanced it
    for o in run.outcomes:
        start = _parent(repo, o.commit) if o.applied is Applied.APPLIED and o.commit else tip
        patch = patches.get(o.name)
        testable = o.applied in (Applied.APPLIED, Applied.EMPTY, Applied.CONFLICT)
        if patch is not None and testable and (wanted is None or o.name in wanted):
            trees, tests = _trees(repo, stack, patch, o, start, originals.get(o.name))
            code = tuple(p for p in patch.paths if not is_test_path(p, cfg.paths))
            for kind, command in kinds:
                if tests and command.strip():
                    stem = o.name.removesuffix(".patch")
                    jobs.append(Job(f"{stem}-{kind}", o.name, kind, expand(command, tests), tests, trees, code))
        if o.applied is Applied.APPLIED and o.commit and o.verdict is not Verdict.REPRESENTED:
            tip = o.commit  # check leaves represented patches out of the tip it judges on
    return jobs


def _parent(repo: git.Repository, commit: str) -> str:
    info = repo.read_commit(commit)  # the persistent reader: one process for the whole plan, not one a patch
    parents = (info or repo.commit_info(commit)).parents
    return parents[0] if parents else commit


def _trees(
    repo: git.Repository, stack: Stack, patch: Patch, o: Outcome, start: str, original: replay.Pick | None
) -> tuple[tuple[TestTree, ...], tuple[str, ...]]:
    """The three trees of one patch, and its test files (added or changed, not deleted)."""
    materialised = original.commit if original else None
    replayed = o.commit if o.applied is Applied.APPLIED else None
    patched = replayed or (start if o.applied is Applied.EMPTY else None)
    source = replayed or materialised or patched
    if source is None:
        return (), ()
    candidates = [p for p in patch.paths if is_test_path(p, stack.config.tests.paths)]
    entries = repo.ls_tree(repo.resolve(source, "tree"), candidates) if candidates else {}
    tests = tuple(sorted(p for p in candidates if p in entries))
    if not tests:
        return (), ()
    trees = [TestTree("base", _overlay(repo, start, {p: entries[p] for p in tests}), start)]
    if patched:
        trees.append(TestTree("patched", repo.resolve(patched, "tree"), start))
    else:
        trees.append(TestTree("patched", None, None, "the patch does not apply to this base"))
    if materialised and original and original.parent:
        old_entries = repo.ls_tree(repo.resolve(materialised, "tree"), tests)
        trees.append(TestTree("old-base", _overlay(repo, original.parent, old_entries), original.parent))
    elif patch.base_commit:
        trees.append(
            TestTree("old-base", None, None, f"its original parent {patch.base_commit[:12]} is not in this repository")
        )
    else:
        trees.append(TestTree("old-base", None, None, "the patch records no original parent (base-commit:)"))
    return tuple(trees), tests


def _overlay(repo: git.Repository, commit: str, entries: dict[str, tuple[str, str]]) -> str:
    """``commit``'s tree with ``entries`` (the test files) written over it."""
    return repo.edit_tree(repo.resolve(commit, "tree"), dict(entries))


# -- the stage --------------------------------------------------------------------------


def test(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    gpu: str = "auto",
    only: Sequence[str] = (),
    progress: Progress | None = None,
    jobs: int = 1,
) -> Run:
    """``ggstack test``: every job here, folded into a copy of ``run``.

    ``jobs``: how many CPU test commands may run at once (GPU commands always
    run one at a time: they share the one device)."""
    planned = plan(repo, stack, run, gpu=gpu, only=only)
    results, gpu_state = execute(repo, stack, planned, gpu=gpu, progress=progress, parallel=jobs)
    return fold(repo, run, planned, results, gpu_state)


def matrix(
    repo: git.Repository, stack: Stack, run: Run, *, gpu: str = "auto", only: Sequence[str] = ()
) -> dict[str, Any]:
    """The job list for GitHub Actions ``strategy.matrix: ${{ fromJSON(...) }}``."""
    jobs = plan(repo, stack, run, gpu=gpu, only=only)
    n = len(jobs)
    return {
        "include": [
            {
                "id": j.id,
                "patch": j.patch,
                "kind": j.kind,
                "runs-on": stack.config.tests.gpu_runner if j.kind == "gpu" else CPU_RUNNER,
                "shard": f"{i}/{n}",
            }
            for i, j in enumerate(jobs, 1)
        ]
    }


def shard(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    part: tuple[int, int] | None = None,
    job_id: str | None = None,
    gpu: str = "auto",
    only: Sequence[str] = (),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run one matrix entry (``job_id``) or every N-th (``part`` = (K, N)); the results document."""
    jobs = plan(repo, stack, run, gpu=gpu, only=only)
    if job_id is not None:
        chosen = [j for j in jobs if j.id == job_id]
        if not chosen:
            known = ", ".join(j.id for j in jobs) or "none"
            raise UserError(f"no test job {job_id!r} for this stack and base (jobs: {known}; see --matrix)")
    elif part is not None:
        k, n = part
        if not 1 <= k <= n:
            raise UserError(f"--shard {k}/{n}: K must be between 1 and N")
        chosen = [j for i, j in enumerate(jobs) if i % n == k - 1]
    else:
        chosen = jobs
    results, gpu_state = execute(repo, stack, chosen, gpu=gpu, progress=progress)
    return {
        "format": RESULTS_FORMAT,
        "version": 1,
        "stack": stack.name,
        "base": run.base,
        "gpu": gpu_state,
        "jobs": [
            {
                "id": j.id,
                "patch": j.patch,
                "kind": j.kind,
                "trees": {t.where: t.tree for t in j.trees},
                "tests": [dataclasses.asdict(r) for r in results[j.id]],
            }
            for j in chosen
        ],
    }


def load_results(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            raise UserError(f"cannot read results file: {e.strerror}", path=path) from None
        except ValueError as e:
            raise UserError(f"not a JSON results file: {e}", path=path) from None
        if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
            raise UserError("not a ggstack test results file (written by `ggstack test --shard`)", path=path)
        jobs = doc.get("jobs", [])
        if not isinstance(jobs, list) or not all(
            isinstance(j, dict)
            and isinstance(j.get("id"), str)
            and isinstance(j.get("tests", []), list)
            and all(isinstance(t, dict) for t in j.get("tests", []))
            for j in jobs
        ):
            raise UserError(
                '"jobs" must be a list of objects, each with an "id" and a list of "tests" (edited by hand?)', path=path
            )
        docs.append((path, doc))
    return docs


def merge(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    documents: Sequence[tuple[str, dict[str, Any]]],
    *,
    gpu: str = "auto",
    only: Sequence[str] = (),
) -> Run:
    """Fold shards' results documents into ``run``, as ``test`` would have."""
    jobs = plan(repo, stack, run, gpu=gpu, only=only)
    by_id = {j.id: j for j in jobs}
    results: dict[str, list[TestResult]] = {}
    gpu_seen: list[str | None] = []
    for path, doc in documents:
        if doc.get("stack") != stack.name or doc.get("base") != run.base:
            raise UserError(
                f"results are for stack {doc.get('stack')!r} on {str(doc.get('base'))[:12]}, "
                f"not {stack.name!r} on {run.base[:12]} (run the shards and --merge with the same --onto)",
                path=path,
            )
        for entry in doc.get("jobs", []):
            job = by_id.get(entry.get("id"))
            if job is None:
                continue  # left out by this merge's --only or --gpu off
            if entry.get("trees") != {t.where: t.tree for t in job.trees}:
                raise UserError(f"job {job.id} was run on other trees than this stack gives on this base", path=path)
            try:
                results[job.id] = [TestResult(**t) for t in entry.get("tests", [])]
            except TypeError as e:  # a test result with missing or unknown keys
                raise UserError(f"job {job.id}: not a test result: {e}", path=path) from None
            if job.kind == "gpu":
                gpu_seen.append(doc.get("gpu"))
    for job in jobs:
        if job.id not in results:
            reason = f"no results for job {job.id} in the merged files"
            results[job.id] = [_not_run(job, t, reason) for t in job.trees]
    if gpu == "off":
        gpu_state = "off"
    elif gpu_seen:
        gpu_state = "present" if all(g == "present" for g in gpu_seen) else "absent"
    else:
        gpu_state = None
    return fold(repo, run, jobs, results, gpu_state)


# -- GPU -------------------------------------------------------------------------------------


def check_gpu_mode(gpu: str) -> None:
    if gpu not in GPU_MODES:
        raise UserError(f"--gpu must be one of {', '.join(GPU_MODES)}, not {gpu!r}")


def detect_gpu(stack: Stack) -> tuple[bool, str]:
    """(present, how it was found out): nvidia-smi, else torch.cuda in the tests' environment."""
    env = _base_env(stack)
    path = env.get("PATH")
    smi = shutil.which("nvidia-smi", path=path)
    said = ["nvidia-smi: not found"]
    if smi:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc = subprocess.run([smi, "-L"], env=env, capture_output=True, text=True, timeout=60)
            gpus = [line for line in proc.stdout.splitlines() if line.startswith("GPU ")]
            if proc.returncode == 0 and gpus:
                return True, f"nvidia-smi: {gpus[0]}" + (f" (+{len(gpus) - 1})" if len(gpus) > 1 else "")
        said = ["nvidia-smi: no GPU listed"]
    if sys.platform == "linux" and not any(os.path.exists(p) for p in _GPU_DRIVER_PATHS):
        # CUDA (and ROCm) need their kernel driver: without it torch could only say False, slowly.
        return False, "no GPU on this machine (" + "; ".join(
            said + ["no GPU driver: " + ", ".join(_GPU_DRIVER_PATHS)]
        ) + ")"
    python = shutil.which("python", path=path) or sys.executable
    probe = "import torch; print(torch.cuda.is_available())"
    try:
        proc = subprocess.run(
            [python, "-c", probe], env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
        answer = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
        if answer == ["True"]:
            return True, "torch.cuda.is_available() is True"
        said.append("torch.cuda.is_available() is False" if answer else "torch is not importable")
    except (OSError, subprocess.TimeoutExpired):
        said.append("torch probe failed")
    return False, "no GPU on this machine (" + "; ".join(said) + ")"


# -- running ------------------------------------------------------------------------------------


def execute(
    repo: git.Repository,
    stack: Stack,
    jobs: Sequence[Job],
    *,
    gpu: str = "auto",
    progress: Progress | None = None,
    parallel: int = 1,
) -> tuple[dict[str, list[TestResult]], str | None]:
    """Every run of ``jobs`` (cache first); (results by job id, what GPU there was)."""
    check_gpu_mode(gpu)
    prune_leftovers(repo)
    gpu_state: str | None = "off" if gpu == "off" else None
    present, why = False, ""
    if gpu == "require" or (gpu == "auto" and any(j.kind == "gpu" for j in jobs)):
        present, why = detect_gpu(stack)
        gpu_state = "present" if present else "absent"
        if gpu == "require" and not present:
            raise UserError(f"--gpu require: {why}; run on a GPU runner or use --gpu auto")
    total = sum(len(j.trees) for j in jobs)
    done = 0
    results: dict[str, list[TestResult]] = {}
    cpu_runs: list[tuple[Job, int, TestTree]] = []
    for job in jobs:
        if job.kind == "gpu" and not present:
            if progress:
                progress(done, total, f"{job.patch} gpu: collecting (no GPU here)")
            results[job.id] = _without_gpu(repo, stack, job, why)
            done += len(job.trees)
            continue
        results[job.id] = [None] * len(job.trees)  # type: ignore[list-item]
        for i, tt in enumerate(job.trees):
            if job.kind == "cpu" and parallel > 1:
                cpu_runs.append((job, i, tt))
                continue
            if progress:
                progress(done, total, f"{job.patch} {job.kind} run {i + 1}/{len(job.trees)} ({LABELS[tt.where]})")
            results[job.id][i] = _run_cached(repo, stack, job, tt, present)
            done += 1
    if cpu_runs:
        # The test commands are independent processes in their own worktrees;
        # what touches git (worktree add/remove) is serialised by _GIT_LOCK.
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            futures = [(job, i, pool.submit(_run_cached, repo, stack, job, tt, present)) for job, i, tt in cpu_runs]
            for job, i, future in futures:
                results[job.id][i] = future.result()
                done += 1
                if progress:
                    progress(done, total, f"{job.patch} cpu run {i + 1}/{len(job.trees)}")
    if progress:
        progress(done, total, "done")
    return results, gpu_state


def _without_gpu(repo: git.Repository, stack: Stack, job: Job, why: str) -> list[TestResult]:
    """GPU tests on a machine without a GPU: skipped (so inconclusive) where the
    patch has any — found by collecting them — and "no-tests" where it has none,
    so that a patch without GPU tests is not held for want of a GPU."""
    tt = next((t for t in job.trees if t.where == "patched" and t.tree), None) or next(
        (t for t in job.trees if t.tree), None
    )
    if tt is None:
        return [_not_run(job, t, t.reason) for t in job.trees]
    probe = _run_cached(repo, stack, job, tt, False, collect_only=True)
    if probe.status == "no-tests":
        why = "no GPU tests among the patch's test files (collected without a GPU)"
    status = "no-tests" if probe.status == "no-tests" else "skipped"
    out = [_not_run(job, t, why, status=status) for t in job.trees]
    for r in out:
        r.cached = probe.cached
    return out


def _not_run(job: Job, tt: TestTree, reason: str, *, status: str = "not-run") -> TestResult:
    return TestResult(job.kind, tt.where, status, tree=tt.tree or "", command=job.command, reason=reason or tt.reason)


def _run_cached(
    repo: git.Repository, stack: Stack, job: Job, tt: TestTree, gpu_present: bool, *, collect_only: bool = False
) -> TestResult:
    if tt.tree is None:
        return _not_run(job, tt, tt.reason)
    key = _cache_key(stack, job, tt.tree, gpu_present, collect_only)
    path = os.path.join(repo.state_dir("cache", "tests"), key + ".json")
    with contextlib.suppress(OSError, ValueError, TypeError):
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
        return TestResult(job.kind, tt.where, tree=tt.tree, command=job.command, cached=True, **stored)
    result = _run_in_worktree(repo, stack, job, tt, collect_only)
    if result.status != "timeout":  # a hang may be the machine's load: try it again next time
        keep = {
            k: v
            for k, v in dataclasses.asdict(result).items()
            if k not in ("kind", "where", "tree", "command", "cached")
        }
        state.write_atomic(path, json.dumps(keep, sort_keys=True).encode())
    return result


def _cache_key(stack: Stack, job: Job, tree: str, gpu_present: bool, collect_only: bool) -> str:
    """(tree, command, environment): what decides a test's result, short of the network."""
    env = _base_env(stack)
    python = shutil.which("python", path=env.get("PATH")) or sys.executable
    python = os.path.realpath(python)
    with contextlib.suppress(OSError):
        python += f"@{os.stat(python).st_mtime_ns}"
    fingerprint = {
        "python": python,
        "machine": f"{sys.platform}-{platform.machine()}",
        "env": list(stack.config.tests.env),
        "gpu": gpu_present if job.kind == "gpu" else None,
        "collect_only": collect_only,
    }
    blob = json.dumps([_CACHE_VERSION, tree, job.command, fingerprint], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _base_env(stack: Stack) -> dict[str, str]:
    """The tests' environment: ours, without the git variables that would point
    them at the user's repository, and without the forge token — a patch's tests
    are the patch's code, and their output lands in the Run."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV and k not in _SECRET_ENV}
    for i in range(int(env["GIT_CONFIG_COUNT"]) if env.get("GIT_CONFIG_COUNT", "").isdigit() else 0):
        if env.get(f"GIT_CONFIG_KEY_{i}", "").lower().endswith(".extraheader"):
            env[f"GIT_CONFIG_VALUE_{i}"] = ""  # an auth header the CI passes to git
    env.update(dict(stack.config.tests.env))
    return env


def _run_in_worktree(
    repo: git.Repository, stack: Stack, job: Job, tt: TestTree, collect_only: bool = False
) -> TestResult:
    timeout = stack.config.tests.timeout
    with (
        _worktree(repo, tt) as wt,
        tempfile.TemporaryDirectory(prefix="ggstack-test-", dir=repo.state_dir("tmp")) as tmp,
    ):
        junit = os.path.join(tmp, "junit.xml")
        log = os.path.join(tmp, "output.log")
        env = _base_env(stack)
        env["PYTHONPATH"] = wt + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # The XML and a rootdir of the worktree's own, whatever the command looks like.
        extra = f"--junitxml={shlex.quote(junit)} --rootdir={shlex.quote(wt)}" + (
            " --collect-only" if collect_only else ""
        )
        env["PYTEST_ADDOPTS"] = f"{env['PYTEST_ADDOPTS']} {extra}" if env.get("PYTEST_ADDOPTS") else extra
        started = time.monotonic()
        rc, timed_out = run_group(job.command, wt, env, log, timeout, wt + ".pgid")
        seconds = round(time.monotonic() - started, 2)
        with open(log, "rb") as f:
            f.seek(
                max(0, os.path.getsize(log) - 8 * _TAIL_CHARS)
            )  # only the tail is kept: a chatty suite can write gigabytes
            output = f.read().decode("utf-8", "replace")
        cases = read_junit(junit)
    status = _status(rc, timed_out, cases)
    if collect_only:  # nothing ran: pytest's exit code 5 is "none collected"
        status = "no-tests" if rc == 5 else "passed" if rc == 0 else "timeout" if timed_out else "error"
    result = TestResult(job.kind, tt.where, status, tree=tt.tree or "", command=job.command, seconds=seconds)
    if cases:
        result.passed, result.failed, result.skipped, result.errors = (
            cases["passed"],
            cases["failed"],
            cases["skipped"],
            cases["errors"],
        )
    if status in _FAILING:
        result.output_tail = _tail(output)
    result.reason = _reason(status, rc, timeout, cases)
    return result


def run_group(
    command: str, cwd: str, env: dict[str, str], log_path: str, timeout: float, pgid_path: str
) -> tuple[int | None, bool]:
    """``command`` in a session of its own: (exit code, timed out). Whatever it
    started is killed with it, on a timeout and after a normal exit alike."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    with open(pgid_path, "w") as f:
        f.write(str(proc.pid))  # for prune_leftovers, should ggstack die before the group
    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_KILL_GRACE)
    finally:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(pgid_path)
    return (None if timed_out else proc.returncode), timed_out


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def read_junit(path: str) -> dict[str, list[str]] | None:
    """Per-test outcomes from a JUnit XML file; None when there is none."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    cases: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": [], "errors": []}
    for case in root.iter("testcase"):
        classname, name = case.get("classname") or "", case.get("name") or ""
        test_id = f"{classname}::{name}" if classname else name
        tags = {child.tag for child in case}
        if "failure" in tags:
            cases["failed"].append(test_id)
        elif "error" in tags:
            cases["errors"].append(test_id)  # a collection or fixture error
        elif "skipped" in tags:
            cases["skipped"].append(test_id)
        else:
            cases["passed"].append(test_id)
    return cases


def _status(rc: int | None, timed_out: bool, cases: dict[str, list[str]] | None) -> str:
    if timed_out:
        return "timeout"
    if cases is None:  # not pytest, or it died before writing: the exit code is all there is
        return "passed" if rc == 0 else "error"
    if cases["failed"]:
        return "failed"
    if cases["errors"]:
        return "error"
    if cases["skipped"]:
        return "skipped"
    if not cases["passed"]:
        return "no-tests"
    return "passed" if rc == 0 else "error"


def _reason(status: str, rc: int | None, timeout: int, cases: dict[str, list[str]] | None) -> str:
    if status == "timeout":
        return f"timed out after {timeout} s (tests.timeout); its process group was killed"
    if cases is None:
        return f"exit code {rc} and no JUnit XML written" if status == "error" else ""
    if status == "error" and not cases["errors"]:
        return f"exit code {rc} although every test passed"
    if status == "error":
        return f"{len(cases['errors'])} error(s) collecting or setting up tests"
    if status == "skipped":
        return f"{len(cases['skipped'])} test(s) skipped"
    if status == "no-tests":
        return "no tests collected"
    return ""


def _tail(output: str) -> str:
    lines = output.rstrip("\n").split("\n")[-_TAIL_LINES:]
    return "\n".join(lines)[-_TAIL_CHARS:]


# -- worktrees ------------------------------------------------------------------------------------


_GIT_LOCK = threading.Lock()  # one Repository (its object queue, its cat-file process) is not thread-safe


@contextlib.contextmanager
def _worktree(repo: git.Repository, tt: TestTree) -> Iterator[str]:
    """A temporary worktree of ``tt.tree``, named after this process so that
    a later run can tell a crashed run's leftovers from a live run's."""
    with _GIT_LOCK:
        root = repo.state_dir("worktrees")
        _stop_pytest_config_search(root)
        path = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root)
    assert tt.tree is not None, "a test tree that was never built has no worktree"
    try:
        with _GIT_LOCK:
            commit = repo.commit_tree(tt.tree, [tt.parent] if tt.parent else [], "ggstack test tree\n", scratch=True)
            repo.add_worktree(path, commit)
        yield path
    finally:
        with _GIT_LOCK:
            _remove_worktree(repo, path)


def _stop_pytest_config_search(root: str) -> None:
    """pytest looks for its config upwards from the tests; without this file a
    worktree that has none would pick up the user's checkout's (the git dir
    is inside it), conftest.py files included."""
    path = os.path.join(root, "pytest.ini")
    if not os.path.exists(path):
        state.write_atomic(
            path, b"# ggstack: pytest's config search stops here, outside the user's checkout\n[pytest]\n"
        )


def _remove_worktree(repo: git.Repository, path: str) -> None:
    repo.remove_worktree(path)
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.unlink(path + ".pgid")


def prune_leftovers(repo: git.Repository) -> list[str]:
    """Remove the worktrees (and kill the test processes) of ggstack runs that died."""
    root = repo.state_dir("worktrees")
    removed = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        owner = name.split("-", 1)[0]
        if not os.path.isdir(path) or not owner.isdigit() or state.alive(int(owner)):
            continue
        _kill_leftover_group(path)
        _remove_worktree(repo, path)
        removed.append(path)
    for name in os.listdir(root):  # a .pgid whose worktree is gone
        if name.endswith(".pgid") and not os.path.isdir(os.path.join(root, name.removesuffix(".pgid"))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name))
    repo.prune_worktrees()
    return removed


def _kill_leftover_group(path: str) -> None:
    """Kill the recorded process group, but only if it still works in ``path``
    (a pid can be reused; a process whose cwd is in our worktree is ours)."""
    try:
        with open(path + ".pgid") as f:
            pgid = int(f.read().strip())
    except (OSError, ValueError):
        return
    real = os.path.realpath(path)
    for entry in _proc_entries():
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cwd = os.path.realpath(os.readlink(f"/proc/{entry}/cwd"))
        except OSError:
            continue
        if int(fields[2]) == pgid and (cwd == real or cwd.startswith(real + os.sep)):
            _kill_group(pgid, signal.SIGKILL)
            return


def _proc_entries() -> list[str]:
    try:
        return [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


# -- folding into the verdict --------------------------------------------------------------------


def fold(
    repo: git.Repository, run: Run, jobs: Sequence[Job], results: dict[str, list[TestResult]], gpu_state: str | None
) -> Run:
    """A copy of ``run`` with each tested patch's results and the verdict they give."""
    run = copy.deepcopy(run)
    by_patch: dict[str, list[Job]] = {}
    for job in jobs:
        by_patch.setdefault(job.patch, []).append(job)
    for o in run.outcomes:
        patch_jobs = by_patch.get(o.name)
        if not patch_jobs:
            continue
        _restore(o)
        o.tests = [r for j in patch_jobs for r in results[j.id]]
        judged = [(j, judge(j.kind, {r.where: r for r in results[j.id]})) for j in patch_jobs]
        _apply(repo, o, judged)
    run.gpu = gpu_state
    run.stages["test"] = "ok"
    return run


def judge(kind: str, runs: dict[str, TestResult]) -> Judgement:
    """What one kind's three runs say about a patch (the rules in the module docstring)."""
    patched, base, old = runs.get("patched"), runs["base"], runs.get("old-base")
    passing: set[str] | None = None
    if patched is not None and patched.status != "not-run":
        if patched.status == "failed":
            return Judgement(
                "broken", tuple(patched.failed), f"{kind} tests fail with the patch: {_names(patched.failed)}"
            )
        if patched.status in ("error", "timeout", "skipped"):
            return Judgement(
                "inconclusive",
                tuple(patched.errors or patched.skipped),
                f"{kind} tests with the patch: {_why(patched)}",
            )
        if patched.status == "no-tests":
            return Judgement("none", (), f"no {kind} tests collected")
        passing = set(patched.passed)
    if base.status in ("failed", "error"):
        failing = [t for t in sorted(passing) if t not in base.passed] if passing else base.failed + base.errors
        how = "and pass with it" if passing is not None else "(the patch does not apply, so they were not run with it)"
        return Judgement(
            "needed", tuple(failing), f"{kind} tests fail on the base without the patch {how}: {_names(failing)}"
        )
    if base.status in ("timeout", "skipped", "not-run"):
        return Judgement(
            "inconclusive", tuple(base.skipped), f"{kind} tests on the base without the patch: {_why(base)}"
        )
    if base.status == "no-tests":
        return Judgement("none", (), f"no {kind} tests collected on the base")
    if old is None or old.status in ("not-run", "timeout", "skipped", "no-tests"):
        why = _why(old) if old else "not run"
        return Judgement(
            "none",
            (),
            f"{kind} tests pass on the base without the patch, but the control on the old base did not run ({why}): no behaviour evidence",
        )
    if old.status in ("failed", "error"):
        shown = [t for t in base.passed if t not in old.passed] or old.failed + old.errors
        return Judgement(
            "represented",
            tuple(shown),
            f"{kind} tests fail on the old base and pass on the base without the patch: {_names(shown)}",
        )
    return Judgement(
        "none",
        (),
        f"{kind} tests pass on the old base too (the control), so they cannot tell the change apart: no behaviour evidence",
    )


def _why(r: TestResult) -> str:
    return r.reason or r.status


def _names(tests: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(tests[:limit])
    return shown + (f" and {len(tests) - limit} more" if len(tests) > limit else "") if tests else "(no test names)"


def combine(judgements: Sequence[Judgement]) -> str:
    """One judgement of the kinds: broken, then needed (any test failing
    without the patch means the base lacks something), then represented, then
    inconclusive. A kind that could not run (GPU tests without a GPU) does not
    overrule one that ran and decided; it stays in the evidence as
    inconclusive (``pending``) and keeps the Run in need of attention."""
    kinds = {j.kind for j in judgements}
    for kind in ("broken", "needed", "represented", "inconclusive"):
        if kind in kinds:
            return kind
    return "none"


def _restore(o: Outcome) -> None:
    """Undo an earlier fold (the text verdict is kept in the tests evidence), so folding twice is folding once."""
    for e in [e for e in o.evidence if e.kind == "tests"]:
        before = e.data.get("before") or {}
        o.verdict = Verdict(before["verdict"]) if before.get("verdict") else None
        o.recommendation = Recommendation(before["recommendation"]) if before.get("recommendation") else None
        o.represented_by = list(before.get("represented_by", []))
        o.evidence.remove(e)
    o.tests = []


_FROM_APPLIED = {
    Applied.APPLIED: Verdict.UNIQUE,
    Applied.EMPTY: Verdict.REPRESENTED,
    Applied.CONFLICT: Verdict.CONFLICT,
}


def _default_recommendation(o: Outcome, verdict: Verdict) -> Recommendation:
    has_pr = o.pr is not None and o.pr.number is not None and o.pr.state == "open"
    if verdict in (Verdict.UNIQUE, Verdict.PARTIAL):
        return Recommendation.UPDATE_PR if has_pr else Recommendation.OPEN_PR
    if verdict is Verdict.REPRESENTED:
        return Recommendation.CLOSE_PR if has_pr else Recommendation.DO_NOT_OPEN
    if verdict in (Verdict.CONFLICT, Verdict.BROKEN):
        return Recommendation.REWORK
    return Recommendation.HOLD


def _apply(repo: git.Repository, o: Outcome, judged: Sequence[tuple[Job, Judgement]]) -> None:
    judgements = [j for _, j in judged]
    job = judged[0][0]
    text = o.verdict  # None when check did not run: apply's result stands for it
    verdict: Verdict | None
    rec: Recommendation | None
    before = {
        "verdict": text.value if text else None,
        "recommendation": o.recommendation.value if o.recommendation else None,
        "represented_by": list(o.represented_by),
    }
    kind = combine(judgements)
    fallback = text or _FROM_APPLIED.get(o.applied or Applied.SKIPPED)
    detail = "; ".join(j.detail for j in sorted(judgements, key=lambda j: j.kind != kind))  # the deciding kind first
    tests = sorted({t for j in judgements if j.kind == kind for t in j.tests})
    commits: list[str] = []
    agrees: bool | None = None
    if kind == "broken":
        verdict, rec = Verdict.BROKEN, Recommendation.REWORK
        detail = "broken: " + detail
    elif kind == "inconclusive":
        if text in (Verdict.REPRESENTED, Verdict.CONFLICT):
            verdict, rec = text, o.recommendation or _default_recommendation(o, text)
        else:
            verdict, rec = Verdict.INCONCLUSIVE, Recommendation.HOLD
        detail = "inconclusive (never a pass): " + detail
    elif kind == "needed":
        if text is Verdict.REPRESENTED:
            agrees = False
            verdict, rec = Verdict.INCONCLUSIVE, Recommendation.HUMAN_LOOK
            by = ", ".join(c[:10] for c in o.represented_by) or "the base"
            detail = (
                f"needed by its tests, but the text evidence says represented by {by}: the signals disagree, a human should look; "
                + detail
            )
        else:
            agrees = True if text else None
            verdict = fallback or Verdict.UNIQUE
            rec = o.recommendation or _default_recommendation(o, verdict)
            detail = "needed: " + detail + ("; agrees with the text evidence" if agrees else "")
    elif kind == "represented":
        agrees = (text is Verdict.REPRESENTED) if text else None
        verdict = Verdict.REPRESENTED
        commits = list(o.represented_by) or _candidates(repo, job)
        o.represented_by = commits
        rec = o.recommendation if agrees and o.recommendation else _default_recommendation(o, verdict)
        said = "agrees with the text evidence" if agrees else f"the text evidence says {text.value}" if text else ""
        found = (
            f"; commits between the old base and the base touching its files: {', '.join(c[:10] for c in commits)}"
            if commits and not before["represented_by"]
            else ""
        )
        detail = "represented by behaviour: " + detail + (f"; {said}" if said else "") + found
    else:
        verdict = fallback
        rec = o.recommendation or (_default_recommendation(o, verdict) if verdict else None)
    pending = sorted(jb.kind for jb, jd in judged if jd.kind == "inconclusive" and kind != "inconclusive")
    o.verdict = verdict
    o.recommendation = rec
    o.evidence.append(
        Evidence(
            "tests",
            detail,
            commits,
            data={
                "judgement": kind,
                "pending": pending,
                "tests": tests,
                "runs": {jb.kind: jd.kind for jb, jd in judged},
                "agrees_with_text": agrees,
                "before": before,
            },
        )
    )


def _candidates(repo: git.Repository, job: Job, limit: int = 5) -> list[str]:
    """The commits between the old base and the base that touch the patch's
    non-test files: where the behaviour most likely came from."""
    trees = {t.where: t for t in job.trees}
    old, base = trees["old-base"].parent, trees["base"].parent
    if not old or not base or not job.code_paths:
        return []
    return repo.rev_list(f"{old}..{base}", f"--max-count={limit}", "--", *job.code_paths)
