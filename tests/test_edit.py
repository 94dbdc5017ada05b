"""``ggstack edit`` and ``squash``: a patch's message changes, or two neighbours become one, and nothing is lost.

Real repositories; the editor is a real program run through $EDITOR, as a
user's would be; ggstack run as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.model import Stack
from ggstack.series import store

SLUG = "owner/repo"


def _text(name: str, change: int | None = None) -> str:
    return "".join(f"{name} line {i}{' changed' if i == change else ''}\n" for i in range(12))


class Fork:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        self.repo.commit("base", {f"{n}.txt": _text(n) for n in "abc"})
        self.repo.git("checkout", "-q", "-b", "feature")
        self.picks = [self.repo.commit(f"fix({n}): change {n}\n\nWhy {n}.", {f"{n}.txt": _text(n, 3)}) for n in "abc"]
        self.repo.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        self.stack = self.patches / "s"
        store.init(str(self.patches), "s", SLUG, "main")
        stack = store.load(str(self.patches), "s")
        repo = git.Repository(str(self.repo.path))
        store.save(importing.commits(repo, stack, self.picks[:1], original_pr="owner/repo#7").stack)
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(repo, stack, self.picks[1:], original_pr="owner/repo#8").stack)

    def gg(self, *args: str, editor: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {"EDITOR": editor, "VISUAL": ""} if editor else None
        argv = ["--repo", str(self.repo.path), "--patches", str(self.patches), *args]
        return run_ggstack(*argv, cwd=self.tmp, env=env)

    def editor(self, old: str, new: str) -> str:
        """An $EDITOR that replaces ``old`` with ``new`` in the file it is given."""
        script = self.tmp / "editor.py"
        script.write_text(
            f"import sys\np = sys.argv[1]\ntext = open(p).read()\nopen(p, 'w').write(text.replace({old!r}, {new!r}))\n"
        )
        return f"{sys.executable} {script}"

    def load(self) -> Stack:
        return store.load(str(self.patches), "s")


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_edit_changes_the_message_and_keeps_identity_diff_and_name(fork: Fork) -> None:
    old = fork.load().patches[1]
    proc = fork.gg(
        "edit",
        "s",
        "2",
        editor=fork.editor("fix(b): change b\n\nWhy b.", "fix(b): a better subject\n\nWhy b, said better."),
    )
    assert proc.returncode == 0, proc.stderr
    assert "message changed" in proc.stdout
    new = fork.load().patches[1]
    assert new.subject == "fix(b): a better subject" and "Why b, said better." in new.message
    assert (new.name, new.diff, new.provenance, new.author, new.date, new.source_commit) == (
        old.name,
        old.diff,
        old.provenance,
        old.author,
        old.date,
        old.source_commit,
    )
    raw = (fork.stack / new.name).read_text()
    assert "Subject: [PATCH 2/3] fix(b): a better subject" in raw and f"From {fork.picks[1]} " in raw
    # git am takes it, with the new message.
    fork.repo.git("checkout", "-q", "--detach", "main")
    fork.repo.git("am", "-q", *[str(fork.stack / p.name) for p in fork.load().patches])
    assert fork.repo.git("log", "-1", "--format=%s", "HEAD~1") == "fix(b): a better subject"


def test_edit_refuses_a_message_that_loses_its_identity_and_keeps_the_text(fork: Fork) -> None:
    before = snapshot(fork.stack)
    spid = fork.load().patches[0].provenance.stack_patch_id
    proc = fork.gg(
        "edit", "s", "1", editor=fork.editor(f"Stack-Patch-Id: {spid}", "Signed-off-by: Me <me@example.com>")
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"must keep its one trailer Stack-Patch-Id: {spid} (it has: none)" in proc.stderr
    kept = proc.stderr.rsplit("your message is kept in ", 1)[1].split()[0]
    assert "Signed-off-by: Me" in Path(kept).read_text()
    bad_pr = fork.gg("edit", "s", "1", editor=fork.editor("owner/repo#7", "PR seven"))
    assert bad_pr.returncode == 2 and "Original-PR: 'PR seven' is not owner/repo#N" in bad_pr.stderr
    assert snapshot(fork.stack) == before
    same = fork.gg("edit", "s", "1", editor="true")  # the editor changes nothing
    assert same.returncode == 0 and "unchanged" in same.stdout and snapshot(fork.stack) == before


def test_squash_makes_two_neighbours_one_with_the_provenance_of_both(fork: Fork) -> None:
    before = fork.load()
    tree = json.loads(fork.gg("apply", "s", "--onto", "main", "--json").stdout)["patches"][-1]["commit"]
    proc = fork.gg("squash", "s", "1", "2")
    assert proc.returncode == 0, proc.stderr
    assert "squashed 0002-fix-b-change-b.patch into 0001-fix-a-change-a.patch" in proc.stdout
    after = fork.load()
    assert [p.name for p in after.patches] == ["0001-fix-a-change-a.patch", "0002-fix-c-change-c.patch"]
    one = after.patches[0]
    a, b = before.patches[0], before.patches[1]
    assert one.provenance.stack_patch_id == a.provenance.stack_patch_id
    assert one.subject == a.subject and "fix(b): change b\n\nWhy b." in one.message
    trailers = dict(git.parse_trailers([one.message])[0])
    assert f"Squashed: {b.provenance.stack_patch_id} (fix(b): change b)" in one.message
    assert one.source_commit == fork.picks[0] and "Cherry-picked-from" not in one.message  # the fork's own commits
    assert "Original-PR: owner/repo#7" in one.message and "Original-PR: owner/repo#8" in one.message
    assert trailers["Stack-Patch-Id"] == a.provenance.stack_patch_id
    assert set(one.paths) == {"a.txt", "b.txt"} and one.base_commit == a.base_commit
    assert "[PATCH 2/2]" in (fork.stack / "0002-fix-c-change-c.patch").read_text()
    # The series applies to the same tree as before.
    run = json.loads(fork.gg("apply", "s", "--onto", "main", "--json").stdout)
    assert [p["applied"] for p in run["patches"]] == ["applied", "applied"]
    assert fork.repo.tree(run["patches"][-1]["commit"]) == fork.repo.tree(tree)


def test_squash_refuses_what_are_not_neighbours(fork: Fork) -> None:
    before = snapshot(fork.stack)
    proc = fork.gg("squash", "s", "1", "3")
    assert proc.returncode == 2 and "are not neighbours" in proc.stderr
    assert snapshot(fork.stack) == before


def test_shell_completion_script_and_stack_names(fork: Fork) -> None:
    ggstack = str(Path(sys.executable).parent / "ggstack")
    script = subprocess.run(
        [ggstack], env={"_GGSTACK_COMPLETE": "bash_source", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert "_ggstack_completion()" in script.stdout and "complete " in script.stdout
    for words, cword in (
        (f"ggstack --patches {fork.patches} drop ", "4"),
        (f"ggstack drop --patches {fork.patches} ", "4"),
    ):
        said = subprocess.run(
            [ggstack],
            env={
                "_GGSTACK_COMPLETE": "bash_complete",
                "COMP_WORDS": words,
                "COMP_CWORD": cword,
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": os.environ.get("PYTHONPATH", ""),  # the ggstack under test, not the installed one
            },
            capture_output=True,
            text=True,
        )
        assert "plain,s" in said.stdout.split(), (words, said.stdout, said.stderr)


def test_squash_finds_trailers_that_end_a_paragraph_of_text(tmp_path: Path) -> None:
    """ "Body.\\nSigned-off-by: …" is a trailer block to git, so import appended its trailers there;
    squash took the whole paragraph for text and wrote the first's Stack-Patch-Id twice."""
    repo = GitRepo.init(tmp_path / "fork")
    repo.commit("base", {"r.txt": "0\n"})
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("first r\n\nBody one.\nSigned-off-by: A <a@example.com>", {"r.txt": "1\n"})
    repo.commit("second r", {"r.txt": "2\n"})
    gg = ["--repo", str(repo.path), "--patches", str(tmp_path / "patches")]
    for args in (["init", "s", "--repo-slug", SLUG, "--base", "main"], ["import", "s", "main..feature"]):
        assert run_ggstack(*gg, *args, cwd=tmp_path).returncode == 0
    before = store.load(str(tmp_path / "patches"), "s")
    assert run_ggstack(*gg, "squash", "s", "1", "2", cwd=tmp_path).returncode == 0
    (one,) = store.load(str(tmp_path / "patches"), "s").patches
    assert one.message.count("Stack-Patch-Id:") == 1
    assert one.message.startswith("first r\n\nBody one.\n\nsecond r\n\n")
    trailers = git.parse_trailers([one.message])[0]
    picked = [v for k, v in trailers if k == "Cherry-picked-from"]
    assert picked == [c for p in before.patches if (c := p.provenance.cherry_picked_from)]
    assert ("Signed-off-by", "A <a@example.com>") in trailers
