"""Run each patch's own tests on the base with and without it (``ggstack test``).

Text can be fooled — a squash that rewrote the code, a refactor that kept the
behaviour — a patch's own tests cannot. Its test files run on three trees made
in memory (base + tests, base + patch, old base + tests: the control), each in
a repository of its own under the git dir, so a test reaches nothing of the
user's; what a run leaves running is killed (``sweep``). The rules are docs/
judgement.md, "Tests as evidence" (``judge``, ``combine``, ``_apply``); only tests that ran and
failed are evidence (``testresult``). ``test`` and CI's ``matrix``/``shard``/
``merge`` share ``plan`` and ``fold``, so a sharded run gives the local Run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import re
import shlex
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ggstack import cache, diff, git, replay, secrets, state, testresult
from ggstack.check import rules
from ggstack.errors import UserError
from ggstack.model import (
    Applied,
    Evidence,
    Outcome,
    Patch,
    Progress,
    Recommendation,
    Run,
    Says,
    Signal,
    Stack,
    TestResult,
    TextVerdict,
    Verdict,
)
from ggstack.picks import Pick, materialize

GPU_MODES = ("auto", "require", "off")
CPU_RUNNER = "ubuntu-latest"  # runs-on of CPU matrix entries
WHERE = ("base", "patched", "old-base")
LABELS = {"base": "base + tests", "patched": "base + patch", "old-base": "old base + tests"}
RESULTS_FORMAT = "ggstack-test-results"

_CACHE_VERSION = (
    "tests-4"  # 2: harness errors classified (testresult.py); 3: the shared cache key; 4: code-not-under-test
)
_TAIL_LINES = 80
_TAIL_CHARS = 8000
_KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a timed-out group
_FAILING = ("failed", "error", "timeout")
# A test run's environment is made of these of ggstack's own variables, those stack.toml's
# tests.pass_env names, and tests.env; nothing else (docs/commands/test.md: the environment). What
# carries a credential is left out even where its name is here (``secrets.credential_name``).
_PASSED_ENV = frozenset(
    {
        *("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"),
        *("TMPDIR", "TEMP", "TMP", "USER", "LOGNAME", "SHELL", "CI", "SOURCE_DATE_EPOCH"),
        *("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH"),
        *("PKG_CONFIG_PATH", "GIT_CONFIG_NOSYSTEM"),
        *("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"),
    }
)
_PASSED_PREFIXES = (
    *("LC_", "PYTHON", "PYTEST_", "COVERAGE_"),
    *("CUDA_", "NVIDIA_", "CUDNN_", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "TRITON_"),
    *("HIP_", "ROCM_", "ROCR_", "HSA_", "OMP_", "KMP_", "MKL_", "OPENBLAS_"),
)
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
    own: tuple[str, ...] = ()  # the test functions the patch adds or changes: never "pre-existing"


@dataclass(frozen=True)
class Judgement:
    kind: str  # broken | needed | represented | could-not-run | inconclusive | none
    tests: tuple[str, ...]
    detail: str
    settle: str = ""  # when it could not decide: what would let it
    pre_existing: tuple[str, ...] = ()  # failing with and without the patch and on the old base: no evidence


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
    """``{tests}``: the patch's test files; ``{python}``: the interpreter running ggstack
    (so a venv's ggstack runs the tests with that venv, activated or not)."""
    command = command.replace("{python}", shlex.quote(sys.executable))
    return command.replace("{tests}", " ".join(shlex.quote(t) for t in tests))


# -- planning -----------------------------------------------------------------------


def prepare(repo: git.Repository, stack: Stack, base_ref: str) -> Run:
    """The Run ``test`` builds on: ``apply`` (no refs written), then ``check``."""
    from ggstack.check.stack import check_stack

    return check_stack(repo, stack, base_ref, run=replay.apply(repo, stack, base_ref, write=False))


def plan(repo: git.Repository, stack: Stack, run: Run, *, gpu: str = "auto", only: Sequence[str] = ()) -> list[Job]:
    """The jobs of a run: each tested patch × {cpu, gpu}, in stack order."""
    check_gpu_mode(gpu)
    cfg = stack.config.tests
    wanted = {stack.find(key).name for key in only} if only else None
    patches = {p.name: p for p in stack.patches}
    originals = {pick.name: pick for pick in materialize(repo, stack)}
    kinds = [("cpu", cfg.cpu)] + ([("gpu", cfg.gpu)] if gpu != "off" else [])
    jobs: list[Job] = []
    chosen = _testable(run, patches, wanted)
    # The replayed commits whose parent a job starts from, in one process (not a round trip a patch).
    commits = repo.read_commits(
        o.commit for o in run.outcomes if o.name in chosen and o.applied is Applied.APPLIED and o.commit
    )
    tip = run.base  # the tree each patch was replayed onto, as apply advanced it
    for o in run.outcomes:
        if o.name in chosen:
            start = _parent(repo, commits, o.commit) if o.applied is Applied.APPLIED and o.commit else tip
            jobs += _jobs(repo, stack, patches[o.name], o, start, originals.get(o.name), kinds)
        if o.applied is Applied.APPLIED and o.commit and o.verdict is not Verdict.REPRESENTED:
            tip = o.commit  # check leaves represented patches out of the tip it judges on
    return jobs


def _testable(run: Run, patches: Mapping[str, Patch], wanted: set[str] | None) -> set[str]:
    """The patches of the Run that get jobs (when they have test files): in the stack, replayed, asked for."""
    return {
        o.name
        for o in run.outcomes
        if o.name in patches
        and o.applied in (Applied.APPLIED, Applied.EMPTY, Applied.CONFLICT)
        and (wanted is None or o.name in wanted)
    }


def _jobs(
    repo: git.Repository,
    stack: Stack,
    patch: Patch,
    o: Outcome,
    start: str,
    original: Pick | None,
    kinds: Sequence[tuple[str, str]],
) -> list[Job]:
    """One patch's jobs: one a kind that has a command, when the patch has test files."""
    trees, tests = _trees(repo, stack, patch, o, start, original)
    if not tests:
        return []
    code = tuple(p for p in patch.paths if not is_test_path(p, stack.config.tests.paths))
    stem = o.name.removesuffix(".patch")
    own = own_tests(patch.diff, tests)
    return [
        Job(f"{stem}-{kind}", o.name, kind, expand(command, tests), tests, trees, code, own)
        for kind, command in kinds
        if command.strip()
    ]


def _parent(repo: git.Repository, commits: Mapping[str, git.CommitInfo], commit: str) -> str:
    parents = (commits.get(commit) or repo.commit_info(commit)).parents  # absent: git's own error
    return parents[0] if parents else commit


def _trees(
    repo: git.Repository, stack: Stack, patch: Patch, o: Outcome, start: str, original: Pick | None
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
    base = _base_tree(repo, start, {p: entries[p] for p in tests}, None if replayed else original)
    trees = [TestTree("base", base, start)]
    if patched:
        trees.append(TestTree("patched", repo.resolve(patched, "tree"), start))
    else:
        trees.append(TestTree("patched", None, None, "the patch does not apply to this base"))
    trees.append(_old_base_tree(repo, patch, original, tests))
    return tuple(trees), tests


def _old_base_tree(repo: git.Repository, patch: Patch, original: Pick | None, tests: tuple[str, ...]) -> TestTree:
    """The control: the patch's original parent with its test files."""
    if original and original.commit and original.parent:
        old_entries = repo.ls_tree(repo.resolve(original.commit, "tree"), list(tests))
        return TestTree("old-base", _overlay(repo, original.parent, old_entries), original.parent)
    if patch.base_commit:
        return TestTree(
            "old-base", None, None, f"its original parent {patch.base_commit[:12]} is not in this repository"
        )
    return TestTree("old-base", None, None, "the patch records no original parent (base-commit:)")


def _base_tree(repo: git.Repository, start: str, tests: dict[str, tuple[str, str]], original: Pick | None) -> str:
    """The base with the patch's test files. From a replayed commit they are the merge already;
    from the patch's own commit (its replay conflicted) they are its old parent's files: the
    patch's test changes are then merged onto the base's files as a cherry-pick would (at its
    parent), so the base run sees the base's tests plus the patch's — and where they conflict,
    the base's own file. Its stale whole file would fail tests the base has since changed."""
    if original is None or not original.commit or not original.parent:
        return _overlay(repo, start, tests)
    only_tests = repo.edit_tree(repo.resolve(original.parent, "tree"), dict(tests))
    ident = git.SCRATCH_IDENT
    theirs = repo.write_commit(only_tests, [original.parent], "ggstack scratch\n", ident, ident)
    merged = repo.cherry_pick_tree(theirs, original.parent, repo.resolve(start, "tree"))
    if merged.clean:
        return merged.tree
    conflicted = [p for p in merged.conflicted_paths if p in tests]
    kept = repo.ls_tree(repo.resolve(start, "tree"), conflicted)
    return repo.edit_tree(merged.tree, {p: kept.get(p) or tests[p] for p in conflicted})


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
    use_cache: bool = True,
) -> Run:
    """``ggstack test``: every job here, folded into a copy of ``run``.

    ``jobs``: how many CPU test commands may run at once (GPU commands always
    run one at a time: they share the one device); ``use_cache`` off reruns
    everything (and stores the new results)."""
    planned = plan(repo, stack, run, gpu=gpu, only=only)
    results, gpu_state = execute(repo, stack, planned, gpu=gpu, progress=progress, parallel=jobs, use_cache=use_cache)
    tested = fold(repo, run, planned, results, gpu_state, require_tests=stack.config.pr.require_tests)
    if not planned and not only and stack.patches:
        # Not a silent "ok": a tests.paths that matches nothing here (pytest's own tests are
        # under testing/, not tests/) is the likeliest reason, and the user can fix it.
        paths = ", ".join(stack.config.tests.paths)
        tested.stages["test"] = (
            f"ok: nothing ran — no patch changes a test file matching tests.paths ({paths}); "
            f"set [tests] paths in {stack.path}/stack.toml if its tests live elsewhere"
        )
    return tested


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
    use_cache: bool = True,
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
    results, gpu_state = execute(repo, stack, chosen, gpu=gpu, progress=progress, use_cache=use_cache)
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
        except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than the parser follows
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
    return fold(repo, run, jobs, results, gpu_state, require_tests=stack.config.pr.require_tests)


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
    python = interpreter(expand(stack.config.tests.gpu or stack.config.tests.cpu, ()), env)
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
    use_cache: bool = True,
) -> tuple[dict[str, list[TestResult]], str | None]:
    """Every run of ``jobs`` (cache first, unless ``use_cache`` is off); (results by job id, what GPU there was)."""
    check_gpu_mode(gpu)
    prune_leftovers(repo)
    gpu_state: str | None = "off" if gpu == "off" else None
    present, why = False, ""
    if gpu == "require" or (gpu == "auto" and any(j.kind == "gpu" for j in jobs)):
        present, why = detect_gpu(stack)
        gpu_state = "present" if present else "absent"
        if gpu == "require" and not present:
            raise UserError(f"--gpu require: {why}; run on a GPU runner or use --gpu auto")
    runner = _Runner(repo, stack, present, use_cache)
    steps = _Steps(sum(len(j.trees) for j in jobs), progress)
    results: dict[str, list[TestResult]] = {}
    cpu_runs: list[tuple[Job, int, TestTree]] = []
    for job in jobs:
        if job.kind == "gpu" and not present:
            steps.say(f"{job.patch} gpu: collecting (no GPU here)")
            results[job.id] = runner.without_gpu(job, why)
            steps.done += len(job.trees)
            continue
        results[job.id] = [None] * len(job.trees)  # type: ignore[list-item]
        for i, tt in enumerate(job.trees):
            if job.kind == "cpu" and parallel > 1:
                cpu_runs.append((job, i, tt))
                continue
            steps.say(f"{job.patch} {job.kind} run {i + 1}/{len(job.trees)} ({LABELS[tt.where]})")
            results[job.id][i] = runner.run(job, tt)
            steps.done += 1
    if cpu_runs:
        # The test commands are independent processes in their own worktrees;
        # what touches git (worktree add/remove) is serialised by _GIT_LOCK.
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            futures = [(job, i, tt, pool.submit(runner.run, job, tt)) for job, i, tt in cpu_runs]
            for job, i, tt, future in futures:
                results[job.id][i] = future.result()
                steps.done += 1
                steps.say(f"{job.patch} cpu run {i + 1}/{len(job.trees)} ({LABELS[tt.where]})")
    steps.say("done")
    return results, gpu_state


