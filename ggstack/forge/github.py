"""GitHub (and GitHub Enterprise) as ggstack's forge, through PyGithub.

A create or comment whose answer was lost (5xx, timeout) is looked up again
before it is re-sent, so there are no duplicates; the token is only handed to
PyGithub and every message raised here is scrubbed of it. Retries are
ggstack's, not urllib3's (PyGithub gets ``retry=None``): a re-sent POST must
first check whether the lost one landed, and every wait comes out of one
bounded budget per run (``RetryPolicy``: its knobs are environment variables,
README "Pull requests", so the tests can shrink the time scale).
"""

from __future__ import annotations

import datetime
import os
import signal
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException

from ggstack import state
from ggstack.errors import InfraError, UserError
from ggstack.forge import Comment, CommitFacts, RemotePR, same_last_line
from ggstack.secrets import TOKEN_VARS, Secrets, shown_url

DEFAULT_API_URL = "https://api.github.com"
MAINTAINERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})  # whose approval lifts the gate
T = TypeVar("T")


# -- the time scale of retries --------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How long ggstack keeps trying the forge, all of it bounded: back-off, ``Retry-After`` and
    rate-limit resets all come out of ``budget``. From GGSTACK_RETRY_BASE_SECONDS,
    GGSTACK_RETRY_ATTEMPTS, GGSTACK_RETRY_BUDGET_SECONDS, GGSTACK_RATE_LIMIT_MAX_WAIT,
    GGSTACK_FORGE_TIMEOUT and GGSTACK_WRITE_INTERVAL_SECONDS (PyGithub's
    ``seconds_between_writes``: writes one at a time, spaced as GitHub asks)."""

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


class GitHub:
    """PyGithub behind ggstack's retry, error and scrubbing rules: a ``Forge``."""

    offline = False

    def __init__(self, slug: str, *, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.slug = slug
        self.token, self.token_var = _token(env, slug)
        self.api_url = _api_url(env.get("GITHUB_API_URL") or DEFAULT_API_URL)
        self.shown_url = shown_url(self.api_url)  # what messages name: never its userinfo
        self.secrets = Secrets.from_env(env)
        self.policy = RetryPolicy.from_env(env)
        self.writes = 0
        self._waited = 0.0
        self._kill_after = state.env_count("GGSTACK_DEBUG_KILL_AFTER_WRITES", env)
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
                f"target.repo {slug!r} not found at {self.shown_url} (check stack.toml, GITHUB_API_URL, "
                f"and that the token in {self.token_var} can see it)"
            ),
        )

    def close(self) -> None:
        self._gh.close()

    def scrub(self, text: str) -> str:
        return self.secrets.scrub(text)

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
            except ValueError as e:  # JSONDecodeError: no JSON at all (a proxy's page, a cut answer): retried
                wait, why = self._backoff(attempt), f"its answer is not JSON ({e})"
            except (TypeError, KeyError, AttributeError, IndexError, RecursionError) as e:
                # JSON, but not the shape GitHub's API answers with (or nested past the parser): no
                # retry makes it one.
                raise InfraError(self.scrub(_malformed(what, self.shown_url, e))) from None
            else:
                if write:
                    self._wrote()
                return result
            attempt += 1
            if attempt >= self.policy.attempts:
                raise InfraError(
                    self.scrub(f"{what}: the forge at {self.shown_url} still fails after {attempt} tries ({why})")
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
                self.scrub(
                    f"the forge at {self.shown_url} rejected the token in {self.token_var} (401 {message}); "
                    f"set {self.token_var} to a valid token"
                )
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
            raise UserError(self.scrub(f"{what}: the forge refused it (422 {message}{_errors(e)}){_what_to_do(e)}"))
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

        return self.call(f"list open PRs of {self.slug}", lambda: [_remote(p) for p in fetch()])

    def find_open_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        pulls = self._pulls_of_head(head_owner, head_ref, "open")
        return pulls[0] if pulls else None

    def closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        """The latest closed PR from this head branch, if any."""
        pulls = self._pulls_of_head(head_owner, head_ref, "closed")
        return max(pulls, key=lambda p: p.number) if pulls else None

    def _pulls_of_head(self, head_owner: str, head_ref: str, state: str) -> list[RemotePR]:
        def fetch() -> list[Any]:
            return list(self.repo.get_pulls(state=state, head=f"{head_owner}:{head_ref}"))

        return self.call(f"look up the {state} PRs of {head_ref}", lambda: [_remote(p) for p in fetch()])

    def approvals(self, pull: RemotePR) -> list[str]:
        """Maintainers whose latest decisive review of the PR approves it."""
        reviews = self.call(f"read reviews of #{pull.number}", lambda: list(pull.handle.get_reviews()))
        latest: dict[str, tuple[str, str]] = {}
        for r in reviews:
            if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED") and r.user is not None:
                latest[r.user.login] = (r.state, r.author_association or "")
        return sorted(u for u, (state, assoc) in latest.items() if state == "APPROVED" and assoc.upper() in MAINTAINERS)

    def commit_facts(self, slug: str, sha: str) -> CommitFacts | None:
        """Tree, parents and message of a commit the forge has, None when it has not."""

        repo = self.repo if slug.lower() == self.slug.lower() else None

        def fetch() -> CommitFacts | None:
            try:
                c = (repo or self._gh.get_repo(slug)).get_commit(sha)
                return CommitFacts(c.commit.tree.sha, tuple(p.sha for p in c.parents), c.commit.message or "")
            except GithubException as e:
                if e.status in (404, 422):
                    return None
                raise

        return self.call(f"read commit {sha[:10]} of {slug}", fetch)

    def comments(self, pull: RemotePR) -> list[Comment]:
        found = self.call(f"read comments of #{pull.number}", lambda: list(pull.handle.get_issue_comments()))
        return [Comment(c.user.login if c.user else "", c.body or "") for c in found]

    def has_branch(self, slug: str, branch: str) -> bool:
        repo = self.repo if slug.lower() == self.slug.lower() else None
        return self.call(
            f"look up branch {branch!r} of {slug}",
            lambda: _found(lambda: (repo or self._gh.get_repo(slug)).get_branch(branch)),
        )

    def has_repository(self, slug: str) -> bool:
        return slug.lower() == self.slug.lower() or self.call(
            f"read repository {slug}", lambda: _found(lambda: self._gh.get_repo(slug))
        )

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

    def comment(self, pull: RemotePR, body: str) -> None:
        """A comment; a lost answer is looked up (by the comment's last line) before it is re-sent."""

        def landed() -> bool | None:
            return True if any(same_last_line(c.body, body) for c in self.comments(pull)) else None

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
        author=p.user.login if p.user else "",
        state=p.state,
        merged=p.merged_at is not None,  # in the list shape; p.merged would cost a request
        handle=p,
    )


