"""Changes to a stack survive kills and concurrency: all-old or all-new, no lost update.

Every command that changes ``patches/<stack>/`` is killed (SIGKILL, through
``GGSTACK_DEBUG_KILL_AFTER_FILE_OPS``) after each of its file operations in
turn; after each kill the stack must load and be byte-identical to the state
before or the state after, and the next command must go on from there.
Concurrent edits run as real processes at once.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.series import store

SLUG = "owner/repo"
KILL = "GGSTACK_DEBUG_KILL_AFTER_FILE_OPS"


class Fork:
    """A fork with a stack ``s`` of three commits that all say "fix: typo" (one slug for all)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        self.patches = tmp / "patches"
        self.stack = self.patches / "s"
        self.repo.commit("base", {"f.txt": "a\nb\nc\nd\ne\n"})
        self.picks = [self.repo.commit("fix: typo", {f"t{i}.txt": f"{i}\n"}) for i in range(3)]
        self.more = [self.repo.commit(f"more {i}", {f"m{i}.txt": f"{i}\n"}) for i in range(6)]
        store.init(str(self.patches), "s", SLUG, "main")
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(git.Repository(str(self.repo.path)), stack, self.picks).stack)

    def gg(self, *args: str, env: dict | None = None, via: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["--repo", str(self.repo.path), "--patches", str(self.patches), *args]
        if via is None:
            return run_ggstack(*argv, cwd=self.tmp, env=env)
        return subprocess.run(
            [*via, *argv], cwd=self.tmp, env={**__import__("os").environ, **(env or {})}, capture_output=True, text=True
        )

    def listing(self) -> list[dict]:
        proc = self.gg("list", "s", "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["s"]


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def leftovers(patches: Path) -> list[str]:
    return sorted(p.name for p in patches.iterdir() if p.name != "s")


# Without the exchange syscall: the two-rename protocol of filesystems that cannot swap.
NO_EXCHANGE = [
    sys.executable,
    "-c",
    "import ggstack.state as s; s._exchange_function = lambda: None; from ggstack.cli import main; main()",
]


def kill_sweep(fork: Fork, args: list[str], *, via: list[str] | None = None) -> tuple[int, set[str]]:
    """Kill ``args`` after its 1st, 2nd, … file operation until it finishes unkilled;
    returns how many kills there were and which states ('old'/'new') they left."""
    saved = fork.tmp / "saved"
    shutil.copytree(fork.patches, saved)
    old, old_listing = snapshot(fork.stack), fork.listing()
    done = fork.gg(*args, via=via)
    assert done.returncode == 0, done.stderr
    new, new_listing = snapshot(fork.stack), fork.listing()
    assert new != old
    seen: set[str] = set()
    kills = 0
    for n in range(1, 500):
        shutil.rmtree(fork.patches)
        shutil.copytree(saved, fork.patches)
        proc = fork.gg(*args, env={KILL: str(n)}, via=via)
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, (n, proc.stderr)
        kills += 1
        listing = fork.listing()  # loads, without any repair first
        assert listing in (old_listing, new_listing), n
        state = "old" if listing == old_listing else "new"
        seen.add(state)
        if via is None:  # the exchange leaves the directory itself whole, always
            assert snapshot(fork.stack) == (old if state == "old" else new), n
        # The next command goes on from there and tidies what the kill left.
        if state == "old":
            again = fork.gg(*args, via=via)
            assert again.returncode == 0, again.stderr
        else:
            assert fork.gg("move", "s", "1", "--to", "1").returncode == 0
        assert snapshot(fork.stack) == new, n
        assert leftovers(fork.patches) == [], n
    else:
        raise AssertionError("never finished")
    shutil.rmtree(saved)
    return kills, seen


@pytest.mark.parametrize(
    "args",
    [["move", "s", "3", "--to", "1"], ["remove", "s", "2"], ["import", "s", "HEAD~1"]],
    ids=["move", "remove", "import"],
)
@pytest.mark.slow
def test_a_kill_at_any_file_operation_leaves_all_old_or_all_new(fork: Fork, args: list[str]) -> None:
    kills, seen = kill_sweep(fork, args)
    assert kills >= 5 and seen == {"old", "new"}


@pytest.mark.slow
def test_without_the_exchange_syscall_a_kill_still_loses_nothing(fork: Fork) -> None:
    kills, seen = kill_sweep(fork, ["move", "s", "3", "--to", "1"], via=NO_EXCHANGE)
    assert kills >= 5 and seen == {"old", "new"}


def test_the_kill_hook_refuses_what_is_not_a_count(fork: Fork) -> None:
    before = snapshot(fork.patches)
    proc = fork.gg("move", "s", "3", "--to", "1", env={KILL: "abc"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{KILL}='abc': expected a whole number" in proc.stderr
    assert snapshot(fork.patches) == before
    apply = fork.gg("apply", "s", "--onto", "main", env={"GGSTACK_DEBUG_KILL_AFTER": "abc"})
    assert apply.returncode == 2 and "Traceback" not in apply.stderr
    assert "GGSTACK_DEBUG_KILL_AFTER='abc': expected a whole number" in apply.stderr
    assert fork.repo.git("for-each-ref", "refs/ggstack", "refs/heads/gg") == ""


# -- concurrency -------------------------------------------------------------------------


def _start(fork: Fork, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ggstack", "--repo", str(fork.repo.path), "--patches", str(fork.patches), *args],
        cwd=fork.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_imports_lose_no_update(fork: Fork) -> None:
    procs = [_start(fork, "import", "s", sha) for sha in fork.more]
    results = [(p.wait(timeout=240), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    picked = [p["source_commit"] for p in fork.listing()]
    assert picked[:3] == fork.picks and sorted(picked[3:]) == sorted(fork.more)
    assert leftovers(fork.patches) == []


def test_concurrent_removes_lose_no_update(fork: Fork) -> None:
    procs = [_start(fork, "remove", "s", "1") for _ in range(2)]
    results = [(p.wait(timeout=240), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    assert [p["source_commit"] for p in fork.listing()] == fork.picks[2:]


def test_an_edit_waits_for_the_lock_then_names_its_holder(fork: Fork) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from ggstack import git, state\n"
            "with state.locked(git.Repository(sys.argv[1]), 's', command='ggstack sync s'):\n"
            "    print('held', flush=True); time.sleep(120)\n",
            str(fork.repo.path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        before = snapshot(fork.patches)
        start = time.monotonic()
        proc = fork.gg("import", "s", fork.more[0], env={"GGSTACK_LOCK_WAIT_SECONDS": "1"})
        assert time.monotonic() - start >= 1
        assert proc.returncode == 3 and "Traceback" not in proc.stderr
        assert f"stack 's' is locked by PID {holder.pid} since " in proc.stderr
        assert "(ggstack sync s)" in proc.stderr and "waiting for the lock" in proc.stderr
        assert snapshot(fork.patches) == before
        bad = fork.gg("import", "s", fork.more[0], env={"GGSTACK_LOCK_WAIT_SECONDS": "soon"})
        assert bad.returncode == 2 and "GGSTACK_LOCK_WAIT_SECONDS='soon'" in bad.stderr
    finally:
        holder.kill()
        holder.wait()
    # The holder died holding it: the next edit takes the stale lock over.
    proc = fork.gg("import", "s", fork.more[0])
    assert proc.returncode == 0 and f"stale lock of PID {holder.pid}" in proc.stderr


def test_a_reader_never_sees_a_torn_stack_while_it_changes(fork: Fork) -> None:
    """``list`` in a loop while moves run: every listing is one whole state."""
    mover = subprocess.Popen(
        [
            "sh",
            "-c",
            f"for i in 1 2 3 4 5 6; do {sys.executable} -m ggstack --repo {fork.repo.path} "
            f"--patches {fork.patches} move s 3 --to 1 || exit 1; done",
        ],
        cwd=fork.tmp,
    )
    names = {tuple(p["source_commit"] for p in fork.listing())}
    while mover.poll() is None:
        proc = fork.gg("list", "s", "--json")
        assert proc.returncode == 0, proc.stderr
        names.add(tuple(p["source_commit"] for p in json.loads(proc.stdout)["s"]))
    assert mover.returncode == 0
    rotations = {tuple(fork.picks[i:] + fork.picks[:i]) for i in range(3)}
    assert names <= rotations and len(names) >= 2