@dataclass
class _Steps:
    total: int
    progress: Progress | None
    done: int = 0

    def say(self, what: str) -> None:
        if self.progress:
            self.progress(self.done, self.total, what)


def _not_run(job: Job, tt: TestTree, reason: str, *, status: str = "not-run") -> TestResult:
    return TestResult(job.kind, tt.where, status, tree=tt.tree or "", command=job.command, reason=reason or tt.reason)


_KEPT = {f.name for f in dataclasses.fields(TestResult)} - {"kind", "where", "tree", "command", "cached"}
_SHAPE = TestResult("cpu", "base", "passed")  # each kept field's type, as its default has it


def _restored(job: Job, tt: TestTree, stored: dict[str, Any] | None) -> TestResult | None:
    """A result read from the cache; None where there is none or it is not one (it is run again)."""
    if stored is None or not isinstance(stored.get("status"), str) or not stored.keys() <= _KEPT:
        return None
    for k, v in stored.items():
        want = getattr(_SHAPE, k)
        if isinstance(want, list):
            if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                return None
        elif not isinstance(v, type(want)) and not (isinstance(want, float) and type(v) is int):
            return None
    return TestResult(job.kind, tt.where, tree=tt.tree or "", command=job.command, cached=True, **stored)


class _Runner:
    """Runs one tree's tests, or reads them from the cache, for one ``execute``.

    The cache key holds what can change a result short of the network: the
    tree, the command, the interpreter the command runs and a digest of the
    distributions *that* interpreter sees (so installing pytest or a new torch
    reruns), the tests' environment and, for GPU tests, whether there is a GPU.
    The distributions are read once per interpreter per ``execute``."""

    def __init__(self, repo: git.Repository, stack: Stack, gpu_present: bool, use_cache: bool) -> None:
        self.repo, self.stack, self.gpu_present = repo, stack, gpu_present
        self.results = cache.Entries(repo, "tests", version=_CACHE_VERSION, read=use_cache)
        self._digests: dict[str, str] = {}
        self._lock = threading.Lock()
        self._git_config: dict[str, str] | None = None

    def git_config(self) -> dict[str, str]:
        """The test runs' git config (``own_git_config``), read once for the whole ``execute``."""
        with self._lock:
            if self._git_config is None:
                self._git_config = own_git_config()
            return self._git_config

    def run(self, job: Job, tt: TestTree, *, collect_only: bool = False) -> TestResult:
        if tt.tree is None:
            return _not_run(job, tt, tt.reason)
        key = self.key(job, tt.tree, collect_only)
        stored = _restored(job, tt, self.results.get(key))
        if stored is not None:
            return stored
        # What the tests print is the patch's code speaking: no secret it found goes into the cache or the Run.
        ran = _run_in_worktree(self.repo, self.stack, job, tt, self.git_config(), collect_only)
        result = secrets.Secrets.from_env().scrub_all(ran)
        if result.status != "timeout":  # a hang may be the machine's load: try it again next time
            self.results.put(key, {k: v for k, v in dataclasses.asdict(result).items() if k in _KEPT})
        return result

    def without_gpu(self, job: Job, why: str) -> list[TestResult]:
        """GPU tests on a machine without a GPU: skipped (so inconclusive) where the
        patch has any — found by collecting them — and "no-tests" where it has none,
        so that a patch without GPU tests is not held for want of a GPU."""
        tt = next((t for t in job.trees if t.where == "patched" and t.tree), None) or next(
            (t for t in job.trees if t.tree), None
        )
        if tt is None:
            return [_not_run(job, t, t.reason) for t in job.trees]
        probe = self.run(job, tt, collect_only=True)
        if probe.status == "no-tests":
            why = "no GPU tests among the patch's test files (collected without a GPU)"
        elif probe.status in _COULD_NOT_RUN:  # not even collectable: a harness error, not a missing GPU
            return [dataclasses.replace(probe, where=t.where, tree=t.tree or "") for t in job.trees]
        status = "no-tests" if probe.status == "no-tests" else "skipped"
        out = [_not_run(job, t, why, status=status) for t in job.trees]
        for r in out:
            r.cached = probe.cached
        return out

    def key(self, job: Job, tree: str, collect_only: bool) -> str:
        env = _base_env(self.stack)
        python = interpreter(job.command, env)
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


