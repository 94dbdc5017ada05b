"""``apply`` never moves a branch that a worktree has checked out, as ``git branch -f`` refuses to.

A checked-out branch moved under its worktree moves that worktree's HEAD: the
index then shows a phantom staged revert, and a deleted one leaves an unborn
HEAD with every file "added". So apply refuses, names the branch and the
worktree, and writes nothing of the transaction.
"""

from __future__ import annotations

from pathlib import Path

from gitrepo import GitRepo
from test_apply import Fork, lines


def _fork(tmp_path: Path) -> Fork:
    return Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f3.txt": lines("f3", l3="up")}],
    )


def _move_main(fork: Fork, tmp_path: Path, files: dict[str, str]) -> None:
    """Upstream moves on: committed where main is checked out, else from a worktree of its own."""
    if fork.g.git("symbolic-ref", "-q", "HEAD", check=False) == "refs/heads/main":
        fork.g.commit("upstream moves", files)
        return
    wt = tmp_path / "upstream"
    if not wt.exists():
        fork.g.git("worktree", "add", "-q", str(wt), "main")
    GitRepo(wt).commit("upstream moves", files)


def _status(g: GitRepo) -> tuple[str, str]:
    return g.git("symbolic-ref", "-q", "HEAD", check=False) or g.git("rev-parse", "HEAD"), g.git(
        "status", "--porcelain"
    )


