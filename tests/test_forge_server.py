"""The test GitHub server answers the real PyGithub the way GitHub does.

Every other forge test trusts this server, so these tests pin what PyGithub
sees: fields, status codes, pagination, GraphQL drafts, auth and the injected
faults (checked with a raw urllib client so that nothing retries them away).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from forge_server import FakeGitHub  # tests/ is on pythonpath (pyproject.toml)
from github import Auth, BadCredentialsException, Github, GithubException, RateLimitExceededException
from gitrepo import GitRepo

TOKEN = "s3cret-token"
REPO = "upstream/proj"


class Checkout:
    """A work tree whose only remote is a bare repository the server reads, as GitHub reads its own."""

    def __init__(self, root: Path, name: str):
        self.bare = GitRepo.init(root / f"{name}.git", bare=True).path
        self.work = GitRepo.init(root / name)
        self.work.git("remote", "add", "origin", str(self.bare))
        self.work.commit("base", {"README": "base\n"})
        self.work.git("push", "-q", "origin", "main")

    def push_branch(self, branch: str, text: str = "x\n") -> str:
        """Push a branch off main carrying one commit; returns its sha."""
        self.work.git("checkout", "-q", "-B", branch, "main")
        sha = self.work.commit(f"add {branch}", {branch.replace("/", "_"): text})
        self.work.git("push", "-q", "--force", "origin", branch)
        self.work.git("checkout", "-q", "main")
        return sha


@pytest.fixture
def srv() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        yield server


@pytest.fixture
def checkout(tmp_path: Path, srv: FakeGitHub) -> Checkout:
    co = Checkout(tmp_path, "proj")
    srv.add_repo(REPO, str(co.bare))
    return co


def client(srv: FakeGitHub, token: str = TOKEN, per_page: int = 30) -> Github:
    # retry=None: PyGithub's default GithubRetry would silently retry 5xx/403 and hide the faults under test.
    # seconds_between_*=None: PyGithub otherwise sleeps 0.25 s between requests and 1 s between writes.
    return Github(
        base_url=srv.url,
        auth=Auth.Token(token),
        retry=None,
        per_page=per_page,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def raw(srv: FakeGitHub, method: str, path: str, body: object = None, token: str = TOKEN) -> tuple[int, dict, object]:
    """One request with no retry logic at all: (status, headers, JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        srv.url + path,
        data=data,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, headers, payload = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, headers, payload = error.code, dict(error.headers), error.read()
    return status, headers, json.loads(payload) if payload else None


def test_create_pull_has_the_fields_pygithub_reads(srv: FakeGitHub, checkout: Checkout) -> None:
    sha = checkout.push_branch("stack/0001")
    repo = client(srv).get_repo(REPO)
    pr = repo.create_pull(base="main", head="stack/0001", title="First", body="why", draft=True)

    assert (pr.number, pr.state, pr.draft, pr.merged, pr.title, pr.body) == (1, "open", True, False, "First", "why")
    assert (pr.head.ref, pr.head.sha, pr.head.label) == ("stack/0001", sha, "upstream:stack/0001")
    assert pr.head.repo.full_name == REPO
    assert pr.base.ref == "main" and pr.user.login == "ggstack-bot"
    assert pr.html_url == f"{srv.url}/{REPO}/pull/1" and pr.node_id and pr.labels == []
    assert repo.get_branch("stack/0001").commit.sha == sha
    with pytest.raises(GithubException) as missing:
        repo.get_branch("nope")
    assert missing.value.status == 404


def test_push_moves_the_pr_head(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    number = repo.create_pull(base="main", head="topic", title="t").number
    checkout.work.git("checkout", "-q", "topic")
    new_sha = checkout.work.commit("more", {"more": "more\n"})
    checkout.work.git("push", "-q", "origin", "topic")
    assert repo.get_pull(number).head.sha == new_sha
    assert srv.pulls(REPO)[0]["head"]["sha"] == new_sha


def test_duplicate_or_missing_head_is_422(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    repo.create_pull(base="main", head="topic", title="t")
    with pytest.raises(GithubException) as duplicate:
        repo.create_pull(base="main", head="topic", title="again")
    assert duplicate.value.status == 422
    assert "already exists for upstream:topic" in duplicate.value.data["errors"][0]["message"]
    with pytest.raises(GithubException) as missing:
        repo.create_pull(base="main", head="ghost", title="t")
    assert missing.value.status == 422 and missing.value.data["errors"][0]["field"] == "head"


def test_list_by_head_needs_the_owner_prefix(srv: FakeGitHub, checkout: Checkout) -> None:
    for branch in ("a", "b"):
        checkout.push_branch(branch)
    repo = client(srv).get_repo(REPO)
    for branch in ("a", "b"):
        repo.create_pull(base="main", head=branch, title=branch)
    assert [p.title for p in repo.get_pulls(state="all", head="upstream:b")] == ["b"]
    # As on GitHub, a head filter without "owner:" is ignored rather than matched.
    assert len(list(repo.get_pulls(head="b"))) == 2
    assert list(repo.get_pulls(state="closed")) == []


def test_fork_pull_request(srv: FakeGitHub, checkout: Checkout, tmp_path: Path) -> None:
    fork = Checkout(tmp_path, "fork")
    srv.add_repo("bot/proj", str(fork.bare), fork_of=REPO)
    sha = fork.push_branch("carry")
    pr = client(srv).get_repo(REPO).create_pull(base="main", head="bot:carry", title="from fork")
    assert (pr.head.label, pr.head.sha, pr.head.repo.full_name) == ("bot:carry", sha, "bot/proj")
    assert pr.base.repo.full_name == REPO
    assert client(srv).get_repo("bot/proj").parent.full_name == REPO


def test_pagination_follows_link_headers(srv: FakeGitHub, checkout: Checkout) -> None:
    repo = client(srv, per_page=3).get_repo(REPO)
    for i in range(7):
        checkout.push_branch(f"p{i}")
        repo.create_pull(base="main", head=f"p{i}", title=f"p{i}")
    srv.reset_counts()
    assert [p.number for p in repo.get_pulls(direction="asc")] == list(range(1, 8))
    assert srv.requests == [("GET", f"/repos/{REPO}/pulls")] * 3

    status, headers, page = raw(srv, "GET", f"/repos/{REPO}/pulls?per_page=3&page=2")
    assert status == 200 and [p["number"] for p in page] == [4, 3, 2]  # default: newest first
    assert 'rel="next"' in headers["Link"] and 'rel="prev"' in headers["Link"] and "page=3" in headers["Link"]


def test_update_base_and_body(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("lower")
    checkout.push_branch("upper")
    repo = client(srv).get_repo(REPO)
    pr = repo.create_pull(base="main", head="upper", title="t", body="old")
    pr.edit(base="lower", body="new")
    again = repo.get_pull(pr.number)
    assert (again.base.ref, again.body) == ("lower", "new")
    with pytest.raises(GithubException) as bad_base:
        pr.edit(base="gone")
    assert bad_base.value.status == 422
    pr.edit(state="closed")
    assert repo.get_pull(pr.number).state == "closed" and list(repo.get_pulls()) == []


def test_labels_add_and_remove(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    repo.create_label("do-not-merge", "b60205", "waits for approval")
    pr = repo.create_pull(base="main", head="topic", title="t")
    pr.add_to_labels("do-not-merge", "stack")
    pr.remove_from_labels("do-not-merge")
    assert [label.name for label in pr.get_labels()] == ["stack"]
    assert [label.name for label in repo.get_pull(pr.number).labels] == ["stack"]
    assert repo.get_label("do-not-merge").color == "b60205"
    assert sorted(label.name for label in repo.get_labels()) == ["do-not-merge", "stack"]
    with pytest.raises(GithubException) as absent:
        pr.remove_from_labels("do-not-merge")
    assert absent.value.status == 404


def test_comments(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    pr = client(srv).get_repo(REPO).create_pull(base="main", head="topic", title="t")
    pr.create_issue_comment("Represented by 639aeff.")
    assert [c.body for c in pr.get_issue_comments()] == ["Represented by 639aeff."]
    assert [c["body"] for c in srv.comments(REPO, pr.number)] == ["Represented by 639aeff."]
    assert pr.as_issue().comments == 1


def test_approve_shows_as_an_approved_review(srv: FakeGitHub, checkout: Checkout) -> None:
    sha = checkout.push_branch("topic")
    pr = client(srv).get_repo(REPO).create_pull(base="main", head="topic", title="t")
    assert list(pr.get_reviews()) == []
    srv.approve(REPO, pr.number, user="alice")
    reviews = list(pr.get_reviews())
    assert [(r.state, r.user.login, r.commit_id) for r in reviews] == [("APPROVED", "alice", sha)]


def test_draft_then_ready_for_review_over_graphql(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    pr = repo.create_pull(base="main", head="topic", title="t", draft=True)
    pr.mark_ready_for_review()
    assert pr.draft is False and repo.get_pull(pr.number).draft is False
    pr.convert_to_draft()
    assert repo.get_pull(pr.number).draft is True
    assert ("POST", "/graphql") in srv.requests


def test_bad_token_is_401(srv: FakeGitHub, checkout: Checkout) -> None:
    with pytest.raises(BadCredentialsException):
        client(srv, token="wrong").get_repo(REPO)
    status, headers, body = raw(srv, "GET", "/user", token="wrong")
    assert status == 401 and body["message"] == "Bad credentials" and "X-RateLimit-Limit" in headers


FAULTS = {
    "5xx": (lambda s: s.inject("GET", r"/pulls$", status=502), 502, {}),
    "rate limit": (lambda s: s.inject_rate_limit("GET", r"/pulls$", reset_in=30), 403, {"X-RateLimit-Remaining": "0"}),
    "retry-after": (lambda s: s.inject_retry_after("GET", r"/pulls$", seconds=2), 429, {"Retry-After": "2"}),
    "custom": (
        lambda s: s.inject("*", r"/pulls$", status=500, headers={"X-Why": "test"}, body={"message": "boom"}),
        500,
        {"X-Why": "test"},
    ),
}


@pytest.mark.parametrize("name", FAULTS)
def test_injected_fault_is_seen_once_then_normal(srv: FakeGitHub, checkout: Checkout, name: str) -> None:
    inject, status, expected_headers = FAULTS[name]
    inject(srv)
    got_status, headers, body = raw(srv, "GET", f"/repos/{REPO}/pulls")
    assert got_status == status and "message" in body
    assert {k: headers[k] for k in expected_headers} == expected_headers
    assert "X-RateLimit-Reset" in headers
    assert raw(srv, "GET", f"/repos/{REPO}/pulls")[0] == 200


def test_rate_limit_reset_is_in_the_future_and_pygithub_names_it(srv: FakeGitHub, checkout: Checkout) -> None:
    repo = client(srv).get_repo(REPO)
    srv.inject_rate_limit("GET", r"/pulls$", reset_in=30)
    with pytest.raises(RateLimitExceededException) as limited:
        list(repo.get_pulls())
    assert int(limited.value.headers["x-ratelimit-reset"]) >= time.time() + 29
    assert list(repo.get_pulls()) == []


def test_delay_only_fault_answers_normally_after_waiting(srv: FakeGitHub, checkout: Checkout) -> None:
    srv.inject("GET", rf"^/repos/{REPO}$", status=0, delay=0.3)
    start = time.monotonic()
    assert raw(srv, "GET", f"/repos/{REPO}")[0] == 200
    assert time.monotonic() - start >= 0.3


def test_rate_limit_headers_on_every_response(srv: FakeGitHub, checkout: Checkout) -> None:
    for path in ("/user", f"/repos/{REPO}", "/nope"):
        headers = raw(srv, "GET", path)[1]
        assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= headers.keys()
    assert raw(srv, "GET", "/nope")[2]["message"] == "Not Found"
    assert client(srv).get_rate_limit().resources.core.limit == 5000


def test_write_calls_count_rest_writes_and_graphql_mutations(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    srv.reset_counts()
    pr = repo.create_pull(base="main", head="topic", title="t", draft=True)  # 1
    pr.edit(body="b")  # 2
    pr.add_to_labels("x")  # 3
    pr.mark_ready_for_review()  # 4: a GraphQL mutation
    list(repo.get_pulls())
    repo.get_pull(pr.number)
    status, _, _ = raw(
        srv,
        "POST",
        "/graphql",
        {"query": "query Q($id: ID!) { node(id: $id) { __typename } }", "variables": {"id": pr.node_id}},
    )
    assert status == 200  # a GraphQL query is a POST but not a write
    assert srv.write_calls() == 4
    srv.reset_counts()
    assert srv.write_calls() == 0 and srv.requests == []


# -- merging, checks, rules and stacked pull requests ------------------------------------------------


def stacked_pulls(srv: FakeGitHub, checkout: Checkout, n: int) -> list[int]:
    """``n`` PRs, each on the one before (the first on main); their numbers."""
    repo = client(srv).get_repo(REPO)
    numbers, base = [], "main"
    for i in range(n):
        checkout.work.git("checkout", "-q", "-B", f"s{i}", base if base != "main" else "main")
        checkout.work.commit(f"s{i}", {f"s{i}": f"{i}\n"})
        checkout.work.git("push", "-q", "--force", "origin", f"s{i}")
        numbers.append(repo.create_pull(base=base, head=f"s{i}", title=f"s{i}").number)
        base = f"s{i}"
    checkout.work.git("checkout", "-q", "main")
    return numbers


def test_legacy_merge_merges_with_git_and_refuses_as_github_does(srv: FakeGitHub, checkout: Checkout) -> None:
    checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    pr = repo.create_pull(base="main", head="topic", title="Topic")
    status, _, body = raw(srv, "PUT", f"/repos/{REPO}/pulls/1/merge", {"sha": "0" * 40})
    assert status == 409 and body["message"] == "Head branch was modified. Review and try the merge again."
    srv.configure(REPO, allow_rebase_merge=False)
    status, _, body = raw(srv, "PUT", f"/repos/{REPO}/pulls/1/merge", {"merge_method": "rebase"})
    assert status == 405 and body["message"] == "Rebase merges are not allowed on this repository."
    srv.protect(REPO, "main", checks=("ci",))
    assert repo.get_pull(1).mergeable_state == "blocked"
    status, _, body = raw(srv, "PUT", f"/repos/{REPO}/pulls/1/merge", {})
    assert status == 405 and body["message"] == 'Required status check "ci" is expected.'
    srv.set_check(REPO, pr.head.sha, "ci", "success")
    assert repo.get_pull(1).mergeable_state == "clean"
    result = pr.merge(merge_method="squash", sha=pr.head.sha)
    assert result.merged and len(result.sha) == 40
    main = checkout.bare
    assert (
        subprocess.run(["git", f"--git-dir={main}", "rev-parse", "main"], capture_output=True, text=True).stdout.strip()
        == result.sha
    )
    after = repo.get_pull(1)
    assert after.merged and after.state == "closed" and after.merge_commit_sha == result.sha
    status, _, body = raw(srv, "PUT", f"/repos/{REPO}/pulls/1/merge", {})
    assert status == 405 and body["message"] == "Pull Request is not mergeable"


def test_checks_statuses_rules_and_permissions_as_pygithub_reads_them(srv: FakeGitHub, checkout: Checkout) -> None:
    sha = checkout.push_branch("topic")
    repo = client(srv).get_repo(REPO)
    srv.set_check(REPO, sha, "build", "failure")
    srv.set_check(REPO, sha, "build", "success")  # a rerun: the latest counts
    srv.set_check(REPO, sha, "gpu", None)
    srv.set_status(REPO, sha, "legacy-ci", "error")
    commit = repo.get_commit(sha)
    runs = {r.name: (r.status, r.conclusion) for r in commit.get_check_runs()}
    assert runs == {"build": ("completed", "success"), "gpu": ("in_progress", None)}
    combined = commit.get_combined_status()
    assert combined.state == "failure" and [(s.context, s.state) for s in combined.statuses] == [("legacy-ci", "error")]
    srv.protect(REPO, "main", checks=("build",))
    assert repo.get_branch("main").raw_data["protection"]["required_status_checks"]["contexts"] == ["build"]
    srv.protect(REPO, "main", checks=("build",), approvals=1, ruleset=True)
    assert not repo.get_branch("main").protected
    status, _, rules = raw(srv, "GET", f"/repos/{REPO}/rules/branches/main")
    assert status == 200 and [r["type"] for r in rules] == ["pull_request", "required_status_checks"]
    assert rules[1]["parameters"]["required_status_checks"] == [{"context": "build"}]
    srv.set_permission(REPO, "alice", "maintain")
    assert repo.get_collaborator_permission("alice") == "write"  # `permission` keeps the old five values
    assert repo.get_collaborator_permission("upstream") == "admin"
    assert repo.get_collaborator_permission("stranger") == "read"


def test_the_stacks_api_create_add_unstack_and_the_stack_object(srv: FakeGitHub, checkout: Checkout) -> None:
    a, b, c = stacked_pulls(srv, checkout, 3)
    assert raw(srv, "GET", f"/repos/{REPO}/stacks")[0] == 404  # not enabled for this repository
    srv.enable_stacks(REPO)
    assert raw(srv, "GET", f"/repos/{REPO}/stacks")[2] == []
    status, _, body = raw(srv, "POST", f"/repos/{REPO}/stacks", {"pull_requests": [a]})
    assert status == 422  # a stack is two pull requests at least
    status, _, body = raw(srv, "POST", f"/repos/{REPO}/stacks", {"pull_requests": [a, c]})
    assert status == 422 and "is not the head of" in body["errors"][0]["message"]
    status, headers, st = raw(srv, "POST", f"/repos/{REPO}/stacks", {"pull_requests": [a, b]})
    assert status == 201 and headers["Location"] == st["url"]
    assert (st["number"], st["base"], st["open"]) == (1, {"ref": "main"}, True)
    assert [(p["number"], p["state"], p["draft"], p["merged_at"]) for p in st["pull_requests"]] == [
        (a, "open", False, None),
        (b, "open", False, None),
    ]
    assert set(st) == {"id", "number", "node_id", "url", "base", "open", "created_at", "pull_requests"}
    status, _, st = raw(srv, "POST", f"/repos/{REPO}/stacks/1/add", {"pull_requests": [c]})
    assert status == 200 and [p["number"] for p in st["pull_requests"]] == [a, b, c]
    pull = client(srv).get_repo(REPO).get_pull(b).raw_data
    assert {k: pull["stack"][k] for k in ("number", "size", "position")} == {"number": 1, "size": 3, "position": 2}
    assert pull["stack"]["base"]["ref"] == "main"
    assert raw(srv, "GET", f"/repos/{REPO}/stacks?pull_request={c}")[2][0]["number"] == 1
    assert raw(srv, "PATCH", f"/repos/{REPO}/pulls/{b}", {"base": "main"})[0] == 422  # not inside a stack
    status, _, body = raw(srv, "POST", f"/repos/{REPO}/stacks/1/unstack")
    assert status == 204 and body is None and raw(srv, "GET", f"/repos/{REPO}/stacks")[2] == []
    assert client(srv).get_repo(REPO).get_pull(b).raw_data["stack"] is None


def test_the_asynchronous_merge_of_a_stack(srv: FakeGitHub, checkout: Checkout) -> None:
    a, b, c = stacked_pulls(srv, checkout, 3)
    assert raw(srv, "PUT", f"/repos/{REPO}/pulls/{b}/merge-async", {})[0] == 404  # not available here
    srv.enable_stacks(REPO)
    raw(srv, "POST", f"/repos/{REPO}/stacks", {"pull_requests": [a, b, c]})
    assert raw(srv, "PUT", f"/repos/{REPO}/pulls/{b}/merge", {})[0] == 405  # never the legacy merge in a stack
    status, _, first = raw(srv, "PUT", f"/repos/{REPO}/pulls/{b}/merge-async", {"merge_method": "squash"})
    assert status == 202 and first["status"] == "pending"
    uuid = first["details"]["uuid"]
    assert first["details"]["merge_method"] == "squash" and first["details"]["merge_action"] == "default"
    status, _, again = raw(srv, "PUT", f"/repos/{REPO}/pulls/{b}/merge-async", {})
    assert status == 409 and again["details"]["uuid"] == uuid
    poll = f"/repos/{REPO}/pulls/{b}/merge-async/{uuid}"
    assert raw(srv, "GET", poll)[2]["status"] == "pending"
    status, _, done = raw(srv, "GET", poll)
    assert status == 200 and done["status"] == "merged" and len(done["details"]["sha"]) == 40
    states = {p["number"]: (p["merged"], p["base"]["ref"]) for p in srv.pulls(REPO)}
    assert states == {a: (True, "main"), b: (True, "main"), c: (False, "main")}  # c now sits on the base
    status, _, merged = raw(srv, "PUT", f"/repos/{REPO}/pulls/{b}/merge-async", {})
    assert status == 200 and merged["status"] == "merged"
    assert raw(srv, "GET", f"/repos/{REPO}/pulls/{b}/merge-async/not-a-request")[0] == 404


def test_an_asynchronous_merge_fails_atomically_on_a_rule_evaluated_when_it_runs(
    srv: FakeGitHub, checkout: Checkout
) -> None:
    a, b = stacked_pulls(srv, checkout, 2)
    srv.enable_stacks(REPO)
    raw(srv, "POST", f"/repos/{REPO}/stacks", {"pull_requests": [a, b]})
    srv.merge_async_polls = 0
    srv.protect(REPO, "main", checks=("ci",), ruleset=True)
    srv.set_check(REPO, srv.pulls(REPO)[0]["head"]["sha"], "ci", "success")  # the bottom passes, the top does not
    status, _, first = raw(srv, "PUT", f"/repos/{REPO}/pulls/{b}/merge-async", {})
    assert status == 202  # only the PR's basic state is checked when it is submitted
    done = raw(srv, "GET", f"/repos/{REPO}/pulls/{b}/merge-async/{first['details']['uuid']}")[2]
    assert done["status"] == "failed" and 'Required status check "ci" is expected.' in done["details"]["message"]
    assert not any(p["merged"] for p in srv.pulls(REPO))
