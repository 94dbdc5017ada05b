"""``ggstack land``: an approved stack merged bottom-up, each PR checked again at the last moment.

The world is test_pr's: a fork whose remote is a bare repository, the local
GitHub-compatible server reading that same repository (merges are real git
commits there), and ggstack run as a subprocess driving PyGithub over HTTP.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import test_pr
from gitrepo import run_ggstack
from test_pr import SLUG, TOKEN, World

from ggstack import land as land_stage
from ggstack.forge import MergeFacts, Review
from ggstack.model import LandPolicy
from ggstack.readiness import READY, readiness
from ggstack.series import store

world = test_pr.world  # test_pr's world exactly (the forge fixture is conftest's): one copy to keep


def land(w: World, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = run_ggstack(
        "--repo", str(w.fork.path), "--patches", str(w.patches), "land", "s", *args, cwd=w.tmp, env=env or w.env()
    )
    assert TOKEN not in proc.stdout + proc.stderr
    return proc


def landed(w: World, *args: str, code: int = 0, **kw) -> subprocess.CompletedProcess[str]:
    proc = land(w, *args, **kw)
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc


def opened(w: World, commits: list[str], *, config: dict[str, str] | None = None) -> list[dict]:
    """Stack ``s`` of ``commits``, its PRs opened by ``ggstack pr`` (gated: draft and labelled)."""
    w.stack("s", commits, config=config)
    w.ok()
    return w.pulls()


def approve_all(w: World) -> None:
    for p in w.pulls():
        w.forge.approve(SLUG, p["number"])


def main_subjects(w: World) -> list[str]:
    return w.upstream.git("log", "--format=%s", "main").splitlines()


# -- the classic path ----------------------------------------------------------------------------


def test_an_approved_three_pr_stack_lands_bottom_up_each_merged_once(world: World) -> None:
    w = world
    pa, pb, pc = opened(w, [w.a, w.b, w.c])
    approve_all(w)
    proc = landed(w)
    merged = {p["number"]: p for p in w.pulls(None)}
    assert all(merged[p["number"]]["merged"] for p in (pa, pb, pc)), proc.stdout
    # Bottom-up, one merge each, every PR onto main by then (land retargeted #2 and #3), its gate lifted.
    assert main_subjects(w)[:3] == [
        f"Merge pull request #{p['number']} from upstream/{p['head']['ref']}" for p in (pc, pb, pa)
    ]
    assert len(w.forge.merge_calls()) == 3
    assert all(merged[p["number"]]["base"]["ref"] == "main" for p in (pa, pb, pc))
    assert not any(merged[p["number"]]["draft"] or merged[p["number"]]["labels"] for p in (pa, pb, pc))
    for name in ("a.txt", "b.txt", "c.txt"):
        assert "changed" in w.upstream.git("show", f"main:{name}")
    # A rerun finds nothing to do and writes nothing.
    w.forge.reset_counts()
    assert "nothing left to land" in landed(w).stdout
    assert w.forge.write_calls() == 0


def test_a_patch_the_base_took_meanwhile_is_closed_with_the_evidence_not_merged(world: World) -> None:
    w = world
    pa, pb, pc = opened(w, [w.a, w.b, w.c])
    approve_all(w)

    def base_takes_b(line: str) -> None:
        """Right after #1 merged, someone lands b's change on main: only a check at that moment sees it."""
        if f"merge #{pa['number']}" in line:
            w.fork.git("fetch", "-q", "origin", "main")
            w.fork.git("checkout", "-q", "-B", "main", "origin/main")
            w.land(w.b)

    result = land_stage.land(w.repo, store.load(str(w.patches), "s"), env=w.env(), say=base_takes_b)
    states = {p["number"]: p for p in w.pulls(None)}
    assert states[pa["number"]]["merged"] and states[pc["number"]]["merged"]
    assert states[pb["number"]]["state"] == "closed" and not states[pb["number"]]["merged"]
    assert result.merged == [pa["number"], pc["number"]] and result.closed == [pb["number"]]
    (comment,) = w.forge.comments(SLUG, pb["number"])
    assert "Closing as already represented in the current `main` base" in comment["body"]
    assert w.fork.sha("main")[:10] in comment["body"]  # the commit that brought it
    assert len(w.forge.merge_calls()) == 2


