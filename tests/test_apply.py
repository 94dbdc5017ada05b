"""``ggstack apply`` as a user runs it: real repositories, ggstack as a subprocess.

What is checked is what the user would see: exit codes, the JSON Run, the
refs in the repository, and that nothing of theirs (working tree, index,
HEAD, an operation in progress) changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

STACK = "s"
FIXED_DATE = {"GIT_COMMITTER_DATE": "1700100000 +0000"}


def lines(name: str, n: int = 10, **changed: str) -> str:
    out = [f"{name} line {i}" for i in range(n)]
    for i, text in changed.items():
        out[int(i.removeprefix("l"))] = text
    return "\n".join(out) + "\n"


class Fork:
    """A fork: ``old`` (where the stack was written), ``main`` moved on from
    it, a ``topic`` branch with the stack's commits, imported as stack ``s``."""

    def __init__(self, tmp: Path, patches: list[dict], base: list[dict], root: dict | None = None) -> None:
        self.g = GitRepo.init(tmp / "fork")
        self.patches = tmp / "patches"
        root = root or {f"f{i}.txt": lines(f"f{i}") for i in range(max(4, len(patches)))}
        self.old = self.g.commit("root", root)
        self.g.git("checkout", "-q", "-b", "topic")
        for i, files in enumerate(patches, 1):
            self.g.commit(f"patch number {i}\n\nbody {i}", files)
        self.g.git("checkout", "-q", "main")
        for i, files in enumerate(base, 1):
            self.g.commit(f"upstream {i}", files)
        self.ggstack("init", STACK, "--repo-slug", "o/r", "--base", "main", check=True)
        self.ggstack("import", STACK, f"{self.old}..topic", check=True)

    def ggstack(
        self, *args: str, check: bool = False, env: dict | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = run_ggstack("--patches", str(self.patches), *args, cwd=cwd or self.g.path, env=env)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    def apply(
        self, *args: str, env: dict | None = None, cwd: Path | None = None
    ) -> tuple[subprocess.CompletedProcess[str], dict | None]:
        proc = self.ggstack("apply", STACK, "--json", *args, env=env, cwd=cwd)
        run = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
        return proc, run

    def patch_files(self) -> list[Path]:
        return sorted((self.patches / STACK).glob("*.patch"))


def objects(g: GitRepo) -> str:
    return g.git("cat-file", "--batch-all-objects", "--batch-check")


def tree_bytes(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def state_of(path: Path) -> str:
    """A fingerprint of a directory's files (an in-progress operation's state)."""
    h = hashlib.sha1()
    for name, data in sorted(tree_bytes(path).items()):
        h.update(name.encode() + b"\0" + data)
    return h.hexdigest()


# -- the user's state is not touched ------------------------------------------------


def test_dirty_tree_staged_untracked_and_detached_head_stay_byte_identical(tmp_path: Path) -> None:
    fork = Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f3.txt": lines("f3", l3="up")}],
    )
    g = fork.g
    g.git("checkout", "-q", "--detach", "HEAD~0")
    g.write("f0.txt", "dirty, not staged\n")
    g.write("f3.txt", "staged change\n")
    g.git("add", "f3.txt")
    g.write("f3.txt", "staged, then changed again\n")
    g.write("untracked.txt", "nobody added me\n")
    status = g.git("status", "--porcelain=v1", "--untracked-files=all")
    before = (
        g.git("rev-parse", "HEAD"),
        (g.path / ".git" / "HEAD").read_bytes(),
        (g.path / ".git" / "index").read_bytes(),
        tree_bytes(g.path),
        g.git("stash", "list"),
    )
    heads = g.git("for-each-ref", "refs/heads/main", "refs/heads/topic")

    proc, run = fork.apply()

    assert proc.returncode == 0, proc.stderr
    assert [p["applied"] for p in run["patches"]] == ["applied", "applied"]
    after = (
        g.git("rev-parse", "HEAD"),
        (g.path / ".git" / "HEAD").read_bytes(),
        (g.path / ".git" / "index").read_bytes(),
        tree_bytes(g.path),
        g.git("stash", "list"),
    )
    assert after == before
    assert g.git("status", "--porcelain=v1", "--untracked-files=all") == status
    assert g.git("for-each-ref", "refs/heads/main", "refs/heads/topic") == heads


@pytest.mark.parametrize("operation", ["rebase", "merge"])
def test_an_operation_in_progress_stays_in_progress(tmp_path: Path, operation: str) -> None:
    fork = Fork(tmp_path, [{"f1.txt": lines("f1", l1="p1")}], [{"f0.txt": lines("f0", l0="main side")}])
    g = fork.g
    g.git("checkout", "-q", "-b", "mine", fork.old)
    g.commit("my side", {"f0.txt": lines("f0", l0="my side")})
    failed = g.git(operation, "main", check=False, env={"GIT_EDITOR": "true"})
    state_dir = g.path / ".git" / ("rebase-merge" if operation == "rebase" else "")
    marker = g.path / ".git" / ("rebase-merge" if operation == "rebase" else "MERGE_HEAD")
    assert marker.exists(), failed
    before = (
        state_of(state_dir) if operation == "rebase" else marker.read_bytes(),
        g.git("status", "--porcelain=v1"),
        (g.path / ".git" / "index").read_bytes(),
    )

    proc, run = fork.apply("--onto", "main")

    assert proc.returncode == 0, proc.stderr
    assert run["patches"][0]["applied"] == "applied"
    assert marker.exists()
    after = (
        state_of(state_dir) if operation == "rebase" else marker.read_bytes(),
        g.git("status", "--porcelain=v1"),
        (g.path / ".git" / "index").read_bytes(),
    )
    assert after == before
    g.git(operation, "--abort")  # and git can still finish (here: abandon) it


# -- outcomes -------------------------------------------------------------------------


def test_conflict_in_patch_2_of_4_is_recorded_and_the_rest_carry_on(tmp_path: Path) -> None:
    fork = Fork(
        tmp_path,
        [
            {"f0.txt": lines("f0", l1="p1")},
            {"f1.txt": lines("f1", l4="patch two says this")},
            {"f2.txt": lines("f2", l2="p3")},
            {"f3.txt": lines("f3", l3="p4")},
        ],
        [{"f1.txt": lines("f1", l4="upstream says that")}],
    )
    proc, run = fork.apply()

    assert proc.returncode == 1, proc.stderr
    p1, p2, p3, p4 = run["patches"]
    assert [p["applied"] for p in (p1, p2, p3, p4)] == ["applied", "conflict", "applied", "applied"]
    assert p2["conflict"]["paths"] == ["f1.txt"]
    hunks = p2["conflict"]["hunks"]
    assert "<<<<<<<" in hunks and ">>>>>>>" in hunks
    assert "patch two says this" in hunks and "upstream says that" in hunks
    assert p2["commit"] is None and p2["branch"] is None
    g = fork.g
    for p in (p1, p3, p4):
        assert p["branch"].startswith("refs/heads/gg/s/")
        assert g.git("rev-parse", p["branch"]) == p["commit"]
    # Stacked, each on the previous applied one; the conflicted patch left out.
    assert g.git("rev-parse", p1["commit"] + "^") == g.sha("main")
    assert g.git("rev-parse", p3["commit"] + "^") == p1["commit"]
    assert g.git("rev-parse", p4["commit"] + "^") == p3["commit"]
    assert g.git("diff", "--name-only", "main", p4["commit"]).split() == ["f0.txt", "f2.txt", "f3.txt"]
    assert g.git("for-each-ref", "--format=%(refname)", "refs/heads/gg/").split() == [
        p1["branch"],
        p3["branch"],
        p4["branch"],
    ]
    # The author and the full message (trailers included) are kept.
    info = g.git("log", "-1", "--format=%an <%ae>%n%B", p3["commit"])
    assert info.startswith("Test Author <author@example.com>\npatch number 3\n\nbody 3\n")
    assert "Stack-Patch-Id: " in info

    table = fork.ggstack("apply", STACK)
    assert table.returncode == 1
    assert "conflict" in table.stdout and "f1.txt" in table.stdout
    # Where the patches went, said (the probe: a new user looked for them).
    names = ", ".join(p["branch"].removeprefix("refs/heads/") for p in (p1, p3, p4))
    assert f"3 branches, one per applied patch: {names}\n" in table.stdout


def test_empty_patch_is_recorded_and_a_second_apply_is_a_no_op(tmp_path: Path) -> None:
    change = {"f1.txt": lines("f1", l1="the same change")}
    fork = Fork(tmp_path, [change, {"f2.txt": lines("f2", l2="p2")}], [change])
    proc, run = fork.apply()

    assert proc.returncode == 0, proc.stderr
    assert [p["applied"] for p in run["patches"]] == ["empty", "applied"]
    assert run["patches"][0]["commit"] is None and run["patches"][0]["branch"] is None
    g = fork.g
    assert g.git("rev-parse", run["patches"][1]["commit"] + "^") == g.sha("main")
    refs, objs, counts = g.refs(), objects(g), g.git("count-objects", "-v")

    again, run2 = fork.apply(env={"GIT_COMMITTER_DATE": "1800000000 +0000"})

    assert again.returncode == 0, again.stderr
    assert run2["patches"] == run["patches"]
    assert g.refs() == refs
    assert objects(g) == objs
    assert g.git("count-objects", "-v") == counts


def test_a_rerun_replays_from_its_cache_and_a_kept_result_that_is_wrong_is_replayed_again(tmp_path: Path) -> None:
    fork = Fork(tmp_path, [{f"f{i}.txt": lines(f"f{i}", l1=f"patch {i}")} for i in range(6)], [{"f9.txt": "up\n"}])
    commits = lambda run: [p["commit"] for p in run["patches"]]  # noqa: E731
    traces = [tmp_path / f"{n}.trace" for n in range(3)]
    first, run = fork.apply(env={**FIXED_DATE, "GIT_TRACE": str(traces[0])})
    assert first.returncode == 0, first.stderr
    _, again = fork.apply(env={**FIXED_DATE, "GIT_TRACE": str(traces[1])})
    assert commits(again) == commits(run)
    raw = "diff-tree --stdin -r --raw"  # what each pick changes: read for the picks the cache cannot answer
    assert raw in traces[0].read_text() and raw not in traces[1].read_text()
    # The cache says patch 3 became patch 5's commit (not on its tip) and patch 4 a commit that is not here.
    kept = fork.g.path / ".git" / "ggstack" / "cache" / "replayed.json"
    data = json.loads(kept.read_text())
    by_commit = {v: k for k, v in data.items()}
    made = commits(run)
    data[by_commit[made[2]]], data[by_commit[made[3]]] = made[4], "0" * 40
    kept.write_text(json.dumps(data))
    _, tampered = fork.apply(env={**FIXED_DATE, "GIT_TRACE": str(traces[2])})
    assert commits(tampered) == made
    assert traces[2].read_text().count(raw) >= 1


def test_a_diff_edited_by_hand_is_replayed_as_stored_not_as_its_source_commit(tmp_path: Path) -> None:
    """The stored file is the truth: a patch whose diff was edited by hand (no trailer says so)
    is replayed as edited, and the patches after it on top of it, as ``git am`` of the files."""
    patches = [{f"f{i}.txt": lines(f"f{i}", l1=f"patch {i}")} for i in range(3)]
    fork = Fork(tmp_path, patches, [{"f9.txt": "up\n"}])
    second = fork.patch_files()[1]
    text = second.read_text()
    assert text.count("+f1 line 1") == 0 and text.count("+patch 1\n") == 1
    second.write_text(text.replace("+patch 1\n", "+patch 1, edited by hand\n"))
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    g = fork.g
    tip = run["patches"][-1]["commit"]
    assert g.git("show", f"{run['patches'][1]['commit']}:f1.txt") == lines("f1", l1="patch 1, edited by hand").strip()
    g.git("checkout", "-q", "--detach", "main")
    g.git("-c", "core.hooksPath=/dev/null", "am", "-q", *map(str, fork.patch_files()))
    assert g.git("rev-parse", f"{tip}^{{tree}}") == g.git("rev-parse", "HEAD^{tree}")
    assert [p["applied"] for p in run["patches"]] == ["applied"] * 3


def test_a_message_edited_in_the_patch_file_is_the_replayed_commits_after_a_run_it_was_not(tmp_path: Path) -> None:
    """A patch file whose diff is its source commit's is replayed from that commit's tree, yet the
    commit apply writes carries the file's message: a rerun after the message alone was edited
    writes a new commit (the result cache knows the pick by its file too), and the stack's own
    commits that edit and resolve start from still carry the file's message, not the source's."""
    patches = [{f"f{i}.txt": lines(f"f{i}", l1=f"patch {i}")} for i in range(3)]
    fork = Fork(tmp_path, patches, [{"f9.txt": "up\n"}])
    proc, first = fork.apply(env=FIXED_DATE)
    assert proc.returncode == 0, proc.stderr
    second = fork.patch_files()[1]
    second.write_text(second.read_text().replace("patch number 2", "patch number 2, retitled", 1))
    proc, again = fork.apply(env=FIXED_DATE)
    assert proc.returncode == 0, proc.stderr
    g = fork.g
    made = [p["commit"] for p in again["patches"]]
    assert made[0] == first["patches"][0]["commit"] and made[1] != first["patches"][1]["commit"]
    assert g.git("log", "-1", "--format=%s", made[1]) == "patch number 2, retitled"
    assert g.git("log", "-1", "--format=%s", made[2]) == "patch number 3"
    assert g.git("rev-parse", f"{made[2]}^{{tree}}") == g.git("rev-parse", f"{first['patches'][2]['commit']}^{{tree}}")
    from ggstack import git  # in-process: the picks the other commands start from
    from ggstack.picks import materialize
    from ggstack.series import store

    stack = store.load(str(fork.patches), STACK)
    picks = materialize(git.Repository(str(g.path)), stack)
    assert g.git("log", "-1", "--format=%s", picks[1].commit or "") == "patch number 2, retitled"
    assert not {p.commit for p in picks} & set(g.git("rev-list", "topic").split())


def test_json_prints_the_run(tmp_path: Path) -> None:
    fork = Fork(tmp_path, [{"f1.txt": lines("f1", l1="p1")}], [{"f2.txt": lines("f2", l2="up")}])
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    assert run["stack"] == STACK and run["base_ref"] == "main" and run["base"] == fork.g.sha("main")
    assert run["merge_base"] == fork.old
    assert run["stages"]["apply"] == "ok"
    (p,) = run["patches"]
    assert p["name"].startswith("0001-") and p["subject"] == "patch number 1"
    assert p["applied"] == "applied" and p["branch"] == "refs/heads/gg/s/01-patch-number-1"
    assert p["source_commit"] == fork.g.sha("topic") and p["provenance"]["cherry_picked_from"] is None
    assert fork.g.tree(p["commit"]) != fork.g.tree("main")


# -- crash safety ---------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_midway_leaves_refs_all_old_or_all_new(tmp_path: Path) -> None:
    root = {f"f{i:02d}.txt": lines(f"f{i:02d}") for i in range(50)}
    fork = Fork(tmp_path, [{f"f{i:02d}.txt": lines(f"f{i:02d}", l1=f"patch {i}")} for i in range(50)], [], root=root)
    g = fork.g
    proc, _ = fork.apply("--onto", fork.old, env=FIXED_DATE)
    assert proc.returncode == 0, proc.stderr
    g.commit("upstream moves", {"f00.txt": lines("f00", l9="upstream")})  # on main
    old_refs = g.refs()
    env = {**FIXED_DATE}

    for n in (1, 17, 49, 50):
        killed, _ = fork.apply("--onto", "main", env={**env, "GGSTACK_DEBUG_KILL_AFTER": str(n)})
        assert killed.returncode == -signal.SIGKILL
        assert g.refs() == old_refs, f"refs changed by a run killed after {n} patches"
        assert subprocess.run(["git", "-C", str(g.path), "fsck", "--no-progress"], capture_output=True).returncode == 0

    done, run = fork.apply("--onto", "main", env=env)
    assert done.returncode == 0, done.stderr
    new_refs = g.refs()
    assert new_refs != old_refs and len([p for p in run["patches"] if p["branch"]]) == 50

    # And by timing, from a cold start: never anything but all old or all new.
    cache = g.path / ".git" / "ggstack" / "cache"
    for delay in (0.5, 0.8, 1.1):
        shutil.rmtree(cache)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ggstack",
                "--patches",
                str(fork.patches),
                "apply",
                STACK,
                "--onto",
                fork.old,
                "--json",
            ],
            cwd=g.path,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert settled_refs(g) in (old_refs, new_refs), f"half-written refs after a kill at {delay}s"
        assert subprocess.run(["git", "-C", str(g.path), "fsck", "--no-progress"], capture_output=True).returncode == 0
        fork.apply("--onto", "main", env=env)  # back to all new for the next round
        assert g.refs() == new_refs