_DISTRIBUTIONS_PROBE = (
    "import hashlib, importlib.metadata as m, json, sys; "
    "ds = sorted({(d.metadata['Name'] or '', d.version) for d in m.distributions()}); "
    "print(hashlib.sha256(json.dumps([sys.version, ds]).encode()).hexdigest())"
)


def distributions_digest(python: str, env: dict[str, str]) -> str:
    """A digest of the distributions ``python`` can import (importlib.metadata), and its version."""
    try:
        proc = subprocess.run(
            [python, "-c", _DISTRIBUTIONS_PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not readable: {type(e).__name__}"
    return proc.stdout.strip() if proc.returncode == 0 else f"not readable: exit code {proc.returncode}"


def interpreter(command: str, env: dict[str, str]) -> str:
    """The Python a test command runs: its first word when that is a Python
    (``{python}`` expands to ours), else ``python`` on the tests' PATH, else ours."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    first = next((w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)), "")
    path = env.get("PATH")
    if re.match(r"^python[0-9.]*$", os.path.basename(first)):
        found = first if "/" in first else shutil.which(first, path=path)
    else:
        found = shutil.which("python", path=path)
    # Not resolved through its links: a venv's python is a link to the base interpreter, and only
    # through the link does it see the venv's own site-packages (what the cache key must cover).
    return os.path.abspath(found or sys.executable)


def _base_env(stack: Stack) -> dict[str, str]:
    """The tests' environment, by allow-list: a patch's tests are the patch's code, and
    their output lands in the Run. So no credential in any form (``secrets``), nothing that
    points git at the user's repository, and HOME is a scratch directory of the run's own
    (``_run_in_worktree``) unless stack.toml's ``tests.home = "user"``."""
    cfg = stack.config.tests
    named = {n for n in cfg.pass_env if not n.endswith("*")} | _PASSED_ENV
    prefixes = (*_PASSED_PREFIXES, *(n[:-1] for n in cfg.pass_env if n.endswith("*")))
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in named or k.startswith(prefixes)) and not secrets.credential_name(k) and not secrets.has_userinfo(v)
    }
    if cfg.home == "user" and "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    env.update(dict(cfg.env))
    return env


