"""A local GitHub-compatible HTTP server for ggstack's forge tests.

ggstack talks to GitHub through PyGithub. Mocking PyGithub would only test our
beliefs about PyGithub; this server lets the real PyGithub speak real HTTP to
something that answers the way api.github.com does for the endpoints ggstack
uses: the same URL shapes, field names, status codes, error bodies, `Link`
pagination and `X-RateLimit-*` headers, and the GraphQL mutations that PyGithub
uses for drafts.

Branches are not modelled: each repository is a real bare git repository on
disk that the test `git push`es to, and branch heads and PR head shas are read
from it on every response, so a push is seen exactly as GitHub would see it.

Two GitHub habits are copied on purpose because code that forgets them breaks
on the real service: a pull listed by `GET /pulls` is the "simple" shape (no
`merged`, `mergeable`, `commits`...; PyGithub fetches the full PR when one of
those is read), and `head=` without an `owner:` prefix is ignored.

Merging is modelled with real git in the bare repository: the legacy
synchronous merge (`PUT /pulls/{n}/merge`: merge, squash or rebase, refused
with 405/409 as GitHub refuses), branch protection (required status checks and
approving reviews, classic or as a ruleset), check runs and commit statuses,
collaborator permissions, and GitHub's stacked pull requests (public preview):
the Stacks API (list, get, create, add, unstack), the `stack` object on every
pull request, and the asynchronous merge API (`PUT .../merge-async`, polled with
`GET .../merge-async/{uuid}`) that lands a stack atomically, evaluating branch
protection only when the merge runs. Fields and status codes follow GitHub's
REST reference for those endpoints; where it is silent (a base change or a
legacy merge of a stacked PR) the server refuses, so code that relies on either
fails here first.

Faults (5xx, rate limits, `Retry-After`, slow answers) can be injected per
method and path, so retry and back-off code is tested against real responses.
Standard library only; state lives in memory behind one lock.
"""

from __future__ import annotations

import http
import itertools
import json
import math
import os
import re
import subprocess
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

DOCS = "https://docs.github.com/rest"
RATE_LIMIT = 5000
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
Json = dict[str, Any]


class ApiError(Exception):
    """An error answer: raised anywhere in a handler, sent as GitHub's error shape."""

    def __init__(self, status: int, message: str, errors: list[Json] | None = None, docs: str = DOCS):
        super().__init__(message)
        self.status = status
        self.body: Json = {"message": message, "documentation_url": docs, "status": str(status)}
        if errors is not None:
            self.body["errors"] = errors


def not_found(message: str = "Not Found") -> ApiError:
    return ApiError(404, message)


