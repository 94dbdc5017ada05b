"""``ggstack sync``: the CI rebase bot's one command, all stages into one Run; a failed stage is recorded, later ones
run on what is still sound. ``pr`` needs every earlier stage to vouch: a PR on a stale base is the noise we avoid."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TextIO

from ggstack import exits, git, pr, replay, secrets, state
from ggstack.check.stack import check_stack
from ggstack.errors import InfraError, UserError
from ggstack.forge import open_forge
from ggstack.model import Outcome, Progress, Run, Stack, Verdict
from ggstack.report.evidence import evidence_words
from ggstack.report.json import run_json
from ggstack.report.summary import markdown
from ggstack.report.words import recommendation_words
from ggstack.testing import stage as test_stage

if TYPE_CHECKING:
    from ggstack.land import Landing

STAGES = ("fetch", "apply", "check", "test", "pr", "land", "rebase-series")
FAILED_INFRA, FAILED_INPUT = exits.FAILED_INFRA, exits.FAILED_INPUT
SKIPPED = "skipped"

NO_FORGE = "--no-forge: the stage that holds the token does it (`ggstack pr --run RUN --bundle FILE`)"


# -- observing the stages -------------------------------------------------------------


class Observer(Protocol):
    def stage(self, name: str, total: int) -> contextlib.AbstractContextManager[Progress | None]: ...

    def finished(self, name: str, state: str) -> None: ...


class Silent:
    @contextlib.contextmanager
    def stage(self, name: str, total: int) -> Iterator[Progress | None]:
        yield None

    def finished(self, name: str, state: str) -> None:
        pass


class ActionsObserver:
    """GitHub Actions log groups, one per stage."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    @contextlib.contextmanager
    def stage(self, name: str, total: int) -> Iterator[Progress | None]:
        self.out.write(f"::group::ggstack {name}\n")
        self.out.flush()
        try:
            yield self._progress
        finally:
            self.out.write("::endgroup::\n")
            self.out.flush()

    def _progress(self, done: int, total: int, what: str) -> None:
        self.out.write(f"{done}/{total} {what}\n")

    def finished(self, name: str, state: str) -> None:
        self.out.write(f"{name}: {state}\n")
        self.out.flush()


# -- sync -------------------------------------------------------------------------------


Stage = Callable[[Progress | None], "Run | str | None"]


class _Stages:
    def __init__(self, observer: Observer, hide: Callable[[str], str], patches: int) -> None:
        self.observer, self.hide, self.patches = observer, hide, patches
        self.states: dict[str, str] = {}
        self.errors: list[str] = []

    def attempt(self, name: str, fn: Stage) -> Run | None:
        """A stage's Run, a state of its own, or None for "ok"."""
        with self.observer.stage(name, self.patches) as progress:
            try:
                result = fn(progress)
            except InfraError as e:  # the message goes into the Run, the log and the summary: scrubbed
                self.states[name], result = f"{FAILED_INFRA}: {self.hide(str(e))}", None
            except UserError as e:
                self.states[name], result = f"{FAILED_INPUT}: {self.hide(str(e))}", None
            else:
                state = result.stages.get(name) if isinstance(result, Run) else result
                self.states[name] = state or "ok"
            if self.states[name].startswith("failed"):
                self.errors.append(f"{name}: {self.states[name].split(': ', 1)[1]}")
            self.observer.finished(name, self.states[name])
        return result if isinstance(result, Run) else None

    def skip(self, name: str, why: str) -> None:
        self.states[name] = f"{SKIPPED}: {why}"
        self.observer.finished(name, self.states[name])

    def into(self, run: Run) -> Run:
        ordered = {s: self.states[s] for s in STAGES if s in self.states}
        return dataclasses.replace(
            run,
            stages={**ordered, **{k: v for k, v in run.stages.items() if k not in ordered}},
            errors=list(dict.fromkeys([*run.errors, *self.errors])),
        )


