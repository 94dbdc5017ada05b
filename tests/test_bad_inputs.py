"""Bad input that once reached a traceback or the wrong exit code: now exit 2 with a message.

Each case is what a probe found; ``test_fuzz.py`` keeps the classes of input they came
from (Run JSON, stack files, forge answers) from finding another.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack


def _deep(depth: int) -> str:
    return '{"stack": "s", "base_ref": "main", "base": "x", "patches": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("depth", [100_000, 5_000])
def test_a_run_json_nested_past_the_parser_is_exit_2(tmp_path: Path, depth: int) -> None:
    saved = tmp_path / "run.json"
    saved.write_text(_deep(depth))
    proc = run_ggstack("report", str(saved), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "not a ggstack Run" in proc.stderr and "run.json" in proc.stderr and "Traceback" not in proc.stderr


def test_a_results_file_nested_past_the_parser_is_exit_2(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "fork")
    g.commit("base", {"a.txt": "a\n"})
    patches = str(tmp_path / "patches")
    assert (
        run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "main", cwd=g.path).returncode
        == 0
    )
    results = tmp_path / "results.json"
    results.write_text("[" * 100_000 + "]" * 100_000)
    proc = run_ggstack("--patches", patches, "test", "s", "--merge", str(results), cwd=g.path)
    assert proc.returncode == 2 and "results.json" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture
def newline_fork(tmp_path: Path) -> tuple[GitRepo, str]:
    """A repository whose path holds a newline: git takes it, and so must ggstack."""
    g = GitRepo.init(tmp_path / "new\nline" / "fork")
    g.commit("base", {"a.txt": "".join(f"a {i}\n" for i in range(10)), "tests/test_a.py": "def test_a():\n    pass\n"})
    g.git("branch", "base")
    g.commit(
        "fix a",
        {
            "a.txt": "".join(f"a {i}\n" for i in range(10)).replace("a 3", "a three"),
            "tests/test_a.py": "def test_a():\n    assert 1\n",
        },
    )
    return g, str(g.path.parent / "patches")


def test_a_repository_path_with_a_newline_goes_through_the_loop(newline_fork: tuple[GitRepo, str]) -> None:
    g, patches = newline_fork
    for args in (
        ["init", "s", "--repo-slug", "o/r", "--base", "base"],
        ["import", "s", "base..main"],
        ["apply", "s", "--json"],
        ["check", "s", "--json"],
        ["pr", "s", "--dry-run"],
    ):
        proc = run_ggstack("--patches", patches, *args, cwd=g.path, env={"GITHUB_TOKEN": ""})
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    toml = Path(patches, "s", "stack.toml")
    toml.write_text(
        toml.read_text().replace('cpu = "', f'cpu = "{sys.executable} -m pytest -q -p no:cacheprovider {{tests}} # ', 1)
    )
    proc = run_ggstack("--patches", patches, "test", "s", "--json", cwd=g.path)
    assert proc.returncode in (0, 1), proc.stderr
    runs = json.loads(proc.stdout)["patches"][0]["tests"]
    assert {(r["where"], r["status"]) for r in runs} >= {("base", "passed"), ("patched", "passed")}, runs
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("base", ["main:../../x", "main:a.txt", "main lane", "ma\tin"])
def test_a_base_that_is_no_ref_is_exit_2_naming_the_key(tmp_path: Path, base: str) -> None:
    g = GitRepo.init(tmp_path / "fork")
    g.commit("base", {"a.txt": "a\n"})
    g.commit("fix", {"a.txt": "b\n"})
    patches = str(tmp_path / "patches")
    assert (
        run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "main", cwd=g.path).returncode
        == 0
    )
    assert run_ggstack("--patches", patches, "import", "s", "HEAD", cwd=g.path).returncode == 0
    toml = Path(patches, "s", "stack.toml")
    text = toml.read_text()
    toml.write_text(text.replace('base = "main"', f"base = {json.dumps(base)}"))
    for args in (["apply", "s"], ["check", "s"], ["list", "s"]):
        proc = run_ggstack("--patches", patches, *args, cwd=g.path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "target.base" in proc.stderr and "Traceback" not in proc.stderr
    toml.write_text(text)
    for args in (["apply", "s", "--onto", base], ["check", "s", "--onto", base]):
        proc = run_ggstack("--patches", patches, *args, cwd=g.path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "infrastructure" not in proc.stderr


def test_git_refuses_nothing_the_quoted_alternates_line_carries(tmp_path: Path) -> None:
    """The test checkout borrows the repository's objects through a quoted alternates line."""
    from ggstack import git

    g = GitRepo.init(tmp_path / 'a "quoted"\\ new\nline' / "fork")
    sha = g.commit("base", {"a.txt": "a\n"})
    checkout = tmp_path / "checkout"
    git.Repository(str(g.path)).add_isolated_checkout(str(checkout), sha)
    shown = subprocess.run(["git", "-C", str(checkout), "show", "HEAD:a.txt"], capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout == "a\n", shown.stderr


@pytest.mark.parametrize("shard", ["²/4", "1/٤", "0/2", "3/2", "2", "a/b"])
def test_a_bad_shard_is_a_user_error_naming_it(shard: str) -> None:
    # "²".isdigit() is true but int("²") raises: a traceback, before the ASCII check.
    from ggstack.commands.test import _parse_shard
    from ggstack.errors import UserError

    with pytest.raises(UserError, match=r"--shard .*expected K/N"):
        _parse_shard(shard)