def validation_failed(*errors: Json) -> ApiError:
    return ApiError(422, "Validation Failed", list(errors))


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def git(bare_path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", f"--git-dir={bare_path}", *args], capture_output=True, text=True)


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    body: Json | None
    delay: float
    raw: bytes | None = None  # sent as the body as it is: an answer that is not JSON

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and self.method in ("*", method) and bool(self.pattern.search(path))


@dataclass
class Protection:
    """A branch's rules: classic branch protection, or the same rules as a ruleset (`ruleset`)."""

    checks: tuple[str, ...] = ()
    approvals: int = 0
    ruleset: bool = False


@dataclass
class NativeStack:
    """A stack of pull requests, bottom first, as GitHub's Stacks API has it."""

    id: int
    number: int
    base_ref: str
    pulls: list[int]
    created_at: str


@dataclass
class MergeRequest:
    """One asynchronous merge request: pending until polled `polls` times, then run."""

    uuid: str
    repo: str
    number: int
    method: str
    action: str
    expected_sha: str
    polls: int
    status: str = "pending"
    details: Json = field(default_factory=dict)


@dataclass
class Repo:
    full_name: str
    bare_path: str
    default_branch: str
    fork_of: str | None
    id: int
    labels: dict[str, Json] = field(default_factory=dict)  # keyed by lower-cased name, as GitHub matches
    next_number: int = 1
    settings: dict[str, bool] = field(
        default_factory=lambda: {
            "allow_merge_commit": True,
            "allow_squash_merge": True,
            "allow_rebase_merge": True,
            "delete_branch_on_merge": False,
        }
    )
    protection: dict[str, Protection] = field(default_factory=dict)  # branch -> its rules
    stacks_enabled: bool = False  # stacked pull requests (public preview) turned on
    stacks: dict[int, NativeStack] = field(default_factory=dict)  # by stack number
    next_stack: int = 1

    @property
    def owner(self) -> str:
        return self.full_name.split("/")[0]

    def branch_heads(self) -> dict[str, str]:
        out = git(self.bare_path, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/heads")
        return dict(line.split(" ", 1) for line in out.stdout.splitlines())


@dataclass
class Pull:
    repo: str
    number: int
    id: int
    issue_id: int
    node_id: str
    title: str
    body: str | None
    user: str
    head_repo: str
    head_ref: str
    base_ref: str
    head_sha: str  # last sha seen; kept when the branch is deleted, as GitHub does
    draft: bool
    created_at: str
    state: str = "open"
    merged: bool = False
    labels: list[str] = field(default_factory=list)
    reviews: list[Json] = field(default_factory=list)
    comments: list[Json] = field(default_factory=list)
    updated_at: str = ""
    updated_seq: int = 0
    closed_at: str | None = None
    merged_at: str | None = None
    merge_commit_sha: str | None = None


@dataclass
class Request:
    method: str
    raw_path: str  # as sent (percent-encoded), without the query and without an /api/v3 prefix
    path: str  # the same, percent-decoded: what `requests` records and fault patterns match
    prefix: str  # "/api/v3" when the client's base URL has it, else ""
    query: dict[str, str]
    body: Any


class FakeGitHub:
    """The server and its state; tests drive it, PyGithub talks to `url`."""

    def __init__(self, token: str = "test-token", login: str = "ggstack-bot"):
        self.token = token
        self.login = login
        self.url = ""
        self.requests: list[tuple[str, str]] = []
        self._writes = 0
        self.lock = threading.RLock()
        self._repos: dict[str, Repo] = {}
        self._pulls: dict[tuple[str, int], Pull] = {}
        self._faults: list[Fault] = []
        self._user_ids: dict[str, int] = {}
        self._next_id = 1000
        self._seq = 0
        self._used = {"core": 0, "graphql": 0}
        self.reset_at = int(time.time()) + 3600
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._checks: dict[tuple[str, str], list[Json]] = {}  # (repo, sha) -> check runs, oldest first
        self._statuses: dict[tuple[str, str], list[Json]] = {}  # (repo, sha) -> commit statuses, oldest first
        self._permissions: dict[tuple[str, str], str] = {}  # (repo, login) -> admin|maintain|write|triage|read
        self.merge_requests: dict[str, MergeRequest] = {}
        self.merge_async_polls = 1  # polls a merge request stays pending before it runs

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeGitHub:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.forge = self  # type: ignore[attr-defined]
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        # A short poll keeps stop() (which waits one poll) from costing half a second per test.
        self._thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test-side setup and inspection --------------------------------------

    def add_repo(
        self, full_name: str, bare_path: str, default_branch: str = "main", fork_of: str | None = None
    ) -> None:
        with self.lock:
            self._repos[full_name.lower()] = Repo(full_name, str(bare_path), default_branch, fork_of, self.new_id())

    def approve(self, full_name: str, number: int, user: str = "maintainer", state: str = "APPROVED") -> None:
        """A review of the PR's current head by ``user`` (who has write access unless told otherwise)."""
        with self.lock:
            pull = self.find_pull(full_name, number)
            self._permissions.setdefault((self.repo(full_name).full_name, user.lower()), "write")
            view = View(self)
            review_id = self.new_id()
            pull.reviews.append(
                {
                    "id": review_id,
                    "node_id": f"PRR_fake{review_id}",
                    "user": view.user(user),
                    "body": "",
                    "state": state,
                    "commit_id": view.head_sha(pull),
                    "submitted_at": now_iso(),
                    "author_association": "MEMBER",
                    "html_url": f"{view.pull_html(pull)}#pullrequestreview-{review_id}",
                    "pull_request_url": view.pull_url(pull),
                    "_links": {
                        "html": {"href": f"{view.pull_html(pull)}#pullrequestreview-{review_id}"},
                        "pull_request": {"href": view.pull_url(pull)},
                    },
                }
            )

    def merge(self, full_name: str, number: int) -> None:
        """Mark a PR merged, as a maintainer pressing the button would (the bare repo is left alone)."""
        with self.lock:
            pull = self.find_pull(full_name, number)
            pull.head_sha = View(self).head_sha(pull)
            pull.state, pull.merged = "closed", True
            pull.closed_at = pull.merged_at = now_iso()
            self.touch(pull)

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        with self.lock:
            self._permissions[(self.repo(full_name).full_name, login.lower())] = permission

    def permission(self, full_name: str, login: str) -> str:
        repo = self.repo(full_name)
        if login.lower() == repo.owner.lower():
            return "admin"
        default = "write" if login.lower() == self.login.lower() else "read"
        return self._permissions.get((repo.full_name, login.lower()), default)

    def set_check(self, full_name: str, sha: str, name: str, conclusion: str | None = "success") -> None:
        """A check run on ``sha``: completed with ``conclusion``, or still running when None."""
        with self.lock:
            check_id = self.new_id()
            self._checks.setdefault((self.repo(full_name).full_name, sha), []).append(
                {
                    "id": check_id,
                    "node_id": f"CR_fake{check_id}",
                    "name": name,
                    "head_sha": sha,
                    "external_id": "",
                    "status": "in_progress" if conclusion is None else "completed",
                    "conclusion": conclusion,
                    "started_at": now_iso(),
                    "completed_at": None if conclusion is None else now_iso(),
                    "url": f"{self.url}/repos/{full_name}/check-runs/{check_id}",
                    "html_url": f"{self.url}/{full_name}/runs/{check_id}",
                    "details_url": f"{self.url}/{full_name}/runs/{check_id}",
                    "output": {"title": None, "summary": None, "text": None, "annotations_count": 0},
                    "pull_requests": [],
                }
            )

    def set_status(self, full_name: str, sha: str, context: str, state: str = "success") -> None:
        """A commit status (the older API): success, failure, error or pending."""
        with self.lock:
            status_id = self.new_id()
            self._statuses.setdefault((self.repo(full_name).full_name, sha), []).append(
                {
                    "id": status_id,
                    "node_id": f"SC_fake{status_id}",
                    "context": context,
                    "state": state,
                    "description": None,
                    "target_url": None,
                    "created_at": now_iso(),
                    "updated_at": now_iso(),
                    "url": f"{self.url}/repos/{full_name}/statuses/{sha}",
                }
            )

    def check_states(self, full_name: str, sha: str) -> dict[str, str]:
        """The latest state of every check run and status on ``sha``: success, failure or pending."""
        name = self.repo(full_name).full_name
        states: dict[str, str] = {}
        for run in self._checks.get((name, sha), []):
            if run["status"] != "completed":
                states[run["name"]] = "pending"
            else:
                ok = run["conclusion"] in ("success", "neutral", "skipped")
                states[run["name"]] = "success" if ok else "failure"
        for status in self._statuses.get((name, sha), []):
            states[status["context"]] = {"error": "failure"}.get(status["state"], status["state"])
        return states

    def protect(
        self, full_name: str, branch: str, *, checks: tuple[str, ...] = (), approvals: int = 0, ruleset: bool = False
    ) -> None:
        with self.lock:
            self.repo(full_name).protection[branch] = Protection(tuple(checks), approvals, ruleset)

    def configure(self, full_name: str, **settings: bool) -> None:
        """Repository merge settings: allow_merge_commit, allow_squash_merge, allow_rebase_merge, delete_branch_on_merge."""
        with self.lock:
            repo = self.repo(full_name)
            unknown = set(settings) - set(repo.settings)
            assert not unknown, unknown
            repo.settings.update(settings)

    def enable_stacks(self, full_name: str) -> None:
        with self.lock:
            self.repo(full_name).stacks_enabled = True

    def stacks(self, full_name: str) -> list[dict]:
        with self.lock:
            view = View(self)
            repo = self.repo(full_name)
            return [view.stack(repo, st) for st in sorted(repo.stacks.values(), key=lambda x: -x.number)]

    def rule_violations(self, pull: Pull, branch: str, head_sha: str) -> list[str]:
        """What the rules of ``branch`` say against merging ``pull`` at ``head_sha``, in GitHub's words."""
        rules = self.repo(pull.repo).protection.get(branch)
        if rules is None:
            return []
        out = []
        latest: dict[str, str] = {}
        for review in pull.reviews:
            if review["state"] in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                latest[review["user"]["login"]] = review["state"]
        approvals = sum(
            1
            for login, state in latest.items()
            if state == "APPROVED" and self.permission(pull.repo, login) in ("admin", "maintain", "write")
        )
        if approvals < rules.approvals:
            noun = "review is" if rules.approvals == 1 else "reviews are"
            out.append(f"At least {rules.approvals} approving {noun} required by reviewers with write access.")
        states = self.check_states(pull.repo, head_sha)
        for context in rules.checks:
            if states.get(context) != "success":
                out.append(
                    f'Required status check "{context}" is {"failing" if states.get(context) == "failure" else "expected"}.'
                )
        return out

    def merge_calls(self) -> list[tuple[str, str]]:
        """The merge requests sent (legacy and asynchronous), as (method, path)."""
        return [(m, p) for m, p in self.requests if m == "PUT" and re.search(r"/merge(-async)?$", p)]

    def pulls(self, full_name: str) -> list[dict]:
        with self.lock:
            view = View(self)
            return [view.pull(p, full=True) for p in self.pulls_of(full_name)]

    def comments(self, full_name: str, number: int) -> list[dict]:
        with self.lock:
            return [dict(c) for c in self.find_pull(full_name, number).comments]

    def write_calls(self) -> int:
        return self._writes

    def reset_counts(self) -> None:
        with self.lock:
            self.requests.clear()
            self._writes = 0

    # -- fault injection -------------------------------------------------------

    def clear_faults(self) -> None:
        """Forget the injected faults no request has met yet."""
        with self.lock:
            self._faults.clear()

    def inject(
        self,
        method: str,
        path_regex: str,
        *,
        status: int = 502,
        times: int = 1,
        headers: dict | None = None,
        body: dict | None = None,
        delay: float = 0.0,
        raw: bytes | None = None,
    ) -> None:
        """The next `times` requests matching method and path get this answer.

        `path_regex` is searched in the percent-decoded path without the query
        string; method "*" matches any. status 0 means: only wait `delay`
        seconds, then answer normally. `raw`: the body's bytes, as they are
        (malformed JSON).
        """
        fault = Fault(
            method.upper(),
            re.compile(path_regex),
            status,
            times,
            {k: str(v) for k, v in (headers or {}).items()},
            body,
            delay,
            raw,
        )
        with self.lock:
            self._faults.append(fault)

    def inject_rate_limit(self, method: str, path_regex: str, reset_in: float, times: int = 1) -> None:
        # X-RateLimit-Reset is whole epoch seconds; round up so the reset is never in the past.
        reset = math.ceil(time.time() + reset_in)
        headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset), "X-RateLimit-Used": str(RATE_LIMIT)}
        body = {
            "message": "API rate limit exceeded for user ID 1.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }
        self.inject(method, path_regex, status=403, times=times, headers=headers, body=body)

    def inject_retry_after(
        self, method: str, path_regex: str, seconds: float, times: int = 1, status: int = 429
    ) -> None:
        # Retry-After is delay-seconds, an integer (RFC 9110); fractions are rounded up.
        body = {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }
        self.inject(
            method, path_regex, status=status, times=times, headers={"Retry-After": str(math.ceil(seconds))}, body=body
        )

    # -- state helpers used by View/Call ----------------------------------------

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def user_id(self, login: str) -> int:
        if login not in self._user_ids:
            self._user_ids[login] = self.new_id()
        return self._user_ids[login]

    def touch(self, pull: Pull) -> None:
        self._seq += 1
        pull.updated_seq, pull.updated_at = self._seq, now_iso()

    def repo(self, full_name: str) -> Repo:
        repo = self._repos.get(full_name.lower())
        if repo is None:
            raise not_found()
        return repo

    def find_pull(self, full_name: str, number: int) -> Pull:
        pull = self._pulls.get((self.repo(full_name).full_name, number))
        if pull is None:
            raise not_found()
        return pull

    def pulls_of(self, full_name: str) -> list[Pull]:
        name = self.repo(full_name).full_name
        return sorted((p for p in self._pulls.values() if p.repo == name), key=lambda p: p.number)

    def add_pull(self, pull: Pull) -> None:
        self._pulls[(pull.repo, pull.number)] = pull

    def repos(self) -> list[Repo]:
        return list(self._repos.values())

    def has_repo(self, full_name: str) -> bool:
        return full_name.lower() in self._repos

    def pull_by_node(self, node_id: str) -> Pull | None:
        return next((p for p in self._pulls.values() if p.node_id == node_id), None)

    def network_root(self, repo: Repo) -> str:
        while repo.fork_of and repo.fork_of.lower() in self._repos:
            repo = self._repos[repo.fork_of.lower()]
        return repo.full_name

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None

    def record(self, method: str, path: str, is_write: bool) -> None:
        with self.lock:
            self.requests.append((method, path))
            self._writes += is_write

    def spend(self, resource: str) -> None:
        with self.lock:
            self._used[resource] += 1

    def rate_headers(self, resource: str) -> dict[str, str]:
        used = self._used[resource]
        return {
            "X-RateLimit-Limit": str(RATE_LIMIT),
            "X-RateLimit-Remaining": str(max(RATE_LIMIT - used, 0)),
            "X-RateLimit-Reset": str(self.reset_at),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Resource": resource,
        }


class View:
    """Renders server state as GitHub's JSON, reading branch heads from git once per request."""

    def __init__(self, forge: FakeGitHub, api_prefix: str = ""):
        self.forge = forge
        # PyGithub refuses URLs outside the base URL it was given, so API links keep the caller's
        # prefix ("" or "/api/v3"); web links sit at the root, as on GitHub Enterprise.
        self.api = forge.url + api_prefix
        self.web = forge.url
        self._heads: dict[str, dict[str, str]] = {}

    def heads(self, repo: Repo) -> dict[str, str]:
        if repo.full_name not in self._heads:
            self._heads[repo.full_name] = repo.branch_heads()
        return self._heads[repo.full_name]

    def head_sha(self, pull: Pull) -> str:
        sha = self.heads(self.forge.repo(pull.head_repo)).get(pull.head_ref)
        if sha and pull.state == "open":
            pull.head_sha = sha
        return pull.head_sha

    def user(self, login: str) -> Json:
        return {
            "login": login,
            "id": self.forge.user_id(login),
            "node_id": f"U_fake{login}",
            "type": "User",
            "site_admin": False,
            "url": f"{self.api}/users/{login}",
            "html_url": f"{self.web}/{login}",
            "avatar_url": "",
            "gravatar_id": "",
        }

    def repo(self, repo: Repo, with_parent: bool = True) -> Json:
        api = f"{self.api}/repos/{repo.full_name}"
        out: Json = {
            "id": repo.id,
            "node_id": f"R_fake{repo.id}",
            "name": repo.full_name.split("/")[1],
            "full_name": repo.full_name,
            "owner": self.user(repo.owner),
            "private": False,
            "html_url": f"{self.web}/{repo.full_name}",
            "description": None,
            "fork": repo.fork_of is not None,
            "url": api,
            "pulls_url": f"{api}/pulls{{/number}}",
            "issues_url": f"{api}/issues{{/number}}",
            "labels_url": f"{api}/labels{{/name}}",
            "branches_url": f"{api}/branches{{/branch}}",
            # clone_url is the bare repository itself, so code that pushes via clone_url works in tests.
            "clone_url": repo.bare_path,
            "default_branch": repo.default_branch,
            "visibility": "public",
            "archived": False,
            "disabled": False,
            "permissions": {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True},
            **repo.settings,
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": now_iso(),
            "pushed_at": now_iso(),
        }
        if with_parent and repo.fork_of and self.forge.has_repo(repo.fork_of):
            parent = self.forge.repo(repo.fork_of)
            out["parent"] = self.repo(parent, with_parent=False)
            out["source"] = self.repo(self.forge.repo(self.forge.network_root(repo)), with_parent=False)
        return out

    def commit(self, repo: Repo, sha: str) -> Json:
        fmt = "%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
        out = git(repo.bare_path, "log", "-1", f"--format={fmt}", sha)
        if out.returncode != 0:
            raise not_found("No commit found for SHA: " + sha)
        tree, parents, an, ae, ad, cn, ce, cd, message = out.stdout.split("\x00", 8)
        api = f"{self.api}/repos/{repo.full_name}"
        return {
            "sha": sha,
            "node_id": f"C_fake{sha[:12]}",
            "url": f"{api}/commits/{sha}",
            "html_url": f"{self.web}/{repo.full_name}/commit/{sha}",
            "commit": {
                "message": message.rstrip("\n"),
                "url": f"{api}/git/commits/{sha}",
                "author": {"name": an, "email": ae, "date": ad},
                "committer": {"name": cn, "email": ce, "date": cd},
                "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
            },
            "parents": [{"sha": p, "url": f"{api}/commits/{p}"} for p in parents.split()],
            "author": None,
            "committer": None,
        }

    def label(self, repo: Repo, name: str) -> Json:
        return repo.labels[name.lower()]

    def pull_url(self, pull: Pull) -> str:
        return f"{self.api}/repos/{pull.repo}/pulls/{pull.number}"

    def issue_url(self, pull: Pull) -> str:
        return f"{self.api}/repos/{pull.repo}/issues/{pull.number}"

    def pull_html(self, pull: Pull) -> str:
        return f"{self.web}/{pull.repo}/pull/{pull.number}"

    def part(self, repo: Repo, ref: str, sha: str) -> Json:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user(repo.owner),
            "repo": self.repo(repo),
        }

    def pull(self, pull: Pull, full: bool) -> Json:
        """A PR as `GET /pulls` (full=False) or `GET /pulls/{n}` (full=True) returns it."""
        base_repo = self.forge.repo(pull.repo)
        head_repo = self.forge.repo(pull.head_repo)
        base_sha = self.heads(base_repo).get(pull.base_ref, "")
        url, issue_url, html = self.pull_url(pull), self.issue_url(pull), self.pull_html(pull)
        out: Json = {
            "url": url,
            "id": pull.id,
            "node_id": pull.node_id,
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue_url,
            "commits_url": f"{url}/commits",
            "review_comments_url": f"{url}/comments",
            "comments_url": f"{issue_url}/comments",
            "statuses_url": f"{self.api}/repos/{pull.repo}/statuses/{self.head_sha(pull)}",
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "user": self.user(pull.user),
            "body": pull.body,
            "labels": [self.label(base_repo, name) for name in pull.labels],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": pull.created_at,
            "updated_at": pull.updated_at,
            "closed_at": pull.closed_at,
            "merged_at": pull.merged_at,
            "merge_commit_sha": (pull.merge_commit_sha or pull.head_sha) if pull.merged else None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self.part(head_repo, pull.head_ref, self.head_sha(pull)),
            "base": self.part(base_repo, pull.base_ref, base_sha),
            "_links": {
                "self": {"href": url},
                "html": {"href": html},
                "issue": {"href": issue_url},
                "comments": {"href": f"{issue_url}/comments"},
            },
            "author_association": "MEMBER",
            "auto_merge": None,
            "draft": pull.draft,
            "stack": self.pull_stack(pull),
        }
        if full:
            out.update(self._pull_details(pull, head_repo, base_sha))
        return out

    def _pull_details(self, pull: Pull, head_repo: Repo, base_sha: str) -> Json:
        # Only the single-PR endpoint has these on GitHub; they cost a diff there too.
        commits, additions, deletions, files = _diff_stats(head_repo, base_sha, self.head_sha(pull))
        mergeable, state = self.mergeability(pull, base_sha)
        return {
            "merged": pull.merged,
            "mergeable": mergeable,
            "rebaseable": mergeable,
            "mergeable_state": state,
            "merged_by": self.user(pull.user) if pull.merged else None,
            "comments": len(pull.comments),
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": commits,
            "additions": additions,
            "deletions": deletions,
            "changed_files": files,
        }

    def mergeability(self, pull: Pull, base_sha: str) -> tuple[bool | None, str]:
        """GitHub's `mergeable` and `mergeable_state`: dirty (conflicts), draft, blocked (its base's
        rules unmet), unstable (a check that is not required failing), else clean."""
        if pull.state != "open":
            return None, "unknown"
        base_repo = self.forge.repo(pull.repo)
        if not base_sha or _merged_tree(base_repo.bare_path, base_sha, self.head_sha(pull)) is None:
            return False, "dirty"
        if pull.draft:
            return True, "draft"
        if self.forge.rule_violations(pull, pull.base_ref, self.head_sha(pull)):
            return True, "blocked"
        if "failure" in self.forge.check_states(pull.repo, self.head_sha(pull)).values():
            return True, "unstable"
        return True, "clean"

    def pull_stack(self, pull: Pull) -> Json | None:
        """The `stack` object of a PR in a stack (null for a standalone PR)."""
        repo = self.forge.repo(pull.repo)
        for st in repo.stacks.values():
            if pull.number in st.pulls:
                return {
                    "id": st.id,
                    "number": st.number,
                    "size": len(st.pulls),
                    "position": st.pulls.index(pull.number) + 1,
                    "base": {"ref": st.base_ref, "sha": self.heads(repo).get(st.base_ref, "")},
                }
        return None

    def stack(self, repo: Repo, st: NativeStack) -> Json:
        pulls = [self.forge.find_pull(repo.full_name, n) for n in st.pulls]
        return {
            "id": st.id,
            "number": st.number,
            "node_id": f"S_fake{st.id}",
            "url": f"{self.api}/repos/{repo.full_name}/stacks/{st.number}",
            "base": {"ref": st.base_ref},
            "open": any(p.state == "open" for p in pulls),
            "created_at": st.created_at,
            "pull_requests": [
                {
                    "number": p.number,
                    "state": p.state,
                    "draft": p.draft,
                    "merged_at": p.merged_at,
                    "head": {"ref": p.head_ref, "sha": self.head_sha(p)},
                }
                for p in pulls
            ],
        }

    def issue(self, pull: Pull) -> Json:
        url, html = self.issue_url(pull), self.pull_html(pull)
        base_repo = self.forge.repo(pull.repo)
        return {
            "url": url,
            "repository_url": f"{self.api}/repos/{pull.repo}",
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": html,
            "id": pull.issue_id,
            "node_id": f"I_fake{pull.issue_id}",
            "number": pull.number,
            "title": pull.title,
            "user": self.user(pull.user),
            "labels": [self.label(base_repo, n) for n in pull.labels],
            "state": pull.state,
            "state_reason": None,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": len(pull.comments),
            "created_at": pull.created_at,
            "updated_at": pull.updated_at,
            "closed_at": pull.closed_at,
            "author_association": "MEMBER",
            "draft": pull.draft,
            "body": pull.body,
            "pull_request": {
                "url": self.pull_url(pull),
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": pull.merged_at,
            },
        }

    def pull_node(self, pull: Pull) -> Json:
        """The GraphQL PullRequest fields PyGithub and ggstack ask for."""
        state = "MERGED" if pull.merged else pull.state.upper()
        return {
            "__typename": "PullRequest",
            "id": pull.node_id,
            "number": pull.number,
            "title": pull.title,
            "body": pull.body,
            "isDraft": pull.draft,
            "state": state,
            "url": self.pull_html(pull),
            "headRefName": pull.head_ref,
            "baseRefName": pull.base_ref,
            "headRefOid": self.head_sha(pull),
        }


