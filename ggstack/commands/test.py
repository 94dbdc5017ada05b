"""``ggstack test``: each patch's own tests, whole or split into a CI's jobs."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ggstack import exits, git, state
from ggstack.commands.context import Ctx, complete_refs, complete_stacks, handled
from ggstack.commands.output import console, print_json, warn
from ggstack.commands.progress import StageProgress
from ggstack.errors import UserError
from ggstack.model import Run, Stack


@click.command("test")
@click.argument("stack", shell_complete=complete_stacks)
@click.argument("results_files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--onto", default=None, help="The base to test on [default: stack.toml target.base].", shell_complete=complete_refs
)
@click.option(
    "--gpu",
    type=click.Choice(["auto", "require", "off"]),
    default="auto",
    show_default=True,
    help="auto: GPU tests where there is a GPU, else inconclusive; require: fail without one; off: skip them.",
)
@click.option("--only", multiple=True, help="Test only this patch (index or file name; repeatable).")
@click.option(
    "--matrix",
    is_flag=True,
    help="Print the job list for the CI (--ci) and run nothing: GitHub Actions strategy.matrix, or a Buildkite pipeline.",
)
@click.option(
    "--ci",
    type=click.Choice(["actions", "buildkite"]),
    default="actions",
    show_default=True,
    help="With --matrix: actions prints the matrix JSON; buildkite a pipeline for `buildkite-agent pipeline upload`.",
)
@click.option(
    "--shard",
    default=None,
    metavar="K/N",
    help="Run every N-th job of the matrix, starting at the K-th, into --results.",
)
@click.option("--job", "job_id", default=None, help="Run one job of the matrix (its id) into --results.")
@click.option(
    "--results",
    "results_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Where --shard/--job write their results [default: ggstack-test-<shard or job>.json].",
)
@click.option("--merge", is_flag=True, help="Fold the RESULTS_FILES written by --shard/--job into the Run.")
@click.option(
    "--bundle",
    "bundle",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the Run's per-patch commits as a git bundle here, for `ggstack pr --run RUN --bundle FILE`.",
)
@click.option(
    "--jobs",
    "-j",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Run this many CPU test commands at once (each in its own worktree); GPU commands always run one at a time.",
)
@click.option(
    "--no-cache",
    "no_cache",
    is_flag=True,
    help="Run every test again instead of reading earlier results (and store the new ones).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the Run as JSON.")
@click.pass_obj
@handled
def command(
    obj: Ctx,
    stack: str,
    results_files: tuple[str, ...],
    onto: str | None,
    gpu: str,
    only: tuple[str, ...],
    matrix: bool,
    ci: str,
    shard: str | None,
    job_id: str | None,
    results_path: str | None,
    merge: bool,
    bundle: str | None,
    jobs: int,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Run each patch's own tests on the base without it, with it, and on its
    old base, and fold what they say into the verdict.

    The tests are the files the patch adds or changes that match
    stack.toml tests.paths; {tests} in tests.cpu/tests.gpu expands to them,
    {python} to the interpreter running ggstack. Each run is a temporary
    checkout of its own under the git dir (its own config, refs, stash); per-test results come from JUnit XML; a run
    that could not run (command missing, module missing, collection error,
    crash, timeout) is a harness error, never evidence. Results are cached by
    tree, command, interpreter and its installed distributions, and GPU
    presence (--no-cache reruns). Exit 1 when a patch is broken.

    \b
    Examples:
      ggstack test my-fork --onto origin/main
      ggstack test my-fork --onto origin/main --matrix                 # a job list for GitHub Actions
      ggstack test my-fork --onto origin/main --shard 1/2 --results results/1.json
      ggstack test my-fork --onto origin/main --merge results/*.json --json
      ggstack test my-fork --onto origin/main --matrix --ci buildkite > pipeline.json

    --shard and --job are the CI's untrusted jobs: they refuse to run where a
    credential is in reach (docs: "The bot").
    """
    from ggstack import handoff
    from ggstack.testing import shards
    from ggstack.testing import stage as test_stage

    _check_test_modes(results_files, matrix, shard, job_id, merge, bundle)
    part = _parse_shard(shard)
    s = obj.stack(stack)
    untrusted = bool(part or job_id)
    if untrusted:
        handoff.refuse_credentials(obj.repo, "test --shard" if part else "test --job")
    run = test_stage.checked_run(obj.repo, s, onto or s.config.target.base)
    if matrix:
        print_json(_job_list(obj.repo, s, run, ci, gpu=gpu, only=only))
        return
    if untrusted:
        path = _results_path(results_path, job_id, shard)
        _run_jobs(obj.repo, s, run, part, job_id, path, gpu=gpu, only=only, use_cache=not no_cache)
        return
    if merge:
        run = shards.merge(obj.repo, s, run, shards.load_results(results_files), gpu=gpu, only=only)
    else:
        with StageProgress(1, "test", min_total=1) as progress:
            run = test_stage.test(
                obj.repo, s, run, gpu=gpu, only=only, progress=progress, jobs=jobs, use_cache=not no_cache
            )
    if bundle:
        handoff.write_bundle(obj.repo, run, bundle)
    if as_json:
        print_json(run.to_json())
    else:
        _print_tested(s, run, only)
    sys.exit(exits.exit_code(run))


