"""``ggstack rebase``: the stored series moves onto a new base, and nothing else changes.

Real repositories; ggstack run as a user runs it. Differentially: the
rebased series re-applied onto that base gives the trees ``apply`` gave
before the rebase, and ``git am`` of the rebased files onto the base gives
them too. A kill at every file operation leaves the old stack or the new one.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_apply_differential import commit_ops, fast_import, histories

from ggstack import git, importing, rebase, replay
from ggstack.model import Applied
from ggstack.series import store

SLUG = "owner/repo"
KILL = "GGSTACK_DEBUG_KILL_AFTER_FILE_OPS"


def _text(name: str, changes: dict[int, str] | None = None) -> str:
    return "".join(f"{(changes or {}).get(i, f'{name} line {i}')}\n" for i in range(20))


class Fork:
    """main: a base; feature: fixes of a, b, c; the stack s holds them, recorded on the old main."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        self.old = self.repo.commit("base", {f"{n}.txt": _text(n) for n in "abc"})
        self.repo.git("checkout", "-q", "-b", "feature")
        self.picks = [
            self.repo.commit(f"fix({n}): change {n}\n\nWhy {n}.", {f"{n}.txt": _text(n, {10: f"{n} fixed"})})
            for n in "abc"
        ]
        self.repo.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        self.stack = self.patches / "s"
        store.init(str(self.patches), "s", SLUG, "main")
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(git.Repository(str(self.repo.path)), stack, self.picks).stack)

    def move_base(self, **lines: str) -> str:
        """main moves: line 7 of each named file changes (in the patches' context, no conflict), and a new file."""
        files = {f"{n}.txt": _text(n, {7: text}) for n, text in lines.items()}
        return self.repo.commit("upstream moves", {**files, "new.txt": "new\n"})

    def gg(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
        return run_ggstack("--repo", str(self.repo.path), "--patches", str(self.patches), *args, cwd=self.tmp, env=env)

    def trees(self, onto: str) -> list[str | None]:
        proc = self.gg("apply", "s", "--onto", onto, "--json", "--branch-prefix", "refs/ggstack/test/apply")
        run = json.loads(proc.stdout)
        return [self.repo.tree(p["commit"]) if p["commit"] else None for p in run["patches"]]


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def base_commits(stack: Path) -> list[str]:
    s = store.load(str(stack.parent), stack.name)
    return [p.base_commit or "" for p in s.patches]


def test_rebase_rewrites_each_patch_onto_its_replayed_parent(fork: Fork) -> None:
    new = fork.move_base(a="a moved upstream", c="c moved upstream")
    before_trees = fork.trees("main")
    old_stack = store.load(str(fork.patches), "s")
    proc = fork.gg("rebase", "s", "--onto", "main", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["written"] and out["stopped_at"] is None
    assert [p["status"] for p in out["patches"]] == ["rewritten"] * 3
    rebased = store.load(str(fork.patches), "s")
    bases = [p.base_commit for p in rebased.patches]
    assert bases[0] == new
    assert fork.repo.tree(bases[1]) == before_trees[0] and fork.repo.tree(bases[2]) == before_trees[1]
    assert fork.repo.git("rev-parse", "refs/ggstack/s/rebased^") == bases[2]  # the chain is kept reachable
    # Identity and provenance are as they were; the diffs are now against the new base.
    for old, p in zip(old_stack.patches, rebased.patches):
        assert (p.name, p.message, p.author, p.date, p.source_commit) == (
            old.name,
            old.message,
            old.author,
            old.date,
            old.source_commit,
        )
        assert p.provenance == old.provenance
    assert "a moved upstream" in rebased.patches[0].diff and "a moved upstream" not in old_stack.patches[0].diff
    # Re-applying the rebased series gives apply's trees of before.
    assert fork.trees("main") == before_trees
    # git am of the files onto the base gives them too.
    fork.repo.git("checkout", "-q", "--detach", "main")
    fork.repo.git("am", "-q", *[str(fork.stack / p.name) for p in rebased.patches])
    am = fork.repo.git("rev-list", "--reverse", f"{new}..HEAD").split()
    assert [fork.repo.tree(c) for c in am] == before_trees


def test_nothing_changed_means_not_a_byte_and_a_rerun_is_a_no_op(fork: Fork) -> None:
    before = snapshot(fork.stack)
    proc = fork.gg("rebase", "s", "--onto", "main", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert not out["written"] and [p["status"] for p in out["patches"]] == ["unchanged"] * 3
    assert snapshot(fork.stack) == before
    assert fork.repo.git("for-each-ref", "refs/ggstack/s/rebased") == ""

    fork.move_base(b="b moved")
    assert fork.gg("rebase", "s", "--onto", "main").returncode == 0
    once = snapshot(fork.stack)
    assert once != before
    # Again, with another committer and clock: not a byte changes (the new parents' ids do not depend on them).
    env = {"GIT_COMMITTER_NAME": "Someone Else", "GIT_COMMITTER_DATE": "1900000000 +0000"}
    again = json.loads(fork.gg("rebase", "s", "--onto", "main", "--json", env=env).stdout)
    assert not again["written"] and snapshot(fork.stack) == once


def test_same_series_same_base_same_bytes_on_another_clone(fork: Fork, tmp_path: Path) -> None:
    fork.move_base(a="a moved")
    saved = tmp_path / "saved"
    shutil.copytree(fork.patches, saved)
    assert fork.gg("rebase", "s", "--onto", "main").returncode == 0
    clone = GitRepo(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", str(fork.repo.path), str(clone.path)], check=True)
    env = {"GIT_COMMITTER_NAME": "A Bot", "GIT_COMMITTER_DATE": "1900000000 +0000"}
    proc = run_ggstack(
        "--repo",
        str(clone.path),
        "--patches",
        str(saved),
        "rebase",
        "s",
        "--onto",
        "origin/main",
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert snapshot(saved / "s") == snapshot(fork.stack)


def test_a_conflict_stops_it_and_partial_rebases_up_to_it(fork: Fork) -> None:
    fork.repo.commit(
        "upstream changes a and b's line",
        {"a.txt": _text("a", {2: "a moved"}), "b.txt": _text("b", {10: "b upstream"})},
    )
    before = snapshot(fork.stack)
    proc = fork.gg("rebase", "s", "--onto", "main")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "0002-fix-b-change-b.patch stops the rebase: conflicts in b.txt; nothing was written" in proc.stderr
    assert snapshot(fork.stack) == before
    assert "s: not rebased onto main" in proc.stdout and "--partial rebases up to it" in proc.stderr
    assert "not written" in proc.stdout and "rewritten" not in proc.stdout
    # The probe: --partial's header said "rebased onto main", --dry-run's "would rebase onto main", for all of it.
    proc = fork.gg("rebase", "s", "--onto", "main", "--partial", "--dry-run")
    assert "s: would rebase 1 of 3 patches onto main" in proc.stdout, proc.stdout
    assert "0002-fix-b-change-b.patch stops the rest" in proc.stdout and "would rewrite" in proc.stdout
    assert "the patch before it would be rebased (`ggstack resolve s 0002` resolves the conflict)" in proc.stderr
    assert snapshot(fork.stack) == before

    proc = fork.gg("rebase", "s", "--onto", "main", "--partial", "--json")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert [p["status"] for p in out["patches"]] == ["rewritten", "stopped", "not rebased"]
    after = snapshot(fork.stack)
    assert after["0001-fix-a-change-a.patch"] != before["0001-fix-a-change-a.patch"]
    for name in ("0002-fix-b-change-b.patch", "0003-fix-c-change-c.patch", "series", "stack.toml"):
        assert after[name] == before[name]
    assert base_commits(fork.stack)[0] == fork.repo.sha("main")
    proc = fork.gg("rebase", "s", "--onto", "main", "--partial")
    assert "s: rebased 1 of 3 patches onto main" in proc.stdout and "the patch before it was rebased" in proc.stderr


def test_a_patch_that_became_empty_stops_it_too(fork: Fork) -> None:
    fork.repo.git("cherry-pick", fork.picks[1])
    before = snapshot(fork.stack)
    proc = fork.gg("rebase", "s", "--onto", "main")
    assert proc.returncode == 1 and "changes nothing on the base" in proc.stderr and "ggstack drop" in proc.stderr
    # The stop's real reason, not a conflict that is not there.
    assert "conflict" not in proc.stderr and "`ggstack drop s` takes it out" in proc.stderr, proc.stderr
    assert snapshot(fork.stack) == before
    unknown = fork.gg("rebase", "s", "--onto", "no-such-branch")
    assert unknown.returncode == 2 and "unknown base ref 'no-such-branch'" in unknown.stderr


@pytest.mark.slow
def test_a_kill_at_any_file_operation_leaves_the_old_stack_or_the_new_one(fork: Fork) -> None:
    fork.move_base(a="a moved", b="b moved", c="c moved")
    args = ["rebase", "s", "--onto", "main"]
    saved = fork.tmp / "saved"
    shutil.copytree(fork.patches, saved)
    old = snapshot(fork.stack)
    assert fork.gg(*args).returncode == 0
    new = snapshot(fork.stack)
    assert new != old
    kills, seen = 0, set()
    for n in range(1, 200):
        shutil.rmtree(fork.patches)
        shutil.copytree(saved, fork.patches)
        proc = fork.gg(*args, env={KILL: str(n)})
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, (n, proc.stderr)
        kills += 1
        assert fork.gg("list", "s").returncode == 0  # loads, without any repair first
        now = snapshot(fork.stack)
        assert now in (old, new), n
        seen.add("old" if now == old else "new")
        assert fork.gg(*args).returncode == 0  # the next rebase goes on from there
        assert snapshot(fork.stack) == new, n
        assert sorted(p.name for p in fork.patches.iterdir()) == ["s"], n
    else:
        raise AssertionError("never finished")
    assert kills >= 4 and seen == {"old", "new"}


# -- differential: generated histories ------------------------------------------------------


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 63),
    base_ops=st.lists(commit_ops, min_size=0, max_size=3),
    stack_ops=st.lists(commit_ops, min_size=1, max_size=4),
)
def test_the_rebased_series_reapplies_to_the_trees_apply_gave(seed: int, base_ops: list, stack_ops: list) -> None:
    root, base, stack = histories(seed, base_ops, stack_ops)
    with tempfile.TemporaryDirectory(prefix="ggstack-rebase-") as d:
        tmp = Path(d)
        g = GitRepo.init(tmp / "fork")
        ids = fast_import(g.path, root, {"base": base, "stack": stack})
        old, new, tip = ids["base"][0], ids["base"][-1], ids["stack"][-1]
        repo = git.Repository(str(g.path))
        patches = tmp / "patches"
        store.init(str(patches), "s", "o/r", "base")
        store.save(importing.commits(repo, store.load(str(patches), "s"), [f"{old}..{tip}"]).stack)
        s = store.load(str(patches), "s")
        before = replay.apply(repo, s, new, write=False)
        result = rebase.rebase(repo, s, new, partial=True)
        after = replay.apply(repo, store.load(str(patches), "s"), new, write=False)
        done = [e.status for e in result.entries]
        for n, (e, o1, o2) in enumerate(zip(result.entries, before.outcomes, after.outcomes)):
            if e.status in (rebase.REWRITTEN, rebase.UNCHANGED):
                assert o1.applied is o2.applied is Applied.APPLIED, (n, done)
                assert repo.resolve(o1.commit or "", "tree") == repo.resolve(o2.commit or "", "tree"), (n, done)
            else:
                assert o1.applied is not Applied.APPLIED or e.status == rebase.NOT_REACHED, (n, done)
        if result.stopped is None:
            assert all(p.base_commit for p in store.load(str(patches), "s").patches)
