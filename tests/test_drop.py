"""``ggstack drop --represented``: what the base carries leaves the stack, with its record, and nothing else.

Real repositories: a fork whose feature branch has three fixes, a base that
cherry-picked the second one, ggstack run as a user runs it. A kill at every
file operation leaves the old stack or the new one with its record; the
forge side runs against the local GitHub-compatible server.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tomllib
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.series import patchfile, store

SLUG = "owner/repo"
KILL = "GGSTACK_DEBUG_KILL_AFTER_FILE_OPS"
EPOCH = {"SOURCE_DATE_EPOCH": "1800000000"}


def _text(name: str, change: int | None = None) -> str:
    return "".join(f"{name} line {i}{' changed' if i == change else ''}\n" for i in range(12))


class Fork:
    """main: a base; feature: fixes a, b, c; then main cherry-picks b (the base now carries it)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        self.repo.commit("base", {f"{n}.txt": _text(n) for n in "abc"})
        self.repo.git("checkout", "-q", "-b", "feature")
        self.picks = [self.repo.commit(f"fix({n}): change {n}", {f"{n}.txt": _text(n, 3)}) for n in "abc"]
        self.repo.git("checkout", "-q", "main")
        self.repo.git("cherry-pick", self.picks[1])
        self.landed = self.repo.sha("main")
        self.patches = tmp / "patches"
        self.stack = self.patches / "s"
        store.init(str(self.patches), "s", SLUG, "main")
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(git.Repository(str(self.repo.path)), stack, self.picks).stack)

    def gg(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["--repo", str(self.repo.path), "--patches", str(self.patches), *args]
        return run_ggstack(*argv, cwd=self.tmp, env={**EPOCH, **(env or {})})

    def ok(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
        proc = self.gg(*args, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def listing(self) -> list[dict]:
        return json.loads(self.ok("list", "s", "--json").stdout)["s"]

    def branches(self) -> list[str]:
        return self.repo.git("for-each-ref", "--format=%(refname)", "refs/heads/gg/").splitlines()


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_drop_takes_out_the_represented_patch_and_records_why(fork: Fork) -> None:
    fork.ok("apply", "s", "--onto", "main~1")  # before the base had b: three branches
    assert len(fork.branches()) == 3
    proc = fork.ok("drop", "s", "--represented", "--onto", "main")
    assert "0002 fix(b): change b" in proc.stdout and fork.landed[:10] in proc.stdout

    listing = fork.listing()
    assert [p["source_commit"] for p in listing] == [fork.picks[0], fork.picks[2]]
    assert [p["name"] for p in listing] == ["0001-fix-a-change-a.patch", "0002-fix-c-change-c.patch"]
    assert (fork.stack / "series").read_text().splitlines()[1:] == [p["name"] for p in listing]
    assert "[PATCH 2/2]" in (fork.stack / "0002-fix-c-change-c.patch").read_text()

    record = tomllib.loads((fork.stack / "dropped.toml").read_text())["dropped"]
    (entry,) = record
    assert entry["name"] == "0002-fix-b-change-b.patch" and entry["subject"] == "fix(b): change b"
    assert entry["represented_by"] == [fork.landed] and entry["represented_subjects"] == ["fix(b): change b"]
    assert entry["base"] == fork.landed and entry["base_ref"] == "main"
    assert entry["source_commit"] == fork.picks[1] and entry["stack_patch_id"].startswith("I")
    assert entry["dropped_at"] == "2027-01-15T08:00:00Z"  # SOURCE_DATE_EPOCH
    assert "patch-id" in entry["reason"] or fork.landed[:10] in entry["reason"]
    # Its branch is gone; the others' stay (apply renames them when it next runs).
    assert "refs/heads/gg/s/02-fix-b-change-b" not in fork.branches() and len(fork.branches()) == 2

    shown = json.loads(fork.ok("list", "s", "--dropped", "--json").stdout)["s"]
    assert [e["stack_patch_id"] for e in shown] == [entry["stack_patch_id"]]
    table = fork.ok("list", "s", "--dropped").stdout
    assert "fix(b): change b" in table and fork.landed[:10] in table

    # Again: nothing is represented now; nothing changes, not a byte.
    before = snapshot(fork.stack)
    again = json.loads(fork.ok("drop", "s", "--represented", "--onto", "main", "--json").stdout)
    assert again["dropped"] == [] and snapshot(fork.stack) == before


def test_drop_from_a_saved_run_and_the_runs_it_refuses(fork: Fork) -> None:
    run = fork.gg("check", "s", "--onto", "main", "--json")
    (fork.tmp / "run.json").write_text(run.stdout)
    before = snapshot(fork.stack)
    dry = json.loads(fork.ok("drop", "s", "--represented", "--run", "run.json", "--dry-run", "--json").stdout)
    assert [d["name"] for d in dry["dropped"]] == ["0002-fix-b-change-b.patch"] and dry["dry_run"]
    assert snapshot(fork.stack) == before

    apply_run = fork.gg("apply", "s", "--onto", "main", "--json")
    (fork.tmp / "apply.json").write_text(apply_run.stdout)
    bad = fork.gg("drop", "s", "--represented", "--run", "apply.json")
    assert bad.returncode == 2 and "drop needs the Run of `check`" in bad.stderr and "Traceback" not in bad.stderr
    other = json.loads(run.stdout) | {"stack": "t"}
    (fork.tmp / "other.json").write_text(json.dumps(other))
    bad = fork.gg("drop", "s", "--represented", "--run", "other.json")
    assert bad.returncode == 2 and "the Run is of stack 't', not 's'" in bad.stderr
    # --represented is what drop takes out: the default, the same plan without the word.
    plain = json.loads(fork.ok("drop", "s", "--run", "run.json", "--dry-run", "--json").stdout)
    assert plain == dry
    assert snapshot(fork.stack) == before and len(fork.branches()) == 2

    fork.ok("drop", "s", "--represented", "--run", "run.json")
    assert [p["source_commit"] for p in fork.listing()] == [fork.picks[0], fork.picks[2]]


def test_a_branch_someone_moved_or_checked_out_is_kept_and_a_later_drop_removes_it(fork: Fork) -> None:
    fork.ok("apply", "s", "--onto", "main~1")  # before the base had b: three branches
    fork.repo.git("worktree", "add", "-q", str(fork.tmp / "wt"), "gg/s/02-fix-b-change-b")
    proc = fork.ok("drop", "s", "--represented", "--onto", "main")
    assert "branch kept: refs/heads/gg/s/02-fix-b-change-b (checked out in" in proc.stderr
    assert "refs/heads/gg/s/02-fix-b-change-b" in fork.branches()
    assert len(fork.listing()) == 2  # the stack changed all the same
    # Once that worktree is elsewhere, the next drop (nothing to drop) removes the recorded branch.
    fork.repo.git("-C", str(fork.tmp / "wt"), "checkout", "-q", "--detach")
    out = json.loads(fork.ok("drop", "s", "--represented", "--onto", "main", "--json").stdout)
    assert out["branches_deleted"] == ["refs/heads/gg/s/02-fix-b-change-b"]
    assert "refs/heads/gg/s/02-fix-b-change-b" not in fork.branches()


def test_a_branch_moved_by_someone_else_is_not_deleted(fork: Fork) -> None:
    fork.ok("apply", "s", "--onto", "main~1")  # before the base had b: three branches
    fork.repo.git("branch", "-f", "gg/s/02-fix-b-change-b", "main")
    proc = fork.ok("drop", "s", "--represented", "--onto", "main")
    assert "(moved since ggstack wrote it)" in proc.stderr
    assert fork.repo.sha("gg/s/02-fix-b-change-b") == fork.landed


@pytest.mark.slow
def test_a_kill_at_any_file_operation_leaves_the_old_stack_or_the_new_one_with_its_record(fork: Fork) -> None:
    args = ["drop", "s", "--represented", "--onto", "main"]
    saved = fork.tmp / "saved"
    shutil.copytree(fork.patches, saved)
    old = snapshot(fork.stack)
    fork.ok(*args)
    new = snapshot(fork.stack)
    assert "dropped.toml" in new and "dropped.toml" not in old
    kills, seen = 0, set()
    for n in range(1, 200):
        shutil.rmtree(fork.patches)
        shutil.copytree(saved, fork.patches)
        proc = fork.gg(*args, env={KILL: str(n)})
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, (n, proc.stderr)
        kills += 1
        fork.listing()  # loads, without any repair first
        now = snapshot(fork.stack)
        assert now in (old, new), n
        seen.add("old" if now == old else "new")
        fork.ok(*args)  # the next drop goes on from there
        assert snapshot(fork.stack) == new, n
        assert sorted(p.name for p in fork.patches.iterdir()) == ["s"], n
    else:
        raise AssertionError("never finished")
    assert kills >= 4 and seen == {"old", "new"}


def test_close_redundant_closes_the_dropped_patchs_pr_with_the_evidence(tmp_path: Path) -> None:
    from forge_server import FakeGitHub
    from test_pr import SLUG as PR_SLUG
    from test_pr import TOKEN, World

    with FakeGitHub(TOKEN) as forge:
        w = World(tmp_path, forge)
        w.stack("s", [w.a, w.b, w.c])
        w.ok()
        p1, p2, p3 = w.pulls()
        landed = w.land(w.b)
        argv = ["--repo", str(w.fork.path), "--patches", str(w.patches), "drop", "s", "--represented"]
        argv += ["--onto", "main", "--close-redundant", "--json"]
        before = snapshot(w.patches / "s")
        # Without a token nothing can be closed: refused, and the stack is as it was.
        no_token = run_ggstack(*argv, cwd=tmp_path, env={})
        assert no_token.returncode == 2 and "GITHUB_TOKEN" in no_token.stderr
        assert snapshot(w.patches / "s") == before and w.pull("fix(b)")["state"] == "open"

        proc = run_ggstack(*argv, cwd=tmp_path, env=w.env())
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = json.loads(proc.stdout)
        assert [d["name"] for d in out["dropped"]] == ["0002-fix-b-retain-b-on-prewarm.patch"]
        assert out["closed_prs"][0]["number"] == p2["number"]
        assert w.pull("fix(b)")["state"] == "closed" and w.pull("fix(a)")["state"] == "open"
        (comment,) = w.forge.comments(PR_SLUG, p2["number"])
        assert comment["body"].startswith("Closing as already represented") and landed[:10] in comment["body"]
        assert w.forge.comments(PR_SLUG, p1["number"]) == [] and w.forge.comments(PR_SLUG, p3["number"]) == []
        names = [p.name for p in store.load(str(w.patches), "s").patches]
        assert names == ["0001-fix-a-preallocate-the-a-buffers.patch", "0002-fix-c-follow-on-for-c.patch"]


def test_a_represented_patch_that_asks_for_a_human_look_is_kept_unless_asked(fork: Fork) -> None:
    """The probe (P-u): drop --represented threw away check's "human look" (e.g. adapted pick, rest rewritten)."""
    run = json.loads(fork.gg("check", "s", "--onto", "main", "--json").stdout)
    (b,) = [o for o in run["patches"] if o["verdict"] == "represented"]
    b["recommendation"] = "human look"
    (fork.tmp / "run.json").write_text(json.dumps(run))
    before = snapshot(fork.stack)

    out = json.loads(fork.ok("drop", "s", "--represented", "--run", "run.json", "--json").stdout)
    assert out["dropped"] == [] and [k["name"] for k in out["kept_human_look"]] == ["0002-fix-b-change-b.patch"]
    assert out["kept_human_look"][0]["why"]
    assert snapshot(fork.stack) == before
    said = fork.ok("drop", "s", "--represented", "--run", "run.json").stdout
    assert "kept 0002-fix-b-change-b.patch: represented, but human look" in " ".join(said.split())

    out = json.loads(
        fork.ok("drop", "s", "--represented", "--run", "run.json", "--include-human-look", "--json").stdout
    )
    assert [d["name"] for d in out["dropped"]] == ["0002-fix-b-change-b.patch"] and out["kept_human_look"] == []


def test_a_dry_run_names_the_branches_the_drop_would_delete_and_keep_and_deletes_none(fork: Fork) -> None:
    fork.ok("apply", "s", "--onto", "main~1")  # before the base had b: three branches
    refs_before = fork.repo.refs()
    (fork.tmp / "run.json").write_text(fork.ok("check", "s", "--onto", "main", "--json").stdout)
    objects = fork.repo.git("count-objects", "-v")
    fork.ok("drop", "s", "--represented", "--run", "run.json", "--dry-run", "--json")
    assert fork.repo.git("count-objects", "-v") == objects  # nor an object (the record's blob)
    dry = json.loads(fork.ok("drop", "s", "--represented", "--onto", "main", "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["branches_deleted"] == ["refs/heads/gg/s/02-fix-b-change-b"]
    table = fork.ok("drop", "s", "--represented", "--onto", "main", "--dry-run").stdout
    assert "gg/s/02-fix-b-change-b (would be deleted)" in table
    assert fork.repo.refs() == refs_before  # nothing written, not even ggstack's own record
    # One someone moved would be kept, and the dry run says so as the real one would.
    fork.repo.git("branch", "-f", "gg/s/02-fix-b-change-b", "main")
    proc = fork.ok("drop", "s", "--represented", "--onto", "main", "--dry-run")
    assert "branch would be kept: refs/heads/gg/s/02-fix-b-change-b (moved since ggstack wrote it)" in proc.stderr
    real = json.loads(fork.ok("drop", "s", "--represented", "--onto", "main", "--json").stdout)
    assert real["branches_deleted"] == [] and real["branches_kept"] == dry["branches_kept"] + [
        "refs/heads/gg/s/02-fix-b-change-b (moved since ggstack wrote it)"
    ]


def test_a_dropped_patch_stays_in_the_stack_and_comes_back_with_import_from_or_git_am(fork: Fork) -> None:
    """Nothing leaves silently: the dropped patch's file, as it was, is kept under dropped/ (beside
    dropped.toml), and brings the patch back by itself."""
    stored = (fork.stack / "0002-fix-b-change-b.patch").read_bytes()
    fork.ok("drop", "s", "--represented", "--onto", "main")
    (entry,) = tomllib.loads((fork.stack / "dropped.toml").read_text())["dropped"]
    assert entry["file"] == "dropped/0001-fix-b-change-b.patch"
    assert (fork.stack / entry["file"]).read_bytes() == stored
    assert "dropped/" not in (fork.stack / "series").read_text()  # git am patches/s/*.patch and quilt skip it

    fork.ok("import", "s", "--from", str(fork.stack / "dropped"), "--onto", fork.picks[0])
    back = fork.listing()[-1]
    assert back["subject"] == "fix(b): change b"
    assert store.load(str(fork.patches), "s").patches[-1].diff == patchfile.parse_patch(stored, "x.patch").diff

    wt = fork.tmp / "am"
    fork.repo.git("worktree", "add", "-q", "--detach", str(wt), f"{fork.picks[1]}~1")
    subprocess.run(["git", "-C", str(wt), "am", "-q", str(fork.stack / entry["file"])], check=True)
    assert subprocess.run(["git", "-C", str(wt), "diff", "--quiet", fork.picks[1]]).returncode == 0


def test_drop_refuses_a_patch_with_lines_of_the_forks_own_unless_forced(fork: Fork) -> None:
    """A Run that says represented (hand-made, or of a ggstack before this rule) while it names lines
    of the fork's own in the patch, or says nothing of them: drop would lose them. Exit 2, naming
    the patch and the lines; nothing written. --force drops it, its file kept under dropped/."""
    run = json.loads(fork.ok("check", "s", "--onto", "main", "--json").stdout)
    b = next(p for p in run["patches"] if p["name"].startswith("0002"))
    b["text"]["own_lines"] = ["b.txt hunk @@ -3 +3 @@: +b line 3 changed"]
    (fork.tmp / "run.json").write_text(json.dumps(run))
    before = snapshot(fork.stack)
    bad = fork.gg("drop", "s", "--represented", "--run", "run.json")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "0002-fix-b-change-b.patch: the fork's own lines b.txt hunk" in bad.stderr and "--force" in bad.stderr
    assert snapshot(fork.stack) == before

    b["text"] = None  # an older Run: no word on the fork's own lines
    (fork.tmp / "run.json").write_text(json.dumps(run))
    bad = fork.gg("drop", "s", "--represented", "--run", "run.json")
    assert bad.returncode == 2 and "does not say which of its lines are the fork's own" in bad.stderr
    assert snapshot(fork.stack) == before

    fork.ok("drop", "s", "--represented", "--run", "run.json", "--force")
    assert [p["source_commit"] for p in fork.listing()] == [fork.picks[0], fork.picks[2]]
    assert (fork.stack / "dropped" / "0001-fix-b-change-b.patch").exists()