def sync(
    repo: git.Repository,
    stack: Stack,
    base_ref: str,
    *,
    fetch: bool = False,
    gpu: str = "auto",
    dry_run: bool = False,
    close_redundant: bool = False,
    observer: Observer | None = None,
    env: Mapping[str, str] | None = None,
    use_cache: bool = True,
    rebase_series: bool = False,
    series_branch: str | None = None,
    forge: bool = True,
    land: bool = False,
) -> Run:
    """fetch → apply → check → test → pr (→ land, → rebase-series) into one Run.
    ``forge`` off: no pr stage. ``dry_run`` writes and pushes nothing. An unknown base is a UserError."""
    stages = _Stages(observer or Silent(), secrets.Secrets.from_env(env).scrub, len(stack.patches))
    if fetch:
        base_ref = _fetch(stages, repo, stack.config.target.remote, base_ref)
    base = replay.resolve_base(repo, stack, base_ref)
    run = stages.attempt("apply", lambda p: replay.apply(repo, stack, base_ref, write=not dry_run, progress=p))
    run = _check_and_test(stages, repo, stack, base_ref, run, gpu=gpu, use_cache=use_cache)
    run = _pr_stage(stages, repo, stack, run, forge=forge, dry_run=dry_run, close_redundant=close_redundant, env=env)
    _land_stage(land, stages, lambda _: _land(repo, stack, base_ref, dry_run=dry_run, env=env))
    if rebase_series and run is not None:
        current = run
        proposed = stages.attempt(
            "rebase-series",
            lambda _: _propose_rebased_series(repo, stack, current, series_branch, dry_run=dry_run, env=env),
        )
        run = proposed or run
    return stages.into(run if run is not None else skeleton(stack, base_ref, base))


def _check_and_test(
    stages: _Stages, repo: git.Repository, stack: Stack, base_ref: str, run: Run | None, *, gpu: str, use_cache: bool
) -> Run | None:
    """No tests without verdicts."""
    checked = stages.attempt(
        "check", lambda p: check_stack(repo, stack, base_ref, run=run, progress=p, use_cache=use_cache)
    )
    if checked is None:
        stages.skip("test", "needs the verdicts of check")
        return run
    with secrets.withheld():
        tested = stages.attempt(
            "test", lambda p: test_stage.test(repo, stack, checked, gpu=gpu, progress=p, use_cache=use_cache)
        )
    return tested or checked


def _pr_stage(
    stages: _Stages,
    repo: git.Repository,
    stack: Stack,
    run: Run | None,
    *,
    forge: bool,
    dry_run: bool,
    close_redundant: bool,
    env: Mapping[str, str] | None,
) -> Run | None:
    held_back = _no_pr_because(stages.states, run, forge=forge)
    if held_back or run is None:
        stages.skip("pr", held_back or "apply did not succeed")
        return run
    planned = run
    secrets.release_to_environ()  # the tests are done: the forge token may enter the environment now
    acted = stages.attempt(
        "pr",
        lambda p: pr.pr(repo, stack, planned, dry_run=dry_run, close_redundant=close_redundant, progress=p, env=env),
    )
    return acted or run


def _no_pr_because(stages: Mapping[str, str], run: Run | None, *, forge: bool) -> str | None:
    if not forge:
        return NO_FORGE
    unsound = [s for s in ("fetch", "apply", "check", "test") if stages.get(s, "ok").startswith(("failed", SKIPPED))]
    if unsound or run is None:
        return f"{', '.join(unsound) or 'apply'} did not succeed; the forge is not touched"
    return None


def _land_stage(land: bool, stages: _Stages, fn: Stage) -> None:
    """Only after a green run (pr neither failed, skipped nor offline)."""
    if not land:
        return
    if stages.states.get("pr", "") in ("ok", "dry-run"):
        stages.attempt("land", fn)
    else:
        stages.skip("land", "the run before it was not green; nothing is merged")


def _land(repo: git.Repository, stack: Stack, base_ref: str, *, dry_run: bool, env: Mapping[str, str] | None) -> str:
    from ggstack import land

    base = pr.pr_base(repo, stack, base_ref)
    result = land.land(repo, stack, onto=base, dry_run=dry_run, env=env)
    return ("dry-run: " if dry_run else "ok: ") + "; ".join(_landed_words(result, base, dry_run=dry_run))


def _landed_words(result: Landing, base: str, *, dry_run: bool) -> list[str]:
    words = [_merged_words(result, dry_run=dry_run)]
    if result.closed:
        words.append(f"closed {', '.join(f'#{n}' for n in result.closed)} (already in {base})")
    for extra in (result.queued, f"stopped at {result.stopped}" if result.stopped else None):
        if extra:
            words.append(extra)
    return words


def _merged_words(result: Landing, *, dry_run: bool) -> str:
    if dry_run:
        ready = [f"#{e.number}" for e in result.plan if e.action == "land"]
        return f"would merge {', '.join(ready)}" if ready else "nothing ready to merge"
    return f"merged {', '.join(f'#{n}' for n in result.merged)}" if result.merged else "nothing merged"


def _fetch(stages: _Stages, repo: git.Repository, remote: str, base_ref: str) -> str:
    """``base_ref`` itself where the fetch failed."""
    onto = base_ref

    def fetch_base(_: Progress | None) -> str:
        nonlocal onto
        with secrets.lent():  # git's credentials for this one process; the tests come later
            repo.fetch(remote)
        onto, state = fetched_base(repo, remote, base_ref)
        return state

    stages.attempt("fetch", fetch_base)
    return onto