def _diff_stats(repo: Repo, base_sha: str, head_sha: str) -> tuple[int, int, int, int]:
    """(commits, additions, deletions, changed files) of base...head; zeros when git cannot tell."""
    if not base_sha:
        return 0, 0, 0, 0
    count = git(repo.bare_path, "rev-list", "--count", f"{base_sha}..{head_sha}")
    numstat = git(repo.bare_path, "diff", "--numstat", f"{base_sha}...{head_sha}")
    if count.returncode or numstat.returncode:
        return 0, 0, 0, 0
    rows = [line.split("\t") for line in numstat.stdout.splitlines()]
    added = sum(int(r[0]) for r in rows if r[0].isdigit())
    deleted = sum(int(r[1]) for r in rows if r[1].isdigit())
    return int(count.stdout), added, deleted, len(rows)


def _has_no_commits(repo: Repo, base_sha: str, head_sha: str) -> bool:
    # Exit 0: head is already in base. 1: it is not. 128: objects missing (a fork without the base) — let it pass.
    return git(repo.bare_path, "merge-base", "--is-ancestor", head_sha, base_sha).returncode == 0


def _merged_tree(bare: str, base_sha: str, head_sha: str) -> str | None:
    """The tree of merging head into base (git merge-tree), None when they conflict."""
    out = git(bare, "merge-tree", "--write-tree", "--no-messages", base_sha, head_sha)
    return out.stdout.split("\n", 1)[0].strip() if out.returncode == 0 else None