def _run_in_worktree(
    repo: git.Repository,
    stack: Stack,
    job: Job,
    tt: TestTree,
    git_config: Mapping[str, str],
    collect_only: bool = False,
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
        imports = _watch_imports(wt, tmp, env)
        scratch_home = stack.config.tests.home != "user" and "HOME" not in dict(stack.config.tests.env)
        env.update(_own_git_config(tmp, git_config, home=scratch_home))
        if scratch_home:  # what `pip install --user` put in your HOME stays importable
            env.setdefault("PYTHONUSERBASE", site.getuserbase())
        marker = f"{os.getpid()}-{os.path.basename(wt)}"
        env[_MARKER] = marker
        started = time.monotonic()
        rc, timed_out = run_group(job.command, wt, env, log, timeout, wt + ".pgid")
        seconds = round(time.monotonic() - started, 2)
        left = sweep(lambda m: m == marker)
        with open(log, "rb") as f:
            f.seek(
                max(0, os.path.getsize(log) - 8 * _TAIL_CHARS)
            )  # only the tail is kept: a chatty suite can write gigabytes
            output = f.read().decode("utf-8", "replace")
        cases = read_junit(junit)
        in_src = os.listdir(os.path.join(wt, "src")) if os.path.isdir(os.path.join(wt, "src")) else []
        outside = _imported_outside(imports, wt)
    if collect_only:  # nothing ran: pytest's exit code 5 is "none collected"
        cases = None if rc in (0, 5) else cases
        said = testresult.classify(
            0 if rc == 5 else rc, timed_out, cases, output, timeout=timeout, worktree=wt, in_src=in_src
        )
        status = "no-tests" if rc == 5 else said.status
        said = dataclasses.replace(said, status=status)
    else:
        said = testresult.classify(
            rc,
            timed_out,
            cases,
            output,
            timeout=timeout,
            worktree=wt,
            code_paths=job.code_paths,
            in_src=in_src,
            outside=outside,
        )
    result = TestResult(job.kind, tt.where, said.status, tree=tt.tree or "", command=job.command, seconds=seconds)
    if cases:
        result.passed, result.failed, result.skipped, result.errors = (
            cases.passed,
            cases.failed + list(said.import_failures),
            cases.skipped,
            [t for t in cases.errors if t not in said.import_failures],
        )
    if said.status in _FAILING:
        result.output_tail = _tail(output)
    result.reason, result.harness_error, result.explanation = said.reason, said.harness_error, said.explanation
    result.left_processes = left
    return result


# A pytest plugin put on the path of a src layout's test runs: at the session's end it writes
# where each of the tree's own src/ packages was imported from. An installed copy (``pip install
# -e`` of the user's checkout) shadows the checkout under test, and then base and patched runs
# test the same code: what they say is no evidence about the tree.
_IMPORTS_PLUGIN = """\
import json, os, sys


def pytest_sessionfinish(session):
    found = {}
    for name in os.environ["GGSTACK_SRC_PACKAGES"].split(","):
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
        if where:
            found[name] = where
    with open(os.environ["GGSTACK_IMPORTS"], "w") as f:
        json.dump(found, f)
"""


def _watch_imports(wt: str, tmp: str, env: dict[str, str]) -> str | None:
    """Where the plugin will say where the tree's src/ packages came from (None: no src layout)."""
    src = os.path.join(wt, "src")
    names = sorted(
        name.removesuffix(".py")
        for name in (os.listdir(src) if os.path.isdir(src) else [])
        if name.removesuffix(".py").isidentifier() and (name.endswith(".py") or os.path.isdir(os.path.join(src, name)))
    )
    if not names:
        return None
    plugin_dir = os.path.join(tmp, "plugin")
    os.makedirs(plugin_dir)
    state.write_atomic(os.path.join(plugin_dir, "_ggstack_imports.py"), _IMPORTS_PLUGIN.encode())
    env["PYTHONPATH"] += os.pathsep + plugin_dir  # last: it shadows nothing of the tests'
    env["PYTEST_ADDOPTS"] += " -p _ggstack_imports"
    env["GGSTACK_SRC_PACKAGES"] = ",".join(names)
    env["GGSTACK_IMPORTS"] = os.path.join(tmp, "imports.json")
    return env["GGSTACK_IMPORTS"]


def _imported_outside(imports: str | None, wt: str) -> list[tuple[str, str]]:
    """(package, where) of each src/ package the tests imported from outside the tree under test."""
    try:
        with open(imports or "", encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError, RecursionError):
        return []  # no src layout, not pytest, or it died before the end: nothing observed
    if not isinstance(found, dict) or not all(isinstance(w, str) for w in found.values()):
        return []  # written where the tests run: whatever they left there is no record of ours
    inside = os.path.realpath(wt) + os.sep
    return [(n, w) for n, w in sorted(found.items()) if not os.path.realpath(w).startswith(inside)]


_MARKER = "GGSTACK_TEST_RUN"  # in the environment of every process a test run starts: "<ggstack pid>-<tree dir>"


def own_git_config() -> dict[str, str]:
    """The user's global and system git config as a test run gets them: every setting but
    those that hand out a credential (an auth header, a credential helper, a client key, a
    URL with userinfo: ``secrets.credential_setting``), includes read in; by variable."""
    home = os.path.expanduser("~")
    found = {
        "GIT_CONFIG_GLOBAL": [os.environ.get("GIT_CONFIG_GLOBAL", ""), os.path.join(home, ".gitconfig")],
        "GIT_CONFIG_SYSTEM": [os.environ.get("GIT_CONFIG_SYSTEM", ""), "/etc/gitconfig"],
    }
    texts = {}
    for var, candidates in found.items():
        source = next((c for c in candidates if c and os.path.isfile(c)), None)
        entries = git.config_file_entries(source) if source else []
        texts[var] = git.render_config(
            [
                (k, v)
                for k, v in entries
                if not secrets.credential_setting(k, v or "") and not k.lower().startswith(("include.", "includeif."))
            ]
        )
    return texts


def _own_git_config(tmp: str, texts: Mapping[str, str], *, home: bool) -> dict[str, str]:
    """The run's copies of the git config (``own_git_config``): the same identity and settings,
    but a ``git config --global`` there changes only the copy; with ``home``, a scratch HOME
    whose ``.gitconfig`` is the global copy."""
    env = {}
    if home:
        env["HOME"] = os.path.join(tmp, "home")
        os.makedirs(env["HOME"], exist_ok=True)
    for var, text in texts.items():
        path = (
            os.path.join(env["HOME"], ".gitconfig")
            if home and var == "GIT_CONFIG_GLOBAL"
            else os.path.join(tmp, var.lower())
        )
        with contextlib.suppress(OSError):
            state.write_atomic(path, text.encode())
        env[var] = path
    return env


def sweep(owned: Callable[[str], bool]) -> list[str]:
    """Kill every process whose environment carries a test-run marker that
    ``owned`` claims — what a test left behind, even outside its process
    group (``setsid sleep 302 &``); what was killed, as "pid command"."""
    killed: list[str] = []
    for _ in range(3):  # a process may fork while the first pass runs
        found = []
        for entry in _proc_entries():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                continue
            for item in environ.split(b"\0"):
                if item.startswith(_MARKER.encode() + b"=") and owned(
                    item.split(b"=", 1)[1].decode("utf-8", "replace")
                ):
                    found.append(int(entry))
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    words = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pid} {words[:80]}")
    return killed


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