def test_landing_stops_at_the_first_unapproved_pr_saying_why(world: World) -> None:
    w = world
    pa, pb, pc = opened(w, [w.a, w.b, w.c])
    w.forge.approve(SLUG, pa["number"])
    w.forge.approve(SLUG, pc["number"])
    w.forge.approve(SLUG, pb["number"], user="reader")  # no write access: it does not count
    w.forge.set_permission(SLUG, "reader", "read")
    proc = landed(w, code=1)
    assert proc.stdout.rstrip().endswith("stopped at 0002: waiting for approval")
    merged = [p["number"] for p in w.pulls(None) if p["merged"]]
    assert merged == [pa["number"]]
    # stack.toml may name who approves: then the reader's approval counts.
    toml = w.patches / "s" / "stack.toml"
    toml.write_text(toml.read_text().replace("approvers = []", 'approvers = ["reader", "maintainer"]'))
    landed(w)
    assert all(p["merged"] for p in w.pulls(None))


def test_an_approval_of_an_older_push_does_not_count(world: World) -> None:
    w = world
    (pa,) = opened(w, [w.a])
    w.forge.approve(SLUG, pa["number"])
    # The patch is reworded and `pr` pushes it: the approval was of the commit before.
    (patch,) = (w.patches / "s").glob("0001-*.patch")
    patch.write_text(patch.read_text().replace("Keep the a buffers alive", "Keep the a buffers alive, reworded"))
    w.ok()
    assert w.pulls()[0]["head"]["sha"] != pa["head"]["sha"]
    proc = landed(w, code=1)
    assert "0001: waiting for approval (the approval by @maintainer is of an older push)" in proc.stdout
    w.forge.approve(SLUG, pa["number"])
    landed(w)


def test_landing_stops_at_a_failing_required_check(world: World) -> None:
    w = world
    pa, pb, pc = opened(w, [w.a, w.b, w.c])
    approve_all(w)
    w.forge.protect(SLUG, "main", checks=("gpu-tests",))
    w.forge.set_check(SLUG, pa["head"]["sha"], "gpu-tests", "success")
    w.forge.set_check(SLUG, pb["head"]["sha"], "gpu-tests", "failure")
    w.forge.set_check(SLUG, pc["head"]["sha"], "gpu-tests", "success")
    proc = landed(w, code=1)
    assert proc.stdout.rstrip().endswith("stopped at 0002: check `gpu-tests` failing")
    assert [p["number"] for p in w.pulls(None) if p["merged"]] == [pa["number"]]
    # Re-run, the check green now (a rerun of the job): the rest lands.
    w.forge.set_check(SLUG, pb["head"]["sha"], "gpu-tests", "success")
    landed(w)
    assert all(p["merged"] for p in w.pulls(None))


def test_dry_run_shows_the_plan_and_the_readiness_and_writes_nothing(world: World) -> None:
    w = world
    pa, _ = opened(w, [w.a, w.b], config={"checks = []": 'checks = ["lint"]'})
    approve_all(w)
    w.forge.set_check(SLUG, pa["head"]["sha"], "lint", "success")
    w.forge.reset_counts()
    proc = landed(w, "--dry-run", code=1)
    assert w.forge.write_calls() == 0 and w.forge.merge_calls() == []
    out = proc.stdout
    assert "plan only (dry run)" in out and f"would merge #{pa['number']} into main (merge)" in out
    assert out.rstrip().endswith("stopped at 0002: waiting for check `lint`")
    plan = json.loads(landed(w, "--dry-run", "--json", code=1).stdout)
    first = plan["plan"][0]
    assert first["action"] == "land" and first["readiness"]["checks"] == [["lint", "success"]]
    assert first["readiness"]["approval"] == "approved by @maintainer" and first["readiness"]["mergeable"] == "draft"
    assert plan["stopped"] == "0002: waiting for check `lint`" and w.forge.write_calls() == 0


