"""``ggstack resolve`` → edit → ``refresh`` → ``apply`` onto a newer base: a conflict is settled once.

Real repositories, ggstack run as a user runs it, the user's edit made in
the printed worktree. The user's own checkout is never touched; the stored
patch carries the resolution afterwards, and git's rerere gives it back to
the next resolve of the same conflict.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.series import store

SLUG = "owner/repo"


def _text(name: str, changes: dict[int, str] | None = None) -> str:
    return "".join(f"{(changes or {}).get(i, f'{name} line {i}')}\n" for i in range(20))


class Fork:
    """main: f.txt and a.txt; the stack: 0001 changes a.txt, 0002 line 10 of f.txt; then main changes that line too."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        self.repo.commit("base", {"f.txt": _text("f"), "a.txt": _text("a")})
        self.repo.git("checkout", "-q", "-b", "feature")
        self.picks = [
            self.repo.commit("fix(a): change a", {"a.txt": _text("a", {3: "a fixed"})}),
            self.repo.commit("fix(f): line ten\n\nWhy.", {"f.txt": _text("f", {10: "fork 10"})}),
        ]
        self.repo.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        store.init(str(self.patches), "s", SLUG, "main")
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(git.Repository(str(self.repo.path)), stack, self.picks).stack)
        self.repo.commit("upstream changes line ten", {"f.txt": _text("f", {10: "upstream 10"})})

    def gg(self, *args: str, patches: Path | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["--repo", str(self.repo.path), "--patches", str(patches or self.patches), *args]
        return run_ggstack(*argv, cwd=self.tmp)

    def ok(self, *args: str, patches: Path | None = None) -> subprocess.CompletedProcess[str]:
        proc = self.gg(*args, patches=patches)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def apply(self, patches: Path | None = None) -> dict:
        proc = self.gg("apply", "s", "--onto", "main", "--json", patches=patches)
        return json.loads(proc.stdout)

    def user_state(self) -> tuple[str, str, str]:
        return self.repo.sha("HEAD"), self.repo.git("status", "--porcelain"), self.repo.git("branch", "--list")


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_conflict_resolve_edit_refresh_then_apply_onto_a_newer_base(fork: Fork) -> None:
    assert [p["applied"] for p in fork.apply()["patches"]] == ["applied", "conflict"]
    teammate = fork.tmp / "teammate"  # another copy of the stack, as it was before the refresh
    shutil.copytree(fork.patches, teammate)
    user = fork.user_state()

    session = json.loads(fork.ok("resolve", "s", "2", "--onto", "main", "--json").stdout)
    wt = Path(session["worktree"])
    assert str(wt).startswith(str(fork.repo.path / ".git" / "ggstack")) and session["conflicts"] == ["f.txt"]
    text = (wt / "f.txt").read_text()
    assert "<<<<<<< " in text and "upstream 10" in text and "fork 10" in text
    assert (wt / "a.txt").read_text() == _text("a", {3: "a fixed"})  # on its replayed parent: 0001 is there
    assert fork.user_state() == user
    again = json.loads(fork.ok("resolve", "s", "2", "--json").stdout)
    assert again["worktree"] == session["worktree"]  # the same session, not a second worktree

    before = snapshot(fork.patches)
    markers = fork.gg("refresh", "s", "2")
    assert markers.returncode == 2 and "conflict markers are still there: f.txt:" in markers.stderr
    assert snapshot(fork.patches) == before

    (wt / "f.txt").write_text(_text("f", {10: "fork and upstream 10"}))
    fork.ok("refresh", "s", "2")
    assert not wt.exists() and str(wt) not in fork.repo.git("worktree", "list")
    assert fork.user_state() == user
    old, new = store.load(str(teammate), "s").patches[1], store.load(str(fork.patches), "s").patches[1]
    assert new.provenance == old.provenance and new.name == old.name and new.author == old.author
    assert new.message.startswith(old.message.rstrip("\n")) and "\nAdapted: resolved onto " in new.message
    assert new.base_commit == session["parent"] and "+fork and upstream 10" in new.diff

    run = fork.apply()
    assert [p["applied"] for p in run["patches"]] == ["applied", "applied"]
    assert "reused the resolution recorded by `ggstack refresh`" in run["patches"][1]["note"]
    assert (
        fork.repo.git("show", f"{run['patches'][1]['commit']}:f.txt")
        == _text("f", {10: "fork and upstream 10"}).strip()
    )

    # The bot says so too: in its Run and in the report (its step summary).
    saved = fork.repo.path / "sync-run.json"
    sync = fork.gg("sync", "s", "--onto", "main", "--dry-run", "--run-json", str(saved))
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "reused the resolution recorded by `ggstack refresh`" in json.loads(saved.read_text())["patches"][1]["note"]
    summary = fork.gg("report", str(saved), "--format", "markdown")
    assert "reused the resolution recorded by `ggstack refresh`" in " ".join(summary.stdout.split())

    # The base moves on elsewhere in the file: the stored resolution still applies.
    fork.repo.commit("upstream moves on", {"f.txt": _text("f", {10: "upstream 10", 18: "upstream 18"}), "n.txt": "n\n"})
    run = fork.apply()
    assert [p["applied"] for p in run["patches"]] == ["applied", "applied"]
    shown = fork.repo.git("show", f"{run['patches'][1]['commit']}:f.txt")
    assert "fork and upstream 10" in shown and "upstream 18" in shown

    # The teammate's copy still has the old patch: rerere gives the recorded resolution back.
    session = json.loads(fork.ok("resolve", "s", "2", "--json", patches=teammate).stdout)
    assert session["conflicts"] == [] and session["reused"] == ["f.txt"]
    assert "fork and upstream 10" in (Path(session["worktree"]) / "f.txt").read_text()
    fork.ok("refresh", "s", "2", patches=teammate)
    assert "+fork and upstream 10" in store.load(str(teammate), "s").patches[1].diff
    # rerere's records are ggstack's: an rr-cache in the user's git dir would turn rerere on
    # for every merge of theirs.
    assert not (fork.repo.path / ".git" / "rr-cache").exists()
    assert any((fork.repo.path / ".git" / "ggstack" / "rr-cache").iterdir())


def test_a_users_own_rr_cache_is_shared_and_left_in_place(fork: Fork) -> None:
    """A rerere user has an rr-cache already: ggstack's records go there, as any rerere's would."""
    theirs = fork.repo.path / ".git" / "rr-cache"
    theirs.mkdir()
    session = json.loads(fork.ok("resolve", "s", "2", "--onto", "main", "--json").stdout)
    (Path(session["worktree"]) / "f.txt").write_text(_text("f", {10: "both 10"}))
    fork.ok("refresh", "s", "2")
    assert theirs.is_dir() and any(theirs.iterdir())


def test_abort_removes_the_worktree_and_changes_nothing(fork: Fork) -> None:
    before, user = snapshot(fork.patches), fork.user_state()
    path = Path(fork.ok("resolve", "s", "0002").stdout.strip())
    assert path.is_dir()
    assert fork.ok("refresh", "s", "2", "--abort").stdout.strip() == f"removed {path}"
    assert not path.exists() and str(path) not in fork.repo.git("worktree", "list")
    assert snapshot(fork.patches) == before and fork.user_state() == user
    none = fork.gg("refresh", "s", "2")
    assert none.returncode == 2 and "no resolve in progress for 0002-fix-f-line-ten.patch" in none.stderr


def test_a_resolution_that_takes_everything_out_is_refused(fork: Fork) -> None:
    path = Path(fork.ok("resolve", "s", "2").stdout.strip())
    (path / "f.txt").write_text(_text("f", {10: "upstream 10"}))  # the base's side: nothing of the patch left
    before = snapshot(fork.patches)
    proc = fork.gg("refresh", "s", "2")
    assert proc.returncode == 2 and "changes nothing on its parent" in proc.stderr and "ggstack drop" in proc.stderr
    said = " ".join(proc.stderr.split())
    assert "`ggstack remove s 0002-fix-f-line-ten.patch`" in said, said  # what drops it when the base lacks it
    assert snapshot(fork.patches) == before


def test_an_earlier_conflict_is_resolved_first(fork: Fork) -> None:
    fork.repo.commit("upstream changes a too", {"a.txt": _text("a", {3: "a upstream"})})
    proc = fork.gg("resolve", "s", "2")
    assert (
        proc.returncode == 2
        and "0001-fix-a-change-a.patch, before 0002-fix-f-line-ten.patch, conflicts too" in proc.stderr
        and "drop it (ggstack drop --represented)" in proc.stderr
    )


def _admin_dir(worktree: Path) -> Path:
    return Path((worktree / ".git").read_text().split("gitdir: ", 1)[1].strip())


@pytest.mark.parametrize("lock", ["index.lock", "MERGE_RR.lock"])
def test_refresh_recovers_from_the_lock_a_killed_git_left_in_its_worktree(fork: Fork, lock: str) -> None:
    """A refresh killed while its git held the worktree's lock: the next refresh goes on,
    as no process holds that lock any more; nothing for the user to delete by hand."""
    path = Path(fork.ok("resolve", "s", "2", "--onto", "main").stdout.strip())
    (path / "f.txt").write_text(_text("f", {10: "both 10"}))
    (_admin_dir(path) / lock).write_bytes(b"")  # what git leaves when killed between lock and commit
    fork.ok("refresh", "s", "2")
    assert "+both 10" in store.load(str(fork.patches), "s").patches[1].diff
    assert not path.exists()
    assert any((fork.repo.path / ".git" / "ggstack" / "rr-cache").iterdir())  # rerere recorded it


def test_a_half_removed_resolve_worktree_is_cleared_and_resolve_starts_again(fork: Fork) -> None:
    """A kill while a finished refresh removed its worktree leaves the session beside a
    directory that is no worktree any more: resolve starts afresh, refresh says none is in progress."""
    path = Path(fork.ok("resolve", "s", "2", "--onto", "main").stdout.strip())
    (path / ".git").unlink()  # the worktree half removed
    none = fork.gg("refresh", "s", "2")
    assert none.returncode == 2 and "no resolve in progress" in none.stderr, none.stderr
    again = json.loads(fork.ok("resolve", "s", "2", "--onto", "main", "--json").stdout)
    assert again["conflicts"] == ["f.txt"] and "<<<<<<< " in (Path(again["worktree"]) / "f.txt").read_text()


def test_a_worktree_half_made_by_a_killed_resolve_is_replaced(fork: Fork) -> None:
    """Killed inside ``git worktree add``: git's admin entry stays locked ("initializing") and the
    directory half there; the next resolve clears both and makes the worktree again."""
    path = Path(fork.ok("resolve", "s", "2", "--onto", "main").stdout.strip())
    admin = _admin_dir(path)
    session = fork.repo.path / ".git" / "ggstack" / "resolve" / "s"
    for f in session.glob("*.json"):
        f.unlink()  # killed before the session was written
    (admin / "locked").write_text("initializing")
    (admin / "index.lock").write_bytes(b"")
    proc = json.loads(fork.ok("resolve", "s", "2", "--onto", "main", "--json").stdout)
    assert proc["conflicts"] == ["f.txt"]
    (Path(proc["worktree"]) / "f.txt").write_text(_text("f", {10: "both 10"}))
    fork.ok("refresh", "s", "2")
    assert fork.repo.git("worktree", "list", "--porcelain").count("worktree ") == 1


def test_resolve_of_a_patch_that_applies_says_there_is_no_conflict(fork: Fork) -> None:
    """It said "edit the files there" as for a conflict; 0001 applies cleanly onto main."""
    proc = fork.ok("resolve", "s", "1", "--onto", "main")
    assert "no conflict: 0001-fix-a-change-a.patch applies cleanly onto main" in " ".join(proc.stderr.split())
    assert "conflicts in" not in proc.stderr
    fork.ok("refresh", "s", "1", "--abort")