def read_junit(path: str) -> testresult.Cases | None:
    """Per-test outcomes from a JUnit XML file; None when there is none."""
    return testresult.read_junit(path)


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
            repo.add_isolated_checkout(path, commit)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)  # its own repository: nothing of the user's to unregister
        with contextlib.suppress(OSError):
            os.unlink(path + ".pgid")


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
    sweep(lambda marker: not state.alive(int(marker.split("-", 1)[0])) if marker.split("-", 1)[0].isdigit() else False)
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
    repo: git.Repository,
    run: Run,
    jobs: Sequence[Job],
    results: dict[str, list[TestResult]],
    gpu_state: str | None,
    *,
    require_tests: bool = True,
) -> Run:
    """A copy of ``run`` with each tested patch's results and the verdict they give.

    ``require_tests`` (stack.toml ``pr.require_tests``): a patch the text
    calls needed whose tests could not decide is held (``inconclusive``)
    rather than given a PR."""
    run = run.copy()
    by_patch: dict[str, list[Job]] = {}
    for job in jobs:
        by_patch.setdefault(job.patch, []).append(job)
    for o in run.outcomes:
        patch_jobs = by_patch.get(o.name)
        if not patch_jobs:
            continue
        text = _restore(o)
        o.tests = [r for j in patch_jobs for r in results[j.id]]
        judged = [(j, judge(j.kind, {r.where: r for r in results[j.id]}, j.own)) for j in patch_jobs]
        _apply(repo, o, text, judged, require_tests)
    run.gpu = gpu_state
    run.stages["test"] = "ok"
    return run