def settled_refs(g: GitRepo) -> str:
    """The refs once no git is writing them. A ``git update-ref`` that ggstack
    started may outlive ggstack by a moment, committing its transaction (all
    of it: it had every line); a reader in that moment can see some refs
    moved, as with any ref transaction of git's files backend."""
    deadline = time.monotonic() + 10
    refs = g.refs()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        busy = any(
            p.name.endswith(".lock")
            for p in (g.path / ".git").rglob("*")
            if "refs" in p.parts or p.name.startswith("packed-refs")
        )
        again = g.refs()
        if again == refs and not busy:
            return again
        refs = again
    return refs


# -- errors and fallbacks ---------------------------------------------------------------


def test_unknown_base_ref_is_exit_2_naming_it(tmp_path: Path) -> None:
    fork = Fork(tmp_path, [{"f1.txt": lines("f1", l1="p1")}], [])
    refs = fork.g.refs()
    proc, _ = fork.apply("--onto", "origin/no-such-branch")
    assert proc.returncode == 2
    assert "origin/no-such-branch" in proc.stderr and "Traceback" not in proc.stderr
    assert fork.g.refs() == refs


def test_missing_recorded_base_falls_back_to_git_apply_and_says_so(tmp_path: Path) -> None:
    fork = Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f3.txt": lines("f3", l3="up")}],
    )
    first, second = fork.patch_files()
    text = first.read_text()
    missing = "1234567" * 5 + "12345"
    first.write_text(text.replace(f"base-commit: {fork.old}", f"base-commit: {missing}"))
    # The second patch's index lines name blobs nobody has: only a plain apply can work.
    text = second.read_text()
    index = next(line for line in text.splitlines() if line.startswith("index "))
    second.write_text(text.replace(index, "index " + "ab" * 20 + ".." + "cd" * 20 + " 100644"))
    second_base = next(line for line in text.splitlines() if line.startswith("base-commit: "))
    second.write_text(second.read_text().replace(second_base, f"base-commit: {missing}"))

    proc, run = fork.apply()

    assert proc.returncode == 0, proc.stderr
    p1, p2 = run["patches"]
    assert p1["applied"] == "applied" and "recorded base missing" in p1["note"] and "--3way" in p1["note"]
    assert p2["applied"] == "applied" and "plain git apply" in p2["note"]
    g = fork.g
    assert g.git("show", f"{p2['commit']}:f1.txt") == lines("f1", l1="p1").strip()
    assert g.git("show", f"{p2['commit']}:f2.txt") == lines("f2", l2="p2").strip()
    table = fork.ggstack("apply", STACK)
    assert "recorded base missing" in table.stdout


