"""GitHub (and GitHub Enterprise) as ggstack's forge, through PyGithub; each call goes through
``github_calls`` (retried within one budget, its failure in words). The token goes to PyGithub only."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from github import Auth, Github, GithubException
from github.Commit import Commit

from ggstack.errors import UserError
from ggstack.forge import (
    Comment,
    CommitFacts,
    MergeAnswer,
    MergeFacts,
    NativeStack,
    RemotePR,
    Review,
    maintainer_approvals,
    same_last_line,
)
from ggstack.forge.github_calls import RetryingClient, error_message
from ggstack.secrets import TOKEN_VARS, shown_url

DEFAULT_API_URL = "https://api.github.com"


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


class GitHub(RetryingClient):
    offline = False

    def __init__(self, slug: str, *, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.token, token_var = _token(env, slug)
        self.api_url = _api_url(env.get("GITHUB_API_URL") or DEFAULT_API_URL)
        super().__init__(slug, token_var, shown_url(self.api_url), env)
        self._permissions: dict[str, str] = {}
        self._gh = Github(
            auth=Auth.Token(self.token),
            base_url=self.api_url,
            timeout=self.policy.timeout,
            retry=None,  # ggstack retries itself (github_calls): a re-sent write first looks for the lost one
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

    # -- reads ------------------------------------------------------------------------

    def open_pulls(self) -> list[RemotePR]:
        def fetch() -> list[Any]:
            return list(self.repo.get_pulls(state="open", sort="created", direction="asc"))

        return self.call(f"list open PRs of {self.slug}", lambda: [_remote(p) for p in fetch()])

    def find_open_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        pulls = self._pulls_of_head(head_owner, head_ref, "open")
        return pulls[0] if pulls else None

    def closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        pulls = self._pulls_of_head(head_owner, head_ref, "closed")
        return max(pulls, key=lambda p: p.number) if pulls else None

    def _pulls_of_head(self, head_owner: str, head_ref: str, state: str) -> list[RemotePR]:
        def fetch() -> list[Any]:
            return list(self.repo.get_pulls(state=state, head=f"{head_owner}:{head_ref}"))

        return self.call(f"look up the {state} PRs of {head_ref}", lambda: [_remote(p) for p in fetch()])

    def approvals(self, pull: RemotePR) -> list[str]:
        reviews = self.call(f"read reviews of #{pull.number}", lambda: list(pull.handle.get_reviews()))
        return maintainer_approvals([_review(r) for r in reviews if r.user is not None])

    def commit_facts(self, slug: str, sha: str) -> CommitFacts | None:
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

    # -- reads for landing -------------------------------------------------------------

    def branch_sha(self, branch: str) -> str | None:
        def fetch() -> str | None:
            try:
                return self.repo.get_branch(branch).commit.sha
            except GithubException as e:
                if e.status == 404:
                    return None
                raise

        return self.call(f"read branch {branch!r} of {self.slug}", fetch)

    def merge_facts(self, pull: RemotePR) -> MergeFacts:
        """The PR as it is now (its full shape: mergeability), its reviews and its head's checks."""
        full = self.call(f"read #{pull.number}", lambda: self.repo.get_pull(pull.number))
        reviews = self.call(f"read reviews of #{pull.number}", lambda: list(full.get_reviews()))
        head = full.head.sha
        return MergeFacts(
            head_sha=head,
            base_ref=full.base.ref,
            state=full.state,
            merged=bool(full.merged),
            draft=bool(full.draft),
            labels=[label.name for label in full.labels],
            mergeable=full.mergeable,
            mergeable_state=full.mergeable_state or "unknown",
            reviews=[_review(r) for r in reviews if r.user is not None],
            checks=self.call(f"read the checks of {head[:10]}", lambda: self._checks(head)),
            merge_commit=full.merge_commit_sha,
        )

    def _checks(self, sha: str) -> dict[str, str]:
        """Every check run and commit status of ``sha``, the latest of each name: success, failure or pending."""
        commit = Commit(self.repo.requester, url=f"{self.repo.url}/commits/{sha}", completed=False)  # no full read
        states: dict[str, str] = {}
        for run in sorted(commit.get_check_runs(), key=lambda r: r.id):
            if run.status != "completed":
                states[run.name] = "pending"
            else:
                states[run.name] = "success" if run.conclusion in ("success", "neutral", "skipped") else "failure"
        for status in commit.get_combined_status().statuses:
            states[status.context] = {"success": "success", "pending": "pending"}.get(status.state, "failure")
        return states

    def required_checks(self, branch: str) -> list[str]:
        """The checks ``branch`` requires: its branch protection's and its rulesets' (both readable with read access)."""

        def fetch() -> list[str]:
            names: list[Any] = []
            try:
                protection = self.repo.get_branch(branch).raw_data.get("protection") or {}
            except GithubException as e:
                if e.status != 404:
                    raise
                protection = {}
            required = protection.get("required_status_checks") or {}
            names += list(required.get("contexts") or []) + [c.get("context") for c in required.get("checks") or []]
            for rule in self._rest("GET", f"/rules/branches/{urllib.parse.quote(branch)}", missing=[]) or []:
                if isinstance(rule, dict) and rule.get("type") == "required_status_checks":
                    found = (rule.get("parameters") or {}).get("required_status_checks") or []
                    names += [c.get("context") for c in found if isinstance(c, dict)]
            return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))

        return self.call(f"read the required checks of {branch!r}", fetch)

    def permission(self, login: str) -> str:
        """``login``'s permission on target.repo (admin, write, read, none); "unknown" where the token may not ask."""
        key = login.lower()
        if key not in self._permissions:

            def fetch() -> str:
                try:
                    return self.repo.get_collaborator_permission(login)
                except GithubException as e:
                    if e.status == 404:
                        return "none"
                    if e.status == 403 and "rate limit" not in error_message(e).lower():
                        return "unknown"
                    raise

            self._permissions[key] = self.call(f"read the permission of {login}", fetch)
        return self._permissions[key]

    def merge_methods(self) -> tuple[str, ...]:
        """The merge methods the repository allows (one it does not say it refuses counts as allowed)."""
        flags = {
            "merge": self.repo.allow_merge_commit,
            "squash": self.repo.allow_squash_merge,
            "rebase": self.repo.allow_rebase_merge,
        }
        return tuple(m for m, allowed in flags.items() if allowed is not False)

    def native_stacks(self) -> list[NativeStack] | None:
        """The repository's stacks of PRs (GitHub's stacked pull requests); None where it has none (404)."""

        def fetch() -> list[NativeStack] | None:
            found: list[Any] = []
            for page in range(1, 100):
                data = self._rest("GET", "/stacks", parameters={"per_page": 100, "page": page}, missing=None)
                if data is None:
                    return None
                found += data
                if len(data) < 100:
                    break
            return [_stack(d) for d in found]

        return self.call(f"list the stacks of {self.slug}", fetch)

    def merge_result(self, pull: RemotePR, uuid: str) -> MergeAnswer:
        data = self.call(
            f"read the merge request of #{pull.number}",
            lambda: self._rest("GET", f"/pulls/{pull.number}/merge-async/{urllib.parse.quote(uuid)}"),
            not_found=f"the merge request {uuid} of #{pull.number} is gone (GitHub keeps one 24 hours)",
        )
        return _merge_result(data)

    def _rest(
        self,
        verb: str,
        path: str,
        *,
        parameters: dict[str, Any] | None = None,
        body: Any = None,
        missing: Any = ...,
    ) -> Any:
        """Plain REST through PyGithub's requester, where PyGithub has no method; ``missing`` answers a 404."""
        try:
            _, data = self.repo.requester.requestJsonAndCheck(
                verb, f"{self.repo.url}{path}", parameters=parameters, input=body
            )
        except GithubException as e:
            if e.status == 404 and missing is not ...:
                return missing
            raise
        return data

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

    def merge(self, pull: RemotePR, *, method: str, sha: str) -> MergeAnswer:
        """Merged, or refused with GitHub's reason; a merge whose answer was lost is looked up, never sent twice."""

        def merge() -> MergeAnswer:
            try:
                status = pull.handle.merge(merge_method=method, sha=sha)
            except GithubException as e:
                if e.status in (405, 409):
                    return MergeAnswer("refused", error_message(e))
                raise
            return MergeAnswer("merged", status.message or "", status.sha)

        def landed() -> MergeAnswer | None:
            now = self.call(f"look up #{pull.number}", lambda: self.repo.get_pull(pull.number))
            return (
                MergeAnswer("merged", "merged (found after a lost answer)", now.merge_commit_sha)
                if now.merged
                else None
            )

        return self.call(f"merge #{pull.number} ({method})", merge, write=True, recheck=landed)

    def merge_async(self, pull: RemotePR, *, method: str, sha: str) -> MergeAnswer:
        """This PR and every one below it in its native stack. Re-sending is safe: GitHub answers 409
        with the request already there, or "merged"; only a new request (202) counts as a write."""

        def submit() -> tuple[MergeAnswer, bool]:
            body = {"merge_method": method, "merge_action": "default", "sha": sha}
            try:
                data = self._rest("PUT", f"/pulls/{pull.number}/merge-async", body=body)
            except GithubException as e:
                if e.status in (400, 409) and isinstance(e.data, dict) and e.data.get("status"):
                    return _merge_result(e.data), False
                raise
            result = _merge_result(data)
            return result, result.status == "pending"

        result, new = self.call(
            f"merge #{pull.number} and the PRs below it ({method})",
            submit,
            not_found=f"{self.slug} has no asynchronous merge API (stacked pull requests are not enabled there)",
        )
        if new:
            self._wrote()
        return result

    def create_stack(self, numbers: Sequence[int]) -> NativeStack:
        def create() -> NativeStack:
            return _stack(self._rest("POST", "/stacks", body={"pull_requests": list(numbers)}))

        return self.call(
            f"stack #{', #'.join(map(str, numbers))}",
            create,
            write=True,
            recheck=lambda: self._stack_holding(numbers),
        )

    def add_to_stack(self, stack: int, numbers: Sequence[int]) -> NativeStack:
        def add() -> NativeStack:
            return _stack(self._rest("POST", f"/stacks/{stack}/add", body={"pull_requests": list(numbers)}))

        return self.call(
            f"add #{', #'.join(map(str, numbers))} to stack {stack}",
            add,
            write=True,
            recheck=lambda: self._stack_holding(numbers),
        )

    def unstack(self, stack: int) -> None:
        def gone() -> bool | None:
            st = self.call(f"read stack {stack}", lambda: self._rest("GET", f"/stacks/{stack}", missing=None))
            return True if st is None or not any(not p.get("merged_at") for p in st.get("pull_requests", [])) else None

        self.call(
            f"unstack stack {stack}", lambda: self._rest("POST", f"/stacks/{stack}/unstack"), write=True, recheck=gone
        )

    def _stack_holding(self, numbers: Sequence[int]) -> NativeStack | None:
        """The stack that holds every one of ``numbers`` already (a create or add whose answer was lost)."""
        found = self.call(
            "look up the stack",
            lambda: self._rest("GET", "/stacks", parameters={"pull_request": numbers[-1]}, missing=[]),
        )
        stacks = [_stack(d) for d in found or []]
        return next((st for st in stacks if set(numbers) <= set(st.pulls)), None)


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
        head_sha=p.head.sha or "",
        handle=p,
    )


def _review(r: Any) -> Review:
    return Review(r.user.login, r.state or "", r.commit_id or "", (r.author_association or "").upper())


def _stack(data: Any) -> NativeStack:
    pulls = data.get("pull_requests") or []
    return NativeStack(
        number=int(data["number"]),
        base_ref=(data.get("base") or {}).get("ref", ""),
        pulls=tuple(int(p["number"]) for p in pulls),
        merged=tuple(int(p["number"]) for p in pulls if p.get("merged_at")),
    )


def _merge_result(data: Any) -> MergeAnswer:
    data = data if isinstance(data, dict) else {}
    details = data.get("details") if isinstance(data.get("details"), dict) else {}
    return MergeAnswer(
        str(data.get("status") or "failed"), str(details.get("message") or ""), details.get("sha"), details.get("uuid")
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