_COULD_NOT_RUN = ("error", "timeout")  # harness errors: never evidence
_UNDECIDED = ("could-not-run", "inconclusive")
_WHERE_WORDS = {"patched": "with the patch", "base": "on the base without the patch", "old-base": "on the old base"}


def judge(kind: str, runs: dict[str, TestResult], own: Collection[str] = ()) -> Judgement:
    """What one kind's three runs say about a patch (README "Tests": the rule table).

    Only tests that ran and failed count: a run that could not run (a harness
    error) or was skipped decides nothing. A test the patch neither adds nor
    changes (``own``: the names of those it does) that fails on the base, on
    the old base and with the patch alike (the environment's failure, not the
    patch's) is no evidence either way: it is reported as pre-existing."""
    patched, base, old = runs.get("patched"), runs["base"], runs.get("old-base")
    seen = set(patched.failed) if patched is not None else set()
    pre = tuple(
        t for t in base.failed if old is not None and t in old.failed and t in seen and _test_name(t) not in own
    )
    judged = _judge_runs(kind, patched, base, old, set(pre))
    if not pre:
        return judged
    detail = (
        f"{judged.detail}; pre-existing (failing with the patch, on the base and on the old base): {_names(list(pre))}"
    )
    return dataclasses.replace(judged, detail=detail, pre_existing=pre)


