"""``ggstack sync``: the CI rebase bot's one command, and what it tells the CI.

The bot runs unattended; the maintainers read what it found. So every stage
— fetch, apply, check, test, pr — runs in one process into one Run, and a
stage that fails is recorded there (``Run.stages``, ``Run.errors``) while the
later ones run on what is still sound. Precision first: ``pr`` touches the
forge only when every earlier stage vouched for the Run (a PR on a stale base
or on verdicts never reached is the noise ggstack exists to avoid). The exit
code is rendered from the Run (``exits.exit_code``; docs/bot.md), so a saved
Run gives the code the bot exited with; this module also writes the GitHub
Actions groups, annotations and step summary (the CLI only chooses where).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, TextIO

from ggstack import exits, git, replay, report, secrets, state, testing
from ggstack import pr as pr_stage
from ggstack.check.stack import check_stack
from ggstack.errors import InfraError, UserError
from ggstack.forge import open_forge
from ggstack.model import Outcome, Progress, Run, Stack, Verdict
from ggstack.state import LockInfo, lock_path, locked, read_lock  # noqa: F401  (the stack's lock lives there)

STAGES = ("fetch", "apply", "check", "test", "pr", "land", "rebase-series")
FAILED_INFRA, FAILED_INPUT = exits.FAILED_INFRA, exits.FAILED_INPUT
SKIPPED = "skipped"

NO_FORGE = "--no-forge: the stage that holds the token does it (`ggstack pr --run RUN --bundle FILE`)"


# -- observing the stages -------------------------------------------------------------


class Observer(Protocol):
    """Told when each stage starts and ends; hands the stage its progress callback."""

    def stage(self, name: str, total: int) -> contextlib.AbstractContextManager[Progress | None]: ...

    def finished(self, name: str, state: str) -> None: ...


class Silent:
    """An observer that is told and says nothing."""

    @contextlib.contextmanager
    def stage(self, name: str, total: int) -> Iterator[Progress | None]:
        yield None

    def finished(self, name: str, state: str) -> None:
        pass


class ActionsObserver:
    """GitHub Actions log groups, one per stage, with the stage's state inside."""

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
    """fetch → apply → check → test → pr: one Run, every stage's failure in it.

    ``forge`` off (``--no-forge``, the untrusted stage): no pr stage; the Run says who does it.

    ``use_cache`` off (``--no-cache``): check and test compute everything again.

    ``dry_run`` changes nothing anywhere: no branch is written, nothing is
    pushed, the forge is only read. ``land`` (opt-in) lands what is ready
    once every stage before succeeded (``ggstack land``: a check of its own,
    no tests; a dry run plans it only). An unknown base is a UserError before
    any stage after fetch runs (there is nothing to report on).
    """
    obs = observer or Silent()
    hide = secrets.Secrets.from_env(env).scrub
    n = len(stack.patches)
    stages: dict[str, str] = {}
    errors: list[str] = []

    def attempt(name: str, fn: Callable[[Progress | None], Run | str | None]) -> Run | None:
        """Run a stage: its Run (whose stages say its state), a state of its own, or None for "ok"."""
        with obs.stage(name, n) as progress:
            try:
                result = fn(progress)
            except InfraError as e:  # the message goes into the Run, the log and the summary: scrubbed
                stages[name], result = f"{FAILED_INFRA}: {hide(str(e))}", None
            except UserError as e:
                stages[name], result = f"{FAILED_INPUT}: {hide(str(e))}", None
            else:
                state = result.stages.get(name) if isinstance(result, Run) else result
                stages[name] = state or "ok"
            if stages[name].startswith("failed"):
                errors.append(f"{name}: {stages[name].split(': ', 1)[1]}")
            obs.finished(name, stages[name])
        return result if isinstance(result, Run) else None

    def skip(name: str, why: str) -> None:
        stages[name] = f"{SKIPPED}: {why}"
        obs.finished(name, stages[name])

    if fetch:
        base_ref = _fetch(attempt, repo, stack.config.target.remote, base_ref)
    base = replay.resolve_base(repo, stack, base_ref)
    run = attempt("apply", lambda p: replay.apply(repo, stack, base_ref, write=not dry_run, progress=p))
    checked = attempt("check", lambda p: check_stack(repo, stack, base_ref, run=run, progress=p, use_cache=use_cache))
    if checked is None:
        skip("test", "needs the verdicts of check")
    else:
        run = judged = checked
        with secrets.withheld():
            tested = attempt(
                "test", lambda p: testing.test(repo, stack, judged, gpu=gpu, progress=p, use_cache=use_cache)
            )
        run = tested or run
    held_back = _no_pr_because(stages, run, forge=forge)
    if held_back or run is None:
        skip("pr", held_back or "apply did not succeed")
    else:
        planned = run
        secrets.release_to_environ()  # the tests are done: the forge token may enter the environment now
        acted = attempt(
            "pr",
            lambda p: pr_stage.pr(
                repo, stack, planned, dry_run=dry_run, close_redundant=close_redundant, progress=p, env=env
            ),
        )
        run = acted or run
    _land_stage(land, stages, attempt, skip, lambda _: _land(repo, stack, base_ref, dry_run=dry_run, env=env))
    if rebase_series and run is not None:
        current = run
        proposed = attempt(
            "rebase-series",
            lambda _: _propose_rebased_series(repo, stack, current, series_branch, dry_run=dry_run, env=env),
        )
        run = proposed or run
    if run is None:
        run = skeleton(stack, base_ref, base)
    ordered = {s: stages[s] for s in STAGES if s in stages}
    return dataclasses.replace(
        run,
        stages={**ordered, **{k: v for k, v in run.stages.items() if k not in ordered}},
        errors=list(dict.fromkeys([*run.errors, *errors])),
    )