def test_a_branch_checked_out_in_the_main_worktree_is_not_moved(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    second = run["patches"][1]["branch"]
    fork.g.git("checkout", "-q", second.removeprefix("refs/heads/"))
    _move_main(fork, tmp_path, {"f3.txt": lines("f3", l3="up again")})
    refs, status = fork.g.refs(), _status(fork.g)

    refused, _ = fork.apply()
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert second.removeprefix("refs/heads/") in refused.stderr and str(fork.g.path) in refused.stderr
    assert "checked out" in refused.stderr
    assert fork.g.refs() == refs and _status(fork.g) == status  # nothing of the transaction: not branch 1 either
    forced, _ = fork.apply("--force")
    assert forced.returncode == 2 and fork.g.refs() == refs  # as git branch -f: not even forced

    fork.g.git("checkout", "-q", "--detach")
    moved, run2 = fork.apply()
    assert moved.returncode == 0, moved.stderr
    assert fork.g.git("rev-parse", second) == run2["patches"][1]["commit"] != run["patches"][1]["commit"]


def test_a_branch_that_would_be_deleted_under_a_linked_worktree_is_refused(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    first = run["patches"][0]["branch"]
    wt = tmp_path / "wt"
    fork.g.git("worktree", "add", "-q", str(wt), first.removeprefix("refs/heads/"))
    _move_main(fork, tmp_path, {"f1.txt": lines("f1", l1="upstream wrote line 1 its own way")})
    refs, status = fork.g.refs(), _status(GitRepo(wt))

    refused, _ = fork.apply()
    assert refused.returncode == 2
    assert f"{first.removeprefix('refs/heads/')} (checked out in {wt})" in refused.stderr
    assert fork.g.refs() == refs and _status(GitRepo(wt)) == status


def test_a_branch_being_rebased_in_a_worktree_is_refused(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    first = run["patches"][0]["branch"].removeprefix("refs/heads/")
    wt = tmp_path / "wt"
    fork.g.git("worktree", "add", "-q", "--detach", str(wt), "main")
    rebasing = GitRepo(wt)
    rebasing.git("rebase", "--exec", "false", "main", first, check=False)  # stops, HEAD detached, branch held
    assert (fork.g.path / ".git" / "worktrees" / "wt" / "rebase-merge" / "head-name").exists()
    _move_main(fork, tmp_path, {"f3.txt": lines("f3", l3="up again")})
    refs = fork.g.refs()

    refused, _ = fork.apply()
    assert refused.returncode == 2
    assert f"{first} (checked out in {wt})" in refused.stderr
    assert fork.g.refs() == refs


def test_a_subject_cut_after_a_dot_still_names_a_branch(tmp_path: Path) -> None:
    """format-patch names this patch ``0001-docs-update-Twitter-to-social-media-in-CONTRIBUTING..patch``
    (pytest's history has it); a branch may not end in ``.`` nor hold ``..``."""
    g = GitRepo.init(tmp_path / "fork")
    old = g.commit("root", {"CONTRIBUTING.md": "Twitter\n"})
    g.git("checkout", "-q", "-b", "topic")
    g.commit("docs: update 'Twitter' to 'social media' in CONTRIBUTING.md", {"CONTRIBUTING.md": "social media\n"})
    g.git("checkout", "-q", "main")
    g.commit("upstream", {"other.txt": "x\n"})
    fork = Fork.__new__(Fork)
    fork.g, fork.patches = g, tmp_path / "patches"
    fork.ggstack("init", "s", "--repo-slug", "o/r", "--base", "main", check=True)
    fork.ggstack("import", "s", f"{old}..topic", check=True)
    assert [p.name for p in fork.patch_files()] == ["0001-docs-update-Twitter-to-social-media-in-CONTRIBUTING..patch"]
    for args in ((), ("--branch-prefix", "refs/ggstack/try")):
        proc, run = fork.apply(*args)
        assert proc.returncode == 0, proc.stderr
        assert run is not None
        branch = run["patches"][0]["branch"]
        assert branch.endswith("-docs-update-Twitter-to-social-media-in-CONTRIBUTING"), branch
        assert g.git("rev-parse", branch) == run["patches"][0]["commit"]


def test_the_branch_of_a_patch_that_left_the_series_is_removed_if_ggstack_wrote_it(tmp_path: Path) -> None:
    """After ``squash`` (or ``remove``) the last patch's branch belongs to no patch: the next apply
    removes it, as it was ggstack's — unless someone moved it since."""
    fork = Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}, {"f3.txt": lines("f3", l3="p3")}],
        [{"f0.txt": lines("f0", l3="up")}],
    )
    _, run = fork.apply()
    branches = [p["branch"] for p in run["patches"]]
    assert all(fork.g.git("rev-parse", "-q", "--verify", b, check=False) for b in branches)
    fork.ggstack("squash", "s", "2", "3", check=True, env={"GIT_EDITOR": "true"})
    _, again = fork.apply()
    assert again["patches"][0]["branch"] == branches[0]
    assert fork.g.git("rev-parse", "-q", "--verify", branches[2], check=False) == ""  # squashed away: removed

    fork.ggstack("remove", "s", "2", check=True)
    mine = [p["branch"] for p in again["patches"]][1]
    fork.g.git("branch", "-f", mine.removeprefix("refs/heads/"), "main")  # someone moved it: theirs now
    proc, _ = fork.apply()
    assert proc.returncode == 0, proc.stderr
    assert fork.g.git("rev-parse", mine) == fork.g.git("rev-parse", "main")


def test_apply_starts_no_reflog_but_keeps_the_one_a_users_commit_started(tmp_path: Path) -> None:
    """A branch only ggstack writes is rebuilt from the patches at every apply: no reflog is
    started for it (74 branches' logs were half of the refs apply writes). One the user moved
    has a reflog git started then; apply --force moving it again is written there, so what the
    user had stays recoverable."""
    fork = _fork(tmp_path)
    _, run = fork.apply()
    first, second = [p["branch"] for p in run["patches"]]
    assert not _has_reflog(fork, first) and not _has_reflog(fork, second)
    fork.g.git("branch", "-f", first.removeprefix("refs/heads/"), "main")  # the user's move starts its log
    users = fork.g.git("rev-parse", "main")
    _move_main(fork, tmp_path, {"f3.txt": lines("f3", l3="up again")})
    proc, _ = fork.apply("--force")
    assert proc.returncode == 0, proc.stderr
    log = fork.g.git("reflog", "show", "--format=%H %gs", first).splitlines()
    assert log[0].endswith("ggstack apply s") and any(line.startswith(users) for line in log[1:])
    assert not _has_reflog(fork, second)


def _has_reflog(fork: Fork, branch: str) -> bool:
    return (fork.g.path / ".git" / "logs" / branch).exists()