def test_a_fallback_apply_that_fails_names_the_files_and_the_line_git_gives(tmp_path: Path) -> None:
    fork = Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l5="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f1.txt": lines("f1", l5="up"), "f2.txt": None}],
    )
    missing = "1234567" * 5 + "12345"
    for f in fork.patch_files():  # no recorded base and no blobs: only a plain git apply is left
        text = f.read_text()
        index = next(line for line in text.splitlines() if line.startswith("index "))
        base = next(line for line in text.splitlines() if line.startswith("base-commit: "))
        text = text.replace(index, "index " + "ab" * 20 + ".." + "cd" * 20 + " 100644")
        f.write_text(text.replace(base, f"base-commit: {missing}"))

    proc, run = fork.apply()

    assert proc.returncode == 1, proc.stderr
    p1, p2 = run["patches"]
    assert p1["applied"] == "conflict" and p1["conflict"]["paths"] == ["f1.txt"]
    assert "git apply: patch does not apply at line 3" in p1["conflict"]["hunks"]  # the hunk "@@ -3,7 +3,7 @@"
    assert p2["applied"] == "conflict" and p2["conflict"]["paths"] == ["f2.txt"]
    assert "does not exist in index" in p2["conflict"]["hunks"]
    table = fork.ggstack("apply", STACK).stdout
    assert "f1.txt (recorded base and blobs missing" in table and "patch failed" not in table


