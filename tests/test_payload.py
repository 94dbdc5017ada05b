"""The demo's payload (``ggstack.demofork``) tells the seed's story truthfully.

``ggstack demo`` is only convincing if the miniature fork behaves as the story
says: the fix is needed on ``dev/before``, the current base already has it in
another shape (so only the tests can tell), and the follow-ons are partly
represented (B) or needed (C). These tests build the history with plain git
and run the fork's own test file with a real ``python -m pytest``, so a
snapshot edit that breaks the story fails here, not in a demo.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ggstack.demofork import history

pytestmark = pytest.mark.slow  # end to end: the suite runs it, `pytest -m "not slow"` does not

OP, OP_TESTS = history.OP, history.OP_TESTS
CURRENT, BEFORE = "dev/gilded-gnosis", "dev/before"
RETENTION_TESTS = {
    "test_capture_scope_keeps_one_pair_per_shape_device_and_dtype",
    "test_prewarm_pair_is_allocated_before_capture_and_used_by_it",
}
B_NEW_TEST = "test_combine_rejects_a_16_bit_lse"
C_TEST = "test_graph_pool_teardown_releases_the_retained_pairs"
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the fork's tests need torch")


class Fork:
    """The history built into a real repository, with a work tree for cherry-picks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Nothing of the developer's git configuration may leak into the build.
        self.env = {
            **os.environ,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_COMMITTER_NAME": "payload test",
            "GIT_COMMITTER_EMAIL": "payload@example.com",
        }
        self.sha: dict[str, str] = {}

    def git(
        self, *args: str, input: bytes | None = None, env: dict | None = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            ["git", "-C", str(self.path), *args], input=input, capture_output=True, env={**self.env, **(env or {})}
        )
        if check and proc.returncode:
            raise AssertionError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace')}")
        return proc

    def out(self, *args: str, **kw) -> str:
        return self.git(*args, **kw).stdout.decode().strip()

    def build(self) -> None:
        self.path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        names = sorted({n for c in history.HISTORY for n in c.files.values() if n})
        blobs = {n: self.out("hash-object", "-w", "--stdin", input=history.snapshot(n)) for n in names}
        index = {"GIT_INDEX_FILE": str(self.path / ".git" / "payload-index")}
        committer_name, committer_email = _ident(history.COMMITTER)
        for c in history.HISTORY:
            if c.parents:
                self.git("read-tree", self.sha[c.parents[0]], env=index)
            else:
                self.git("read-tree", "--empty", env=index)
            info = "".join(
                f"100644 blob {blobs[name]}\t{path}\n" if name else f"0 {'0' * 40}\t{path}\n"
                for path, name in c.files.items()
            )
            self.git("update-index", "--index-info", input=info.encode(), env=index)
            tree = self.out("write-tree", env=index)
            name, email = _ident(c.author)
            dates = {
                "GIT_AUTHOR_NAME": name,
                "GIT_AUTHOR_EMAIL": email,
                "GIT_AUTHOR_DATE": c.date,
                "GIT_COMMITTER_NAME": committer_name,
                "GIT_COMMITTER_EMAIL": committer_email,
                "GIT_COMMITTER_DATE": c.date,
            }
            parents = [arg for p in c.parents for arg in ("-p", self.sha[p])]
            self.sha[c.key] = self.out("commit-tree", tree, *parents, "-F", "-", input=c.message.encode(), env=dates)
        for ref, key in history.REFS.items():
            self.git("update-ref", ref, self.sha[key])

    def cherry_pick(self, base: str, *keys: str) -> str | None:
        """The commit of ``keys`` cherry-picked onto ``base`` in order; None if one conflicts."""
        self.git("checkout", "-q", "-f", "--detach", base)
        for key in keys:
            if self.git("cherry-pick", "--allow-empty", self.sha[key], check=False).returncode:
                self.git("cherry-pick", "--abort", check=False)
                return None
        return self.out("rev-parse", "HEAD")

    def materialise(self, rev: str, dest: Path, tests_from: str | None = None) -> Path:
        """The tree of ``rev`` in ``dest``; with ``tests_from``, the op's test file taken from there."""
        dest.mkdir(parents=True)
        archive = self.git("archive", "--format=tar", rev).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        if tests_from:
            (dest / OP_TESTS).write_bytes(self.git("show", f"{tests_from}:{OP_TESTS}").stdout)
        return dest