@pytest.mark.slow
def test_killed_at_every_write_a_rerun_lands_the_rest_and_merges_nothing_twice(world: World) -> None:
    w = world
    opened(w, [w.a, w.b, w.c])
    approve_all(w)
    kills = 0
    while (proc := land(w, env=w.env(GGSTACK_DEBUG_KILL_AFTER_WRITES="1"))).returncode != 0:
        assert proc.returncode == -9, proc.stdout + proc.stderr
        kills += 1
        assert kills < 40, "never finished"
    assert kills >= 9  # per PR: ready, unlabel, (retarget,) merge — each a place to die
    assert len(w.forge.merge_calls()) == 3 and all(p["merged"] for p in w.pulls(None))
    assert sum(s.startswith("Merge pull request") for s in main_subjects(w)) == 3


@pytest.mark.parametrize(
    "fault",
    [
        ("inject", "PUT", r"/pulls/\d+/merge$", {"status": 502, "times": 2}),
        ("inject", "GET", r"/pulls/\d+$", {"status": 503, "times": 3}),
        ("inject_retry_after", "PUT", r"/pulls/\d+/merge$", {"seconds": 1, "status": 403, "times": 2}),
        ("inject_retry_after", "PATCH", r"/pulls/\d+$", {"seconds": 1}),
    ],
    ids=["merge-502", "read-503", "merge-secondary-rate-limit", "retarget-429"],
)
@pytest.mark.slow
def test_a_forge_failure_mid_landing_is_retried_and_each_pr_merged_once(world: World, fault) -> None:
    w = world
    opened(w, [w.a, w.b, w.c])
    approve_all(w)
    method, *args, kw = fault
    getattr(w.forge, method)(*args, **kw)
    landed(w)
    assert all(p["merged"] for p in w.pulls(None))
    assert sum(s.startswith("Merge pull request") for s in main_subjects(w)) == 3


def test_a_merge_whose_answer_was_lost_is_looked_up_not_sent_again(world: World) -> None:
    w = world
    opened(w, [w.a, w.b])
    approve_all(w)
    w.forge.inject("PUT", r"/pulls/\d+/merge$", status=0, delay=2.5)  # merged, but after the client gave up
    landed(w, env=w.env(GGSTACK_FORGE_TIMEOUT="1", GGSTACK_RETRY_BASE_SECONDS="2"))
    assert len(w.forge.merge_calls()) == 2 and all(p["merged"] for p in w.pulls(None))


def test_a_lasting_forge_failure_is_exit_3_and_a_rerun_finishes(world: World) -> None:
    w = world
    opened(w, [w.a, w.b])
    approve_all(w)
    w.forge.inject("PUT", r"/pulls/\d+/merge$", status=502, times=5)
    proc = land(w)
    assert proc.returncode == 3 and "still fails after 5 tries" in proc.stderr
    landed(w)
    assert all(p["merged"] for p in w.pulls(None))


def test_a_refused_merge_is_reported_in_github_words(world: World) -> None:
    w = world
    opened(w, [w.a])
    approve_all(w)
    w.forge.protect(SLUG, "main", approvals=2)  # a rule land does not know of: GitHub says no at the merge
    proc = landed(w, code=1)
    assert "GitHub refused to merge #1: At least 2 approving reviews are required" in proc.stdout
    assert not any(p["merged"] for p in w.pulls(None))


def test_after_landing_check_says_represented_by_the_merge_commit(world: World) -> None:
    w = world
    opened(w, [w.a, w.b], config={'method = ""': 'method = "squash"'})
    approve_all(w)
    landed(w)
    squashes = {p["title"]: p["merge_commit_sha"] for p in w.pulls(None)}
    w.fork.git("fetch", "-q", "origin")
    proc = run_ggstack(
        "--repo",
        str(w.fork.path),
        "--patches",
        str(w.patches),
        "check",
        "s",
        "--onto",
        "origin/main",
        "--json",
        cwd=w.tmp,
    )
    run = json.loads(proc.stdout)
    for o in run["patches"]:
        assert o["verdict"] == "represented", o
        assert squashes[o["subject"]] in o["represented_by"]
    assert main_subjects(w)[:2] == [
        f"{t} (#{n})" for t, n in (("fix(b): retain b on prewarm", 2), ("fix(a): preallocate the a buffers", 1))
    ]