def _job_list(repo: git.Repository, s: Stack, run: Run, ci: str, *, gpu: str, only: tuple[str, ...]) -> Any:
    """--matrix: the jobs as the CI reads them, a GitHub Actions matrix or a Buildkite pipeline."""
    from ggstack.testing import shards

    if ci == "buildkite":
        from ggstack import buildkite

        return buildkite.pipeline(repo, s, run, gpu=gpu, only=only)
    return shards.matrix(repo, s, run, gpu=gpu, only=only)


def _run_jobs(
    repo: git.Repository,
    s: Stack,
    run: Run,
    part: tuple[int, int] | None,
    job_id: str | None,
    path: str,
    *,
    gpu: str,
    only: tuple[str, ...],
    use_cache: bool,
) -> None:
    """--shard/--job: a CI job's share of the tests, into a results file for --merge."""
    from ggstack.testing import shards

    with StageProgress(1, "test", min_total=1) as progress:
        doc = shards.shard(
            repo, s, run, part=part, job_id=job_id, gpu=gpu, only=only, progress=progress, use_cache=use_cache
        )
    _write_results(doc, path)


def _print_tested(s: Stack, run: Run, only: tuple[str, ...]) -> None:
    from ggstack.report.text import test_failures, test_table

    out = console()
    chosen = {s.find(key).name for key in only}
    out.print(test_table(run, [p.name for p in s.patches if only and p.name not in chosen]))
    failures = test_failures(run)
    if failures:
        out.print(failures, markup=False, highlight=False, soft_wrap=True)
    if run.stages.get("test", "").startswith("ok: "):
        warn(run.stages["test"].removeprefix("ok: "))


def _check_test_modes(
    results_files: tuple[str, ...], matrix: bool, shard: str | None, job_id: str | None, merge: bool, bundle: str | None
) -> None:
    modes = [m for m, on in (("--matrix", matrix), ("--shard", shard), ("--job", job_id), ("--merge", merge)) if on]
    if bundle and set(modes) - {"--merge"}:
        raise UserError("--bundle goes with --merge (or a whole test run): the Run whose commits it carries")
    if len(modes) > 1:
        raise UserError(f"{' and '.join(modes)} do not go together")
    if results_files and not merge:
        raise UserError(f"unexpected arguments {' '.join(results_files)} (results files go with --merge)")
    if merge and not results_files:
        raise UserError("--merge needs the results files written by --shard/--job")


def _results_path(given: str | None, job_id: str | None, shard: str | None) -> str:
    return given or f"ggstack-test-{job_id or (shard or '').replace('/', '-of-')}.json"


def _write_results(doc: dict, path: str) -> None:
    if os.path.dirname(path):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as e:
            raise UserError(f"--results: cannot create its directory: {e.strerror}", path=path) from None
    state.write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())
    click.echo(f"wrote {path} ({len(doc['jobs'])} job(s))")


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    k, sep, n = text.partition("/")
    if not sep or not (k + n).isascii() or not k.isdigit() or not n.isdigit() or not 1 <= int(k) <= int(n):
        raise UserError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)