_GITHUB = {
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}


def _commit_tree(bare: str, tree: str, parents: list[str], message: str, author: tuple[str, str, str]) -> str:
    env = {**os.environ, **_GITHUB, "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]}
    if author[2]:
        env["GIT_AUTHOR_DATE"] = author[2]
    args = ["git", f"--git-dir={bare}", "commit-tree", tree, *[a for p in parents for a in ("-p", p)]]
    out = subprocess.run(args, input=message, capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def _author_of(bare: str, sha: str) -> tuple[str, str, str]:
    name, email, date = git(bare, "log", "-1", "--format=%an%x00%ae%x00%aI", sha).stdout.strip("\n").split("\x00")
    return name, email, date


def _rebased(bare: str, onto: str, head: str) -> str | None:
    """head's commits that onto lacks (by patch-id, as git rebase skips them) replayed onto it; None on a conflict."""
    commits = git(bare, "rev-list", "--reverse", "--no-merges", "--right-only", "--cherry-pick", f"{onto}...{head}")
    current = onto
    for sha in commits.stdout.split():
        diff = git(bare, "diff", "--binary", "--full-index", f"{sha}^", sha).stdout
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "GIT_INDEX_FILE": os.path.join(tmp, "index")}
            subprocess.run(["git", f"--git-dir={bare}", "read-tree", current], env=env, check=True)
            applied = subprocess.run(
                ["git", f"--git-dir={bare}", "apply", "--cached", "-"],
                input=diff,
                env=env,
                capture_output=True,
                text=True,
            )
            if applied.returncode != 0:
                return None
            tree = subprocess.run(
                ["git", f"--git-dir={bare}", "write-tree"], env=env, capture_output=True, text=True, check=True
            ).stdout.strip()
        message = git(bare, "log", "-1", "--format=%B", sha).stdout
        current = _commit_tree(bare, tree, [current], message, _author_of(bare, sha))
    return current


def _label_names(body: Any) -> list[str]:
    """GitHub takes ["a"], {"labels": ["a"]} and {"labels": [{"name": "a"}]} alike."""
    items = body.get("labels", []) if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise validation_failed({"resource": "Label", "field": "labels", "code": "invalid"})
    return [item["name"] if isinstance(item, dict) else str(item) for item in items]


class Call(View):
    """One API request: the handlers, one per endpoint, each returning (status, body, extra headers)."""

    def __init__(self, forge: FakeGitHub, req: Request):
        super().__init__(forge, req.prefix)
        self.req = req

    # -- users and limits --

    def get_user(self, login: str | None = None) -> Json:
        return self.user(login or self.forge.login)

    def get_rate_limit(self) -> Json:
        resources = {name: self._rate(name) for name in ("core", "graphql")}
        resources["search"] = {
            "limit": 30,
            "remaining": 30,
            "reset": self.forge.reset_at,
            "used": 0,
            "resource": "search",
        }
        return {"resources": resources, "rate": resources["core"]}

    def _rate(self, resource: str) -> Json:
        h = self.forge.rate_headers(resource)
        return {
            "limit": int(h["X-RateLimit-Limit"]),
            "remaining": int(h["X-RateLimit-Remaining"]),
            "reset": int(h["X-RateLimit-Reset"]),
            "used": int(h["X-RateLimit-Used"]),
            "resource": resource,
        }

    # -- repositories and branches --

    def get_repo(self, o: str, r: str) -> Json:
        return self.repo(self.forge.repo(f"{o}/{r}"))

    def get_branch(self, o: str, r: str, branch: str) -> Json:
        repo = self.forge.repo(f"{o}/{r}")
        sha = self.heads(repo).get(branch)
        if sha is None:
            raise ApiError(404, "Branch not found", docs=f"{DOCS}/branches/branches#get-a-branch")
        url = f"{self.api}/repos/{repo.full_name}/branches/{branch}"
        rules = repo.protection.get(branch)
        classic = rules is not None and not rules.ruleset
        checks = list(rules.checks) if rules is not None and classic else []
        return {
            "name": branch,
            "commit": self.commit(repo, sha),
            "protected": classic,
            "protection": {
                "enabled": classic,
                "required_status_checks": {
                    "enforcement_level": "non_admins" if checks else "off",
                    "contexts": checks,
                    "checks": [{"context": c, "app_id": None} for c in checks],
                },
            },
            "protection_url": f"{url}/protection",
            "_links": {"self": url, "html": f"{self.web}/{repo.full_name}/tree/{branch}"},
        }

    def get_commit(self, o: str, r: str, sha: str) -> Json:
        return self.commit(self.forge.repo(f"{o}/{r}"), sha)

    def branch_rules(self, o: str, r: str, branch: str) -> tuple[int, list[Json], dict[str, str]]:
        """`GET /rules/branches/{branch}`: the rulesets' rules that apply to a branch (read access suffices)."""
        repo = self.forge.repo(f"{o}/{r}")
        rules = repo.protection.get(branch)
        out: list[Json] = []
        if rules is not None and rules.ruleset:
            source = {"ruleset_source_type": "Repository", "ruleset_source": repo.full_name, "ruleset_id": 1}
            if rules.approvals:
                params = {
                    "required_approving_review_count": rules.approvals,
                    "dismiss_stale_reviews_on_push": False,
                    "require_code_owner_review": False,
                    "require_last_push_approval": False,
                    "required_review_thread_resolution": False,
                }
                out.append({"type": "pull_request", "parameters": params, **source})
            if rules.checks:
                params = {
                    "strict_required_status_checks_policy": False,
                    "required_status_checks": [{"context": c} for c in rules.checks],
                }
                out.append({"type": "required_status_checks", "parameters": params, **source})
        page, links = self._paginate(out)
        return 200, page, links

    def _sha_of(self, repo: Repo, ref: str) -> str:
        return self.heads(repo).get(ref, ref)

    def check_runs(self, o: str, r: str, ref: str) -> Json:
        repo = self.forge.repo(f"{o}/{r}")
        latest: dict[str, Json] = {}
        for run in self.forge._checks.get((repo.full_name, self._sha_of(repo, ref)), []):
            latest[run["name"]] = run  # filter=latest, GitHub's default
        return {"total_count": len(latest), "check_runs": list(latest.values())}

    def combined_status(self, o: str, r: str, ref: str) -> Json:
        repo = self.forge.repo(f"{o}/{r}")
        sha = self._sha_of(repo, ref)
        latest: dict[str, Json] = {}
        for status in self.forge._statuses.get((repo.full_name, sha), []):
            latest[status["context"]] = status
        states = {s["state"] for s in latest.values()}
        state = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if "pending" in states or not states
            else "success"
        )
        return {
            "state": state,
            "statuses": list(latest.values()),
            "sha": sha,
            "total_count": len(latest),
            "repository": self.repo(repo, with_parent=False),
            "commit_url": f"{self.api}/repos/{repo.full_name}/commits/{sha}",
            "url": f"{self.api}/repos/{repo.full_name}/commits/{sha}/status",
        }

    def collaborator_permission(self, o: str, r: str, login: str) -> Json:
        role = self.forge.permission(f"{o}/{r}", login)
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)  # `permission` keeps the old five values
        return {"permission": legacy, "role_name": role, "user": self.user(login)}

    # -- merging --

    _ALLOWED: ClassVar[dict[str, str]] = {
        "merge": "allow_merge_commit",
        "squash": "allow_squash_merge",
        "rebase": "allow_rebase_merge",
    }
    _NOT_ALLOWED: ClassVar[dict[str, str]] = {
        "merge": "Merge commits",
        "squash": "Squash merges",
        "rebase": "Rebase merges",
    }

    def _method(self, body: Json) -> str:
        method = body.get("merge_method") or "merge"
        if method not in self._ALLOWED:
            raise validation_failed({"resource": "PullRequest", "field": "merge_method", "code": "invalid"})
        return method

    def _merge_one(self, repo: Repo, pull: Pull, onto: str, method: str) -> str | None:
        """The new tip of the base after merging ``pull`` onto commit ``onto``; None when they conflict."""
        head = self.head_sha(pull)
        bare = repo.bare_path
        if pull.head_repo != repo.full_name:  # a fork's head: its objects come over first
            fork = self.forge.repo(pull.head_repo)
            git(bare, "fetch", "--quiet", "--no-write-fetch-head", fork.bare_path, f"refs/heads/{pull.head_ref}")
        if method == "rebase":
            return _rebased(bare, onto, head)
        tree = _merged_tree(bare, onto, head)
        if tree is None:
            return None
        if method == "squash":
            listed = git(bare, "log", "--reverse", "--format=* %B", f"{onto}..{head}").stdout.strip()
            message = f"{pull.title} (#{pull.number})\n\n{listed}\n"
            return _commit_tree(bare, tree, [onto], message, _author_of(bare, head))
        owner = self.forge.repo(pull.head_repo).owner
        message = f"Merge pull request #{pull.number} from {owner}/{pull.head_ref}\n\n{pull.title}\n"
        login = self.forge.login
        return _commit_tree(bare, tree, [onto, head], message, (login, f"{login}@users.noreply.github.com", ""))

    def _landed(self, repo: Repo, pulls: list[tuple[Pull, str]], base_ref: str, old: str) -> None:
        """Move the base to the last tip (compare-and-swap on ``old``) and mark each PR merged at its tip."""
        tip = pulls[-1][1]
        if git(repo.bare_path, "update-ref", f"refs/heads/{base_ref}", tip, old).returncode != 0:
            raise ApiError(409, "Base branch was modified. Review and try the merge again.")
        self._heads.pop(repo.full_name, None)
        for pull, sha in pulls:
            self.head_sha(pull)  # keep the head it had
            pull.state, pull.merged, pull.base_ref = "closed", True, base_ref
            pull.closed_at = pull.merged_at = now_iso()
            pull.merge_commit_sha = sha
            self.forge.touch(pull)
        if repo.settings["delete_branch_on_merge"]:
            for pull, _ in pulls:
                if pull.head_repo == repo.full_name:
                    git(repo.bare_path, "update-ref", "-d", f"refs/heads/{pull.head_ref}")
                    for other in self.forge.pulls_of(repo.full_name):  # GitHub retargets the PRs on it
                        if other.state == "open" and other.base_ref == pull.head_ref:
                            other.base_ref = base_ref
                            self.forge.touch(other)
            self._heads.pop(repo.full_name, None)

    def merge_pull(self, o: str, r: str, n: str) -> Json:
        """`PUT /pulls/{n}/merge`: the synchronous merge, refused (405/409) as GitHub refuses it."""
        repo, pull, body = self.forge.repo(f"{o}/{r}"), self.forge.find_pull(f"{o}/{r}", int(n)), self._body_dict()
        method = self._method(body)
        if pull.state != "open":
            raise ApiError(405, "Pull Request is not mergeable")
        if self.pull_stack(pull) is not None:
            raise ApiError(405, "This pull request is part of a stack: merge it with the asynchronous merge API.")
        if not repo.settings[self._ALLOWED[method]]:
            raise ApiError(405, f"{self._NOT_ALLOWED[method]} are not allowed on this repository.")
        head = self.head_sha(pull)
        if body.get("sha") and body["sha"] != head:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        if pull.draft:
            raise ApiError(405, "Pull Request is still a draft")
        violations = self.forge.rule_violations(pull, pull.base_ref, head)
        if violations:
            rules = repo.protection[pull.base_ref]
            raise ApiError(
                405,
                ("Repository rule violations found\n\n" + "\n".join(violations)) if rules.ruleset else violations[0],
            )
        base_sha = self.heads(repo)[pull.base_ref]
        tip = self._merge_one(repo, pull, base_sha, method)
        if tip is None:
            raise ApiError(405, "Pull Request is not mergeable")
        self._landed(repo, [(pull, tip)], pull.base_ref, base_sha)
        return {"sha": tip, "merged": True, "message": "Pull Request successfully merged"}

    def _async_repo(self, o: str, r: str) -> Repo:
        repo = self.forge.repo(f"{o}/{r}")
        if not repo.stacks_enabled:
            raise not_found()  # async merge (and stacks) not available for this repository
        return repo

    @staticmethod
    def _pending(req: MergeRequest, message: str) -> Json:
        return {
            "status": "pending",
            "details": {
                "message": message,
                "uuid": req.uuid,
                "merge_method": req.method,
                "merge_action": req.action,
                "expected_head_sha": req.expected_sha,
            },
        }

    def merge_async(self, o: str, r: str, n: str) -> tuple[int, Json, dict[str, str]]:
        """`PUT /pulls/{n}/merge-async`: only the PR's basic state is checked now; the merge runs later."""
        repo = self._async_repo(o, r)
        pull, body = self.forge.find_pull(repo.full_name, int(n)), self._body_dict()
        method = self._method(body)
        action = body.get("merge_action") or "default"
        if action not in ("default", "direct_merge", "merge_queue"):
            raise validation_failed({"resource": "PullRequest", "field": "merge_action", "code": "invalid"})
        if pull.merged:
            details = {"message": "Pull request was already merged.", "sha": pull.merge_commit_sha}
            return 200, {"status": "merged", "details": details}, {}
        for req in self.forge.merge_requests.values():
            if req.repo == repo.full_name and req.number == pull.number and req.status == "pending":
                return 409, self._pending(req, "A merge request already exists for this pull request."), {}
        if pull.state != "open" or pull.draft:
            why = "it is a draft" if pull.draft else "it is closed"
            return (
                400,
                {"status": "failed", "details": {"message": f"Pull request is not ready to be merged: {why}."}},
                {},
            )
        req = MergeRequest(
            str(uuid.uuid4()),
            repo.full_name,
            pull.number,
            method,
            action,
            body.get("sha") or self.head_sha(pull),
            self.forge.merge_async_polls,
        )
        self.forge.merge_requests[req.uuid] = req
        return 202, self._pending(req, "Merge request enqueued."), {}

    def merge_async_result(self, o: str, r: str, n: str, request_id: str) -> Json:
        repo = self._async_repo(o, r)
        req = self.forge.merge_requests.get(request_id)
        if req is None or req.repo != repo.full_name or req.number != int(n):
            raise not_found()
        if req.status == "pending":
            if req.polls > 0:
                req.polls -= 1
                return self._pending(req, "Merge request is in progress.")
            self._run_merge(repo, req)
        return {"status": req.status, "details": req.details}

    def _run_merge(self, repo: Repo, req: MergeRequest) -> None:
        """The merge runs: the whole stack below (and with) the PR lands, or nothing does."""
        pull = self.forge.find_pull(repo.full_name, req.number)
        st = next((x for x in repo.stacks.values() if pull.number in x.pulls), None)
        chain = (
            [self.forge.find_pull(repo.full_name, m) for m in st.pulls[: st.pulls.index(pull.number) + 1]]
            if st
            else [pull]
        )
        todo = [p for p in chain if not p.merged]
        base_ref = st.base_ref if st else pull.base_ref
        req.status = "failed"
        if any(p.state != "open" or p.draft for p in todo):
            req.details = {"message": "A pull request of the stack is closed or a draft."}
            return
        if self.head_sha(pull) != req.expected_sha:
            req.details = {"message": "Head branch was modified. Review and try the merge again."}
            return
        if not repo.settings[self._ALLOWED[req.method]]:
            req.details = {"message": f"{self._NOT_ALLOWED[req.method]} are not allowed on this repository."}
            return
        violations = [v for p in todo for v in self.forge.rule_violations(p, base_ref, self.head_sha(p))]
        if violations:
            req.details = {"message": "Repository rule violations found\n\n" + "\n".join(dict.fromkeys(violations))}
            return
        old = tip = self.heads(repo)[base_ref]
        tips = []
        for p in todo:
            merged = self._merge_one(repo, p, tip, req.method)
            if merged is None:
                req.details = {"message": "Merge conflict: the pull request could not be merged."}
                return
            tip = merged
            tips.append(tip)
        self._landed(repo, list(zip(todo, tips, strict=True)), base_ref, old)
        if st is not None:  # what stays of the stack now sits on its base
            merged_heads = {p.head_ref for p in todo}
            for m in st.pulls:
                rest = self.forge.find_pull(repo.full_name, m)
                if rest.state == "open" and rest.base_ref in merged_heads:
                    rest.base_ref = st.base_ref
                    self.forge.touch(rest)
        req.status, req.details = "merged", {"message": "Pull request was merged.", "sha": tip}

    # -- stacked pull requests --

    def _stack_of(self, repo: Repo, number: str) -> NativeStack:
        st = repo.stacks.get(int(number))
        if st is None:
            raise not_found()
        return st

    def _stackable(self, repo: Repo, numbers: Any, least: int) -> list[Pull]:
        """The PRs a create or add names, checked as GitHub checks them; 422 with the reason otherwise."""
        if not isinstance(numbers, list) or not all(isinstance(x, int) for x in numbers):
            raise validation_failed({"resource": "Stack", "field": "pull_requests", "code": "invalid"})
        if not least <= len(numbers) <= 100:
            raise validation_failed(
                {"resource": "Stack", "code": "custom", "message": f"A stack needs {least} to 100 pull requests."}
            )
        pulls = []
        for number in numbers:
            pull = self.forge._pulls.get((repo.full_name, number))
            if pull is None or pull.state != "open":
                raise validation_failed(
                    {"resource": "Stack", "code": "custom", "message": f"Pull request #{number} is not open."}
                )
            if pull.head_repo != repo.full_name:
                raise validation_failed(
                    {"resource": "Stack", "code": "custom", "message": "Cross-fork stacks are not supported."}
                )
            if self.pull_stack(pull) is not None:
                raise validation_failed(
                    {"resource": "Stack", "code": "custom", "message": f"Pull request #{number} is already in a stack."}
                )
            pulls.append(pull)
        for below, above in itertools.pairwise(pulls):
            self._chained(below, above)
        return pulls

    @staticmethod
    def _chained(below: Pull, above: Pull) -> None:
        if above.base_ref != below.head_ref:
            raise validation_failed(
                {
                    "resource": "Stack",
                    "code": "custom",
                    "message": f"The base of #{above.number} ({above.base_ref}) is not the head of #{below.number} ({below.head_ref}).",
                }
            )

    def list_stacks(self, o: str, r: str) -> tuple[int, list[Json], dict[str, str]]:
        repo = self._async_repo(o, r)
        found = sorted(repo.stacks.values(), key=lambda x: -x.number)
        if "pull_request" in self.req.query:
            found = [x for x in found if int(self.req.query["pull_request"]) in x.pulls]
        page, links = self._paginate(found)
        return 200, [self.stack(repo, x) for x in page], links

    def get_stack(self, o: str, r: str, number: str) -> Json:
        repo = self._async_repo(o, r)
        return self.stack(repo, self._stack_of(repo, number))

    def create_stack(self, o: str, r: str) -> tuple[int, Json, dict[str, str]]:
        repo = self._async_repo(o, r)
        pulls = self._stackable(repo, self._body_dict().get("pull_requests"), 2)
        st = NativeStack(self.forge.new_id(), repo.next_stack, pulls[0].base_ref, [p.number for p in pulls], now_iso())
        repo.next_stack += 1
        repo.stacks[st.number] = st
        out = self.stack(repo, st)
        return 201, out, {"Location": out["url"]}

    def add_to_stack(self, o: str, r: str, number: str) -> Json:
        repo = self._async_repo(o, r)
        st = self._stack_of(repo, number)
        pulls = self._stackable(repo, self._body_dict().get("pull_requests"), 1)
        self._chained(self.forge.find_pull(repo.full_name, st.pulls[-1]), pulls[0])
        st.pulls += [p.number for p in pulls]
        return self.stack(repo, st)

    def unstack(self, o: str, r: str, number: str) -> tuple[int, Json | None, dict[str, str]]:
        """Takes the unmerged PRs out; 204 when none is left (the stack is dissolved)."""
        repo = self._async_repo(o, r)
        st = self._stack_of(repo, number)
        st.pulls = [n for n in st.pulls if self.forge.find_pull(repo.full_name, n).merged]
        if not st.pulls:
            del repo.stacks[st.number]
            return 204, None, {}
        return 200, self.stack(repo, st), {}

    # -- pulls --

    def list_pulls(self, o: str, r: str) -> tuple[int, list[Json], dict[str, str]]:
        q = self.req.query
        pulls = self.forge.pulls_of(f"{o}/{r}")
        state = q.get("state", "open")
        if state != "all":
            pulls = [p for p in pulls if p.state == state]
        if ":" in q.get("head", ""):  # GitHub ignores a head filter without "owner:"
            owner, ref = q["head"].split(":", 1)
            pulls = [p for p in pulls if p.head_repo.split("/")[0].lower() == owner.lower() and p.head_ref == ref]
        if "base" in q:
            pulls = [p for p in pulls if p.base_ref == q["base"]]
        pulls = self._sorted(pulls, q.get("sort", "created"), q.get("direction"))
        page, links = self._paginate(pulls)
        return 200, [self.pull(p, full=False) for p in page], links

    @staticmethod
    def _sorted(pulls: list[Pull], sort: str, direction: str | None) -> list[Pull]:
        key: Callable[[Pull], int] = (lambda p: p.updated_seq) if sort == "updated" else (lambda p: p.number)
        # GitHub's default direction: desc for created, asc otherwise.
        descending = (direction or ("desc" if sort == "created" else "asc")) == "desc"
        return sorted(pulls, key=key, reverse=descending)

    def _paginate(self, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        per_page = min(max(int(self.req.query.get("per_page", 30)), 1), 100)
        page = max(int(self.req.query.get("page", 1)), 1)
        last = max(math.ceil(len(items) / per_page), 1)
        rels = {"prev": page - 1, "next": page + 1, "first": 1, "last": last}
        if page == 1:
            wanted: tuple[str, ...] = ("next", "last")
        else:
            wanted = ("prev", "next", "last", "first") if page < last else ("prev", "first")
        links = [f'<{self._page_url(rels[rel])}>; rel="{rel}"' for rel in wanted if last > 1 and 1 <= rels[rel] <= last]
        headers = {"Link": ", ".join(links)} if links else {}
        return items[(page - 1) * per_page : page * per_page], headers

    def _page_url(self, page: int) -> str:
        query = dict(self.req.query, page=str(page))
        return f"{self.api}{self.req.raw_path}?{urllib.parse.urlencode(query)}"

    def get_pull(self, o: str, r: str, n: str) -> Json:
        return self.pull(self.forge.find_pull(f"{o}/{r}", int(n)), full=True)

    def create_pull(self, o: str, r: str) -> tuple[int, Json, dict[str, str]]:
        base_repo, body = self.forge.repo(f"{o}/{r}"), self._body_dict()
        for required in ("title", "head", "base"):
            if not body.get(required):
                raise validation_failed({"resource": "PullRequest", "field": required, "code": "missing_field"})
        head_repo, head_ref = self._resolve_head(base_repo, body["head"], body.get("head_repo"))
        head_sha = self.heads(head_repo).get(head_ref)
        base_sha = self.heads(base_repo).get(body["base"])
        if head_sha is None:
            raise validation_failed({"resource": "PullRequest", "field": "head", "code": "invalid"})
        if base_sha is None:
            raise validation_failed({"resource": "PullRequest", "field": "base", "code": "invalid"})
        self._refuse_duplicate(base_repo, head_repo, head_ref, body["base"])
        if _has_no_commits(head_repo, base_sha, head_sha):
            raise validation_failed(
                {
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": f"No commits between {body['base']} and {body['head']}",
                }
            )
        pull = self._new_pull(base_repo, head_repo, head_ref, head_sha, body)
        return 201, self.pull(pull, full=True), {"Location": self.pull_url(pull)}

    def _resolve_head(self, base: Repo, head: str, head_repo: str | None) -> tuple[Repo, str]:
        owner, _, ref = head.rpartition(":")
        owner = owner or base.owner
        if head_repo:
            return self.forge.repo(head_repo if "/" in head_repo else f"{owner}/{head_repo}"), ref
        if owner.lower() == base.owner.lower():
            return base, ref
        root = self.forge.network_root(base)
        for repo in self.forge.repos():
            if repo.owner.lower() == owner.lower() and self.forge.network_root(repo) == root:
                return repo, ref
        raise validation_failed({"resource": "PullRequest", "field": "head", "code": "invalid"})

    def _refuse_duplicate(self, base: Repo, head_repo: Repo, head_ref: str, base_ref: str, skip: int = 0) -> None:
        for p in self.forge.pulls_of(base.full_name):
            if (
                p.state == "open"
                and p.number != skip
                and p.head_repo == head_repo.full_name
                and p.head_ref == head_ref
                and p.base_ref == base_ref
            ):
                raise validation_failed(
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for {head_repo.owner}:{head_ref}.",
                    }
                )

    def _new_pull(self, base: Repo, head_repo: Repo, head_ref: str, head_sha: str, body: Json) -> Pull:
        number, pull_id = base.next_number, self.forge.new_id()
        base.next_number += 1
        pull = Pull(
            repo=base.full_name,
            number=number,
            id=pull_id,
            issue_id=self.forge.new_id(),
            node_id=f"PR_fake{pull_id}",
            title=body["title"],
            body=body.get("body"),
            user=self.forge.login,
            head_repo=head_repo.full_name,
            head_ref=head_ref,
            base_ref=body["base"],
            head_sha=head_sha,
            draft=bool(body.get("draft", False)),
            created_at=now_iso(),
        )
        self.forge.touch(pull)
        self.forge.add_pull(pull)
        return pull

    def update_pull(self, o: str, r: str, n: str) -> Json:
        pull, body = self.forge.find_pull(f"{o}/{r}", int(n)), self._body_dict()
        base_repo = self.forge.repo(pull.repo)
        if body.get("state", "open") not in ("open", "closed"):
            raise validation_failed({"resource": "PullRequest", "field": "state", "code": "invalid"})
        if "base" in body and body["base"] != pull.base_ref:
            if pull.state != "open":
                raise validation_failed(
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": "Cannot change the base branch of a closed pull request.",
                    }
                )
            if body["base"] not in self.heads(base_repo):
                raise validation_failed({"resource": "PullRequest", "field": "base", "code": "invalid"})
            if self.pull_stack(pull) is not None:
                raise validation_failed(
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": "Cannot change the base branch of a pull request in a stack; unstack it first.",
                    }
                )
            pull.base_ref = body["base"]
        self._edit_common(pull, body)
        return self.pull(pull, full=True)

    def _edit_common(self, pull: Pull, body: Json) -> None:
        """Fields that PATCH /pulls/{n} and PATCH /issues/{n} share; checks come before any change."""
        state = body.get("state", pull.state)
        if state not in ("open", "closed"):
            raise validation_failed({"resource": "PullRequest", "field": "state", "code": "invalid"})
        if state == "open" and pull.state == "closed":
            if pull.merged:
                raise validation_failed(
                    {"resource": "PullRequest", "code": "custom", "message": "Cannot reopen a merged pull request."}
                )
            head_repo = self.forge.repo(pull.head_repo)
            self._refuse_duplicate(
                self.forge.repo(pull.repo), head_repo, pull.head_ref, pull.base_ref, skip=pull.number
            )
            pull.closed_at = None
        elif state == "closed" and pull.state == "open":
            self.head_sha(pull)  # remember the head as it was at closing
            pull.closed_at = now_iso()
        pull.state = state
        for name in ("title", "body"):
            if name in body:
                setattr(pull, name, body[name])
        self.forge.touch(pull)

    def list_reviews(self, o: str, r: str, n: str) -> tuple[int, list[Json], dict[str, str]]:
        page, links = self._paginate(self.forge.find_pull(f"{o}/{r}", int(n)).reviews)
        return 200, page, links

    def check_merged(self, o: str, r: str, n: str) -> tuple[int, None, dict[str, str]]:
        if not self.forge.find_pull(f"{o}/{r}", int(n)).merged:
            raise not_found()
        return 204, None, {}

    # -- issues (every PR is an issue; plain issues are not modelled) --

    def get_issue(self, o: str, r: str, n: str) -> Json:
        return self.issue(self.forge.find_pull(f"{o}/{r}", int(n)))

    def update_issue(self, o: str, r: str, n: str) -> Json:
        pull, body = self.forge.find_pull(f"{o}/{r}", int(n)), self._body_dict()
        if "labels" in body:
            pull.labels = self._ensure_labels(self.forge.repo(pull.repo), _label_names(body))
        self._edit_common(pull, body)
        return self.issue(pull)

    def list_comments(self, o: str, r: str, n: str) -> tuple[int, list[Json], dict[str, str]]:
        page, links = self._paginate(self.forge.find_pull(f"{o}/{r}", int(n)).comments)
        return 200, page, links

    def create_comment(self, o: str, r: str, n: str) -> tuple[int, Json, dict[str, str]]:
        pull, body = self.forge.find_pull(f"{o}/{r}", int(n)), self._body_dict()
        if not isinstance(body.get("body"), str) or not body["body"]:
            raise validation_failed({"resource": "IssueComment", "field": "body", "code": "missing_field"})
        comment_id = self.forge.new_id()
        comment = {
            "id": comment_id,
            "node_id": f"IC_fake{comment_id}",
            "url": f"{self.api}/repos/{pull.repo}/issues/comments/{comment_id}",
            "html_url": f"{self.pull_html(pull)}#issuecomment-{comment_id}",
            "issue_url": self.issue_url(pull),
            "body": body["body"],
            "user": self.user(self.forge.login),
            "created_at": now_iso(),
            "updated_at": now_iso(),
            "author_association": "MEMBER",
        }
        pull.comments.append(comment)
        self.forge.touch(pull)
        return 201, comment, {"Location": comment["url"]}

    def _find_comment(self, o: str, r: str, comment_id: str) -> tuple[Pull, Json]:
        for pull in self.forge.pulls_of(f"{o}/{r}"):
            for comment in pull.comments:
                if comment["id"] == int(comment_id):
                    return pull, comment
        raise not_found()

    def get_comment(self, o: str, r: str, comment_id: str) -> Json:
        return self._find_comment(o, r, comment_id)[1]

    def update_comment(self, o: str, r: str, comment_id: str) -> Json:
        _pull, comment = self._find_comment(o, r, comment_id)
        comment.update(body=self._body_dict().get("body", comment["body"]), updated_at=now_iso())
        return comment

    def delete_comment(self, o: str, r: str, comment_id: str) -> tuple[int, None, dict[str, str]]:
        pull, comment = self._find_comment(o, r, comment_id)
        pull.comments.remove(comment)
        return 204, None, {}

    # -- labels --

    def _ensure_labels(self, repo: Repo, names: list[str]) -> list[str]:
        """Adding an unknown label to an issue creates it, as GitHub does; returns the canonical names."""
        out = []
        for name in names:
            if name.lower() not in repo.labels:
                self._new_label(repo, name, "ededed", None)
            canonical = repo.labels[name.lower()]["name"]
            if canonical not in out:
                out.append(canonical)
        return out

    def _new_label(self, repo: Repo, name: str, color: str, description: str | None) -> Json:
        label_id = self.forge.new_id()
        label = {
            "id": label_id,
            "node_id": f"LA_fake{label_id}",
            "url": f"{self.api}/repos/{repo.full_name}/labels/{urllib.parse.quote(name)}",
            "name": name,
            "color": color,
            "default": False,
            "description": description,
        }
        repo.labels[name.lower()] = label
        return label

    def issue_labels(self, o: str, r: str, n: str) -> tuple[int, list[Json], dict[str, str]]:
        """GET lists, POST adds, PUT replaces; each answers with the issue's labels."""
        pull = self.forge.find_pull(f"{o}/{r}", int(n))
        repo = self.forge.repo(pull.repo)
        if self.req.method != "GET":
            added = _label_names(self.req.body)
            pull.labels = self._ensure_labels(repo, pull.labels + added if self.req.method == "POST" else added)
            self.forge.touch(pull)
        page, links = self._paginate([self.label(repo, name) for name in pull.labels])
        return 200, page, links

    def clear_issue_labels(self, o: str, r: str, n: str) -> tuple[int, None, dict[str, str]]:
        pull = self.forge.find_pull(f"{o}/{r}", int(n))
        pull.labels = []
        self.forge.touch(pull)
        return 204, None, {}

    def remove_issue_label(self, o: str, r: str, n: str, name: str) -> list[Json]:
        pull = self.forge.find_pull(f"{o}/{r}", int(n))
        repo = self.forge.repo(pull.repo)
        kept = [label for label in pull.labels if label.lower() != name.lower()]
        if len(kept) == len(pull.labels):
            raise ApiError(404, "Label does not exist", docs=f"{DOCS}/issues/labels#remove-a-label-from-an-issue")
        pull.labels = kept
        self.forge.touch(pull)
        return [self.label(repo, label) for label in pull.labels]

    def list_labels(self, o: str, r: str) -> tuple[int, list[Json], dict[str, str]]:
        page, links = self._paginate(list(self.forge.repo(f"{o}/{r}").labels.values()))
        return 200, page, links

    def create_label(self, o: str, r: str) -> tuple[int, Json, dict[str, str]]:
        repo, body = self.forge.repo(f"{o}/{r}"), self._body_dict()
        name = body.get("name")
        if not name:
            raise validation_failed({"resource": "Label", "field": "name", "code": "missing_field"})
        if name.lower() in repo.labels:
            raise validation_failed({"resource": "Label", "field": "name", "code": "already_exists"})
        label = self._new_label(repo, name, str(body.get("color", "ededed")).lstrip("#"), body.get("description"))
        return 201, label, {"Location": label["url"]}

    def get_label(self, o: str, r: str, name: str) -> Json:
        repo = self.forge.repo(f"{o}/{r}")
        if name.lower() not in repo.labels:
            raise not_found()
        return repo.labels[name.lower()]

    # -- GraphQL --

    def graphql(self) -> Json:
        body = self._body_dict()
        query, variables = str(body.get("query", "")), body.get("variables") or {}
        if _is_mutation(query):
            return self._mutation(query, variables)
        if re.search(r"\bnode\s*\(", query):
            return self._node_query(variables.get("id"))
        return {"errors": [{"message": "This test server answers only node(id:) queries and draft mutations."}]}

    def _mutation(self, query: str, variables: Json) -> Json:
        match = re.search(r"\{\s*(\w+)\s*\(", query)
        name = match.group(1) if match else ""
        drafts = {"markPullRequestReadyForReview": False, "convertPullRequestToDraft": True}
        if name not in drafts:
            return {
                "errors": [
                    {
                        "message": f"Field '{name}' doesn't exist on type 'Mutation'",
                        "extensions": {"code": "undefinedField", "typeName": "Mutation", "fieldName": name},
                    }
                ]
            }
        mutation_input = variables.get("input") or _inline_input(query)
        pull = self.forge.pull_by_node(str(mutation_input.get("pullRequestId")))
        if pull is None:
            return _graphql_not_found(name, mutation_input.get("pullRequestId"))
        pull.draft = drafts[name]
        self.forge.touch(pull)
        return {
            "data": {
                name: {"clientMutationId": mutation_input.get("clientMutationId"), "pullRequest": self.pull_node(pull)}
            }
        }

    def _node_query(self, node_id: Any) -> Json:
        pull = self.forge.pull_by_node(str(node_id))
        if pull is None:
            return _graphql_not_found("node", node_id)
        return {"data": {"node": self.pull_node(pull)}}

    def _body_dict(self) -> Json:
        if self.req.body is None:
            return {}
        if not isinstance(self.req.body, dict):
            raise ApiError(400, "Problems parsing JSON")
        return self.req.body