# -- GitHub's native stacked pull requests --------------------------------------------------------


def gg(w: World, *args: str) -> subprocess.CompletedProcess[str]:
    proc = run_ggstack("--repo", str(w.fork.path), "--patches", str(w.patches), *args, cwd=w.tmp, env=w.env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def stacked(w: World) -> list[list[int]]:
    """The repository's native stacks, each its PRs bottom first."""
    return [[p["number"] for p in st["pull_requests"]] for st in w.forge.stacks(SLUG)]


def test_pr_keeps_the_prs_as_one_native_stack_made_extended_and_remade(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    pa, pb = opened(w, [w.a, w.b])
    assert stacked(w) == [[pa["number"], pb["number"]]]
    assert w.pull("fix(b)")["stack"]["position"] == 2 and w.pull("fix(b)")["stack"]["base"]["ref"] == "main"
    # A patch added on top: the stack is extended, not made again.
    gg(w, "import", "s", w.c)
    w.ok()
    pc = w.pull("fix(c)")
    assert stacked(w) == [[pa["number"], pb["number"], pc["number"]]]
    assert ("POST", f"/repos/{SLUG}/stacks/1/add") in w.forge.requests
    w.forge.reset_counts()
    w.ok()
    assert w.forge.write_calls() == 0
    # Reordered: the old stack is dissolved, the bases change, the new order is stacked.
    gg(w, "move", "s", "3", "--to", "1")
    w.ok()
    assert stacked(w) == [[pc["number"], pa["number"], pb["number"]]]
    assert w.pull("fix(c)")["base"]["ref"] == "main" and w.pull("fix(a)")["base"]["ref"] == pc["head"]["ref"]
    assert ("POST", f"/repos/{SLUG}/stacks/1/unstack") in w.forge.requests
    assert [st["number"] for st in w.forge.stacks(SLUG)] == [2]


def test_land_merges_a_native_stack_at_once_and_follows_the_asynchronous_result(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    w.forge.configure(SLUG, allow_merge_commit=False)  # the method: what the repository allows
    w.forge.merge_async_polls = 2  # pending for two polls before it runs
    opened(w, [w.a, w.b, w.c])
    approve_all(w)
    proc = landed(w, env=w.env(GGSTACK_MERGE_POLL_SECONDS="0.05"))
    assert "through the native stack" in proc.stdout
    assert all(p["merged"] for p in w.pulls(None))
    assert w.forge.merge_calls() == [("PUT", f"/repos/{SLUG}/pulls/3/merge-async")]
    assert "(squash, through the native stack)" in proc.stdout
    assert main_subjects(w)[:3] == [f"{p['title']} (#{p['number']})" for p in reversed(w.pulls(None))]
    polls = [p for m, p in w.forge.requests if m == "GET" and "/merge-async/" in p]
    assert len(polls) == 3  # pending, pending, merged
    assert ("PUT", f"/repos/{SLUG}/pulls/1/merge") not in w.forge.requests  # never the legacy merge
    for name in ("a.txt", "b.txt", "c.txt"):
        assert "changed" in w.upstream.git("show", f"main:{name}")
    assert "nothing left to land" in landed(w).stdout


def test_a_native_stack_merge_refused_by_branch_protection_is_reported_and_nothing_lands(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    opened(w, [w.a, w.b])
    approve_all(w)
    w.forge.protect(SLUG, "main", approvals=2, ruleset=True)  # evaluated only when the merge runs
    before = w.upstream.git("rev-parse", "main")
    proc = landed(w, code=1, env=w.env(GGSTACK_MERGE_POLL_SECONDS="0.05"))
    assert "stopped at 0002: GitHub refused to merge stack 1 up to #2: Repository rule violations found" in proc.stdout
    assert "At least 2 approving reviews are required" in proc.stdout
    assert not any(p["merged"] for p in w.pulls(None)) and w.upstream.git("rev-parse", "main") == before


@pytest.mark.slow
def test_a_pr_the_base_took_inside_a_native_stack_unstacks_it_and_the_rest_lands_classically(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    pa, pb, pc = opened(w, [w.a, w.b, w.c])
    approve_all(w)
    w.land(w.b)
    landed(w)
    states = {p["number"]: p for p in w.pulls(None)}
    assert states[pa["number"]]["merged"] and states[pc["number"]]["merged"]
    assert states[pb["number"]]["state"] == "closed" and not states[pb["number"]]["merged"]
    # #1 merged through the stack (which keeps it: unstacking leaves merged PRs), #3 on its own after.
    assert stacked(w) == [[pa["number"]]]
    assert w.forge.merge_calls() == [
        ("PUT", f"/repos/{SLUG}/pulls/{pa['number']}/merge-async"),
        ("PUT", f"/repos/{SLUG}/pulls/{pc['number']}/merge"),
    ]


def test_native_stacks_off_in_stack_toml_keeps_the_classic_path(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    opened(w, [w.a, w.b], config={'native_stacks = "auto"': 'native_stacks = "off"'})
    assert stacked(w) == []
    approve_all(w)
    landed(w)
    assert len(w.forge.merge_calls()) == 2 and all(p["merged"] for p in w.pulls(None))
    assert not any("/stacks" in p for _, p in w.forge.requests)


# -- the merge-readiness view ----------------------------------------------------------------------


def test_pr_dry_run_and_report_show_each_prs_merge_readiness(world: World) -> None:
    w = world
    pa, _, pc = opened(w, [w.a, w.b, w.c])
    w.forge.approve(SLUG, pa["number"])
    w.forge.approve(SLUG, pc["number"])
    w.forge.protect(SLUG, "main", checks=("gpu-tests",))
    w.forge.set_check(SLUG, pa["head"]["sha"], "gpu-tests", "success")
    w.forge.set_check(SLUG, pc["head"]["sha"], "gpu-tests", "failure")
    shown = w.ok("--dry-run").stdout
    assert "next: ready to land" in shown and "next: waiting for approval" in shown
    assert "next: check `gpu-tests` failing" in shown and "gpu-tests: failure" in shown
    run = w.run_json("--dry-run")
    states = [o.pr for o in run.outcomes]
    assert [s.next_action for s in states if s] == [
        "ready to land",
        "waiting for approval",
        "check `gpu-tests` failing",
    ]
    assert (
        states[0] and states[0].checks == [("gpu-tests", "success")] and states[0].approval == "approved by @maintainer"
    )
    assert states[1] and states[1].checks == [("gpu-tests", "expected")] and states[1].mergeable == "draft"
    saved = w.tmp / "run.json"
    saved.write_text(w.ok("--dry-run", "--json").stdout)
    table = run_ggstack("report", str(saved), cwd=w.tmp).stdout
    assert "ready to land" in table and "waiting for approval" in table
    markdown = run_ggstack("report", str(saved), "--format", "markdown", cwd=w.tmp).stdout
    assert "checks: gpu-tests failure; GitHub: draft; next: check `gpu-tests` failing" in markdown


def test_a_stack_merge_still_pending_is_exit_3_and_a_rerun_follows_the_same_request(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    w.forge.merge_async_polls = 10**6  # GitHub takes its time
    opened(w, [w.a, w.b])
    approve_all(w)
    slow = w.env(GGSTACK_MERGE_POLL_SECONDS="0.05", GGSTACK_MERGE_WAIT_SECONDS="0.3")
    proc = land(w, env=slow)
    assert proc.returncode == 3 and "still pending after 0.3 s" in proc.stderr
    assert "rerun `ggstack land` to follow it" in proc.stderr
    (request,) = w.forge.merge_requests.values()
    request.polls = 0  # it runs at the next poll
    landed(w, env=slow)
    assert all(p["merged"] for p in w.pulls(None)) and len(w.forge.merge_requests) == 1
    assert w.forge.merge_calls() == [("PUT", f"/repos/{SLUG}/pulls/2/merge-async")] * 2  # the second answered 409


@pytest.mark.slow
def test_killed_at_every_write_a_native_stack_lands_once(world: World) -> None:
    w = world
    w.forge.enable_stacks(SLUG)
    opened(w, [w.a, w.b, w.c])
    approve_all(w)
    kills = 0
    env = w.env(GGSTACK_DEBUG_KILL_AFTER_WRITES="1", GGSTACK_MERGE_POLL_SECONDS="0.05")
    while (proc := land(w, env=env)).returncode != 0:
        assert proc.returncode == -9, proc.stdout + proc.stderr
        kills += 1
        assert kills < 30, "never finished"
    assert kills >= 6 and all(p["merged"] for p in w.pulls(None)) and len(w.forge.merge_requests) == 1


def test_land_without_a_token_is_exit_2_naming_the_variables(world: World) -> None:
    w = world
    w.stack("s", [w.a])
    env = {k: v for k, v in w.env().items() if k != "GITHUB_TOKEN"}
    proc = land(w, "--dry-run", env=env)
    assert proc.returncode == 2 and "GITHUB_TOKEN" in proc.stderr and "GH_TOKEN" in proc.stderr
    assert w.forge.requests == []


# -- readiness, pure -------------------------------------------------------------------------------


def facts(**kw) -> MergeFacts:
    base = {
        "head_sha": "h2",
        "base_ref": "main",
        "state": "open",
        "merged": False,
        "draft": False,
        "labels": [],
        "mergeable": True,
        "mergeable_state": "clean",
        "reviews": [],
        "checks": {},
    }
    return MergeFacts(**{**base, **kw})


WRITERS = {"ann": "write", "bob": "admin", "eve": "read"}


@pytest.mark.parametrize(
    ("reviews", "checks", "mergeable", "next_action"),
    [
        ([], {}, True, "waiting for approval"),
        ([Review("eve", "APPROVED", "h2")], {}, True, "waiting for approval"),  # no write access
        (
            [Review("ann", "APPROVED", "h1")],
            {},
            True,
            "waiting for approval (the approval by @ann is of an older push)",
        ),
        (
            [Review("ann", "APPROVED", "h2"), Review("bob", "CHANGES_REQUESTED", "h2")],
            {},
            True,
            "changes requested by @bob",
        ),
        ([Review("bob", "CHANGES_REQUESTED", "h1"), Review("bob", "APPROVED", "h2")], {"ci": "success"}, True, READY),
        ([Review("ann", "APPROVED", "h2")], {"ci": "failure"}, True, "check `ci` failing"),
        ([Review("ann", "APPROVED", "h2")], {"ci": "pending"}, True, "waiting for check `ci`"),
        ([Review("ann", "APPROVED", "h2")], {}, True, "waiting for check `ci`"),  # required, not reported yet
        (
            [Review("ann", "APPROVED", "h2")],
            {"ci": "success"},
            None,
            "GitHub has not computed yet whether it can merge; rerun in a moment",
        ),
        (
            [Review("ann", "APPROVED", "h2")],
            {"ci": "success"},
            False,
            "conflicts with main: rerun `ggstack pr` (or resolve the patch)",
        ),
    ],
)
def test_readiness_decides_as_the_policy_says(reviews, checks, mergeable, next_action) -> None:
    got = readiness(facts(reviews=reviews, checks=checks, mergeable=mergeable), LandPolicy(), WRITERS, ["ci"], "main")
    assert got.next_action == next_action


def test_readiness_with_named_approvers_and_extra_checks() -> None:
    policy = LandPolicy(approvers=("@Eve",), checks=("gpu-tests",))
    got = readiness(
        facts(reviews=[Review("eve", "APPROVED", "h2")], checks={"gpu-tests": "success"}), policy, WRITERS, [], "main"
    )
    assert (got.approval, got.checks, got.next_action) == ("approved by @eve", [("gpu-tests", "success")], READY)
    got = readiness(facts(reviews=[Review("ann", "APPROVED", "h2")]), policy, WRITERS, [], "main")
    assert got.next_action == "waiting for approval"  # ann may write, but stack.toml names eve
    unknown = readiness(
        facts(reviews=[Review("zed", "APPROVED", "h2", "MEMBER")]), LandPolicy(), {"zed": "unknown"}, [], "main"
    )
    assert unknown.next_action == READY  # the token may not read permissions: a member's approval counts
