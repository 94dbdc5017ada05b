"""Work split over forked processes: values and failures come back as if run here, and a
``check --commits`` split over processes says exactly what one process says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from gitrepo import GitRepo, run_ggstack
from test_check import LINES, OTHER, edited, text

from ggstack import forked, git
from ggstack.check.commits import _parts, check_commits
from ggstack.errors import InfraError, UserError


def _pid(_: int) -> int:
    return os.getpid()


def test_parts_run_in_processes_of_their_own_and_come_back_in_order() -> None:
    got = forked.map_in_forks(lambda n: (n * n, os.getpid()), [1, 2, 3], lambda: None)
    assert [v for v, _ in got] == [1, 4, 9]
    pids = [p for _, p in got]
    assert pids[0] == os.getpid() and len(set(pids)) == 3


def test_in_child_runs_in_the_children_only() -> None:
    marks: list[str] = []
    got = forked.map_in_forks(lambda _: list(marks), [0, 1], lambda: marks.append("child"))
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
        forked.map_in_forks(fn, [0, 1], lambda: None)


def test_a_bug_in_a_part_comes_back_with_its_traceback() -> None:
    def broken_part(n: int) -> int:
        return [0][n]

    with pytest.raises(RuntimeError, match=r"(?s)in a forked part.*broken_part.*IndexError"):
        forked.map_in_forks(broken_part, [0, 1], lambda: None)


def test_a_part_that_dies_without_an_answer_is_an_infrastructure_failure() -> None:
    def dies(n: int) -> int:
        if n:
            os._exit(3)
        return n

    with pytest.raises(InfraError, match=r"ended without an answer \(exit status 3\)"):
        forked.map_in_forks(dies, [0, 1], lambda: None)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads a process's state in /proc")
def test_a_part_ends_when_the_process_that_forked_it_is_killed(tmp_path) -> None:
    """A CI job cancelled (SIGKILL or SIGTERM to ggstack alone): no forked part keeps computing."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from ggstack import forked\n"
        "def part(n):\n"
        "    if n:\n"
        "        open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "forked.map_in_forks(part, [0, 1], lambda: None)\n"
    )
    pidfile = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, str(script), str(pidfile)])
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the part never started"
            time.sleep(0.05)
        child = int(pidfile.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _running(child):
            assert time.monotonic() < deadline, "the part outlived the process that forked it"
            time.sleep(0.05)
    finally:
        parent.kill()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_nothing_is_forked_while_another_thread_is_at_work() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert set(forked.map_in_forks(_pid, [0, 1, 2], lambda: None)) == {os.getpid()}
    finally:
        stop.set()
        other.join()


def test_a_jobs_count_that_is_not_a_whole_number_is_refused_with_nothing_judged(repo: GitRepo) -> None:
    repo.commit("root", {"f.txt": "a\n"})
    c = repo.commit("change", {"f.txt": "b\n"})
    for args, env, named in (([], {"GGSTACK_JOBS": "two"}, "GGSTACK_JOBS='two'"), (["--jobs", "0"], {}, "--jobs")):
        proc = run_ggstack("check", "--onto", "main", "--commits", c, *args, cwd=repo.path, env=env)
        assert proc.returncode == 2 and named in proc.stderr and "whole number" in proc.stderr, proc.stderr
    assert not (repo.path / ".git" / "ggstack" / "cache" / "check").exists()


def test_lines_go_whole_to_the_parts_and_only_a_long_one_is_cut() -> None:
    """Two lines (a branch's commits and another history's, each with a range of its own): one a
    part, not a part and a half each. One long line: cut in two. A short one: one part."""

    def shape(*lengths: int) -> list[list[tuple[tuple[int, int], int]]]:
        lines = [[object()] * n for n in lengths]
        return [[(key, len(c)) for key, c in part] for part in _parts(lines, 2)]  # type: ignore[arg-type]

    assert shape(73, 29) == [[((0, 0), 73)], [((1, 0), 29)]]
    assert shape(66) == [[((0, 0), 33)], [((0, 33), 33)]]
    assert shape(300, 10) == [[((0, 0), 150), ((1, 0), 10)], [((0, 150), 150)]]
    assert shape(20) == [[((0, 0), 20)]]


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
        runs[jobs] = check_commits(repo, commits, "main", use_cache=False, jobs=jobs).to_json()
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        assert repo.commit_infos(["main"])[0].message.startswith('Revert "change 33"')  # the parent's reader answers
        readers = {e["sid"] for e in _events(trace) if e.get("argv", [])[-2:] == ["cat-file", "--batch"]}
        assert len(readers) == jobs  # each part asks a cat-file of its own
    assert runs[2] == runs[1]
    verdicts = [p["verdict"] for p in runs[1]["patches"]]
    assert verdicts.count("represented") == 13 and verdicts[33] == "unique"


def test_a_line_cut_over_parts_is_judged_against_the_range_one_process_gives_it(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Commits the base has are one line; cut over two parts, each part judged its piece against
    the base less its piece only (a revert between the pieces was in one part's range, not in
    the other's, nor in one process's). The range of a cut line is read once, for the line."""
    repo.commit("root", {"f.txt": text(LINES)})
    commits = [repo.commit(f"change {i}", {f"f{i}.txt": text(edited(LINES, l5=f"change {i}"))}) for i in range(20)]
    repo.git("revert", "--no-edit", commits[5])
    commits += [repo.commit(f"change {i}", {f"f{i}.txt": text(edited(LINES, l5=f"change {i}"))}) for i in range(20, 40)]
    runs = {}
    for jobs in (1, 2):
        trace = tmp_path / f"trace-{jobs}.json"
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        runs[jobs] = check_commits(git.Repository(str(repo.path)), commits, "main", use_cache=False, jobs=jobs)
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        messages_logs = [e for e in _events(trace) if "--format=%H%x00%ae%x00%B%x00" in e.get("argv", [])]
        assert len(messages_logs) == 1, jobs  # the range's messages, read once however many parts
    assert runs[2].to_json() == runs[1].to_json()


def test_a_part_merges_through_a_merge_tree_of_its_own_after_the_parent_merged(
    forty_commits: tuple[GitRepo, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """The long-lived ``merge-tree --stdin`` keeps the end of its last answer to read with the
    next one: a child forked after the parent merged starts a process of its own with nothing
    left to read, not a reader out of step (which would give the process up and start one
    merge-tree a merge)."""
    world, commits = forty_commits
    repo = git.Repository(str(world.path))
    ours, theirs = world.git("rev-parse", "main"), commits[1]
    before = repo.merge_trees(ours, theirs)
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))

    def merge(n: int) -> tuple[str, bool]:
        merged = repo.merge_trees(ours, commits[n])
        return merged.tree, merged.clean

    got = forked.map_in_forks(merge, [1, 2, 3], repo.after_fork)
    assert got[0] == (before.tree, before.clean)
    assert got[1:] == [(repo.merge_trees(ours, commits[n]).tree, True) for n in (2, 3)]
    merges = [e["argv"] for e in _events(trace) if e.get("event") == "start" and "merge-tree" in e.get("argv", [])]
    assert merges and all("--stdin" in argv for argv in merges), merges


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