def _inline_input(query: str) -> Json:
    """The input of a hand-written mutation (`input: {pullRequestId: "PR_..."}`), as opposed to $input."""
    match = re.search(r'pullRequestId\s*:\s*"([^"]*)"', query)
    return {"pullRequestId": match.group(1)} if match else {}


def _is_mutation(query: str) -> bool:
    return query.lstrip().startswith("mutation")


def _is_write(request: Request) -> bool:
    """What write_calls() counts: REST writes and GraphQL mutations, not GraphQL queries (also POSTs)."""
    if request.path == "/graphql":
        return isinstance(request.body, dict) and _is_mutation(str(request.body.get("query", "")))
    return request.method in WRITE_METHODS


def _graphql_not_found(path: str, node_id: Any) -> Json:
    return {
        "data": {path: None},
        "errors": [
            {
                "type": "NOT_FOUND",
                "path": [path],
                "message": f"Could not resolve to a node with the global id of '{node_id}'.",
            }
        ],
    }


_REPO = r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)"
ROUTES: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
    (method, re.compile(f"^{pattern}$"), handler)
    for method, pattern, handler in [
        ("GET", r"/user", Call.get_user),
        ("GET", r"/users/(?P<login>[^/]+)", Call.get_user),
        ("GET", r"/rate_limit", Call.get_rate_limit),
        ("POST", r"/graphql", Call.graphql),
        ("GET", _REPO, Call.get_repo),
        ("GET", _REPO + r"/branches/(?P<branch>.+)", Call.get_branch),
        ("GET", _REPO + r"/commits/(?P<sha>[0-9a-f]{4,40})", Call.get_commit),
        ("GET", _REPO + r"/commits/(?P<ref>[^/]+)/check-runs", Call.check_runs),
        ("GET", _REPO + r"/commits/(?P<ref>[^/]+)/status", Call.combined_status),
        ("GET", _REPO + r"/rules/branches/(?P<branch>.+)", Call.branch_rules),
        ("GET", _REPO + r"/collaborators/(?P<login>[^/]+)/permission", Call.collaborator_permission),
        ("PUT", _REPO + r"/pulls/(?P<n>\d+)/merge", Call.merge_pull),
        ("PUT", _REPO + r"/pulls/(?P<n>\d+)/merge-async", Call.merge_async),
        ("GET", _REPO + r"/pulls/(?P<n>\d+)/merge-async/(?P<request_id>[^/]+)", Call.merge_async_result),
        ("GET", _REPO + r"/stacks", Call.list_stacks),
        ("POST", _REPO + r"/stacks", Call.create_stack),
        ("GET", _REPO + r"/stacks/(?P<number>\d+)", Call.get_stack),
        ("POST", _REPO + r"/stacks/(?P<number>\d+)/add", Call.add_to_stack),
        ("POST", _REPO + r"/stacks/(?P<number>\d+)/unstack", Call.unstack),
        ("GET", _REPO + r"/pulls", Call.list_pulls),
        ("POST", _REPO + r"/pulls", Call.create_pull),
        ("GET", _REPO + r"/pulls/(?P<n>\d+)", Call.get_pull),
        ("PATCH", _REPO + r"/pulls/(?P<n>\d+)", Call.update_pull),
        ("GET", _REPO + r"/pulls/(?P<n>\d+)/reviews", Call.list_reviews),
        ("GET", _REPO + r"/pulls/(?P<n>\d+)/merge", Call.check_merged),
        ("GET", _REPO + r"/issues/comments/(?P<comment_id>\d+)", Call.get_comment),
        ("PATCH", _REPO + r"/issues/comments/(?P<comment_id>\d+)", Call.update_comment),
        ("DELETE", _REPO + r"/issues/comments/(?P<comment_id>\d+)", Call.delete_comment),
        ("GET", _REPO + r"/issues/(?P<n>\d+)", Call.get_issue),
        ("PATCH", _REPO + r"/issues/(?P<n>\d+)", Call.update_issue),
        ("GET", _REPO + r"/issues/(?P<n>\d+)/comments", Call.list_comments),
        ("POST", _REPO + r"/issues/(?P<n>\d+)/comments", Call.create_comment),
        ("GET", _REPO + r"/issues/(?P<n>\d+)/labels", Call.issue_labels),
        ("POST", _REPO + r"/issues/(?P<n>\d+)/labels", Call.issue_labels),
        ("PUT", _REPO + r"/issues/(?P<n>\d+)/labels", Call.issue_labels),
        ("DELETE", _REPO + r"/issues/(?P<n>\d+)/labels", Call.clear_issue_labels),
        ("DELETE", _REPO + r"/issues/(?P<n>\d+)/labels/(?P<name>.+)", Call.remove_issue_label),
        ("GET", _REPO + r"/labels", Call.list_labels),
        ("POST", _REPO + r"/labels", Call.create_label),
        ("GET", _REPO + r"/labels/(?P<name>.+)", Call.get_label),
    ]
]