def _test_name(test: str) -> str:
    """A test id's function name: ``tests.test_c::TestC::test_x[1]`` -> ``test_x``."""
    return test.rpartition("::")[2].rpartition(".")[2].partition("[")[0]


_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(")


def own_tests(patch_diff: str, tests: Collection[str]) -> tuple[str, ...]:
    """The test functions the patch adds or changes in its test files (``tests``): a ``def`` among
    its added lines, or the function a hunk's header names."""
    found = []
    for fc in diff.parse(patch_diff):
        if fc.new_path not in tests:
            continue
        for h in fc.hunks:
            named = _DEF.search(h.header.split("@@")[-1])
            found += [named.group(1)] if named else []
            found += [m.group(1) for b in h.blocks for line in b.added if (m := _DEF.match(line))]
    return tuple(dict.fromkeys(found))


def _judge_runs(
    kind: str, patched: TestResult | None, base: TestResult, old: TestResult | None, pre: set[str]
) -> Judgement:
    passing: set[str] | None = None
    if patched is not None and patched.status != "not-run":
        early = _judge_patched(kind, patched, pre)
        if early is not None:
            return early
        passing = set(patched.passed)
    # Only tests seen failing: one that did not run on the base (``-x`` stopped it) is no evidence.
    failing = [t for t in base.failed if t not in pre and (passing is None or t in passing)] or [
        t for t in base.failed if t not in pre
    ]
    if base.status == "failed" and failing:
        how = "and pass with it" if passing is not None else "(the patch does not apply, so they were not run with it)"
        return Judgement(
            "needed", tuple(failing), f"{kind} tests fail on the base without the patch {how}: {_names(failing)}"
        )
    if base.status in _COULD_NOT_RUN:
        return _could_not_run(kind, base)
    if base.status in ("skipped", "not-run"):
        return _skipped(kind, base)
    if base.status == "no-tests":
        return Judgement("none", (), f"no {kind} tests collected on the base")
    return _judge_control(kind, base, old, pre)


def _judge_patched(kind: str, patched: TestResult, pre: set[str]) -> Judgement | None:
    failed = [t for t in patched.failed if t not in pre]
    if patched.status == "failed" and (failed or not patched.failed):
        return Judgement("broken", tuple(failed), f"{kind} tests fail with the patch: {_names(failed)}")
    if patched.status in _COULD_NOT_RUN:
        return _could_not_run(kind, patched)
    if patched.status == "skipped":
        return _skipped(kind, patched)
    if patched.status == "no-tests":
        return Judgement("none", (), f"no {kind} tests collected")
    return None


def _could_not_run(kind: str, r: TestResult) -> Judgement:
    """A harness error: the reason, where, and what would settle it."""
    why = r.reason or r.status
    return Judgement(
        "could-not-run",
        tuple(r.errors),
        f"{kind} tests could not run: {why} (in tests.{kind}, {_WHERE_WORDS.get(r.where, r.where)})",
        testresult.settle(r.harness_error or r.status, why, r.command),
    )


def _skipped(kind: str, r: TestResult) -> Judgement:
    settle = (
        f"run the {kind} tests on a machine with a GPU (`ggstack test --gpu require` on a GPU runner)"
        if kind == "gpu"
        else f"find out why the {kind} tests were skipped"
    )
    return Judgement(
        "inconclusive", tuple(r.skipped), f"{kind} tests {_WHERE_WORDS.get(r.where, r.where)}: {_why(r)}", settle
    )


def _judge_control(kind: str, base: TestResult, old: TestResult | None, pre: set[str]) -> Judgement:
    """The tests pass on the base without the patch: does the old base (the control) fail them?"""
    if old is not None and old.status == "failed" and not set(old.failed) - pre:
        return Judgement("none", (), f"{kind} tests: only pre-existing failures on the old base: no behaviour evidence")
    if old is None or old.status != "failed":
        if old is not None and old.status == "passed":
            why = "the control: pass on the old base too, so they cannot tell the change apart"
        else:
            why = f"the control on the old base did not run ({_why(old) if old else 'not run'})"
        return Judgement(
            "none", (), f"{kind} tests pass on the base without the patch, but {why}: no behaviour evidence"
        )
    shown = [t for t in base.passed if t in old.failed] or [t for t in old.failed if t not in pre]
    return Judgement(
        "represented",
        tuple(shown),
        f"{kind} tests fail on the old base and pass on the base without the patch: {_names(shown)}",
    )


def _why(r: TestResult) -> str:
    return r.reason or r.status


def _names(tests: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(tests[:limit])
    return shown + (f" and {len(tests) - limit} more" if len(tests) > limit else "") if tests else "(no test names)"


def combine(judgements: Sequence[Judgement]) -> str:
    """One judgement of the kinds: broken, then needed (any test failing
    without the patch means the base lacks something), then represented, then
    could-not-run, then inconclusive. A kind that could not decide (GPU tests
    without a GPU, a harness error) does not overrule one that ran and decided;
    it stays in the evidence (``pending``) and keeps the Run in need of attention."""
    kinds = {j.kind for j in judgements}
    for kind in ("broken", "needed", "represented", *_UNDECIDED):
        if kind in kinds:
            return kind
    return "none"


def _restore(o: Outcome) -> TextVerdict | None:
    """The text verdict the tests fold onto, and the outcome without an earlier fold's tests: folding
    twice is folding once."""
    folded = [e for e in o.evidence if e.kind == "tests"]
    if o.text is None and o.verdict is not None:
        before = folded[0].data.get("before") if folded else None  # a Run of an older ggstack
        if isinstance(before, dict) and before.get("verdict"):
            o.text = TextVerdict(Verdict(before["verdict"]), Recommendation(before["recommendation"]), "")
            o.text.represented_by = list(before.get("represented_by", []))
        elif not folded:
            o.text = TextVerdict(o.verdict, o.recommendation or rules.recommend(o.verdict, False), "")
            o.text.represented_by = list(o.represented_by)
    o.evidence = [e for e in o.evidence if e.kind != "tests"]
    o.tests = []
    return o.text


def _apply(
    repo: git.Repository, o: Outcome, text: TextVerdict | None, judged: Sequence[tuple[Job, Judgement]], required: bool
) -> None:
    """Fold one patch's judgements onto its text verdict (``rules.fold``; README "Tests")."""
    judgements = [j for _, j in judged]
    kind = combine(judgements)
    detail = "; ".join(j.detail for j in sorted(judgements, key=lambda j: j.kind != kind))  # the deciding kind first
    has_pr = o.pr is not None and o.pr.number is not None and o.pr.state == "open"
    touching = _candidates(repo, judged[0][0]) if kind == "represented" and not (text and text.represented_by) else []
    d = rules.fold(
        text, rules.FromTests(kind, detail, required, has_pr, o.applied, tuple(_brought(o)), tuple(touching))
    )
    o.verdict, o.recommendation = d.verdict, d.recommendation
    if d.commits or text:
        o.represented_by = list(d.commits or (text.represented_by if text else []))
    o.evidence.append(Evidence("tests", d.detail + _left_behind(o), list(d.commits), data=_tests_data(d, judged, kind)))


def _left_behind(o: Outcome) -> str:
    left = [
        f"{r.kind} {LABELS.get(r.where, r.where)}: {', '.join(r.left_processes)}" for r in o.tests if r.left_processes
    ]
    return "; left processes behind (killed): " + "; ".join(left) if left else ""


def _tests_data(d: rules.Folded, judged: Sequence[tuple[Job, Judgement]], kind: str) -> dict[str, object]:
    judgements = [j for _, j in judged]
    undecided = [jd for jd in judgements if jd.kind in _UNDECIDED]
    return {
        "judgement": kind,
        "rule": d.rule,
        "pending": sorted(jb.kind for jb, jd in judged if jd.kind in _UNDECIDED and kind not in _UNDECIDED),
        "tests": sorted({t for j in judgements if j.kind == kind for t in j.tests}),
        "runs": {jb.kind: jd.kind for jb, jd in judged},
        "agrees_with_text": d.agrees,
        "settle": "; ".join(dict.fromkeys(j.settle for j in undecided if j.settle)),
        "pre_existing": sorted({t for j in judgements for t in j.pre_existing}),
    }


def _brought(o: Outcome) -> list[str]:
    """The base commits blame found bringing the patch's lines, where the text evidence named
    none as representing it: a base that redid a change its own way (a reverted pick done
    again by a consolidating commit) is represented by that commit once its tests say so."""
    found = (e.commits for e in o.evidence if e.kind is Signal.BLAME and e.says is Says.PRESENT)
    return list(dict.fromkeys(c for commits in found for c in commits))


def _candidates(repo: git.Repository, job: Job, limit: int = 5) -> list[str]:
    """The commits between the old base and the base that touch the patch's
    non-test files: where the behaviour most likely came from."""
    trees = {t.where: t for t in job.trees}
    old, base = trees["old-base"].parent, trees["base"].parent
    if not old or not base or not job.code_paths:
        return []
    return repo.rev_list(f"{old}..{base}", f"--max-count={limit}", "--", *job.code_paths)
