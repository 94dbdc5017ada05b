"""No value from a stack file or the command line reaches git as an option.

Each argument position gets a value git would take as an option that runs
something or writes a file (``--upload-pack=…``, ``--output=…``); the marker
file such a value would create must not exist afterwards, and ggstack says
what is wrong (exit 2) instead of running it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git
from ggstack.errors import UserError


class Fork:
    """A fork with a remote and a stack ``s`` of two patches imported from ``topic``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.marker = tmp / "MARKER"
        self.remote = GitRepo.init(tmp / "remote.git", bare=True)
        self.g = GitRepo.init(tmp / "fork")
        self.g.git("remote", "add", "origin", str(self.remote.path))
        self.root = self.g.commit("root", {"a.txt": "a\n", "b.txt": "b\n"})
        self.g.git("push", "-q", "origin", "main")
        self.g.git("checkout", "-q", "-b", "topic")
        self.g.commit("one", {"a.txt": "a1\n"})
        self.g.commit("two", {"b.txt": "b1\n"})
        self.g.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        assert self.gg("init", "s", "--repo-slug", "o/r", "--base", "main").returncode == 0
        assert self.gg("import", "s", f"{self.root}..topic").returncode == 0

    def gg(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_ggstack("--patches", str(self.patches), *args, cwd=self.g.path, env={"GITHUB_TOKEN": ""})

    def edit_config(self, old: str, new: str) -> None:
        toml = self.patches / "s" / "stack.toml"
        text = toml.read_text()
        assert old in text, old
        toml.write_text(text.replace(old, new))

    def upload_pack(self) -> str:
        return f"--upload-pack=touch {self.marker}; git-upload-pack"

    def output(self) -> str:
        return f"--output={self.marker}"


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def _refused(fork: Fork, proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr
    assert not fork.marker.exists()


@pytest.mark.parametrize("command", [("pr", "s", "--dry-run"), ("sync", "s", "--fetch", "--dry-run")])
def test_a_remote_that_is_an_option_in_stack_toml_runs_nothing(fork: Fork, command: tuple[str, ...]) -> None:
    fork.edit_config('remote = "origin"', f'remote = "{fork.upload_pack()}"')
    _refused(fork, fork.gg(*command), "stack.toml", "target.remote")


def test_a_remote_that_is_an_option_reaches_no_git_call(fork: Fork) -> None:
    repo = git.Repository(str(fork.g.path))
    for call in (
        lambda: repo.fetch(fork.upload_pack()),
        lambda: repo.ls_remote(fork.upload_pack(), ["refs/heads/main"]),
        lambda: repo.push(fork.upload_pack(), ["HEAD:refs/heads/x"], []),
        lambda: repo.fetch("not-a-remote"),
    ):
        with pytest.raises(UserError, match="neither a configured git remote"):
            call()
    assert not fork.marker.exists()
    assert repo.ls_remote("origin", ["refs/heads/main"]) == {"refs/heads/main": fork.root}
    assert repo.ls_remote(str(fork.remote.path.as_uri()), ["refs/heads/main"]) == {"refs/heads/main": fork.root}


def test_a_base_that_is_an_option_in_stack_toml_runs_nothing(fork: Fork) -> None:
    fork.edit_config('base = "main"', f'base = "{fork.output()}"')
    _refused(fork, fork.gg("apply", "s"), "target.base")


@pytest.mark.parametrize("command", ["apply", "check", "test"])
def test_an_onto_that_is_an_option_runs_nothing(fork: Fork, command: str) -> None:
    _refused(fork, fork.gg(command, "s", f"--onto={fork.output()}"), fork.output())


def test_a_branch_prefix_or_template_that_is_an_option_writes_nothing(fork: Fork) -> None:
    refs = fork.g.refs()
    _refused(fork, fork.gg("apply", "s", f"--branch-prefix={fork.output()}"))
    fork.edit_config('template = "gg/{stack}/{index:02d}-{slug}"', f'template = "{fork.output()}{{index}}"')
    _refused(fork, fork.gg("apply", "s"), "branches.template")
    assert fork.g.refs() == refs


def test_a_rev_range_that_is_an_option_runs_nothing(fork: Fork) -> None:
    _refused(fork, fork.gg("import", "s", "--", f"{fork.output()}..topic"), fork.output())
    _refused(fork, fork.gg("import", "s", "--", f"{fork.root}..{fork.output()}"), fork.output())
    _refused(fork, fork.gg("import", "s", "--", fork.output()), fork.output())
    _refused(fork, fork.gg("check", "--commits", "--onto", "main", "--", fork.output()))


def test_paths_that_are_options_are_paths(fork: Fork) -> None:
    fork.g.git("checkout", "-q", "topic")
    fork.g.commit("three", {"a.txt": "a2\n", "b.txt": "b2\n"})
    fork.g.git("checkout", "-q", "main")
    proc = fork.gg("import", "s", "topic~1..topic", f"--only={fork.output()}", "--only=a.txt")
    assert proc.returncode == 0, proc.stderr
    assert not fork.marker.exists()