def _ident(ident: str) -> tuple[str, str]:
    name, _, email = ident.rpartition(" <")
    return name, email.rstrip(">")


@pytest.fixture(scope="module")
def fork(tmp_path_factory: pytest.TempPathFactory) -> Fork:
    built = Fork(tmp_path_factory.mktemp("payload") / "fork")
    built.build()
    return built


class ForkTestRun:
    """One real ``python -m pytest`` of the op's test file in a materialised tree, started now."""

    def __init__(self, tree: Path, *select: str) -> None:
        self.junit, self.log = tree / "junit.xml", tree / "pytest.log"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={self.junit}",
            OP_TESTS,
            *select,
        ]
        # A file, not a pipe: runs are collected one after another and a full pipe would stall the others.
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)

    def results(self) -> dict[str, str]:
        """Test name -> 'passed' / 'failed' / 'skipped' (parametrised cases folded, a failure wins)."""
        self.proc.wait(timeout=120)
        assert self.junit.exists(), self.log.read_text(errors="replace")
        results: dict[str, str] = {}
        for case in ET.parse(self.junit).iter("testcase"):
            name = case.get("name").split("[")[0]
            status = "failed" if case.find("failure") is not None or case.find("error") is not None else "passed"
            status = "skipped" if case.find("skipped") is not None else status
            results[name] = "failed" if results.get(name) == "failed" else status
        return results


