"""The forge stage: open, update and close the stack's pull requests, via PyGithub.

The seed's PR should never have been opened: the base already had its change.
So this stage only acts on what ``check`` (and ``test``) decided, and it is
split in two: a *plan* (pure: the Run, the forge's PRs and the remote's
branch heads in, a list of steps per patch out) and the *act* that carries the
plan out in merge order. ``--dry-run`` stops after the plan, so what it prints
is exactly what a real run would do, and nothing anywhere changes.

What it avoids:
- Noise. A branch whose remote head is already the replayed commit is not
  pushed again, a PR whose title, body and base are already right is not
  edited: a rerun with nothing changed makes no write call at all, so no CI
  run, no review bot, no notification.
- Duplicates. PRs are found by a hidden marker carrying the Stack-Patch-Id
  (and by head branch), so reruns update; a create or comment whose answer was
  lost (5xx, timeout) is looked up again before it is re-sent, and the closing
  comment carries its own marker. A run killed midway is converged from.
- Flapping. A PR's base follows the previous needed patch only when the
  stacked chain itself changed; an existing stack keeps the mode (stacked or
  flat) it was opened in unless the user says otherwise.
- Leaks. The token is only handed to PyGithub; every message this module
  raises is scrubbed of it.

Retries are ggstack's, not urllib3's (PyGithub gets ``retry=None``): a
re-sent POST must first check whether the lost one landed, and every wait
(back-off, ``Retry-After``, a rate-limit reset) comes out of one bounded budget
per run. PyGithub's ``seconds_between_writes`` keeps writes one at a time and
spaced as GitHub asks. Knobs (all optional) are environment variables, so the
tests can shrink the time scale: GGSTACK_RETRY_BASE_SECONDS,
GGSTACK_RETRY_ATTEMPTS, GGSTACK_RETRY_BUDGET_SECONDS,
GGSTACK_RATE_LIMIT_MAX_WAIT, GGSTACK_FORGE_TIMEOUT,
GGSTACK_WRITE_INTERVAL_SECONDS.
"""

from __future__ import annotations

import datetime
import os
import re
import signal
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException

from ggstack import git, replay, report
from ggstack.errors import InfraError, UserError
from ggstack.model import Applied, Outcome, Patch, PRState, Run, Stack, Verdict

DEFAULT_API_URL = "https://api.github.com"
TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")
NEEDED = (Verdict.UNIQUE, Verdict.PARTIAL)  # the only verdicts that get a PR
MAINTAINERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})  # whose approval lifts the gate

Progress = Callable[[int, int, str], None]
T = TypeVar("T")

_MARKER = re.compile(re.escape(report.MARKER_PREFIX) + r"([^\s>]+) -->")
_TRAILER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*: .*|\(cherry picked from commit [0-9a-f]+\))$")


# -- the time scale of retries --------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How long ggstack keeps trying the forge, all of it bounded."""

    base: float = 1.0  # back-off: base * 2**attempt seconds
    attempts: int = 5  # tries per call
    budget: float = 300.0  # seconds of waiting one run may spend in all
    max_wait: float = 120.0  # the longest single wait the forge may ask for
    timeout: int = 30  # seconds per request
    write_interval: float = 1.0  # GitHub asks for at least a second between writes

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetryPolicy:
        default = cls()

        def number(var: str, value: float, kind: type = float) -> Any:
            raw = env.get(var)
            if raw in (None, ""):
                return value
            try:
                parsed = kind(raw)
            except ValueError:
                raise UserError(f"{var}={raw!r} is not a {kind.__name__}") from None
            if parsed < 0:
                raise UserError(f"{var} must not be negative")
            if not parsed < 10**9:  # NaN, inf, or past what a timer can hold
                raise UserError(f"{var}={raw!r} is not a usable number of seconds or tries")
            return parsed

        return cls(
            base=number("GGSTACK_RETRY_BASE_SECONDS", default.base),
            attempts=max(1, number("GGSTACK_RETRY_ATTEMPTS", default.attempts, int)),
            budget=number("GGSTACK_RETRY_BUDGET_SECONDS", default.budget),
            max_wait=number("GGSTACK_RATE_LIMIT_MAX_WAIT", default.max_wait),
            timeout=max(1, number("GGSTACK_FORGE_TIMEOUT", default.timeout, int)),
            write_interval=number("GGSTACK_WRITE_INTERVAL_SECONDS", default.write_interval),
        )


# -- the forge, as ggstack needs it ----------------------------------------------------


