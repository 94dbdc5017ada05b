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