def _found(read: Callable[[], object]) -> bool:
    """Whether the forge has what ``read`` asks for: a 404 says no, any other failure is raised."""
    try:
        read()
    except GithubException as e:
        if e.status == 404:
            return False
        raise
    return True


def _message(e: GithubException) -> str:
    data = e.data
    if isinstance(data, dict):
        return str(data.get("message") or data.get("errors") or "")
    return str(data or "")


def _errors(e: GithubException) -> str:
    """GitHub's ``errors[]`` in words: "base: invalid", or the message a custom error carries."""
    errors = e.data.get("errors") if isinstance(e.data, dict) else None
    if not isinstance(errors, list) or not errors:
        return ""
    words = []
    for x in errors:
        if not isinstance(x, dict):
            words.append(str(x))
            continue
        what = " ".join(str(x[k]) for k in ("code", "message") if x.get(k) and not (k == "code" and x[k] == "custom"))
        words.append(f"{x['field']}: {what}" if x.get("field") else what)
    return ": " + "; ".join(w for w in words if w)


def _what_to_do(e: GithubException) -> str:
    """What the user can do about a refusal, from GitHub's ``errors[]``; else where GitHub documents it."""
    data = e.data if isinstance(e.data, dict) else {}
    errors = [x for x in data.get("errors") or [] if isinstance(x, dict)]
    fields = {x.get("field") for x in errors}
    text = " ".join(str(x.get("message", "")) for x in errors)
    if "base" in fields:
        return "; the PR base is not a branch of the target repository on the forge: push it there, or pass --onto an existing branch"
    if "head" in fields:
        return "; the PR head is not a branch the forge can see (was it pushed? with target.fork: is it a fork of target.repo?)"
    if "No commits between" in text:
        return "; the branch adds nothing to its base (is the patch already there?)"
    docs = data.get("documentation_url")
    return f"; see {docs}" if docs else ""


def _seconds(value: str) -> float:
    try:
        return max(float(value), 0.0)
    except ValueError:  # an HTTP date: wait until then
        return max((parsedate_to_datetime(value).timestamp() - time.time()), 0.0)


def _malformed(what: str, url: str, e: Exception) -> str:
    return (
        f"{what}: the forge at {url} answered with JSON that is not what GitHub's API sends ({type(e).__name__}: {e})"
    )