@dataclass
class RemotePR:
    """An open PR as the forge has it (facts the forge owns: read each run)."""

    number: int
    url: str
    draft: bool
    title: str
    body: str
    head_owner: str
    head_ref: str
    base_ref: str
    labels: list[str]
    marker: str | None  # the Stack-Patch-Id in its body, if any
    state: str = "open"
    merged: bool = False
    approved_by: list[str] = field(default_factory=list)
    handle: Any = field(default=None, repr=False)  # the PyGithub PullRequest


def _api_url(raw: str) -> str:
    """GITHUB_API_URL, checked here: PyGithub fails on a malformed one with a bare AttributeError."""
    try:
        parts = urllib.parse.urlsplit(raw)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. an unclosed "[" of an IPv6 host
        ok = False
    if not ok:
        shown = repr(raw) if "@" not in raw else "(a value with credentials in it)"  # never echo a secret
        raise UserError(f"GITHUB_API_URL={shown} is not an http(s) URL with a host (e.g. {DEFAULT_API_URL})")
    return raw.rstrip("/")


class Forge:
    """PyGithub behind ggstack's retry, error and scrubbing rules."""

    def __init__(self, slug: str, *, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.slug = slug
        self.token, self.token_var = _token(env, slug)
        self.api_url = _api_url(env.get("GITHUB_API_URL") or DEFAULT_API_URL)
        self.policy = RetryPolicy.from_env(env)
        self.writes = 0
        self._waited = 0.0
        self._kill_after = int(env.get("GGSTACK_DEBUG_KILL_AFTER_WRITES", "0") or 0)
        self._gh = Github(
            auth=Auth.Token(self.token),
            base_url=self.api_url,
            timeout=self.policy.timeout,
            retry=None,  # ggstack retries itself: see the module docstring
            per_page=100,
            seconds_between_requests=None,
            seconds_between_writes=self.policy.write_interval or None,
        )
        self.repo = self.call(
            f"read repository {slug}",
            lambda: self._gh.get_repo(slug),
            not_found=(
                f"target.repo {slug!r} not found at {self.api_url} (check stack.toml, GITHUB_API_URL, "
                f"and that the token in {self.token_var} can see it)"
            ),
        )

    def close(self) -> None:
        self._gh.close()

    def scrub(self, text: str) -> str:
        return text.replace(self.token, "***") if self.token else text

    # -- one call, retried ---------------------------------------------------------

    def call(
        self,
        what: str,
        fn: Callable[[], T],
        *,
        write: bool = False,
        recheck: Callable[[], T | None] | None = None,
        not_found: str | None = None,
    ) -> T:
        """``fn()``, retried on 5xx, timeouts and rate limits within the budget.

        ``recheck`` is asked, before a failed write is re-sent, whether it
        landed after all (a lost answer); its non-None answer is the result.
        """
        attempt = 0
        while True:
            try:
                result = fn()
            except GithubException as e:
                wait, why = self._retryable(e, what, attempt, not_found)
            except requests.RequestException as e:
                wait, why = self._backoff(attempt), f"{type(e).__name__}: {e}"
            else:
                if write:
                    self._wrote()
                return result
            attempt += 1
            if attempt >= self.policy.attempts:
                raise InfraError(
                    self.scrub(f"{what}: the forge at {self.api_url} still fails after {attempt} tries ({why})")
                ) from None
            self._sleep(wait, what, why)
            if recheck is not None:
                found = recheck()
                if found is not None:
                    return found

    def _retryable(self, e: GithubException, what: str, attempt: int, not_found: str | None) -> tuple[float, str]:
        """How long to wait before retrying ``e``; raises when it is not worth retrying."""
        headers = {k.lower(): v for k, v in (e.headers or {}).items()}
        message = _message(e)
        status = e.status
        if status == 401:
            raise UserError(
                f"the forge at {self.api_url} rejected the token in {self.token_var} (401 {message}); set {self.token_var} to a valid token"
            )
        if status in (403, 429):
            if "retry-after" in headers:
                seconds = _seconds(headers["retry-after"])
                if seconds > self.policy.max_wait:
                    raise InfraError(
                        self.scrub(
                            f"{what}: the forge asks to wait {seconds:.0f} s (Retry-After), more than the {self.policy.max_wait:.0f} s ggstack waits; try again later"
                        )
                    )
                return seconds, f"{status} Retry-After {seconds:.0f} s"
            if headers.get("x-ratelimit-remaining") == "0":
                reset = int(headers.get("x-ratelimit-reset", "0") or 0)
                wait = max(reset - time.time(), 0) + 1  # the reset happens some time within that second
                at = datetime.datetime.fromtimestamp(reset, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
                if wait > self.policy.max_wait:
                    raise InfraError(
                        self.scrub(
                            f"{what}: GitHub API rate limit exhausted; it resets at {at} (in {wait:.0f} s); try again then"
                        )
                    )
                return wait, f"rate limit exhausted until {at}"
            if "secondary rate limit" in message.lower():
                # GitHub: "wait at least one minute"; scaled with the back-off base.
                return max(60 * self.policy.base, self._backoff(attempt)), "secondary rate limit"
            raise UserError(
                self.scrub(
                    f"{what}: the forge refused ({status} {message}); does the token in {self.token_var} have write access to {self.slug}?"
                )
            )
        if status == 404:
            raise UserError(self.scrub(not_found or f"{what}: not found on the forge (404 {message})"))
        if status == 422:
            raise UserError(self.scrub(f"{what}: the forge refused it (422 {message}{_errors(e)})"))
        if status >= 500:
            return self._backoff(attempt), f"{status} {message}"
        raise InfraError(self.scrub(f"{what}: unexpected answer from the forge ({status} {message})"))

    def _backoff(self, attempt: int) -> float:
        return self.policy.base * 2**attempt

    def _sleep(self, wait: float, what: str, why: str) -> None:
        if self._waited + wait > self.policy.budget:
            raise InfraError(
                self.scrub(
                    f"{what}: gave up: waiting {wait:.0f} s more ({why}) would exceed the retry budget of "
                    f"{self.policy.budget:.0f} s (GGSTACK_RETRY_BUDGET_SECONDS)"
                )
            ) from None
        self._waited += wait
        time.sleep(wait)

    def _wrote(self) -> None:
        self.writes += 1
        if self._kill_after and self.writes >= self._kill_after:
            # A test hook: die as a crash would, between two forge writes.
            os.kill(os.getpid(), signal.SIGKILL)

    # -- reads ------------------------------------------------------------------------

    def open_pulls(self) -> list[RemotePR]:
        def fetch() -> list[Any]:
            return list(self.repo.get_pulls(state="open", sort="created", direction="asc"))

        return [_remote(p) for p in self.call(f"list open PRs of {self.slug}", fetch)]

    def find_open_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        pulls = self._pulls_of_head(head_owner, head_ref, "open")
        return pulls[0] if pulls else None

    def find_closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        """The latest closed PR from this head branch, if any."""
        pulls = self._pulls_of_head(head_owner, head_ref, "closed")
        return max(pulls, key=lambda p: p.number) if pulls else None

    def _pulls_of_head(self, head_owner: str, head_ref: str, state: str) -> list[RemotePR]:
        def fetch() -> list[Any]:
            return list(self.repo.get_pulls(state=state, head=f"{head_owner}:{head_ref}"))

        return [_remote(p) for p in self.call(f"look up the {state} PRs of {head_ref}", fetch)]

    def approvals(self, pull: RemotePR) -> list[str]:
        """Maintainers whose latest decisive review of the PR approves it."""
        reviews = self.call(f"read reviews of #{pull.number}", lambda: list(pull.handle.get_reviews()))
        latest: dict[str, tuple[str, str]] = {}
        for r in reviews:
            if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED") and r.user is not None:
                latest[r.user.login] = (r.state, r.author_association or "")
        return sorted(u for u, (state, assoc) in latest.items() if state == "APPROVED" and assoc.upper() in MAINTAINERS)

    def commit_facts(self, slug: str, sha: str) -> tuple[str, list[str], str] | None:
        """(tree, parents, message) of a commit the forge has, None when it has not."""

        repo = self.repo if slug.lower() == self.slug.lower() else None

        def fetch() -> tuple[str, list[str], str] | None:
            try:
                c = (repo or self._gh.get_repo(slug)).get_commit(sha)
                return c.commit.tree.sha, [p.sha for p in c.parents], c.commit.message or ""
            except GithubException as e:
                if e.status in (404, 422):
                    return None
                raise

        return self.call(f"read commit {sha[:10]} of {slug}", fetch)

    def comment_bodies(self, pull: RemotePR) -> list[str]:
        comments = self.call(f"read comments of #{pull.number}", lambda: list(pull.handle.get_issue_comments()))
        return [c.body or "" for c in comments]

    # -- writes (one at a time; each retried) --------------------------------------------

    def create_pull(
        self, *, title: str, body: str, base: str, head_owner: str, head_ref: str, head: str, draft: bool
    ) -> RemotePR:
        def create() -> RemotePR:
            try:
                return _remote(self.repo.create_pull(title=title, body=body, base=base, head=head, draft=draft))
            except GithubException as e:
                # A create re-sent after a lost answer may find its first copy already there.
                found = (
                    self.find_open_pull(head_owner, head_ref)
                    if e.status == 422 and "already exists" in str(e.data)
                    else None
                )
                if found is None:
                    raise
                return found

        return self.call(
            f"open the PR of {head_ref}", create, write=True, recheck=lambda: self.find_open_pull(head_owner, head_ref)
        )

    def edit_pull(self, pull: RemotePR, **fields: str) -> None:
        self.call(f"update #{pull.number} ({', '.join(fields)})", lambda: pull.handle.edit(**fields), write=True)

    def add_labels(self, pull: RemotePR, labels: Sequence[str]) -> None:
        self.call(f"label #{pull.number}", lambda: pull.handle.add_to_labels(*labels), write=True)

    def remove_label(self, pull: RemotePR, label: str) -> None:
        def remove() -> None:
            try:
                pull.handle.remove_from_labels(label)
            except GithubException as e:
                if e.status != 404:  # already gone (someone removed it, or a retried call landed): fine
                    raise

        self.call(f"remove label {label!r} from #{pull.number}", remove, write=True)

    def mark_ready(self, pull: RemotePR) -> None:
        self.call(f"mark #{pull.number} ready for review", lambda: pull.handle.mark_ready_for_review(), write=True)

    def comment(self, pull: RemotePR, body: str, marker: str) -> None:
        def landed() -> bool | None:
            return True if any(marker in b for b in self.comment_bodies(pull)) else None

        self.call(
            f"comment on #{pull.number}", lambda: pull.handle.create_issue_comment(body), write=True, recheck=landed
        )


def _token(env: Mapping[str, str], slug: str) -> tuple[str, str]:
    for var in TOKEN_VARS:
        value = env.get(var, "").strip()
        if value and any(c.isspace() or not c.isprintable() for c in value):
            # An HTTP header cannot carry it, and requests' error would quote it (escaped, past scrub).
            raise UserError(
                f"{var} has whitespace or control characters inside it (a pasted line break?); the value is not shown"
            )
        if value:
            return value, var
    raise UserError(f"no GitHub token: set GITHUB_TOKEN (or GH_TOKEN) to a token that may open PRs on {slug}")


def _remote(p: Any) -> RemotePR:
    owner, _, ref = (p.head.label or "").rpartition(":")
    marker = _MARKER.search(p.body or "")
    return RemotePR(
        number=p.number,
        url=p.html_url,
        draft=bool(p.draft),
        title=p.title or "",
        body=p.body or "",
        head_owner=owner,
        head_ref=p.head.ref or ref,
        base_ref=p.base.ref,
        labels=[label.name for label in p.labels],
        marker=marker.group(1) if marker else None,
        state=p.state,
        merged=p.merged_at is not None,  # in the list shape; p.merged would cost a request
        handle=p,
    )


def _message(e: GithubException) -> str:
    data = e.data
    if isinstance(data, dict):
        return str(data.get("message") or data.get("errors") or "")
    return str(data or "")


def _errors(e: GithubException) -> str:
    errors = e.data.get("errors") if isinstance(e.data, dict) else None
    if not errors:
        return ""
    words = [str(x.get("message") or x.get("code") or x) if isinstance(x, dict) else str(x) for x in errors]
    return ": " + "; ".join(words)


def _seconds(value: str) -> float:
    try:
        return max(float(value), 0.0)
    except ValueError:  # an HTTP date: wait until then
        return max((parsedate_to_datetime(value).timestamp() - time.time()), 0.0)


# -- the plan ------------------------------------------------------------------------------


@dataclass
class Step:
    kind: str  # push | open | edit | label | unlabel | ready | comment | close | would-close
    words: str  # what the plan prints
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Slot:
    """One patch in the plan: what it is, what the forge and remote have, what to do."""

    outcome: Outcome
    patch: Patch
    branch: str  # the remote branch name (without refs/heads/)
    commit: str | None
    remote_sha: str | None
    pull: RemotePR | None
    state: PRState | None = None
    steps: list[Step] = field(default_factory=list)
    summary: str = ""
    diffstat: report.Diffstat = field(default_factory=list)
    note: str = ""

    @property
    def needed(self) -> bool:
        return self.outcome.verdict in NEEDED and self.commit is not None


@dataclass
class Plan:
    slots: list[Slot]
    stacked: bool
    gate: str | None  # the approval gate in words, None when the stack has none
    head_owner: str
    fork: bool

    @property
    def needed(self) -> list[Slot]:
        return [s for s in self.slots if s.needed]


def pr(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    dry_run: bool = False,
    close_redundant: bool = False,
    stacked: bool | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    client: Any = None,
) -> Run:
    """``ggstack pr``: plan the forge actions for the Run's verdicts, then (unless
    ``dry_run``) carry them out in merge order. Fills each Outcome's ``pr`` and
    ``run.stages["pr"]``. Nothing is ever merged."""
    missing = [o.name for o in run.outcomes if o.verdict is None]
    if missing:
        raise UserError(f"no verdict for {', '.join(missing)}: `pr` needs the Run of `check` (run check first)")
    # ``client``: another forge to read (e.g. ``NoForge`` for the demo's plan).
    forge = client or Forge(stack.config.target.repo, env=env)
    try:
        plan = make_plan(repo, stack, run, forge, close_redundant=close_redundant, stacked=stacked)
        if not dry_run:
            act(repo, stack, run, plan, forge, progress)
        for slot in plan.slots:
            if slot.state is not None:
                slot.state.actions = [step.words for step in slot.steps]
                slot.state.action = _summary_action(slot, dry_run)
            slot.outcome.pr = slot.state
        run.stages["pr"] = "dry-run" if dry_run else "ok"
        return run
    finally:
        forge.close()


class NoForge:
    """A forge on which nothing exists yet: no PRs, reviews or comments.

    It lets ``pr --dry-run`` plan without a token or network (``ggstack demo``).
    """

    writes = 0

    def close(self) -> None:
        pass

    def scrub(self, text: str) -> str:
        return text

    def open_pulls(self) -> list[RemotePR]:
        return []

    def find_open_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        return None

    def find_closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        return None

    def approvals(self, pull: RemotePR) -> list[str]:
        return []

    def commit_facts(self, slug: str, sha: str) -> None:
        return None

    def comment_bodies(self, pull: RemotePR) -> list[str]:
        return []


def make_plan(
    repo: git.Repository, stack: Stack, run: Run, forge: Forge, *, close_redundant: bool, stacked: bool | None
) -> Plan:
    """Read the forge and the remote, and decide every step (nothing is written)."""
    target = stack.config.target
    head_owner = (target.fork or target.repo).split("/")[0]
    patches = {p.name: p for p in stack.patches}
    refs = replay.branch_refs(stack)
    pulls = forge.open_pulls()
    ids = {p.provenance.stack_patch_id for p in stack.patches}
    by_marker: dict[str, RemotePR] = {}
    for p in pulls:  # oldest first: a later duplicate never wins
        if p.marker in ids and p.marker not in by_marker:
            by_marker[p.marker] = p
    slots = []
    for o in run.outcomes:
        patch = patches.get(o.name)
        if patch is None:
            raise UserError(f"the Run names {o.name!r}, which is not in stack {stack.name!r}")
        default = _remote_branch(o.branch or refs[stack.patches.index(patch)])
        pull = by_marker.get(o.stack_patch_id) or next(
            (
                p
                for p in pulls
                if p.marker is None and p.head_ref == default and p.head_owner.lower() == head_owner.lower()
            ),
            None,
        )
        # An existing PR keeps its head branch (PRs cannot change head), e.g. after a rename.
        branch = pull.head_ref if pull else default
        slots.append(Slot(o, patch, branch, o.commit if o.verdict in NEEDED else None, None, pull))
    wanted = [f"refs/heads/{s.branch}" for s in slots if s.needed]
    heads = repo.ls_remote(target.remote, wanted) if wanted else {}  # no patterns would list every ref
    for s in slots:
        s.remote_sha = heads.get(f"refs/heads/{s.branch}")
    for s in slots:
        if s.pull is not None:
            s.pull.approved_by = forge.approvals(s.pull)
        elif s.needed:
            _respect_closed(s, forge, head_owner)
    plan = Plan(slots, _stacked_mode(stacked, stack, slots), _gate_words(stack), head_owner, target.fork is not None)
    _settle_commits(repo, stack, run, plan, forge)
    _plan_needed(repo, stack, run, plan)
    _plan_others(run, plan, forge, close_redundant)
    return plan


def _respect_closed(s: Slot, forge: Forge, head_owner: str) -> None:
    """A needed patch whose PR someone merged or closed gets no new one.

    Only a PR that ggstack itself closed as redundant (its closing comment
    says so) may be followed by a new PR when the patch is needed again.
    """
    closed = forge.find_closed_pull(head_owner, s.branch)
    if closed is None or closed.marker not in (None, s.outcome.stack_patch_id):
        return
    if closed.merged:
        s.note = f"its PR #{closed.number} was merged (into {closed.base_ref}); no new PR"
    elif any(report.CLOSED_PREFIX + s.outcome.stack_patch_id in b for b in forge.comment_bodies(closed)):
        return
    else:
        s.note = f"its PR #{closed.number} was closed by someone else: not reopened or replaced (reopen it, or remove the patch)"
    s.commit, s.pull = None, closed


def _remote_branch(ref: str) -> str:
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ref.removeprefix("refs/")


def _stacked_mode(stacked: bool | None, stack: Stack, slots: list[Slot]) -> bool:
    """The flag if given; else the mode the open PRs were opened in; else stack.toml.

    With the heads in a fork there is no stacking: a PR's base must be a branch
    of the target repository, and the patches' branches live in the fork.
    """
    target = stack.config.target
    if target.fork is not None:
        if stacked:
            raise UserError(
                f"--stacked needs the patch branches in {target.repo}, but target.fork puts them in "
                f"{target.fork}: fork PRs are flat (use --flat, or push to {target.repo})"
            )
        return False
    if stacked is not None:
        return stacked
    later = [s.pull for s in [s for s in slots if s.needed][1:] if s.pull is not None]
    if later:
        return any(p.base_ref != stack.config.target.base for p in later)
    return stack.config.pr.stacked


def _gate_words(stack: Stack) -> str | None:
    policy = stack.config.pr
    if not policy.approval_gate:
        return None
    words = (["draft"] if policy.draft else []) + [f"label `{label}`" for label in policy.labels]
    return ", ".join(words) or "approval"


def _settle_commits(repo: git.Repository, stack: Stack, run: Run, plan: Plan, forge: Forge) -> None:
    """Make each needed patch's commit sit on the previous needed one, and
    keep the remote's commit where it is the same change.

    ``apply`` chains every patch that applied; a patch without a PR (broken,
    held, represented yet applied) would ride along in the next PR, so the
    next one is replayed onto the previous needed commit instead. And a
    replay on another machine (the CI bot's fresh clone) makes new commit
    objects for the same change (the committer date differs): when the
    remote head has the same tree, parent and message, it is kept, so an
    unchanged branch is not pushed again.
    """
    target = stack.config.target
    head_repo = target.fork or target.repo
    picks: dict[str, replay.Pick] | None = None
    previous = run.base
    for s in plan.needed:
        assert s.commit is not None
        info = repo.commit_info(s.commit)
        if info.parents[:1] != (previous,):
            picks = picks or {p.name: p for p in replay.materialize(repo, stack)}
            replayer = replay.Replayer(repo, previous)
            try:
                step = replayer.try_pick(picks[s.outcome.name])
            finally:
                replayer.close()
            if step.applied is not Applied.APPLIED or step.commit is None:
                s.commit, s.note = (
                    None,
                    f"does not apply on the previous needed patch alone ({step.applied.value}): no PR action",
                )
                continue
            s.commit = step.commit
            info = repo.commit_info(s.commit)
        if s.remote_sha and s.remote_sha != s.commit:
            facts = forge.commit_facts(head_repo, s.remote_sha)
            if facts is not None and f"Stack-Patch-Id: {s.outcome.stack_patch_id}" not in facts[2]:
                # Not a commit ggstack made of this patch: a reviewer's fixup, say. Never overwritten.
                raise UserError(
                    f"someone else pushed {s.remote_sha[:10]} ({facts[2].splitlines()[0] if facts[2] else 'no message'!r}) "
                    f"to {s.branch} on {target.remote!r}; ggstack will not overwrite it: fold that change into "
                    f"{s.outcome.name} (or delete the branch), then rerun"
                )
            if (
                facts is not None
                and facts[0] == info.tree
                and facts[1] == [previous]
                and facts[2].rstrip("\n") == info.message.rstrip("\n")
            ):
                s.commit = s.remote_sha
        s.outcome.commit = s.commit
        previous = s.commit


def _plan_needed(repo: git.Repository, stack: Stack, run: Run, plan: Plan) -> None:
    policy, target = stack.config.pr, stack.config.target
    needed = plan.needed
    previous: Slot | None = None
    for n, s in enumerate(needed, 1):
        base = previous.branch if plan.stacked and previous else target.base
        pull = s.pull
        approved = bool(pull and pull.approved_by)
        s.state = PRState(
            number=pull.number if pull else None,
            url=pull.url if pull else None,
            state="open" if pull else "planned",
            draft=pull.draft if pull else (policy.draft and plan.gate is not None),
            approved=approved,
            head=f"{plan.head_owner}:{s.branch}" if plan.fork else s.branch,
            base=base,
            title=s.patch.subject,
            labels=list(pull.labels) if pull else (list(policy.labels) if plan.gate else []),
            approved_by=list(pull.approved_by) if pull else [],
            position=n,
            total=len(needed),
        )
        s.outcome.pr = s.state  # the bodies of its neighbours read its number
        info = repo.commit_info(s.commit)
        parent = info.parents[0] if info.parents else git.EMPTY_TREE
        s.diffstat = repo.numstat(parent, s.commit)
        s.summary = summary_of(s.patch)
        if s.commit != s.remote_sha:
            s.steps.append(
                Step(
                    "push",
                    f"push {s.branch} {report.short(s.remote_sha) or '(new)'} → {report.short(s.commit)} (--force-with-lease)",
                )
            )
        if pull is None:
            gate = f" as {plan.gate}" if plan.gate else ""
            s.steps.append(Step("open", f"open PR {n} of {len(needed)}: {s.state.head} → {base}{gate}"))
            if plan.gate and policy.labels:
                s.steps.append(Step("label", f"label {', '.join(policy.labels)}"))
        elif plan.gate is not None:
            if approved and pull.draft:
                s.steps.append(Step("ready", f"approved by {', '.join(pull.approved_by)}: mark ready for review"))
            for label in policy.labels:
                has = any(label.lower() == x.lower() for x in pull.labels)
                if approved and has:
                    s.steps.append(Step("unlabel", f"approved: remove label {label}", {"label": label}))
                elif not approved and not has:
                    s.steps.append(Step("label", f"label {label}", {"label": label}))
        previous = s
    for s in needed:
        s.state.body = _body(run, plan, s)
        if s.pull is not None:
            fields = _changed_fields(s)
            if fields:
                words = ", ".join(f"base {s.pull.base_ref} → {v}" if k == "base" else k for k, v in fields.items())
                s.steps.append(Step("edit", f"update {words}", fields))


def _body(run: Run, plan: Plan, s: Slot) -> str:
    if s.state is not None:
        s.state.approved = bool(s.pull and s.pull.approved_by)
    return report.pr_body(
        run, s.outcome, summary=s.summary, diffstat=s.diffstat, order=[x.outcome for x in plan.needed], gate=plan.gate
    )


def _changed_fields(s: Slot) -> dict[str, str]:
    assert s.pull is not None and s.state is not None
    fields = {}
    if s.pull.title != s.state.title:
        fields["title"] = s.state.title or ""
    if s.pull.body.replace("\r\n", "\n") != s.state.body:
        fields["body"] = s.state.body or ""
    if s.pull.base_ref != s.state.base:
        fields["base"] = s.state.base or ""
    return fields


def _plan_others(run: Run, plan: Plan, forge: Forge, close_redundant: bool) -> None:
    """Patches without a PR to open: close the redundant ones' PRs, leave the rest."""
    for s in plan.slots:
        if s.needed or s.pull is None:
            continue
        o, pull = s.outcome, s.pull
        s.state = PRState(
            number=pull.number,
            url=pull.url,
            state="merged" if pull.merged else pull.state,
            draft=pull.draft,
            approved=bool(pull.approved_by),
            head=pull.head_ref,
            base=pull.base_ref,
            title=pull.title,
            labels=list(pull.labels),
            approved_by=list(pull.approved_by),
        )
        if o.verdict is Verdict.REPRESENTED:
            s.state.comment = report.closing_comment(run, o)
            via = ", ".join(report.short(c) for c in o.represented_by) or "the base"
            if not close_redundant:
                s.steps.append(Step("would-close", f"would close: represented by {via} (pass --close-redundant)"))
                continue
            # Whatever base it was checked on: one closing comment a PR, also across a moving base.
            marker = report.CLOSED_PREFIX + o.stack_patch_id
            if not any(marker in b for b in forge.comment_bodies(pull)):
                s.steps.append(Step("comment", f"comment: represented by {via}, with the evidence"))
            s.steps.append(Step("close", f"close #{pull.number}"))
        elif o.verdict in (Verdict.CONFLICT, Verdict.BROKEN):
            s.state.note = f"{o.verdict.value}: needs rework; PR left as it is"
        elif o.verdict is Verdict.INCONCLUSIVE:
            s.state.note = "inconclusive: held; PR left as it is"
        elif o.verdict in NEEDED:
            s.state.note = s.note or "no replayed commit: PR left as it is"


def summary_of(patch: Patch) -> str:
    """The patch message without subject and trailers: the PR's summary."""
    paragraphs = patch.body.split("\n\n")
    if paragraphs and all(_TRAILER.match(line) for line in paragraphs[-1].strip().splitlines()):
        paragraphs = paragraphs[:-1]
    text = "\n\n".join(paragraphs)
    return "\n".join(line for line in text.splitlines() if not line.startswith("(cherry picked from commit ")).strip()


def _summary_action(slot: Slot, dry_run: bool) -> str:
    kinds = list(dict.fromkeys(step.kind for step in slot.steps))
    if not kinds:
        return "nothing"
    return ("would " if dry_run and kinds != ["would-close"] else "") + ", ".join(kinds)


# -- acting -------------------------------------------------------------------------------


def act(repo: git.Repository, stack: Stack, run: Run, plan: Plan, forge: Forge, progress: Progress | None) -> None:
    """Carry the plan out: push, open in merge order, fix bodies and bases, gates, closes."""
    total = sum(len(s.steps) for s in plan.slots)
    done = 0

    def tick(s: Slot, kind: str) -> None:
        nonlocal done
        done += sum(1 for step in s.steps if step.kind == kind)
        if progress:
            progress(min(done, total), total, f"{s.outcome.name}: {kind}")

    _push(repo, stack, [s for s in plan.needed if any(st.kind == "push" for st in s.steps)])
    for s in plan.needed:
        tick(s, "push")
    policy = stack.config.pr
    for s in plan.needed:  # open in merge order, so each base exists and earlier numbers are known
        if s.pull is not None:
            continue
        assert s.state is not None
        body = _body(run, plan, s)
        s.pull = forge.create_pull(
            title=s.state.title or s.patch.subject,
            body=body,
            base=s.state.base or stack.config.target.base,
            head_owner=plan.head_owner,
            head_ref=s.branch,
            head=s.state.head or s.branch,
            draft=bool(s.state.draft),
        )
        s.state.number, s.state.url, s.state.state = s.pull.number, s.pull.url, "open"
        tick(s, "open")
        missing = [x for x in policy.labels if x.lower() not in {y.lower() for y in s.pull.labels}] if plan.gate else []
        if missing:
            forge.add_labels(s.pull, missing)
            s.pull.labels += missing
        tick(s, "label")
    for s in plan.needed:  # with every number known, each body, title and base once
        assert s.state is not None and s.pull is not None
        s.state.body = _body(run, plan, s)
        fields = _changed_fields(s)
        if fields:
            forge.edit_pull(s.pull, **fields)
            s.pull.title, s.pull.body, s.pull.base_ref = s.state.title or "", s.state.body or "", s.state.base or ""
            if not any(st.kind == "edit" for st in s.steps):
                s.steps.append(Step("edit", f"update {', '.join(fields)}", fields))
        tick(s, "edit")
        _gate(s, forge)
    for s in plan.slots:
        if s.needed or s.pull is None or s.state is None:
            continue
        for step in s.steps:
            if step.kind == "comment":
                forge.comment(s.pull, s.state.comment or "", report.CLOSED_PREFIX + s.outcome.stack_patch_id)
            elif step.kind == "close":
                forge.edit_pull(s.pull, state="closed")
                s.state.state = "closed"
            tick(s, step.kind)


def _gate(s: Slot, forge: Forge) -> None:
    """Lift the gate of an approved PR, or put back a label an interrupted run lost."""
    assert s.pull is not None and s.state is not None
    for step in s.steps:
        if step.kind == "ready":
            forge.mark_ready(s.pull)
            s.state.draft = False
        elif step.kind == "unlabel":
            forge.remove_label(s.pull, step.fields["label"])
            s.state.labels = [x for x in s.state.labels if x.lower() != step.fields["label"].lower()]
        elif step.kind == "label" and step.fields.get("label"):
            forge.add_labels(s.pull, [step.fields["label"]])
            s.state.labels.append(step.fields["label"])


def _push(repo: git.Repository, stack: Stack, slots: Sequence[Slot]) -> None:
    """One atomic ``git push --force-with-lease`` of every branch that moved.

    The lease is the remote head the plan saw: if anyone pushed since, nothing
    is pushed and the user is told which branch moved.
    """
    if not slots:
        return
    remote = stack.config.target.remote
    refspecs = [f"{s.commit}:refs/heads/{s.branch}" for s in slots]
    leases = [f"refs/heads/{s.branch}:{s.remote_sha or ''}" for s in slots]
    proc = repo.push(remote, refspecs, leases, atomic=True)
    if proc.returncode == 0:
        return
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace").strip()
    rejected = [
        line.split("\t")[1].split(":")[-1] for line in out.splitlines() if line.startswith("!") and "\t" in line
    ]
    if rejected and ("stale info" in out or "fetch first" in out or "rejected" in out):
        raise UserError(
            f"git push to {remote!r} refused ({', '.join(rejected)}): someone pushed to these branches since "
            f"ggstack looked; nothing was pushed — rerun `ggstack pr` to plan from the new state"
        )
    raise InfraError(f"git push to {remote!r} failed: {err[-2000:] or out[-2000:]}")