def fetched_base(repo: git.Repository, remote: str, base_ref: str) -> tuple[str, str]:
    """A local branch behind the one just fetched (a CI checkout's ``main`` from clone time) is not what
    ``--fetch`` means: the fetched one is. A local branch of one's own (ahead, diverged) stays."""
    local = repo.try_resolve(f"refs/heads/{base_ref}")
    tracking = repo.try_resolve(f"refs/remotes/{remote}/{base_ref}")
    if local is None or tracking is None or local == tracking:
        return base_ref, "ok"
    there = f"{remote}/{base_ref}"
    if repo.is_ancestor(local, tracking):
        behind = len(repo.rev_list(f"{local}..{tracking}"))
        return there, f"ok: {base_ref} is {behind} commit(s) behind {there}, just fetched: replaying onto {there}"
    return base_ref, f"ok: the local {base_ref} is not behind {there} (it has commits of its own): replaying onto it"


def _propose_rebased_series(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    series_branch: str | None,
    *,
    dry_run: bool,
    env: Mapping[str, str] | None,
) -> Run:
    from ggstack import rebase_pr

    forge = open_forge(stack, env, dry_run=dry_run)  # without a token: a UserError, or offline for a dry run
    try:
        return rebase_pr.propose(repo, stack, run, series_branch=series_branch, dry_run=dry_run, forge=forge)
    finally:
        forge.close()


def skeleton(stack: Stack, base_ref: str, base: str) -> Run:
    """For when no stage produced a Run."""
    run = Run(stack=stack.name, base_ref=base_ref, base=base, repo_slug=stack.config.target.repo)
    for p in stack.patches:
        run.outcomes.append(
            Outcome(
                p.name,
                p.subject,
                p.provenance.stack_patch_id,
                source_commit=p.provenance.cherry_picked_from or p.source_commit,
                provenance=p.provenance,
            )
        )
    return run


def save_run(repo: git.Repository, run: Run, path: str | None = None) -> str:
    data = secrets.scrub(run_json(run)).encode()  # uploaded by the workflow: no secret in it
    last = os.path.join(repo.state_dir("runs"), _file_safe(run.stack or "commits") + ".json")
    state.write_atomic(last, data)
    if path:
        parent = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(parent, exist_ok=True)
            state.write_atomic(path, data)
        except OSError as e:  # a folder on the way is a file, or not writable
            raise UserError(
                f"--run-json: cannot write it: {e.strerror} (the Run is saved in {last})", path=path
            ) from None
        return path
    return last


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


# -- GitHub Actions ------------------------------------------------------------------


def in_actions(env: Mapping[str, str]) -> bool:
    return env.get("GITHUB_ACTIONS") == "true"


ERROR_VERDICTS = (Verdict.CONFLICT, Verdict.BROKEN)
WARNING_VERDICTS = (Verdict.PARTIAL, Verdict.INCONCLUSIVE)


def workflow_annotations(run: Run, stack: Stack, workspace: str) -> list[str]:
    lines = []
    for o in run.outcomes:
        level = _annotation_level(o)
        if level is None:
            continue
        path = os.path.relpath(os.path.join(stack.path, o.name), workspace)
        verdict = o.verdict.value if o.verdict else "conflict"
        title = f"ggstack: {o.name} is {verdict}"
        message = f"{evidence_words(o)} — recommendation: {recommendation_words(o)}"
        if exits.redundant_open(o):
            message += f"; PR #{o.pr.number if o.pr else None} is still open (pass --close-redundant)"
        lines.append(f"::{level} file={_property(path)},title={_property(title)}::{_data(message)}")
    for error in run.errors:
        lines.append(f"::error title=ggstack::{_data(error)}")
    return lines


def _annotation_level(o: Outcome) -> str | None:
    if o.verdict in ERROR_VERDICTS or (o.verdict is None and o.conflict):
        return "error"
    if o.verdict in WARNING_VERDICTS or exits.redundant_open(o):
        return "warning"
    return None


def publish_to_actions(run: Run, stack: Stack, env: Mapping[str, str], out: TextIO) -> None:
    workspace = env.get("GITHUB_WORKSPACE") or os.getcwd()
    for line in workflow_annotations(run, stack, workspace):
        out.write(secrets.scrub(line) + "\n")
    out.flush()
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8", errors="replace") as f:
                f.write(secrets.scrub(markdown(run)) + "\n")
        except OSError as e:  # the runner gave a path it cannot take: the machine's fault, not the input's
            raise InfraError(f"GITHUB_STEP_SUMMARY={summary}: cannot append the report: {e.strerror}") from None


def _data(text: str) -> str:
    """GitHub's toolkit ``escapeData``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """GitHub's toolkit ``escapeProperty``."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")