def _no_pr_because(stages: Mapping[str, str], run: Run | None, *, forge: bool) -> str | None:
    """Why the pr stage does not run (``--no-forge``, or an earlier stage unsound); None: it runs."""
    if not forge:
        return NO_FORGE
    unsound = [s for s in ("fetch", "apply", "check", "test") if stages.get(s, "ok").startswith(("failed", SKIPPED))]
    if unsound or run is None:
        return f"{', '.join(unsound) or 'apply'} did not succeed; the forge is not touched"
    return None


def _land_stage(
    land: bool,
    stages: Mapping[str, str],
    attempt: Attempt,
    skip: Callable[[str, str], None],
    fn: Callable[[Progress | None], str],
) -> None:
    """``--land``: only after a green run (pr neither failed, skipped nor offline)."""
    if not land:
        return
    if stages.get("pr", "") in ("ok", "dry-run"):
        attempt("land", fn)
    else:
        skip("land", "the run before it was not green; nothing is merged")


def _land(repo: git.Repository, stack: Stack, base_ref: str, *, dry_run: bool, env: Mapping[str, str] | None) -> str:
    """The land stage: its state in one line ("ok: merged #1, #2; stopped at 0003: waiting for approval")."""
    from ggstack import land as landing

    base = pr_stage.pr_base(repo, stack, base_ref)
    result = landing.land(repo, stack, onto=base, dry_run=dry_run, env=env)
    if dry_run:
        ready = [f"#{e.number}" for e in result.plan if e.action == "land"]
        words = [f"would merge {', '.join(ready)}" if ready else "nothing ready to merge"]
    else:
        words = [f"merged {', '.join(f'#{n}' for n in result.merged)}" if result.merged else "nothing merged"]
    if result.closed:
        words.append(f"closed {', '.join(f'#{n}' for n in result.closed)} (already in {base})")
    for extra in (result.queued, f"stopped at {result.stopped}" if result.stopped else None):
        if extra:
            words.append(extra)
    return ("dry-run: " if dry_run else "ok: ") + "; ".join(words)


Attempt = Callable[[str, Callable[[Progress | None], "Run | str | None"]], "Run | None"]


