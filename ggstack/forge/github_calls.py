"""One call to GitHub, retried in one budget a run, failures in the maintainer's words, secrets scrubbed. Retries are
ggstack's, not urllib3's: a write whose answer was lost is looked up before it is re-sent (no duplicate PRs)."""

from __future__ import annotations

import datetime
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import requests
from github import GithubException

from ggstack import state
from ggstack.errors import InfraError, UserError
from ggstack.secrets import Secrets

T = TypeVar("T")
# What a call may fail with: retried (_wait_after), or not GitHub's API (TypeError…: no retry helps).
_FAILURES = (
    GithubException,
    requests.RequestException,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    RecursionError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """How long ggstack keeps trying the forge: every wait (back-off, Retry-After, rate-limit reset) comes
    out of ``budget``. GGSTACK_RETRY_* and kin (docs/commands/pr.md) set it, so tests shrink the time scale."""

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


class RetryingClient:
    """The retry, error and scrubbing rules every GitHub call goes through (``GitHub`` is one)."""

    def __init__(self, slug: str, token_var: str, shown_url: str, env: Mapping[str, str]) -> None:
        self.slug, self.token_var = slug, token_var
        self.shown_url = shown_url  # what messages name: never its userinfo
        self.secrets = Secrets.from_env(env)
        self.policy = RetryPolicy.from_env(env)
        self.writes = 0
        self._waited = 0.0
        self._kill_after = state.env_count("GGSTACK_DEBUG_KILL_AFTER_WRITES", env)

    def scrub(self, text: str) -> str:
        return self.secrets.scrub(text)

    def call(
        self,
        what: str,
        fn: Callable[[], T],
        *,
        write: bool = False,
        recheck: Callable[[], T | None] | None = None,
        not_found: str | None = None,
    ) -> T:
        """``fn()``, retried on 5xx, timeouts and rate limits within the budget. Before a failed write
        is re-sent, ``recheck`` says whether it landed after all (a lost answer): its non-None answer is kept."""
        attempt = 0
        while True:
            try:
                result = fn()
            except _FAILURES as e:
                wait, why = self._wait_after(e, what, attempt, not_found)
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
            found = recheck() if recheck is not None else None
            if found is not None:
                return found

    def _wait_after(self, e: Exception, what: str, attempt: int, not_found: str | None) -> tuple[float, str]:
        """How long to wait before trying again after ``e``, and why; raises where no retry helps."""
        if isinstance(e, GithubException):
            return self._retryable(e, what, attempt, not_found)
        if isinstance(e, requests.RequestException):
            return self._backoff(attempt), f"{type(e).__name__}: {e}"
        if isinstance(e, ValueError):  # JSONDecodeError: no JSON at all (a proxy's page, a cut answer)
            return self._backoff(attempt), f"its answer is not JSON ({e})"
        # JSON, but not the shape GitHub's API answers with (or nested past the parser): no retry makes it one.
        raise InfraError(self.scrub(_malformed(what, self.shown_url, e))) from None

    def _retryable(self, e: GithubException, what: str, attempt: int, not_found: str | None) -> tuple[float, str]:
        message = error_message(e)
        status = e.status
        if status == 401:
            raise UserError(
                self.scrub(
                    f"the forge at {self.shown_url} rejected the token in {self.token_var} (401 {message}); "
                    f"set {self.token_var} to a valid token"
                )
            )
        if status in (403, 429):
            return self._throttled(e, what, attempt, message)
        if status == 404:
            raise UserError(self.scrub(not_found or f"{what}: not found on the forge (404 {message})"))
        if status == 422:
            raise UserError(self.scrub(f"{what}: the forge refused it (422 {message}{_errors(e)}){_what_to_do(e)}"))
        if status >= 500:
            return self._backoff(attempt), f"{status} {message}"
        raise InfraError(self.scrub(f"{what}: unexpected answer from the forge ({status} {message})"))

    def _throttled(self, e: GithubException, what: str, attempt: int, message: str) -> tuple[float, str]:
        """A 403 or 429: the wait the forge asks for, within ``max_wait``; else the token may not do this."""
        headers = {k.lower(): v for k, v in (e.headers or {}).items()}
        if "retry-after" in headers:
            seconds = _seconds(headers["retry-after"])
            if seconds is None:  # asked to wait, but not how long in words we read: the back-off's wait
                return self._backoff(attempt), f"{e.status} Retry-After {headers['retry-after']!r} (unreadable)"
            if seconds > self.policy.max_wait:
                raise InfraError(
                    self.scrub(
                        f"{what}: the forge asks to wait {seconds:.0f} s (Retry-After), more than the {self.policy.max_wait:.0f} s ggstack waits; try again later"
                    )
                )
            return seconds, f"{e.status} Retry-After {seconds:.0f} s"
        if headers.get("x-ratelimit-remaining") == "0":
            return self._until_reset(headers, what)
        if "secondary rate limit" in message.lower():
            # GitHub: "wait at least one minute"; scaled with the back-off base.
            return max(60 * self.policy.base, self._backoff(attempt)), "secondary rate limit"
        raise UserError(
            self.scrub(
                f"{what}: the forge refused ({e.status} {message}); does the token in {self.token_var} have write access to {self.slug}?"
            )
        )

    def _until_reset(self, headers: Mapping[str, str], what: str) -> tuple[float, str]:
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


def error_message(e: GithubException) -> str:
    data = e.data
    if isinstance(data, dict):
        return str(data.get("message") or data.get("errors") or "")
    return str(data or "")


def _errors(e: GithubException) -> str:
    errors = e.data.get("errors") if isinstance(e.data, dict) else None
    if not isinstance(errors, list) or not errors:
        return ""
    return ": " + "; ".join(w for w in map(_error_words, errors) if w)


def _error_words(x: object) -> str:
    """One of GitHub's ``errors[]``: "base: invalid", or the message a custom error carries."""
    if not isinstance(x, dict):
        return str(x)
    what = " ".join(str(x[k]) for k in ("code", "message") if x.get(k) and not (k == "code" and x[k] == "custom"))
    return f"{x['field']}: {what}" if x.get("field") else what


_ADVICE = (  # a refused field of GitHub's ``errors[]`` -> what the user can do
    (
        "base",
        "the PR base is not a branch of the target repository on the forge: push it there, or pass --onto an existing branch",
    ),
    (
        "head",
        "the PR head is not a branch the forge can see (was it pushed? with target.fork: is it a fork of target.repo?)",
    ),
)


def _what_to_do(e: GithubException) -> str:
    """What the user can do about a refusal, from GitHub's ``errors[]``; else where GitHub documents it."""
    data = e.data if isinstance(e.data, dict) else {}
    errors = [x for x in data.get("errors") or [] if isinstance(x, dict)]
    docs = data.get("documentation_url")
    return _advice(errors) or (f"; see {docs}" if docs else "")


def _advice(errors: list[dict[str, Any]]) -> str:
    fields = {x.get("field") for x in errors}
    for field, words in _ADVICE:
        if field in fields:
            return f"; {words}"
    if "No commits between" in " ".join(str(x.get("message", "")) for x in errors):
        return "; the branch adds nothing to its base (is the patch already there?)"
    return ""


def _seconds(value: str) -> float | None:
    """None where it is neither seconds nor an HTTP date (a proxy's header)."""
    try:
        return max(float(value), 0.0)
    except ValueError:  # an HTTP date: wait until then
        pass
    try:
        return max((parsedate_to_datetime(value).timestamp() - time.time()), 0.0)
    except (ValueError, TypeError):
        return None


def _malformed(what: str, url: str, e: Exception) -> str:
    return (
        f"{what}: the forge at {url} answered with JSON that is not what GitHub's API sends ({type(e).__name__}: {e})"
    )
