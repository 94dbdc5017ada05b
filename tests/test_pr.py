"""``ggstack pr``: stacked PRs only for needed patches, gated, converging, never leaking the token.

The world is real: a fork checkout whose remote is a bare repository, the
local GitHub-compatible server (tests/forge_server.py) reading that same bare
repository, and ggstack run as a subprocess (or ``pr.pr`` in-process where
only the forge side matters) driving the real PyGithub over HTTP. Every
assertion is about what a maintainer would see on the forge: PRs, bases,
drafts, labels, bodies, comments, and how many write calls were made.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from forge_server import FakeGitHub
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing, replay
from ggstack import pr as pr_stage
from ggstack.check.stack import check_stack
from ggstack.forge.marker import closed_marker, pr_marker
from ggstack.model import Run, Verdict
from ggstack.pr import text as pr_text
from ggstack.report.bodies import PR_GATE
from ggstack.series import store

TOKEN = "ghp_T0kenThatMustNeverBeSeen4242"
SLUG = "upstream/proj"
FAST = {  # the retry time scale shrunk, so fault tests take milliseconds, not minutes
    "GGSTACK_RETRY_BASE_SECONDS": "0.01",
    "GGSTACK_WRITE_INTERVAL_SECONDS": "0",
    "GGSTACK_FORGE_TIMEOUT": "5",
    "GGSTACK_RATE_LIMIT_MAX_WAIT": "5",
}


def _text(name: str, change: int | None = None) -> str:
    return "".join(f"{name} line {i}{' changed' if i == change else ''}\n" for i in range(12))


class World:
    """The fork, its remote (the forge's bare repo), the stored stacks, the forge."""

    def __init__(self, tmp: Path, forge: FakeGitHub) -> None:
        self.tmp = tmp
        self.forge = forge
        self.upstream = GitRepo.init(tmp / "upstream.git", bare=True)
        self.upstream.git("config", "core.logAllRefUpdates", "always")  # so a test can count pushes
        self.fork = GitRepo.init(tmp / "fork")
        self.fork.git("remote", "add", "origin", str(self.upstream.path))
        self.fork.commit("base", {f"{n}.txt": _text(n) for n in "abcdx"})
        self.fork.git("push", "-q", "origin", "main")
        forge.add_repo(SLUG, str(self.upstream.path))
        self.fork.git("checkout", "-q", "-b", "feature")
        self.x = self.fork.commit(
            "fix(x): the change the base already has\n\nThe seed's PR: already in the base via a squash.",
            {"x.txt": _text("x", 3)},
        )
        self.a = self.fork.commit(
            "fix(a): preallocate the a buffers\n\nKeep the a buffers alive while graphs are captured.\n\nCo-authored-by: Someone <s@example.com>",
            {"a.txt": _text("a", 3), "tests/test_a.py": "def test_a():\n    assert True\n"},
        )
        self.b = self.fork.commit("fix(b): retain b on prewarm\n\nThe b part.", {"b.txt": _text("b", 5)})
        self.c = self.fork.commit("fix(c): follow-on for c\n\nThe c part.", {"c.txt": _text("c", 7)})
        self.fork.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        self.repo = git.Repository(str(self.fork.path))

    # -- setup --

    def stack(self, name: str, commits: list[str], *, config: dict[str, str] | None = None, **import_kw) -> None:
        store.init(str(self.patches), name, SLUG, "main")
        toml = self.patches / name / "stack.toml"
        text = toml.read_text()
        for old, new in (config or {}).items():
            assert old in text, old
            text = text.replace(old, new)
        toml.write_text(text)
        stack = importing.commits(self.repo, store.load(str(self.patches), name), commits, **import_kw).stack
        store.save(stack)

    def land(self, commit: str) -> str:
        """The base moves: ``commit`` is cherry-picked onto main (and pushed)."""
        self.fork.git("cherry-pick", "--allow-empty", commit)
        self.fork.git("push", "-q", "origin", "main")
        return self.fork.sha("main")

    # -- running --

    def env(self, **extra: str) -> dict[str, str]:
        return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": self.forge.url, **FAST, **extra}

    def gg(
        self, *args: str, env: dict[str, str] | None = None, stack: str = "s", onto: str = "main"
    ) -> subprocess.CompletedProcess[str]:
        """``ggstack pr STACK --onto main ARGS`` as a user runs it."""
        return run_ggstack(
            "--repo",
            str(self.fork.path),
            "--patches",
            str(self.patches),
            "pr",
            stack,
            "--onto",
            onto,
            *args,
            cwd=self.tmp,
            env=env if env is not None else self.env(),
        )

    def ok(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:
        proc = self.gg(*args, **kw)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert TOKEN not in proc.stdout + proc.stderr
        return proc

    def pr(self, *, stack: str = "s", env: dict[str, str] | None = None, **kw) -> Run:
        """``pr.pr`` in-process (no interpreter start): for the tests about the forge alone."""
        s = store.load(str(self.patches), stack)
        return pr_stage.pr(self.repo, s, checked_run(self.repo, s, "main"), env=env or self.env(), **kw)

    def run_json(self, *args: str, **kw) -> Run:
        return Run.from_json(json.loads(self.ok(*args, "--json", **kw).stdout))

    # -- looking --

    def pulls(self, state: str | None = "open") -> list[dict]:
        return [p for p in self.forge.pulls(SLUG) if state is None or p["state"] == state]

    def pull(self, subject_start: str) -> dict:
        (found,) = [p for p in self.forge.pulls(SLUG) if p["title"].startswith(subject_start)]
        return found

    def remote_heads(self) -> dict[str, str]:
        out = self.upstream.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/gg/")
        return dict(line.split(" ") for line in out.splitlines())

    def pushes(self, branch: str) -> int:
        return len(self.upstream.git("reflog", "show", "--format=%H", f"refs/heads/{branch}").split())


def checked_run(repo: git.Repository, stack, base: str, *, write: bool = True) -> Run:
    """apply + check, as ``ggstack pr`` runs them, in-process."""
    return check_stack(repo, stack, base, run=replay.apply(repo, stack, base, write=write))


@pytest.fixture
def world(tmp_path: Path, forge: FakeGitHub) -> World:
    return World(tmp_path, forge)


@pytest.fixture
def seeded(world: World) -> World:
    """Stack ``s``: one represented patch (x, already in the base), two needed (a, b)."""
    world.land(world.x)
    world.stack(
        "s",
        [world.x, world.a, world.b],
        original_pr="upstream/proj#130",
        dropped=["CUTLASS version pin (cmake/cutlass.cmake)"],
    )
    return world


# -- the first run and its rerun ----------------------------------------------------------


def test_first_run_opens_two_stacked_gated_prs_and_none_for_the_represented_patch(seeded: World) -> None:
    w = seeded
    run = w.run_json()
    pulls = w.pulls()
    assert [p["title"] for p in pulls] == ["fix(a): preallocate the a buffers", "fix(b): retain b on prewarm"]
    pa, pb = pulls
    out_a, out_b = run.outcomes[1], run.outcomes[2]
    # Stacked: a on the target base, b on a's branch; heads are the replayed commits, pushed.
    assert pa["base"]["ref"] == "main" and pa["head"]["ref"] == "gg/s/02-fix-a-preallocate-the-a-buffers"
    assert pb["base"]["ref"] == pa["head"]["ref"]
    heads = w.remote_heads()
    assert heads[f"refs/heads/{pa['head']['ref']}"] == out_a.commit
    assert heads[f"refs/heads/{pb['head']['ref']}"] == out_b.commit
    assert not any("fix-x" in ref for ref in heads)
    # Gated: draft and labelled.
    assert all(p["draft"] and [label["name"] for label in p["labels"]] == ["do-not-merge"] for p in pulls)
    # The body: summary, provenance, what was dropped, changes, merge order with links, gate, marker.
    body = pa["body"]
    assert "Keep the a buffers alive while graphs are captured." in body
    assert "Co-authored-by" not in body and "Stack-Patch-Id" not in body  # trailers are not the summary
    assert "upstream/proj#130" in body and w.a in body
    # The fork's own commit is its source, never "cherry-picked" (it was picked from nowhere).
    assert f"Source commit (the fork's own): {w.a}" in body and "herry-pick" not in body
    assert "CUTLASS version pin (cmake/cutlass.cmake)" in body
    assert re.search(r"a\.txt\s+\| \+1 -1", body) and re.search(r"tests/test_a\.py\s+\| \+2 -0", body)
    assert "PR 1 of 2" in body and f"Next: #{pb['number']}" in body
    assert "PR 2 of 2" in pb["body"] and f"Previous: #{pa['number']}" in pb["body"]
    assert PR_GATE in body and PR_GATE in pb["body"]
    assert pr_marker(out_a.stack_patch_id) in body
    # The Run says the same.
    assert run.stages["pr"] == "ok"
    assert run.outcomes[0].verdict is Verdict.REPRESENTED and run.outcomes[0].pr is None
    assert out_a.pr.number == pa["number"] and out_a.pr.position == 1 and out_a.pr.total == 2
    assert out_b.pr.base == pa["head"]["ref"]
    # A Run keeps no bodies; rendered from it and the stack, they are what the forge has.
    bodies = pr_text.bodies(run, store.load(str(w.patches), "s"))
    assert (bodies[out_a.name], bodies[out_b.name]) == (pa["body"], pb["body"])


def test_rerun_with_nothing_changed_makes_no_write_call_and_no_push(seeded: World) -> None:
    w = seeded
    w.ok()
    branches = [p["head"]["ref"] for p in w.pulls()]
    pushes = {b: w.pushes(b) for b in branches}
    w.forge.reset_counts()
    proc = w.ok()
    assert w.forge.write_calls() == 0, w.forge.requests
    assert {b: w.pushes(b) for b in branches} == pushes
    assert len(w.pulls(None)) == 2
    assert "nothing" in proc.stdout


def test_dry_run_prints_plan_and_bodies_and_changes_nothing(seeded: World) -> None:
    w = seeded
    local_before = w.fork.refs()
    proc = w.ok("--dry-run")
    assert w.forge.write_calls() == 0
    assert w.pulls(None) == [] and w.remote_heads() == {}
    assert w.fork.refs() == local_before  # not even ggstack's own branches
    assert "plan only" in proc.stdout and "open PR 1 of 2" in proc.stdout
    assert "PR body" in proc.stdout and PR_GATE in proc.stdout
    assert "no PR: represented" in proc.stdout


def test_the_run_keeps_no_pr_bodies_and_renders_the_ones_the_dry_run_prints(seeded: World) -> None:
    w = seeded
    data = json.loads(w.ok("--dry-run", "--json").stdout)
    planned = [p["pr"] for p in data["patches"] if p["pr"] and p["pr"]["position"]]
    assert len(planned) == 2 and all("body" not in p and p["diffstat"] for p in planned)
    bodies = pr_text.bodies(Run.from_json(data), store.load(str(w.patches), "s"))
    printed = w.ok("--dry-run").stdout
    assert len(bodies) == 2 and all(f"===== {name}: PR body =====\n{b}" in printed for name, b in bodies.items())


def test_a_rerun_reads_the_diffstats_it_kept_and_a_kept_one_that_is_not_one_is_read_again(seeded: World) -> None:
    w = seeded
    traces = [w.tmp / f"{n}.trace" for n in range(3)]
    first = w.ok("--dry-run", env=w.env(GIT_TRACE=str(traces[0])))
    second = w.ok("--dry-run", env=w.env(GIT_TRACE=str(traces[1])))
    assert second.stdout == first.stdout and "+1 -1" in first.stdout  # a.txt's line in fix(a)'s body
    assert "--numstat" in traces[0].read_text() and "--numstat" not in traces[1].read_text()
    kept = w.fork.path / ".git" / "ggstack" / "cache" / "diffstats.json"
    data = json.loads(kept.read_text())
    assert len(data) == 2  # the pairs of the last run only
    kept.write_text(json.dumps({key: '[["a.txt", "one", 1]]' for key in data}))
    third = w.ok("--dry-run", env=w.env(GIT_TRACE=str(traces[2])))
    assert third.stdout == first.stdout and "--numstat" in traces[2].read_text()
    kept.write_text("{not json")
    assert w.ok("--dry-run").stdout == first.stdout


def test_a_fresh_clone_replaying_new_commit_objects_pushes_and_writes_nothing(seeded: World) -> None:
    w = seeded
    w.ok()
    branches = [p["head"]["ref"] for p in w.pulls()]
    pushes = {b: w.pushes(b) for b in branches}
    # The CI bot's clone has no ggstack cache and another clock: new commit objects, same change.
    for cache in Path(w.repo.common_dir, "ggstack", "cache").glob("*.json"):
        cache.unlink()
    w.forge.reset_counts()
    w.ok(env=w.env(GIT_COMMITTER_DATE="1900000000 +0000"))
    assert w.forge.write_calls() == 0, w.forge.requests
    assert {b: w.pushes(b) for b in branches} == pushes


def test_a_patch_without_a_pr_does_not_ride_along_in_the_next_pr(world: World) -> None:
    """The test stage says patch 2 is broken: PRs for 1 and 3, and 3's branch sits on 1's."""
    w = world
    w.stack("s", [w.a, w.b, w.c])
    run = checked_run(w.repo, store.load(str(w.patches), "s"), "main")
    run.outcomes[1].verdict = Verdict.BROKEN
    path = w.tmp / "tested.json"
    path.write_text(json.dumps(run.to_json()))
    proc = run_ggstack(
        "--repo",
        str(w.fork.path),
        "--patches",
        str(w.patches),
        "pr",
        "s",
        "--run",
        str(path),
        "--json",
        cwd=w.tmp,
        env=w.env(),
    )
    assert proc.returncode == 1, proc.stderr  # a broken patch needs a human: exit by the verdicts, as sync
    after = Run.from_json(json.loads(proc.stdout))
    p1, p3 = w.pulls()
    assert [p1["title"][:6], p3["title"][:6]] == ["fix(a)", "fix(c)"]
    assert p3["base"]["ref"] == p1["head"]["ref"]
    head3 = w.remote_heads()[f"refs/heads/{p3['head']['ref']}"]
    assert head3 == after.outcomes[2].commit
    assert w.fork.git("rev-parse", head3 + "^") == w.remote_heads()[f"refs/heads/{p1['head']['ref']}"]
    assert w.fork.git("diff", "--name-only", head3 + "^", head3) == "c.txt"
    assert after.outcomes[1].pr is None


def test_a_commit_someone_else_pushed_to_a_patch_branch_is_never_overwritten(seeded: World) -> None:
    w = seeded
    w.ok()
    p1, _ = w.pulls()
    branch = p1["head"]["ref"]
    # A reviewer pushes a fixup on top of the PR's branch.
    w.fork.git("checkout", "-q", "-b", "fixup", f"refs/heads/{branch}")
    fixup = w.fork.commit("reviewer fixup", {"a.txt": _text("a", 4)})
    w.fork.git("push", "-q", "origin", f"fixup:refs/heads/{branch}")
    w.fork.git("checkout", "-q", "main")
    w.land(w.c)  # the base moves: ggstack would push new commits
    w.forge.reset_counts()
    proc = w.gg()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "someone else pushed" in proc.stderr and branch in proc.stderr
    assert w.remote_heads()[f"refs/heads/{branch}"] == fixup
    assert w.forge.write_calls() == 0


def test_a_pr_closed_by_a_maintainer_is_not_replaced_but_one_closed_as_redundant_may_be(world: World) -> None:
    w = world
    w.stack("s", [w.a, w.b])
    w.ok()
    _, p2 = w.pulls()
    # A maintainer closes PR 2 by hand: ggstack does not open another one.
    from github import Auth, Github

    gh = Github(auth=Auth.Token(TOKEN), base_url=w.forge.url)
    gh.get_repo(SLUG).get_pull(p2["number"]).edit(state="closed")
    run = w.run_json()
    assert len(w.pulls(None)) == 2 and w.pull("fix(b)")["state"] == "closed"
    assert "closed by someone else" in run.outcomes[1].pr.note
    # ggstack closed it as redundant and the patch is needed again: a new PR is fine.
    gh.get_repo(SLUG).get_pull(p2["number"]).create_issue_comment(
        closed_marker(run.outcomes[1].stack_patch_id, "0" * 40)
    )
    w.ok()
    assert [p["title"][:6] for p in w.pulls()] == ["fix(a)", "fix(b)"] and len(w.pulls(None)) == 3


def test_flat_puts_every_pr_on_the_target_base_and_a_rerun_keeps_it(seeded: World) -> None:
    w = seeded
    w.ok("--flat")
    assert [p["base"]["ref"] for p in w.pulls()] == ["main", "main"]
    w.forge.reset_counts()
    w.ok()  # no flag: the stack keeps the mode it was opened in; bases are not flipped
    assert w.forge.write_calls() == 0
    assert [p["base"]["ref"] for p in w.pulls()] == ["main", "main"]


# -- the base moves -----------------------------------------------------------------------


def test_base_moves_patch_2_represented_close_redundant_closes_it_with_the_evidence(world: World) -> None:
    w = world
    w.stack("s", [w.a, w.b, w.c])
    w.ok()
    p1, p2, p3 = w.pulls()
    assert p3["base"]["ref"] == p2["head"]["ref"]
    landed = w.land(w.b)

    # Without the flag: the plan says "would close"; PR 2 stays open and uncommented, and a human is asked (exit 1).
    proc = w.gg()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "would close" in proc.stdout
    assert w.pull("fix(b)")["state"] == "open" and w.forge.comments(SLUG, p2["number"]) == []
    # ... while patch 3's PR follows the chain: now on patch 1's branch.
    assert w.pull("fix(c)")["base"]["ref"] == p1["head"]["ref"]

    run = w.run_json("--close-redundant")
    assert w.pull("fix(b)")["state"] == "closed"
    (comment,) = w.forge.comments(SLUG, p2["number"])
    text = comment["body"]
    assert text.startswith("Closing as already represented in the current `main` base")
    assert landed[:10] in text and "no unique change left to merge" in text
    assert "patch-id" in text and "100%" in text
    assert "no identity match" not in text  # only the evidence that it is there
    assert "\n- patch-id: " in text and "Signal." not in text  # the signal's name, not Python's repr of it
    assert run.outcomes[1].pr.state == "closed" and run.outcomes[1].pr.comment == text
    # PR 3 is now 2 of 2, linked to PR 1; PR 1 links to PR 3.
    assert "PR 2 of 2" in w.pull("fix(c)")["body"] and f"Previous: #{p1['number']}" in w.pull("fix(c)")["body"]
    assert f"Next: #{p3['number']}" in w.pull("fix(a)")["body"]
    assert w.remote_heads()[f"refs/heads/{p3['head']['ref']}"] == run.outcomes[2].commit
    assert w.fork.git("rev-parse", run.outcomes[2].commit + "^") == run.outcomes[0].commit

    # Rerun: nothing more to say.
    w.forge.reset_counts()
    w.ok("--close-redundant")
    assert w.forge.write_calls() == 0 and len(w.forge.comments(SLUG, p2["number"])) == 1


def test_approval_lifts_the_gate_of_that_pr_and_leaves_the_other(seeded: World) -> None:
    w = seeded
    w.ok()
    p1, p2 = w.pulls()
    w.forge.approve(SLUG, p1["number"], "maintainer")
    run = w.run_json()
    p1, p2 = w.pulls()
    assert p1["draft"] is False and p1["labels"] == []
    assert "Approved by @maintainer" in p1["body"] and PR_GATE not in p1["body"]
    assert p2["draft"] is True and [label["name"] for label in p2["labels"]] == ["do-not-merge"]
    assert PR_GATE in p2["body"]
    assert run.outcomes[1].pr.approved and not run.outcomes[2].pr.approved
    assert all(p["state"] == "open" and not p["merged"] for p in w.pulls(None))  # never merged
    w.forge.reset_counts()
    w.ok()
    assert w.forge.write_calls() == 0


def test_github_enterprise_api_url_works_rest_and_graphql(seeded: World) -> None:
    w = seeded
    env = w.env(GITHUB_API_URL=w.forge.url + "/api/v3")  # GHE's shape; GraphQL lives at /api/graphql
    w.pr(env=env)
    w.forge.approve(SLUG, w.pulls()[0]["number"])
    w.pr(env=env)
    assert [p["draft"] for p in w.pulls()] == [False, True]
    assert ("POST", "/graphql") in w.forge.requests


def test_prs_from_a_fork_have_owner_prefixed_heads(tmp_path: Path, forge: FakeGitHub) -> None:
    w = World(tmp_path, forge)
    fork_bare = GitRepo.init(tmp_path / "forker.git", bare=True)
    w.fork.git("remote", "add", "mine", str(fork_bare.path))
    w.fork.git("push", "-q", "mine", "main")
    forge.add_repo("forker/proj", str(fork_bare.path), fork_of=SLUG)
    w.stack(
        "s", [w.a, w.b], config={'# fork = "me/name"': 'fork = "forker/proj"', 'remote = "origin"': 'remote = "mine"'}
    )
    w.ok()
    p1, p2 = w.pulls()
    assert p1["head"]["label"] == "forker:gg/s/01-fix-a-preallocate-the-a-buffers"
    assert p1["head"]["repo"]["full_name"] == "forker/proj" and p2["base"]["ref"] == "main"
    assert w.remote_heads() == {}  # pushed to the fork, not upstream
    w.forge.reset_counts()
    w.ok()
    assert w.forge.write_calls() == 0


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "phase,fault",
    [
        ("open", ("inject", "GET", r"/pulls$", {"status": 502})),
        ("open", ("inject", "POST", r"/pulls$", {"status": 503, "times": 2})),
        ("open", ("inject", "PATCH", r"/pulls/\d+$", {"status": 500})),
        ("open", ("inject_rate_limit", "GET", r"/pulls$", {"reset_in": 1})),
        ("open", ("inject_retry_after", "POST", r"/labels$", {"seconds": 1})),
        ("open", ("inject_retry_after", "POST", r"/pulls$", {"seconds": 1, "status": 403})),
        (
            "open",
            ("inject", "GET", r"/repos/upstream/proj$", {"status": 0, "delay": 2.5}),
        ),  # slower than the 1 s timeout
        ("update", ("inject", "PATCH", r"/pulls/\d+$", {"status": 502, "times": 3})),
        ("update", ("inject", "POST", r"/graphql$", {"status": 502})),
        ("update", ("inject", "DELETE", r"/labels/", {"status": 503})),
    ],
    ids=[
        "502-read",
        "503-create-twice",
        "500-edit",
        "rate-limit-near-reset",
        "429-retry-after",
        "403-retry-after",
        "timeout",
        "502-rebase-edit-3x",
        "502-graphql-ready",
        "503-unlabel",
    ],
)
@pytest.mark.slow
def test_a_transient_fault_is_retried_and_the_run_converges(seeded: World, phase: str, fault) -> None:
    """Phase "open": the first run meets the fault; "update": the run after an
    approval and a base move (push, edit, mark ready, unlabel) does."""
    w = seeded
    method, verb, path, kw = fault

    def faulted_run() -> None:
        getattr(w.forge, method)(verb, path, **kw)
        w.forge.reset_counts()
        run = w.pr(env=w.env(GGSTACK_FORGE_TIMEOUT="1"))
        assert run.stages["pr"] == "ok"
        tries = [p for m, p in w.forge.requests if m == verb and re.search(path, p)]
        assert len(tries) >= kw.get("times", 1) + 1  # the fault was met, and retried

    if phase == "open":
        faulted_run()
    else:
        w.pr()
    w.forge.approve(SLUG, w.pulls()[0]["number"])
    w.land(w.c)
    if phase == "update":
        faulted_run()
    else:
        w.pr()
    p1, p2 = w.pulls()
    assert len(w.pulls(None)) == 2 and not p1["draft"] and p2["draft"]
    assert [[label["name"] for label in p["labels"]] for p in (p1, p2)] == [[], ["do-not-merge"]]
    w.forge.reset_counts()
    w.pr()
    assert w.forge.write_calls() == 0


@pytest.mark.parametrize(
    "fault,words",
    [
        (("inject", "GET", r"/pulls$", {"status": 502, "times": 5}), "still fails after 5 tries"),
        (("inject_rate_limit", "GET", r"/pulls$", {"reset_in": 3600}), "rate limit exhausted; it resets at"),
        (("inject_retry_after", "POST", r"/pulls$", {"seconds": 3600}), "Retry-After"),
    ],
    ids=["502-forever", "rate-limit-far-reset", "retry-after-too-long"],
)
def test_a_lasting_fault_is_a_clear_infrastructure_error(seeded: World, fault, words: str) -> None:
    w = seeded
    method, verb, path, kw = fault
    getattr(w.forge, method)(verb, path, **kw)
    proc = w.gg()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    # Once the forge is back (every injected fault spent), the next run converges.
    w.ok()
    assert len(w.pulls(None)) == 2


def test_a_create_whose_answer_was_lost_is_not_sent_twice(seeded: World) -> None:
    w = seeded
    # The server creates the PR, but only after the client has timed out.
    w.forge.inject("POST", r"/pulls$", status=0, delay=2.5)
    w.ok(env=w.env(GGSTACK_FORGE_TIMEOUT="1", GGSTACK_RETRY_BASE_SECONDS="2"))
    assert len(w.pulls(None)) == 2


@pytest.mark.slow
def test_killed_at_every_write_then_rerun_converges_without_duplicates(world: World) -> None:
    w = world
    w.stack("s", [w.a, w.b, w.c])

    def check_no_duplicates() -> None:
        titles = [p["title"] for p in w.pulls()]
        assert len(titles) == len(set(titles)), titles
        for p in w.pulls(None):
            assert len(w.forge.comments(SLUG, p["number"])) <= 1

    def kill_everywhere(*args: str) -> int:
        """Die right after the first write of every run, until a run has nothing left to write."""
        for kills in range(30):
            proc = w.gg(*args, env=w.env(GGSTACK_DEBUG_KILL_AFTER_WRITES="1"))
            check_no_duplicates()
            if proc.returncode == 0:
                return kills
            assert proc.returncode == -9, proc.stdout + proc.stderr
        raise AssertionError("never finished")

    assert kill_everywhere() >= 6  # 3 opens, 3 labels, body edits: each one a place to die
    w.forge.reset_counts()
    w.ok()
    assert w.forge.write_calls() == 0
    assert len(w.pulls()) == 3 and all(p["draft"] and p["labels"] for p in w.pulls())

    w.land(w.b)
    assert kill_everywhere("--close-redundant") >= 2  # at least the comment and the close
    assert w.pull("fix(b)")["state"] == "closed"
    assert len(w.forge.comments(SLUG, w.pull("fix(b)")["number"])) == 1
    assert w.pull("fix(c)")["base"]["ref"] == w.pull("fix(a)")["head"]["ref"]
    w.forge.reset_counts()
    w.ok("--close-redundant")
    assert w.forge.write_calls() == 0


# -- the token --------------------------------------------------------------------------------


def test_missing_token_is_a_user_error_naming_the_variable(seeded: World) -> None:
    env = {k: v for k, v in seeded.env().items() if k != "GITHUB_TOKEN"}
    proc = seeded.gg(env=env)
    assert proc.returncode == 2 and "GITHUB_TOKEN" in proc.stderr and "GH_TOKEN" in proc.stderr
    assert seeded.forge.requests == []


def test_a_rejected_token_is_a_user_error_and_the_token_is_never_printed(seeded: World) -> None:
    bad = "ghp_WrongTokenAlsoSecret1234"
    env = {k: v for k, v in seeded.env().items() if k != "GITHUB_TOKEN"}
    proc = seeded.gg(env={**env, "GH_TOKEN": bad})
    assert proc.returncode == 2, proc.stderr
    assert "GH_TOKEN" in proc.stderr and "401" in proc.stderr and "Traceback" not in proc.stderr
    assert bad not in proc.stdout + proc.stderr and TOKEN not in proc.stdout + proc.stderr


def test_an_unreachable_forge_is_an_infrastructure_error_without_the_token(seeded: World) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = seeded.gg(env=seeded.env(GITHUB_API_URL=f"http://127.0.0.1:{port}"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "still fails after 5 tries" in proc.stderr and "Traceback" not in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr


def test_the_token_is_in_no_output_and_no_run_json(seeded: World) -> None:
    w = seeded
    for args in (("--dry-run",), (), ("--json",), ("--dry-run", "--json")):
        proc = w.ok(*args)
        assert TOKEN not in proc.stdout + proc.stderr
    # Even when the forge echoes the token back in an error, ggstack does not repeat it.
    w.forge.inject("GET", r"/pulls$", status=422, body={"message": f"bad request for {TOKEN}"})
    proc = w.gg()
    assert proc.returncode == 2 and "422" in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr


# -- what comes from commit messages and the environment is data, never markup or secrets ----------

HOSTILE = (
    "Closes <img src=x onerror=alert(1)> early.\n\n"
    "</details>\n<!-- a comment that never closes\n\n"
    "<script>alert(1)</script> and `<kept in code>` stay text.\n\n"
    "```\n<!-- in a fence: shown as it is -->\n"  # a fence the message never closes
)
OURS = {"<sub>", "</sub>", "<code>", "</code>"}  # the HTML ggstack writes itself, besides its own marker line


def _html_of(markdown: str) -> list[str]:
    """Every piece of raw HTML GitHub would render from ``markdown`` (CommonMark allows it)."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type == "html_block":
            found.append(token.content.strip())
        for child in token.children or []:
            if child.type == "html_inline":
                found.append(child.content)
    return found


def test_a_marker_in_a_commit_message_cannot_claim_another_patchs_pr(world: World) -> None:
    """The probe: a message carrying another patch's marker made ggstack find PR a as b's, then stick."""
    w = world
    id_a, id_b = "I" + "a" * 40, "I" + "b" * 40
    w.fork.git("checkout", "-q", "-b", "hostile", "main")
    a = w.fork.commit(
        f"fix(a): a\n\nThis PR is b's, says the message:\n{pr_marker(id_b)}\n\nStack-Patch-Id: {id_a}",
        {"a.txt": _text("a", 3)},
    )
    b = w.fork.commit(f"fix(b): b\n\nThe b part.\n\nStack-Patch-Id: {id_b}", {"b.txt": _text("b", 5)})
    w.fork.git("checkout", "-q", "main")
    w.stack("s", [a, b])
    w.ok()
    pa, pb = w.pull("fix(a)"), w.pull("fix(b)")
    assert len(w.pulls(None)) == 2
    assert pr_marker(id_b) not in pa["body"] and pa["body"].rstrip().endswith(pr_marker(id_a))
    w.forge.reset_counts()
    run = w.run_json()  # the rerun finds each PR by its own marker: nothing to do
    assert w.forge.write_calls() == 0, w.forge.requests
    assert [o.pr.number for o in run.outcomes] == [pa["number"], pb["number"]]
    assert len(w.pulls(None)) == 2


def test_a_pr_from_another_head_repository_is_not_adopted_by_its_marker(seeded: World) -> None:
    """Anyone may open a PR whose body ends in a patch's marker; only a head in the stack's repository counts."""
    w = seeded
    stack = store.load(str(w.patches), "s")
    stranger = GitRepo.init(w.tmp / "stranger.git", bare=True)
    w.fork.git("push", "-q", str(stranger.path), f"{w.a}:refs/heads/mine")
    w.forge.add_repo("stranger/proj", str(stranger.path), fork_of=SLUG)
    from github import Auth, Github

    gh = Github(auth=Auth.Token(TOKEN), base_url=w.forge.url)
    gh.get_repo(SLUG).create_pull(
        title="hijack",
        body=f"mine now\n{pr_marker(stack.patches[1].provenance.stack_patch_id)}\n",
        base="main",
        head="stranger:mine",
    )
    run = w.run_json()
    assert w.pull("hijack")["body"].startswith("mine now")  # not edited
    assert [p["title"][:6] for p in w.pulls()] == ["hijack", "fix(a)", "fix(b)"]
    assert run.outcomes[1].pr.head == "gg/s/02-fix-a-preallocate-the-a-buffers"


def test_raw_html_from_commit_messages_is_text_in_pr_bodies(world: World) -> None:
    w = world
    w.fork.git("checkout", "-q", "-b", "hostile", "main")
    a = w.fork.commit(f"fix(a): <b>bold</b> </details> claim\n\n{HOSTILE}", {"a.txt": _text("a", 3)})
    b = w.fork.commit("fix(b): retain b\n\nThe b part.", {"b.txt": _text("b", 5)})
    w.fork.git("checkout", "-q", "main")
    w.stack("s", [a, b], dropped=["the <!-- half of it (x.txt)"], only=["a.txt", "b.txt"])
    w.ok()
    for pull in w.pulls():
        body = pull["body"]
        html = _html_of(body)
        assert set(html) - OURS == {body.rstrip().splitlines()[-1]}, html  # only ggstack's own marker line
        assert PR_GATE in body  # not swallowed by an unclosed comment or fence
    body_a = w.pull("fix(a)")["body"]
    from markdown_it import MarkdownIt

    shown = MarkdownIt("commonmark").render(body_a)
    assert "<code>&lt;kept in code&gt;</code>" in shown and "<!-- in a fence: shown as it is -->" not in shown
    assert "&lt;!-- in a fence: shown as it is --&gt;" in shown  # as code
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "&lt;img src=x" in shown
    assert "fix(a): &lt;b&gt;bold" in MarkdownIt("commonmark").render(w.pull("fix(b)")["body"])


def test_credentials_in_the_api_url_are_never_printed(seeded: World) -> None:
    w = seeded
    secret = "Pa55w0rdInTheUrl"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = w.gg(env=w.env(GITHUB_API_URL=f"http://x:{secret}@127.0.0.1:{port}", GGSTACK_RETRY_ATTEMPTS="2"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"http://127.0.0.1:{port}" in proc.stderr
    assert secret not in proc.stdout + proc.stderr and "x:" not in proc.stderr
    # A forge that is there, reached through a URL with credentials: they are not in the Run either.
    proc = w.ok("--json", env=w.env(GITHUB_API_URL=w.forge.url.replace("http://", f"http://x:{secret}@")))
    assert secret not in proc.stdout + proc.stderr
    assert [p["title"][:6] for p in w.pulls()] == ["fix(a)", "fix(b)"]


# -- previews, bases and refusals ---------------------------------------------------------------


def test_dry_run_without_a_token_plans_offline_says_so_and_exits_by_the_verdicts(world: World) -> None:
    w = world
    w.fork.git("checkout", "-q", "feature")
    partial = w.fork.commit(
        "fix(d): two changes, one of them landed", {"d.txt": _text("d", 2).replace("d line 9", "d line 9 too")}
    )
    w.fork.git("checkout", "-q", "main")
    w.stack("s", [w.a, partial])
    w.fork.commit("base: half of d", {"d.txt": _text("d", 2)})
    env = {k: v for k, v in w.env().items() if k != "GITHUB_TOKEN"}
    proc = w.gg("--dry-run", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the partial patch needs a human
    assert [line for line in proc.stderr.splitlines() if "offline" in line] == [
        f"ggstack: no GITHUB_TOKEN or GH_TOKEN: {pr_stage.OFFLINE}"
    ]
    assert "open PR 1 of 2" in proc.stdout and "PR body" in proc.stdout and PR_GATE in proc.stdout
    assert w.forge.requests == []  # nothing was asked of the forge
    assert w.gg(env=env).returncode == 2  # a real run still needs the token


def test_prs_go_onto_the_branch_the_stack_was_replayed_onto(world: World) -> None:
    w = world
    w.fork.git("branch", "dev/before", "main")
    w.fork.git("push", "-q", "origin", "dev/before")
    w.fork.commit("main moves on", {"x.txt": _text("x", 9)})  # target.base (main) is another base now
    w.stack("s", [w.a, w.b])
    run = w.run_json("--json", onto="dev/before")
    p1, p2 = w.pulls()
    assert p1["base"]["ref"] == "dev/before" and p2["base"]["ref"] == p1["head"]["ref"]
    assert "Replayed onto `dev/before`" in p1["body"] and "onto `dev/before`" in p2["body"]
    assert run.outcomes[0].pr.base == "dev/before"
    # onto the remote-tracking name of the same branch: the same PRs, nothing to change
    w.fork.git("fetch", "-q", "origin")
    w.forge.reset_counts()
    w.ok(onto="origin/dev/before")
    assert w.forge.write_calls() == 0


def test_a_base_that_is_no_branch_is_refused_naming_both(seeded: World) -> None:
    w = seeded
    sha = w.fork.sha("main~1")  # main's own tip would be main (CI shards pin the base by its sha)
    proc = w.gg(onto=sha)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert sha in proc.stderr and "'main'" in proc.stderr and "--onto" in proc.stderr
    assert w.forge.requests == [] and w.remote_heads() == {}


def test_a_base_branch_missing_on_the_forge_is_refused_before_anything_is_pushed(seeded: World) -> None:
    w = seeded
    w.fork.git("branch", "topic", "main")  # here, never pushed
    proc = w.gg(onto="topic")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the PR base 'topic' is not a branch of upstream/proj" in proc.stderr and "push it" in proc.stderr
    assert w.remote_heads() == {} and w.forge.write_calls() == 0


def test_a_head_repository_the_forge_does_not_have_is_refused_before_anything_is_pushed(
    tmp_path: Path, forge: FakeGitHub
) -> None:
    w = World(tmp_path, forge)
    fork_bare = GitRepo.init(tmp_path / "forker.git", bare=True)
    w.fork.git("remote", "add", "mine", str(fork_bare.path))
    w.stack("s", [w.a], config={'# fork = "me/name"': 'fork = "forker/nope"', 'remote = "origin"': 'remote = "mine"'})
    proc = w.gg()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "target.fork 'forker/nope' is not on the forge" in proc.stderr
    assert fork_bare.git("for-each-ref") == "" and w.forge.write_calls() == 0


def test_a_forge_refusal_names_the_field_and_what_to_do(seeded: World) -> None:
    w = seeded
    w.forge.inject(
        "POST",
        r"/pulls$",
        status=422,
        body={
            "message": "Validation Failed",
            "errors": [{"resource": "PullRequest", "field": "base", "code": "invalid"}],
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        },
    )
    proc = w.gg()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "422 Validation Failed: base: invalid" in proc.stderr
    assert "not a branch of the target repository" in proc.stderr and "--onto" in proc.stderr


def test_a_pr_of_another_stack_with_the_same_stack_patch_id_is_refused_and_nothing_is_pushed(world: World) -> None:
    """The probe (P-q): stack t holding s's Stack-Patch-Ids took over s's PR and force-pushed its branch."""
    w = world
    w.stack("s", [w.a, w.b])
    w.ok()
    before, body = w.remote_heads(), w.pull("fix(a)")["body"]
    shutil.copytree(w.patches / "s", w.patches / "t")  # same ids, as a git am of s's files imported used to give
    w.forge.reset_counts()

    proc = w.gg(stack="t")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    pa = w.pull("fix(a)")
    said = " ".join(proc.stderr.split())
    assert f"PR #{pa['number']}" in said and "gg/s/01-fix-a-preallocate-the-a-buffers" in said, said
    assert "is not one of stack 't''s" in said and "Traceback" not in proc.stderr
    assert w.forge.write_calls() == 0, w.forge.requests
    assert w.remote_heads() == before
    assert pa["body"] == body


@pytest.mark.parametrize(
    "verb,path,raw",
    [
        ("GET", r"/repos/[^/]+/[^/]+$", b"{not json"),
        ("GET", r"/pulls$", b"<html>502 Bad Gateway</html>"),
        ("POST", r"/pulls$", b'{"number": '),
        ("GET", r"/pulls$", b'"a string"'),
        ("GET", r"/pulls$", b"[1, 2]"),
    ],
    ids=["repo-truncated", "pulls-html", "create-truncated", "pulls-a-string", "pulls-not-objects"],
)
def test_a_forge_answering_malformed_json_is_exit_3_without_a_traceback(
    seeded: World, verb: str, path: str, raw: bytes
) -> None:
    w = seeded
    w.forge.inject(verb, path, status=200, raw=raw, times=10)
    proc = w.gg()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "forge" in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr


@pytest.mark.parametrize("header", ["soon", ""])
def test_an_unreadable_retry_after_waits_the_back_off_not_a_traceback(header: str) -> None:
    from github import GithubException

    from ggstack.forge.github_calls import RetryingClient

    client = RetryingClient("o/r", "GITHUB_TOKEN", "https://api.github.com", {"GGSTACK_RETRY_BASE_SECONDS": "0.5"})
    e = GithubException(429, {"message": "slow down"}, {"Retry-After": header})
    wait, why = client._wait_after(e, "list open PRs", 1, None)
    assert wait == 1.0
    assert why == f"429 Retry-After {header!r} (unreadable)"