def _fetch(attempt: Attempt, repo: git.Repository, remote: str, base_ref: str) -> str:
    """The fetch stage; the base to replay onto after it (see ``fetched_base``): ``base_ref``
    itself where the fetch failed."""
    onto = base_ref

    def fetch_base(_: Progress | None) -> str:
        nonlocal onto
        with secrets.lent():  # git's credentials for this one process; the tests come later
            repo.fetch(remote)
        onto, state = fetched_base(repo, remote, base_ref)
        return state

    attempt("fetch", fetch_base)
    return onto


def fetched_base(repo: git.Repository, remote: str, base_ref: str) -> tuple[str, str]:
    """The base to replay onto after fetching, and the fetch stage's state. A local branch
    behind the remote-tracking one just fetched (a CI checkout's ``main`` from clone time) is
    not what a bot that asked for ``--fetch`` means: the fetched one is, and the state says so.
    A local branch of one's own (ahead, or diverged) stays, with a word."""
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
    """``--rebase-series``: the rebased series as a PR onto the branch the stack lives on (see ``rebase_pr``)."""
    from ggstack import rebase_pr

    forge = open_forge(stack, env, dry_run=dry_run)  # without a token: a UserError, or offline for a dry run
    try:
        return rebase_pr.propose(repo, stack, run, series_branch=series_branch, dry_run=dry_run, forge=forge)
    finally:
        forge.close()


def skeleton(stack: Stack, base_ref: str, base: str) -> Run:
    """A Run with one unjudged Outcome a patch, for when no stage produced one."""
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
    """Write the Run to ``path`` and as the stack's last run under the git dir; returns where."""
    data = secrets.scrub(report.run_json(run)).encode()  # uploaded by the workflow: no secret in it
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


# -- one bot at a time ---------------------------------------------------------------


# -- GitHub Actions ------------------------------------------------------------------


def in_actions(env: Mapping[str, str]) -> bool:
    return env.get("GITHUB_ACTIONS") == "true"


ERROR_VERDICTS = (Verdict.CONFLICT, Verdict.BROKEN)
WARNING_VERDICTS = (Verdict.PARTIAL, Verdict.INCONCLUSIVE)


def workflow_annotations(run: Run, stack: Stack, workspace: str) -> list[str]:
    """``::error``/``::warning`` workflow commands on the patch files that need a human."""
    lines = []
    for o in run.outcomes:
        if o.verdict in ERROR_VERDICTS or (o.verdict is None and o.conflict):
            level = "error"
        elif o.verdict in WARNING_VERDICTS or exits.redundant_open(o):
            level = "warning"
        else:
            continue
        path = os.path.relpath(os.path.join(stack.path, o.name), workspace)
        verdict = o.verdict.value if o.verdict else "conflict"
        title = f"ggstack: {o.name} is {verdict}"
        message = f"{report.evidence_words(o)} — recommendation: {report.recommendation_words(o)}"
        if exits.redundant_open(o):
            message += f"; PR #{o.pr.number if o.pr else None} is still open (pass --close-redundant)"
        lines.append(f"::{level} file={_property(path)},title={_property(title)}::{_data(message)}")
    for error in run.errors:
        lines.append(f"::error title=ggstack::{_data(error)}")
    return lines


def publish_to_actions(run: Run, stack: Stack, env: Mapping[str, str], out: TextIO) -> None:
    """Annotations to the log; the Markdown report appended to ``$GITHUB_STEP_SUMMARY``."""
    workspace = env.get("GITHUB_WORKSPACE") or os.getcwd()
    for line in workflow_annotations(run, stack, workspace):
        out.write(secrets.scrub(line) + "\n")
    out.flush()
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8", errors="replace") as f:
                f.write(secrets.scrub(report.markdown(run)) + "\n")
        except OSError as e:  # the runner gave a path it cannot take: the machine's fault, not the input's
            raise InfraError(f"GITHUB_STEP_SUMMARY={summary}: cannot append the report: {e.strerror}") from None


def _data(text: str) -> str:
    """Escape a workflow command's message (GitHub's toolkit ``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """Escape a workflow command's property (``escapeProperty``)."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")
