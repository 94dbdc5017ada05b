"""A ``--object-format=sha256`` repository, end to end: every id is git's, so the verdicts are right.

The fork has a base that cherry-picked one of two stack commits; on sha256
as on sha1, that one is represented (same patch-id) and the other is unique,
and the replayed branch has exactly the tree ``git cherry-pick`` makes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack


@pytest.fixture
def fork(tmp_path: Path) -> GitRepo:
    subprocess.run(["git", "init", "-q", "--object-format=sha256", "-b", "main", str(tmp_path / "fork")], check=True)
    g = GitRepo(tmp_path / "fork")
    g.commit("root", {f"{n}.txt": f"{n} 1\n{n} 2\n{n} 3\n" for n in "abc"})
    g.git("checkout", "-q", "-b", "topic")
    g.commit("fix a", {"a.txt": "a 1\na two\na 3\n"})
    g.commit("fix b", {"b.txt": "b 1\nb two\nb 3\n", "d/new.txt": "new\n"})
    g.git("checkout", "-q", "main")
    g.commit("upstream c", {"c.txt": "c 1\nc 2\nc three\n"})
    g.git("cherry-pick", "topic~1")
    assert len(g.sha("main")) == 64
    return g


def _gg(fork: GitRepo, *args: str) -> dict:
    proc = run_ggstack("--patches", str(fork.path.parent / "patches"), *args, "--json", cwd=fork.path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def test_import_apply_and_check_on_sha256(fork: GitRepo) -> None:
    patches = str(fork.path.parent / "patches")
    assert (
        run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "main", cwd=fork.path).returncode
        == 0
    )
    imported = _gg(fork, "import", "s", "main~2..topic")
    assert [p["source_commit"] for p in imported] == [fork.sha("topic~1"), fork.sha("topic")]

    applied = _gg(fork, "apply", "s")
    assert [p["applied"] for p in applied["patches"]] == ["empty", "applied"]
    fork.git("checkout", "-q", "-b", "by-git", "main")
    fork.git("cherry-pick", "topic")
    assert fork.tree(applied["patches"][1]["commit"]) == fork.tree("by-git")
    assert fork.sha("gg/s/02-fix-b") == applied["patches"][1]["commit"]

    checked = _gg(fork, "check", "s")
    assert [p["verdict"] for p in checked["patches"]] == ["represented", "unique"]
    assert checked["patches"][0]["represented_by"] == [fork.sha("main")]

    tested = _gg(fork, "test", "s")
    assert [p["verdict"] for p in tested["patches"]] == ["represented", "unique"]
    planned = run_ggstack("--patches", patches, "pr", "s", "--dry-run", cwd=fork.path, env={"GITHUB_TOKEN": ""})
    assert planned.returncode == 0, planned.stderr
    assert "open PR 1 of 1" in planned.stdout and "Traceback" not in planned.stderr


def test_check_commits_on_sha256_gives_the_right_verdicts(fork: GitRepo) -> None:
    run = _gg(fork, "check", "--commits", "--onto", "main", "topic", "topic~1")
    verdicts = {p["source_commit"]: p["verdict"] for p in run["patches"]}
    assert verdicts == {fork.sha("topic"): "unique", fork.sha("topic~1"): "represented"}


def test_the_whole_loop_on_sha256(tmp_path: Path) -> None:
    """Every command that changes a stack, on sha256: edit (message kept, and changed), move,
    squash, resolve/refresh, rebase, remove, drop, import --from, sync and report."""
    subprocess.run(["git", "init", "-q", "--object-format=sha256", "-b", "main", str(tmp_path / "fork")], check=True)
    g = GitRepo(tmp_path / "fork")
    old = g.commit("root", {f"{n}.txt": "".join(f"{n} {i}\n" for i in range(12)) for n in "abcd"})
    g.git("checkout", "-q", "-b", "topic")
    for n in "abcd":
        g.commit(f"fix {n}", {f"{n}.txt": "".join(f"{n} {i}\n" for i in range(12)).replace(f"{n} 5", f"{n} five")})
    g.git("checkout", "-q", "main")
    g.commit("upstream d", {"d.txt": "".join(f"d {i}\n" for i in range(12)).replace("d 5", "d FIVE")})
    g.git("cherry-pick", "topic~3")  # fix a: the base has it
    patches = str(tmp_path / "patches")

    def gg(*args: str, env: dict | None = None, ok: tuple[int, ...] = (0,)) -> str:
        proc = run_ggstack("--patches", patches, *args, cwd=g.path, env=env)
        assert proc.returncode in ok, (args, proc.stdout + proc.stderr)
        assert "Traceback" not in proc.stderr
        return proc.stdout

    gg("init", "s", "--repo-slug", "o/r", "--base", "main")
    gg("import", "s", f"{old}..topic")
    names = [p["name"] for p in json.loads(gg("list", "s", "--json"))["s"]]
    assert len(names) == 4
    gg("edit", "s", "1", env={"EDITOR": "true", "VISUAL": ""})  # the message as it was
    gg("edit", "s", "2", env={"EDITOR": "sed -i 1s/fix/Fix/", "VISUAL": ""})
    assert json.loads(gg("list", "s", "--json"))["s"][1]["subject"] == "Fix b"
    gg("move", "s", "3", "--to", "2")
    gg("squash", "s", "2", "3")
    applied = json.loads(gg("apply", "s", "--json", ok=(0, 1)))
    assert [p["applied"] for p in applied["patches"]] == ["empty", "applied", "conflict"]
    path = gg("resolve", "s", "3").strip()
    Path(path, "d.txt").write_text("".join(f"d {i}\n" for i in range(12)).replace("d 5", "d five and FIVE"))
    gg("refresh", "s", "3")
    checked = json.loads(gg("check", "s", "--json"))
    assert [p["verdict"] for p in checked["patches"]] == ["represented", "unique", "unique"]
    gg("drop", "s", "--represented")
    assert len(json.loads(gg("list", "s", "--json"))["s"]) == 2
    g.commit("upstream moves", {"e.txt": "e\n"})
    gg("rebase", "s", "--onto", "main")
    gg("remove", "s", "2")
    exported = tmp_path / "exported"
    g.git("format-patch", "-q", "-o", str(exported), f"{old}..topic~2")
    gg("init", "t", "--repo-slug", "o/r", "--base", "main")
    gg("import", "t", "--from", str(exported), "--onto", old)
    assert len(json.loads(gg("list", "t", "--json"))["t"]) == 2
    run_json = tmp_path / "run.json"
    gg("sync", "s", "--dry-run", "--run-json", str(run_json), env={"GITHUB_TOKEN": ""})
    assert "unique" in gg("report", str(run_json))


def test_the_bots_two_stages_hand_sha256_commits_over_in_a_bundle(fork: GitRepo, tmp_path: Path) -> None:
    """sync --no-forge --bundle in the fork; pr --run --bundle in a clone that never had the commits."""
    patches = str(tmp_path / "patches")
    run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "main", cwd=fork.path)
    _gg(fork, "import", "s", "main~2..topic")
    out = tmp_path / "out"
    proc = run_ggstack(
        "--patches", patches, "sync", "s", "--no-forge", "--run-json", str(out / "run.json"),
        "--bundle", str(out / "commits.bundle"), cwd=fork.path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    commit = json.loads((out / "run.json").read_text())["patches"][1]["commit"]
    assert len(commit) == 64
    subprocess.run(
        ["git", "clone", "-q", "--no-local", "--single-branch", "-b", "main", str(fork.path), str(tmp_path / "c")],
        check=True,
    )
    clone = GitRepo(tmp_path / "c")
    assert clone.git("cat-file", "-t", commit, check=False) != "commit"
    args = ["--patches", patches, "pr", "s", "--run", str(out / "run.json"), "--dry-run"]
    # Another job's committer: its own replay is never, by the same second, the very commit.
    other = {"GITHUB_TOKEN": "", "GIT_COMMITTER_NAME": "The Privileged Job"}
    missing = run_ggstack(*args, cwd=clone.path, env=other)
    assert missing.returncode == 2 and "is not here" in missing.stderr, missing.stderr
    # The files named as a CI job names them: relative to where it runs, not to the repository.
    relative = ["--repo", str(clone.path), *args[:-2], "out/run.json", "--dry-run", "--bundle", "out/commits.bundle"]
    planned = run_ggstack(*relative, cwd=tmp_path, env=other)
    assert planned.returncode == 0, planned.stderr
    assert "open PR 1 of 1" in planned.stdout and clone.git("cat-file", "-t", commit) == "commit"