@pytest.fixture(scope="module")
def fork_runs(fork: Fork, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Every tree the story makes a claim about, tested at once: the runs are mostly torch imports, so they overlap well."""
    root = tmp_path_factory.mktemp("trees")
    with_c = fork.cherry_pick(CURRENT, "release-helper", "teardown-release")
    assert with_c is not None
    # -k spares the gloo test where it would only repeat a pass the full runs already show.
    fast = ("-k", "not gloo")
    plan = {
        "old base, fix's tests": (BEFORE, fork.sha["reapply"], fast),
        "old base + fix": (fork.sha["reapply"], None, ()),
        # The stack's last test file holds every test of the fix and of B and C.
        "current base, the stack's tests": (CURRENT, fork.sha["teardown-release"], ()),
        "current base + B + C": (with_c, None, fast),
    }
    runs = {
        label: ForkTestRun(fork.materialise(rev, root / f"t{i}", tests_from=tests_from), *select)
        for i, (label, (rev, tests_from, select)) in enumerate(plan.items())
    }
    return {label: run.results() for label, run in runs.items()}


def failing(results: dict[str, str]) -> set[str]:
    return {name for name, status in results.items() if status == "failed"}


# -- the data itself ---------------------------------------------------------


def test_history_is_topological_and_refs_and_imports_name_commits():
    seen: set[str] = set()
    for commit in history.HISTORY:
        assert commit.key not in seen and set(commit.parents) <= seen, commit.key
        seen.add(commit.key)
        for name in commit.files.values():
            assert name is None or isinstance(history.snapshot(name), bytes), name
    assert set(history.REFS.values()) <= seen and {f"refs/heads/{CURRENT}", f"refs/heads/{BEFORE}"} <= set(history.REFS)
    assert [imp.commit for imp in history.IMPORTS] == ["pr130", "release-helper", "teardown-release"]
    assert history.IMPORTS[0].only == (OP, OP_TESTS) and len(history.IMPORTS[0].dropped) == 2


def test_no_snapshot_looks_like_a_test_module_to_pytest():
    names = {n for c in history.HISTORY for n in c.files.values() if n}
    assert not [
        n for n in names if fnmatch.fnmatch(n, "test_*.py") or fnmatch.fnmatch(n, "*_test.py") or n == "conftest.py"
    ]


# -- what git says about the history -------------------------------------------


def test_every_ref_holds_the_snapshots_history_says(fork):
    for ref, key in history.REFS.items():
        listing = fork.out("ls-tree", "-r", "--format=%(objectname) %(path)", ref)
        blobs = dict(line.split(" ", 1)[::-1] for line in listing.splitlines())
        want = {
            path: fork.out("hash-object", "--stdin", input=history.snapshot(name))
            for path, name in history.tree(key).items()
        }
        assert blobs == want, ref


def test_the_merge_of_130_is_what_git_merges(fork):
    merged = fork.out("merge-tree", "--write-tree", fork.sha["work-topk"], fork.sha["pr130"])
    assert merged == fork.out("rev-parse", f"{fork.sha['merge130']}^{{tree}}")


def test_the_revert_brings_the_tree_back_to_before_130(fork):
    assert fork.out("rev-parse", f"{fork.sha['revert130']}^{{tree}}") == fork.out(
        "rev-parse", f"{fork.sha['work-topk']}^{{tree}}"
    )
    assert fork.out("log", "-1", "--format=%s", fork.sha["pr130"]).endswith("(#130)")


def test_the_reapply_is_exactly_the_dcp_part_of_130(fork):
    dcp_part = fork.out("diff-tree", "-p", fork.sha["pr130"], "--", OP, OP_TESTS)
    reapply = fork.out("diff-tree", "-p", fork.sha["reapply"])
    assert dcp_part.split("\n", 1)[1] == reapply.split("\n", 1)[1]  # past the commit id line


def test_no_commit_of_the_current_base_has_the_reapplys_patch_id(fork):
    def patch_ids(*log_args: str) -> set[str]:
        patches = fork.git("log", "-p", "--no-merges", "--format=commit %H", *log_args).stdout
        ids = fork.out("patch-id", "--stable", input=patches)
        return {line.split()[0] for line in ids.splitlines()}

    reapply = patch_ids("-1", fork.sha["reapply"])
    assert reapply and not reapply & patch_ids(f"{BEFORE}..{CURRENT}")


def test_the_reapply_conflicts_on_the_current_base_and_applies_on_the_old_one(fork):
    assert fork.cherry_pick(CURRENT, "reapply") is None
    assert fork.cherry_pick(BEFORE, "reapply", "release-helper", "teardown-release") is not None


def test_the_follow_ons_apply_cleanly_on_the_current_base_without_the_reapply(fork):
    head = fork.cherry_pick(CURRENT, "release-helper", "teardown-release")
    assert head is not None
    after_b = fork.out("rev-parse", f"{head}~1")
    # B is partly represented: its release_graph_buffers() is already there, its LSE check is not.
    remaining = fork.out("diff", CURRENT, after_b, "--", OP)
    assert "lse must be fp32" in remaining and "def release_graph_buffers" not in remaining
    assert "def release_graph_buffers" in fork.out("diff", fork.sha["reapply"], fork.sha["release-helper"], "--", OP)


# -- what the fork's tests say ---------------------------------------------------


@needs_torch
def test_the_fix_is_needed_on_the_old_base_and_its_tests_pass_with_it(fork_runs):
    without = fork_runs["old base, fix's tests"]
    assert failing(without) == RETENTION_TESTS, "only the retention tests may fail without the fix"
    assert without["test_eager_calls_use_fresh_buffers_and_retain_nothing"] == "passed"
    with_fix = fork_runs["old base + fix"]
    assert not failing(with_fix) and with_fix["test_combine_matches_reference_at_world_size_2_over_gloo"] == "passed"
    assert all(with_fix[name] == "passed" for name in RETENTION_TESTS)


@needs_torch
def test_the_current_base_passes_the_fixs_tests_without_the_fixs_code(fork_runs):
    fix_tests = set(fork_runs["old base + fix"])
    results = fork_runs["current base, the stack's tests"]
    assert fix_tests <= set(results) and fix_tests >= RETENTION_TESTS
    assert {results[name] for name in fix_tests} <= {"passed", "skipped"}
    assert results["test_combine_matches_reference_at_world_size_2_over_gloo"] == "passed"


@needs_torch
def test_the_follow_ons_are_needed_on_the_current_base(fork_runs):
    assert failing(fork_runs["current base, the stack's tests"]) == {B_NEW_TEST, C_TEST}
    with_c = fork_runs["current base + B + C"]
    assert not failing(with_c) and with_c[C_TEST] == with_c[B_NEW_TEST] == "passed"
