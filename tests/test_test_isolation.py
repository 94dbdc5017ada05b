"""A patch's tests are the patch's code: what they can reach of ggstack and of the user.

Real ggstack processes, real pytest runs in the test trees, and a test file
that goes looking: through every /proc/<pid>/environ and cmdline it can read
(ggstack's own process among its ancestors) for the forge token.
"""

from __future__ import annotations

import json
import secrets as random_secrets
from pathlib import Path

import test_testrun as tr

PROBE = """import json
import os


def _parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_the_token_is_nowhere_to_be_read():
    token = os.environ["GGSTACK_PROBE_REVERSED"][::-1].encode()
    found, read, ancestors, pid = [], 0, [], os.getpid()
    while pid > 1:
        ancestors.append(pid)
        pid = _parent(pid)
    for entry in os.listdir("/proc"):
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{entry}/{what}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            read += 1
            if token in data:
                found.append(f"{entry}/{what}")
    with open(os.environ["GGSTACK_PROBE_OUT"], "a") as f:
        f.write(json.dumps({"found": found, "read": read, "ancestors": ancestors}) + "\\n")
    assert not found
"""


def test_the_forge_token_is_not_readable_by_a_patchs_tests_not_even_through_proc(tmp_path: Path) -> None:
    world = tr.World(tmp_path)
    token = "ghp_" + random_secrets.token_hex(16)  # unique: other processes on this machine may hold another
    out = tmp_path / "probe.jsonl"
    probe = world.on(world.old, "a test that looks for the token", {"tests/test_probe.py": PROBE})
    env = {"GGSTACK_PROBE_REVERSED": token[::-1], "GGSTACK_PROBE_OUT": str(out)}
    world.stack("probe", [probe], cpu="{python} -m pytest -q -p no:cacheprovider {tests}", env=env)

    def gg(*args: str) -> None:
        proc = tr.run_ggstack(
            "--repo",
            str(world.fork.path),
            "--patches",
            str(world.patches),
            *args,
            cwd=tmp_path,
            env={
                "GITHUB_TOKEN": token,
                "GH_TOKEN": token,
                "GITHUB_API_URL": "http://127.0.0.1:9/api/v3",  # nothing listens: sync's pr stage fails
                "GGSTACK_RETRY_ATTEMPTS": "1",
                "GGSTACK_RETRY_BUDGET_SECONDS": "1",
            },
        )
        assert token not in proc.stdout + proc.stderr

    gg("test", "probe", "--onto", "base-needed")
    by_test = len(out.read_text().splitlines())
    assert by_test >= 2  # the old base + tests, the base + tests (here the same tree as base + patch)
    gg("sync", "probe", "--onto", "base-needed", "--dry-run", "--no-cache")
    probes = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(probes) > by_test  # sync's test stage ran the probe again
    for p in probes:
        assert p["found"] == []
        assert p["read"] > 10 and len(p["ancestors"]) >= 3  # pytest, the shell, ggstack, …


MEDDLER = """import os
import subprocess


def test_meddles_with_git_and_leaves_a_process_behind():
    def git(*args):
        subprocess.run(["git", *args], check=True, capture_output=True)

    with open("README", "a") as f:
        f.write("changed by the test\\n")
    git("stash")
    git("config", "user.name", "Changed By A Test")
    git("config", "--global", "user.name", "Changed By A Test Globally")
    git("-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "--allow-empty", "-qm", "from a test")
    git("tag", "from-a-test")
    git("branch", "from-a-test")
    git("update-ref", "refs/heads/main", "HEAD")
    leftover = subprocess.Popen(["setsid", "sleep", "302"], start_new_session=True)
    with open(os.environ["GGSTACK_PROBE_OUT"], "a") as f:
        f.write(f"{leftover.pid}\\n")
"""


def _git_state(world: tr.World) -> dict[str, str]:
    g = world.fork
    return {
        "refs": g.git("for-each-ref", "--format=%(refname) %(objectname)"),
        "stash": g.git("stash", "list"),
        "config": (world.fork.path / ".git" / "config").read_text(),
        "status": g.git("status", "--porcelain"),
        "head": g.git("rev-parse", "HEAD"),
    }


def test_what_a_test_does_with_git_stays_in_its_own_checkout_and_what_it_leaves_running_is_killed(
    tmp_path: Path,
) -> None:
    world = tr.World(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = The User\n\temail = user@example.com\n")
    pids = tmp_path / "pids"
    meddler = world.on(world.old, "a test that meddles", {"tests/test_meddle.py": MEDDLER})
    world.stack(
        "m", [meddler], cpu="{python} -m pytest -q -p no:cacheprovider {tests}", env={"GGSTACK_PROBE_OUT": str(pids)}
    )
    before, global_before = _git_state(world), (home / ".gitconfig").read_text()

    proc = tr.run_ggstack(
        "--repo",
        str(world.fork.path),
        "--patches",
        str(world.patches),
        "test",
        "m",
        "--onto",
        "base-needed",
        "--json",
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    patch = json.loads(proc.stdout)["patches"][0]
    assert {r["status"] for r in patch["tests"]} == {"passed"}  # git worked there, on its own repository
    assert _git_state(world) == before
    assert (home / ".gitconfig").read_text() == global_before

    left = [int(p) for p in pids.read_text().split()]
    assert left and tr.wait_dead(left) == []  # setsid put it outside the process group: swept all the same
    assert all(r["left_processes"] for r in patch["tests"] if not r["cached"])
    (ev,) = [e for e in patch["evidence"] if e["kind"] == "tests"]
    assert "left processes behind (killed)" in ev["detail"] and "sleep 302" in ev["detail"]