def _route(method: str, raw_path: str) -> tuple[Callable[..., Any], dict[str, str]]:
    for route_method, pattern, handler in ROUTES:
        match = pattern.match(raw_path)
        if match and route_method == method:
            # Match on the raw path so an encoded "/" stays inside a branch or label name.
            return handler, {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
    raise not_found()


class _Handler(BaseHTTPRequestHandler):
    """HTTP plumbing: record, authenticate, apply faults, dispatch, write JSON with GitHub's headers."""

    server_version = "GitHub.com"
    sys_version = ""

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    @property
    def forge(self) -> FakeGitHub:
        return self.server.forge  # type: ignore[attr-defined]

    def _serve(self) -> None:
        request, bad_json = self._parse()
        resource = "graphql" if request.path == "/graphql" else "core"
        self.forge.record(request.method, request.path, _is_write(request))
        try:
            self._authenticate()
            self._count(request.path, resource)
            fault = self.forge.take_fault(request.method, request.path)
            if fault is not None:
                time.sleep(fault.delay)
                if fault.status:
                    body = fault.raw if fault.raw is not None else fault.body or _fault_body(fault.status)
                    return self._send(fault.status, body, resource, fault.headers)
            if bad_json:
                raise ApiError(400, "Problems parsing JSON")
            status, out, headers = self._dispatch(request)
        except ApiError as error:
            status, out, headers = error.status, error.body, {}
        except Exception as error:  # a bug here, or a bad parameter: answer, so the client fails clearly
            traceback.print_exc()
            out = {"message": f"fake GitHub server error: {error!r}", "documentation_url": DOCS}
            status, headers = 500, {}
        self._send(status, out, resource, headers)

    def _parse(self) -> tuple[Request, bool]:
        raw_path, _, raw_query = self.path.partition("?")
        # A GitHub Enterprise style base URL (/api/v3, GraphQL at /api/graphql) works too.
        prefix = "/api/v3" if raw_path.startswith("/api/v3/") else ""
        raw_path = re.sub(r"^/api(/v3)?(?=/)", "", raw_path).rstrip("/") or "/"
        body, bad_json = self._read_body()
        query = dict(urllib.parse.parse_qsl(raw_query))
        return Request(self.command, raw_path, urllib.parse.unquote(raw_path), prefix, query, body), bad_json

    def _read_body(self) -> tuple[Any, bool]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return None, False
        try:
            return json.loads(raw), False
        except ValueError:
            return None, True

    def _authenticate(self) -> None:
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() not in ("token", "bearer") or token.strip() != self.forge.token:
            raise ApiError(401, "Bad credentials")

    def _count(self, path: str, resource: str) -> None:
        if path != "/rate_limit":  # as on GitHub, asking for the limit does not spend it
            self.forge.spend(resource)

    def _dispatch(self, request: Request) -> tuple[int, Any, dict[str, str]]:
        handler, args = _route(request.method, request.raw_path)
        with self.forge.lock:
            result = handler(Call(self.forge, request), **args)
        if isinstance(result, tuple):
            return result
        return 200, result, {}

    def _send(self, status: int, body: Any, resource: str, extra: dict[str, str]) -> None:
        data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": f"FAKE:{len(self.forge.requests)}",
            "X-OAuth-Scopes": "repo",
            **self.forge.rate_headers(resource),
            **extra,
        }
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to tell it


def _fault_body(status: int) -> Json:
    try:
        message = http.HTTPStatus(status).phrase
    except ValueError:
        message = "Injected fault"
    return {"message": message, "documentation_url": DOCS}