def test_shallow_clone_missing_the_recorded_base_is_a_clear_exit_2(tmp_path: Path) -> None:
    fork = Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}],
        [{"f2.txt": lines("f2", l2="up")}, {"f3.txt": lines("f3", l3="up")}],
    )
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--branch", "main", f"file://{fork.g.path}", str(shallow)], check=True
    )
    refs = GitRepo(shallow).refs()
    proc, _ = fork.apply("--onto", "origin/main", cwd=shallow)
    assert proc.returncode == 2
    assert "shallow" in proc.stderr and "--unshallow" in proc.stderr and fork.old[:12] in proc.stderr
    assert "Traceback" not in proc.stderr
    assert GitRepo(shallow).refs() == refs


def test_a_branch_moved_by_someone_else_is_refused_unless_force(tmp_path: Path) -> None:
    fork = Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f3.txt": lines("f3", l3="up")}],
    )
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    g = fork.g
    branch = run["patches"][0]["branch"]
    g.git("update-ref", branch, g.sha("main"))  # a colleague pushed something else there
    refs = g.refs()

    refused, _ = fork.apply()
    assert refused.returncode == 2
    assert branch in refused.stderr and "--force" in refused.stderr
    assert g.refs() == refs

    forced, run2 = fork.apply("--force")
    assert forced.returncode == 0, forced.stderr
    assert g.git("rev-parse", branch) == run2["patches"][0]["commit"] == run["patches"][0]["commit"]
