"""Work split over forked processes: values and failures come back as if run here, and a
``check --commits`` split over processes says exactly what one process says."""

from __future__ import annotations

import json
import os
import re
import threading

import pytest
from gitrepo import GitRepo, run_ggstack
from test_check import LINES, OTHER, edited, text

from ggstack import check, forked, git
from ggstack.errors import InfraError, UserError


def _pid(_: int) -> int:
    return os.getpid()


def test_parts_run_in_processes_of_their_own_and_come_back_in_order() -> None:
    got = forked.side_by_side(lambda n: (n * n, os.getpid()), [1, 2, 3], lambda: None)
    assert [v for v, _ in got] == [1, 4, 9]
    pids = [p for _, p in got]
    assert pids[0] == os.getpid() and len(set(pids)) == 3


def test_in_child_runs_in_the_children_only() -> None:
    marks: list[str] = []
    got = forked.side_by_side(lambda _: list(marks), [0, 1], lambda: marks.append("child"))
    assert got == [[], ["child"]] and marks == []


@pytest.mark.parametrize(
    ("error", "kind"),
    [(UserError("stack.toml: bad key"), UserError), (InfraError("git cat-file failed (128)"), InfraError)],
)
def test_a_failing_part_raises_here_what_it_raised_there(error: Exception, kind: type) -> None:
    def fn(n: int) -> int:
        if n == 1:
            raise error
        return n

    with pytest.raises(kind, match=re.escape(str(error))):
        forked.side_by_side(fn, [0, 1], lambda: None)


def test_a_bug_in_a_part_comes_back_with_its_traceback() -> None:
    def broken_part(n: int) -> int:
        return [0][n]

    with pytest.raises(RuntimeError, match=r"(?s)in a forked part.*broken_part.*IndexError"):
        forked.side_by_side(broken_part, [0, 1], lambda: None)


def test_a_part_that_dies_without_an_answer_is_an_infrastructure_failure() -> None:
    def dies(n: int) -> int:
        if n:
            os._exit(3)
        return n

    with pytest.raises(InfraError, match=r"ended without an answer \(exit status 3\)"):
        forked.side_by_side(dies, [0, 1], lambda: None)


def test_nothing_is_forked_while_another_thread_is_at_work() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert set(forked.side_by_side(_pid, [0, 1, 2], lambda: None)) == {os.getpid()}
    finally:
        stop.set()
        other.join()


def test_a_jobs_count_that_is_not_a_whole_number_is_refused_with_nothing_judged(repo: GitRepo) -> None:
    repo.commit("root", {"f.txt": "a\n"})
    c = repo.commit("change", {"f.txt": "b\n"})
    for args, env in (([], {"GGSTACK_JOBS": "two"}), (["--jobs", "0"], {})):
        proc = run_ggstack("check", "--onto", "main", "--commits", c, *args, cwd=repo.path, env=env)
        assert proc.returncode == 2 and "--jobs" in proc.stderr, proc.stderr
    assert not (repo.path / ".git" / "ggstack" / "cache" / "check").exists()


@pytest.fixture
def forty_commits(repo: GitRepo) -> tuple[GitRepo, list[str]]:
    """A fork of forty commits, each on a file of its own; main took every third of them (one
    of those reverted again) and moved on."""
    repo.commit("root", {"f.txt": text(LINES)})
    repo.git("checkout", "-q", "-b", "fork")
    commits = [repo.commit(f"change {i}", {f"f{i}.txt": text(edited(LINES, l5=f"change {i}"))}) for i in range(40)]
    repo.git("checkout", "-q", "main")
    repo.commit("main moves", {"f.txt": text(edited(LINES, l1="main"))}, author=OTHER)
    for c in commits[::3]:
        repo.git("cherry-pick", c)
    repo.git("revert", "--no-edit", "HEAD~2")
    return repo, commits


def test_check_commits_split_over_processes_says_what_one_process_says(
    forty_commits: tuple[GitRepo, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    world, commits = forty_commits
    runs = {}
    for jobs in (1, 2):
        trace = tmp_path / f"trace-{jobs}"
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        repo = git.Repository(str(world.path))
        runs[jobs] = check.commits(repo, commits, "main", use_cache=False, jobs=jobs).to_json()
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        assert repo.commit_infos(["main"])[0].message.startswith('Revert "change 33"')  # the parent's reader answers
        readers = {e["sid"] for e in _events(trace) if e.get("argv", [])[-2:] == ["cat-file", "--batch"]}
        assert len(readers) == jobs  # each part asks a cat-file of its own
    assert runs[2] == runs[1]
    verdicts = [p["verdict"] for p in runs[1]["patches"]]
    assert verdicts.count("represented") == 13 and verdicts[33] == "unique"


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
