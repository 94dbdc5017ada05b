"""The test jobs spread over CI machines (``--matrix``, ``--shard``) and merged back into one Run
(``--merge``) as a local ``test`` would have made it, refusing results run on other trees."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from ggstack import git
from ggstack.errors import UserError
from ggstack.model import Progress, Run, Stack, TestResult
from ggstack.testing.plan import Job, plan_jobs
from ggstack.testing.runner import execute, misfit, not_run
from ggstack.testing.verdict import fold_tests

CPU_RUNNER = "ubuntu-latest"  # runs-on of CPU matrix entries
RESULTS_FORMAT = "ggstack-test-results"


def matrix(
    repo: git.Repository, stack: Stack, run: Run, *, gpu: str = "auto", only: Sequence[str] = ()
) -> dict[str, Any]:
    """For GitHub Actions' ``strategy.matrix: ${{ fromJSON(...) }}``."""
    jobs = plan_jobs(repo, stack, run, gpu=gpu, only=only)
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
    chosen = _chosen(plan_jobs(repo, stack, run, gpu=gpu, only=only), part, job_id)
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


def _chosen(jobs: list[Job], part: tuple[int, int] | None, job_id: str | None) -> list[Job]:
    if job_id is not None:
        return _the_job(jobs, job_id)
    return jobs if part is None else _every_nth(jobs, part)


def _the_job(jobs: list[Job], job_id: str) -> list[Job]:
    chosen = [j for j in jobs if j.id == job_id]
    if not chosen:
        known = ", ".join(j.id for j in jobs) or "none"
        raise UserError(f"no test job {job_id!r} for this stack and base (jobs: {known}; see --matrix)")
    return chosen


def _every_nth(jobs: list[Job], part: tuple[int, int]) -> list[Job]:
    k, n = part
    if not 1 <= k <= n:
        raise UserError(f"--shard {k}/{n}: K must be between 1 and N")
    return [j for i, j in enumerate(jobs) if i % n == k - 1]


def load_results(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    return [(path, _read_document(path)) for path in paths]


def _read_document(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise UserError(f"cannot read results file: {e.strerror}", path=path) from None
    except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than the parser follows
        raise UserError(f"not a JSON results file: {e}", path=path) from None
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        raise UserError("not a ggstack test results file (written by `ggstack test --shard`)", path=path)
    if not _job_entries(doc.get("jobs", [])):
        raise UserError(
            '"jobs" must be a list of objects, each with an "id" and a list of "tests" (edited by hand?)', path=path
        )
    return doc


def _job_entries(jobs: object) -> bool:
    return isinstance(jobs, list) and all(_job_entry(j) for j in jobs)


def _job_entry(j: object) -> bool:
    return (
        isinstance(j, dict)
        and isinstance(j.get("id"), str)
        and isinstance(j.get("tests", []), list)
        and all(isinstance(t, dict) for t in j.get("tests", []))
    )


def merge(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    documents: Sequence[tuple[str, dict[str, Any]]],
    *,
    gpu: str = "auto",
    only: Sequence[str] = (),
) -> Run:
    jobs = plan_jobs(repo, stack, run, gpu=gpu, only=only)
    by_id = {j.id: j for j in jobs}
    results: dict[str, list[TestResult]] = {}
    gpu_seen: list[str | None] = []
    for path, doc in documents:
        _same_stack_and_base(path, doc, stack, run)
        gpu_seen += _take_results(path, doc, by_id, results)
    for job in jobs:
        if job.id not in results:
            reason = f"no results for job {job.id} in the merged files"
            results[job.id] = [not_run(job, t, reason) for t in job.trees]
    return fold_tests(repo, run, jobs, results, _merged_gpu(gpu, gpu_seen), require_tests=stack.config.pr.require_tests)


def _take_results(
    path: str, doc: dict[str, Any], by_id: dict[str, Job], results: dict[str, list[TestResult]]
) -> list[str | None]:
    """Into ``results``, this merge's jobs from one document; the document's GPU state once a GPU job."""
    gpu_seen = []
    for entry in doc.get("jobs", []):
        job = by_id.get(entry.get("id"))
        if job is None:
            continue  # left out by this merge's --only or --gpu off
        results[job.id] = _entry_results(path, job, entry)
        if job.kind == "gpu":
            gpu_seen.append(doc.get("gpu"))
    return gpu_seen


def _same_stack_and_base(path: str, doc: dict[str, Any], stack: Stack, run: Run) -> None:
    if doc.get("stack") != stack.name or doc.get("base") != run.base:
        raise UserError(
            f"results are for stack {doc.get('stack')!r} on {str(doc.get('base'))[:12]}, "
            f"not {stack.name!r} on {run.base[:12]} (run the shards and --merge with the same --onto)",
            path=path,
        )


def _entry_results(path: str, job: Job, entry: dict[str, Any]) -> list[TestResult]:
    if entry.get("trees") != {t.where: t.tree for t in job.trees}:
        raise UserError(f"job {job.id} was run on other trees than this stack gives on this base", path=path)
    tests = entry.get("tests", [])
    try:
        results = [TestResult(**t) for t in tests]
    except TypeError as e:  # a test result with missing or unknown keys
        raise UserError(f"job {job.id}: not a test result: {e}", path=path) from None
    for t in tests:  # a value of the wrong type would be a traceback in the report
        if (key := misfit(t)) is not None:
            raise UserError(f"job {job.id}: not a test result: {key!r} is {t[key]!r}", path=path)
    return results


def _merged_gpu(gpu: str, seen: Sequence[str | None]) -> str | None:
    if gpu == "off":
        return "off"
    if seen:
        return "present" if all(g == "present" for g in seen) else "absent"
    return None
