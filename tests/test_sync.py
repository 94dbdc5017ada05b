"""``ggstack sync``: the bot's whole run, end to end, as the CI runs it.

A fork checkout whose remote is a bare repository, the local GitHub-compatible
server reading that same bare repository, and ``ggstack sync`` run as a real
subprocess through every real stage (apply, check, test with real pytest
runs, pr through PyGithub over HTTP). The assertions are what the bot and the
maintainers see: exit codes, PRs on the forge, write calls, the report, the
lock, and the GitHub Actions output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from forge_server import FakeGitHub
from gitrepo import GitRepo, run_ggstack
from markdown_it import MarkdownIt

from ggstack import exits, git, importing
from ggstack.model import Run, Verdict
from ggstack.series import store

TOKEN = "ghp_SyncT0kenNeverPrinted0042"
SLUG = "upstream/proj"
FAST = {
    "GGSTACK_RETRY_BASE_SECONDS": "0.01",
    "GGSTACK_RETRY_ATTEMPTS": "2",
    "GGSTACK_RETRY_BUDGET_SECONDS": "2",
    "GGSTACK_WRITE_INTERVAL_SECONDS": "0",
    "GGSTACK_FORGE_TIMEOUT": "2",
    "GGSTACK_RATE_LIMIT_MAX_WAIT": "1",
}

# A test command that waits at a barrier before running pytest, so a test can
# hold a sync inside its test stage (lock held) for as long as it needs.
BARRIER = """\
import os, subprocess, sys, time
marks = os.environ["GG_BARRIER"]
open(os.path.join(marks, "started-%d" % os.getpid()), "w").close()
deadline = time.time() + 60
while not os.path.exists(os.path.join(marks, "release")) and time.time() < deadline:
    time.sleep(0.05)
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]]))
"""


def _text(name: str, change: int | None = None) -> str:
    return "".join(f"{name} line {i}{' changed' if i == change else ''}\n" for i in range(12))


class World:
    """The fork, its remote (the forge's bare repo), the stored stack ``s``, the forge."""

    def __init__(self, tmp: Path, forge: FakeGitHub) -> None:
        self.tmp = tmp
        self.forge = forge
        self.upstream = GitRepo.init(tmp / "upstream.git", bare=True)
        self.fork = GitRepo.init(tmp / "fork")
        self.fork.git("remote", "add", "origin", str(self.upstream.path))
        self.fork.commit("base", {f"{n}.txt": _text(n) for n in "abcx"})
        self.fork.git("push", "-q", "origin", "main")
        forge.add_repo(SLUG, str(self.upstream.path))
        self.fork.git("checkout", "-q", "-b", "feature")
        self.x = self.fork.commit(
            "fix(x): the change the base already has\n\nAlready in the base.", {"x.txt": _text("x", 3)}
        )
        self.a = self.fork.commit("fix(a): preallocate the a buffers\n\nKeep them alive.", {"a.txt": _text("a", 3)})
        self.b = self.fork.commit("fix(b): retain b on prewarm\n\nThe b part.", {"b.txt": _text("b", 5)})
        self.fork.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        self.repo = git.Repository(str(self.fork.path))

    def stack(self, commits: list[str], *, cpu: str | None = None, name: str = "s") -> None:
        store.init(str(self.patches), name, SLUG, "main")
        if cpu is not None:
            toml = self.patches / name / "stack.toml"
            text = toml.read_text()
            old = 'cpu = "python -m pytest -q {tests}"'
            assert old in text
            toml.write_text(text.replace(old, f"cpu = {json.dumps(cpu)}"))
        stack = importing.commits(
            self.repo, store.load(str(self.patches), name), commits, original_pr="upstream/proj#130"
        ).stack
        store.save(stack)

    def land(self, commit: str) -> None:
        """The base moves: ``commit`` is cherry-picked onto main."""
        self.fork.git("cherry-pick", "--allow-empty", commit)

    def env(self, **extra: str) -> dict[str, str]:
        return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": self.forge.url, **FAST, **extra}

    def argv(self, *args: str) -> list[str]:
        return ["--repo", str(self.fork.path), "--patches", str(self.patches), "sync", "s", "--onto", "main", *args]

    def sync(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        proc = run_ggstack(*self.argv(*args), cwd=self.tmp, env=env if env is not None else self.env())
        assert TOKEN not in proc.stdout + proc.stderr
        return proc

    def popen(self, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "ggstack", *self.argv(*args)],
            cwd=self.tmp,
            text=True,
            env={**os.environ, "COLUMNS": "200", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def last_run(self, path: Path | None = None) -> Run:
        path = path or Path(self.repo.state_dir("runs")) / "s.json"
        return Run.from_json(json.loads(path.read_text()))

    def pulls(self, state: str | None = "open") -> list[dict]:
        return [p for p in self.forge.pulls(SLUG) if state is None or p["state"] == state]

    def refs(self) -> str:
        return self.fork.refs()


@pytest.fixture
def world(tmp_path: Path, forge: FakeGitHub) -> World:
    return World(tmp_path, forge)


@pytest.fixture
def seeded(world: World) -> World:
    """Stack ``s``: x (already in the base), a and b (needed)."""
    world.land(world.x)
    world.stack([world.x, world.a, world.b])
    return world


def verdicts(run: Run) -> list[str | None]:
    return [o.verdict.value if o.verdict else None for o in run.outcomes]


# -- the bot's life: first run, rerun, the base moves ------------------------------------


def test_first_run_opens_prs_for_needed_patches_second_is_a_no_op_then_the_base_moves(
    seeded: World, tmp_path: Path
) -> None:
    w = seeded
    first = w.sync("--run-json", str(tmp_path / "run1.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    run = w.last_run(tmp_path / "run1.json")
    assert verdicts(run) == ["represented", "unique", "unique"]
    assert list(run.stages) == ["apply", "check", "test", "pr"] and run.stages["pr"] == "ok"
    assert [p["title"] for p in w.pulls()] == ["fix(a): preallocate the a buffers", "fix(b): retain b on prewarm"]
    assert "represented" in first.stdout and "#1" in first.stdout  # the report table

    w.forge.reset_counts()
    second = w.sync()
    assert second.returncode == 0, second.stdout + second.stderr
    assert w.forge.write_calls() == 0
    assert len(w.pulls(state=None)) == 2

    # The base moves: a lands upstream, so its open PR is now redundant.
    w.land(w.a)
    third = w.sync("--run-json", str(tmp_path / "run3.json"))
    assert third.returncode == 1, third.stdout + third.stderr
    run = w.last_run(tmp_path / "run3.json")
    assert verdicts(run) == ["represented", "represented", "unique"]
    pr_a = run.outcomes[1].pr
    assert pr_a is not None and pr_a.number == 1 and pr_a.state == "open"  # not closed without --close-redundant
    report = run_ggstack("report", str(tmp_path / "run3.json"), "--format", "markdown", cwd=tmp_path)
    assert report.returncode == 0
    md = report.stdout
    assert "represented, but PR #1 is still open" in md and "closing comment for #1 (draft)" in md
    assert "| close PR |" in md

    closed = w.sync("--close-redundant")
    assert closed.returncode == 0, closed.stdout + closed.stderr
    assert [p["number"] for p in w.pulls(state="closed")] == [1]
    comments = w.forge.comments(SLUG, 1)
    assert len(comments) == 1 and "already represented" in comments[0]["body"]

    # The base moves again: b's lines change under it.
    w.fork.commit("base: rework b", {"b.txt": _text("b", 5).replace("b line 5 changed", "b line 5 reworked")})
    fifth = w.sync("--run-json", str(tmp_path / "run5.json"))
    assert fifth.returncode == 1, fifth.stdout + fifth.stderr
    assert verdicts(w.last_run(tmp_path / "run5.json"))[2] == "conflict"
    md = run_ggstack("report", str(tmp_path / "run5.json"), "--format", "markdown", cwd=tmp_path).stdout
    assert "Needs attention: 0003-fix-b-retain-b-on-prewarm.patch: conflict" in md and "conflict in b.txt" in md


def test_dry_run_changes_nothing_anywhere_and_still_writes_the_run(seeded: World, tmp_path: Path) -> None:
    w = seeded
    refs_before = w.refs()
    remote_before = w.upstream.refs()
    proc = w.sync("--dry-run", "--run-json", str(tmp_path / "dry.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert w.forge.write_calls() == 0 and w.pulls(state=None) == []
    assert w.refs() == refs_before and w.upstream.refs() == remote_before
    run = w.last_run(tmp_path / "dry.json")
    assert run.stages["pr"] == "dry-run"
    assert [o.pr.state if o.pr else None for o in run.outcomes] == [None, "planned", "planned"]
    assert "new PR planned" in proc.stdout


# -- exit codes --------------------------------------------------------------------------


def test_a_partial_patch_is_attention_and_the_report_holds_its_remaining_diff(world: World, tmp_path: Path) -> None:
    w = world
    w.fork.git("checkout", "-q", "feature")
    both = w.fork.commit("fix(ab): a and c together", {"a.txt": _text("a", 9), "c.txt": _text("c", 9)})
    w.fork.git("checkout", "-q", "main")
    w.fork.commit("base: the a half only", {"a.txt": _text("a", 9)})
    w.stack([both])
    proc = w.sync("--run-json", str(tmp_path / "run.json"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run = w.last_run(tmp_path / "run.json")
    assert verdicts(run) == ["partial"]
    md = run_ggstack("report", str(tmp_path / "run.json"), "--format", "markdown", cwd=tmp_path).stdout
    html = MarkdownIt("commonmark").enable("table").render(md)
    details = html[html.index("<details>") : html.index("</details>")]
    assert "remaining diff" in details and "+c line 9 changed" in details and "a line 9" not in details


def test_exit_code_of_each_verdict() -> None:
    from ggstack.model import Outcome, PRState

    def code(verdict: Verdict, pr: PRState | None = None, stages: dict[str, str] | None = None) -> int:
        run = Run(
            "s",
            "main",
            "b" * 40,
            outcomes=[Outcome("0001-p.patch", "p", "id", verdict=verdict, pr=pr)],
            stages=stages or {"pr": "ok"},
        )
        return exits.exit_code(run)

    waiting = PRState(number=1, state="open", draft=True)
    assert code(Verdict.UNIQUE, waiting) == 0 and code(Verdict.REPRESENTED) == 0
    assert code(Verdict.REPRESENTED, PRState(number=1, state="closed")) == 0
    assert code(Verdict.REPRESENTED, PRState(number=1, state="open")) == 1  # a redundant PR left open
    for verdict in (Verdict.CONFLICT, Verdict.BROKEN, Verdict.PARTIAL, Verdict.INCONCLUSIVE):
        assert code(verdict) == 1, verdict
    assert code(Verdict.UNIQUE, stages={"pr": "failed (input): no GitHub token"}) == 2
    assert code(Verdict.CONFLICT, stages={"test": "failed (input): x", "pr": "failed (infrastructure): 502"}) == 3


def test_an_unknown_base_is_a_usage_error(seeded: World) -> None:
    proc = run_ggstack(*seeded.argv()[:-2], "--onto", "no-such-ref", cwd=seeded.tmp, env=seeded.env())
    assert proc.returncode == 2
    assert "no-such-ref" in proc.stderr


def test_a_missing_token_is_exit_2_with_the_run_written(seeded: World) -> None:
    env = {k: v for k, v in seeded.env().items() if k != "GITHUB_TOKEN"}
    proc = seeded.sync(env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    run = seeded.last_run()
    assert run.stages["pr"].startswith("failed (input)") and "GITHUB_TOKEN" in run.stages["pr"]
    assert verdicts(run) == ["represented", "unique", "unique"]  # the earlier stages' work is kept


def test_a_dry_run_without_a_token_plans_offline_and_exits_by_the_verdicts(world: World, tmp_path: Path) -> None:
    w = world
    w.fork.git("checkout", "-q", "feature")
    both = w.fork.commit("fix(ab): a and c together", {"a.txt": _text("a", 9), "c.txt": _text("c", 9)})
    w.fork.git("checkout", "-q", "main")
    w.fork.commit("base: the a half only", {"a.txt": _text("a", 9)})
    w.stack([w.b, both])
    env = {k: v for k, v in w.env().items() if k != "GITHUB_TOKEN"}
    proc = w.sync("--dry-run", "--gpu", "off", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a partial patch: attention, not a missing token
    run = w.last_run()
    assert verdicts(run) == ["unique", "partial"]
    assert run.stages["pr"].startswith("dry-run (offline") and "as if nothing existed" in proc.stderr
    assert w.forge.requests == []
    assert [o.pr.action for o in run.outcomes] == ["would push, open, label"] * 2


def test_an_unreachable_forge_is_exit_3(seeded: World) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    proc = seeded.sync(env=seeded.env(GITHUB_API_URL=dead))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert seeded.last_run().stages["pr"].startswith("failed (infrastructure)")


def test_a_failing_fetch_is_exit_3_and_the_forge_is_not_touched(seeded: World) -> None:
    w = seeded
    w.fork.git("remote", "set-url", "origin", str(w.tmp / "gone.git"))
    proc = w.sync("--fetch")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    run = w.last_run()
    assert run.stages["fetch"].startswith("failed (infrastructure)")
    assert run.stages["pr"].startswith("skipped")
    assert verdicts(run) == ["represented", "unique", "unique"]  # judged on what is here
    assert w.forge.write_calls() == 0


def test_after_fetch_a_local_base_behind_the_fetched_one_is_not_replayed_onto(seeded: World, tmp_path: Path) -> None:
    """A CI checkout's ``main`` is as old as the clone; ``--fetch`` brings the remote's new
    commits to ``origin/main`` only: the bot replays onto those, and says why."""
    w = seeded
    w.fork.git("push", "-q", "origin", "main")
    other = GitRepo.init(tmp_path / "teammate")
    other.git("remote", "add", "origin", str(w.upstream.path))
    other.git("fetch", "-q", "origin")
    other.git("checkout", "-q", "-B", "main", "origin/main")
    other.commit("fix(a): preallocate the a buffers", {"a.txt": _text("a", 3)})  # upstream takes fix(a) meanwhile
    other.git("push", "-q", "origin", "main")
    fresh = other.sha("HEAD")
    stale = w.fork.sha("main")

    proc = w.sync("--fetch", "--dry-run")

    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    run = w.last_run()
    assert run.base == fresh and run.base_ref == "origin/main"
    assert run.stages["fetch"].startswith("ok: main is 1 commit(s) behind origin/main"), run.stages
    assert "behind origin/main" in proc.stderr
    assert verdicts(run)[1] == "represented"  # fix(a) is in the fetched base
    assert w.fork.sha("main") == stale  # the user's branch is not moved


# -- one bot at a time -------------------------------------------------------------------


def _barrier(w: World, tmp: Path) -> tuple[Path, dict[str, str]]:
    marks = tmp / "marks"
    marks.mkdir()
    script = tmp / "barrier.py"
    script.write_text(BARRIER)
    w.fork.git("checkout", "-q", "feature")
    tested = w.fork.commit(
        "fix(t): t with its test", {"t.txt": "t\n", "tests/test_t.py": "def test_t():\n    assert True\n"}
    )
    w.fork.git("checkout", "-q", "main")
    w.stack([w.a, tested], cpu=f"{sys.executable} {script} {{tests}}")
    toml = w.patches / "s" / "stack.toml"  # a test run gets only what the stack passes on to it
    toml.write_text(toml.read_text().replace("[tests]\n", '[tests]\npass_env = ["GG_BARRIER"]\n'))
    return marks, w.env(GG_BARRIER=str(marks))


def _wait_for(predicate, what: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_two_syncs_started_together_one_runs_the_other_exits_3_naming_the_lock(world: World, tmp_path: Path) -> None:
    w = world
    marks, env = _barrier(w, tmp_path)
    procs = [w.popen(env=env), w.popen(env=env)]
    # One of them gets the lock and waits at the barrier in its test stage; the other must give up.
    _wait_for(lambda: any(p.poll() is not None for p in procs), "one sync to give up")
    loser = next(p for p in procs if p.poll() is not None)
    winner = next(p for p in procs if p is not loser)
    _, err = loser.communicate()
    assert loser.returncode == 3, err
    assert f"locked by PID {winner.pid} since " in err
    assert winner.poll() is None
    (marks / "release").touch()
    out, err = winner.communicate(timeout=120)
    assert winner.returncode == 0, out + err
    assert len(w.pulls()) == 2
    assert not os.path.exists(os.path.join(w.repo.state_dir("locks"), "s.lock"))


@pytest.mark.slow
def test_after_kill_9_a_rerun_takes_over_the_stale_lock_and_converges(world: World, tmp_path: Path) -> None:
    w = world
    marks, env = _barrier(w, tmp_path)
    victim = w.popen(env=env)
    _wait_for(lambda: any(m.name.startswith("started-") for m in marks.iterdir()), "the sync to reach its test stage")
    lock = Path(w.repo.state_dir("locks")) / "s.lock"
    assert json.loads(lock.read_text())["pid"] == victim.pid
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    (marks / "release").touch()  # the orphaned test command may finish; the rerun must not wait
    assert lock.exists()  # a SIGKILL leaves the lock behind

    rerun = w.sync(env=env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"taking over the stale lock of PID {victim.pid}" in rerun.stderr
    assert [p["title"] for p in w.pulls()] == ["fix(a): preallocate the a buffers", "fix(t): t with its test"]
    assert not lock.exists()
    w.forge.reset_counts()
    again = w.sync(env=env)
    assert again.returncode == 0 and w.forge.write_calls() == 0 and "stale" not in again.stderr


def _contend(repo_path: str, barrier, results, release) -> None:
    """One contender for the lock: 'won' (with any warning) or the error it got."""
    from ggstack import state
    from ggstack.errors import InfraError

    repo = git.Repository(repo_path)
    warnings: list[str] = []
    barrier.wait()
    try:
        with state.locked(repo, "s", warn=warnings.append):
            results.put(("won", os.getpid(), warnings))
            release.wait(60)  # hold it until every contender has tried
    except InfraError as e:
        results.put(("locked", os.getpid(), str(e)))


def test_a_stale_lock_found_by_many_at_once_is_taken_over_by_exactly_one(world: World) -> None:
    import multiprocessing

    from ggstack import state

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = state.lock_path(world.repo, "s")
    Path(path).write_text(
        json.dumps({"pid": dead.pid, "started": "2026-01-01T00:00:00Z", "host": __import__("socket").gethostname()})
    )
    ctx = multiprocessing.get_context("fork")
    n = 6
    barrier, results, release = ctx.Barrier(n), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_contend, args=(str(world.fork.path), barrier, results, release)) for _ in range(n)]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in range(n)]
    release.set()
    for p in procs:
        p.join(timeout=60)
    won = [g for g in got if g[0] == "won"]
    assert len(won) == 1, got
    assert len(won[0][2]) == 1 and f"stale lock of PID {dead.pid}" in won[0][2][0]
    assert all(f"locked by PID {won[0][1]} since " in g[2] for g in got if g[0] == "locked")
    assert not os.path.exists(path)


# -- GitHub Actions ----------------------------------------------------------------------


def test_in_github_actions_the_summary_has_the_table_and_conflicts_and_broken_patches_are_annotated(
    world: World, tmp_path: Path
) -> None:
    w = world
    w.fork.git("checkout", "-q", "feature")
    broken = w.fork.commit(
        "fix(c): c with a test that fails",
        {
            "c.txt": _text("c", 1),
            # A patch's test is code from the patch: it must not get the forge token to print.
            "tests/test_c.py": "import os\n\ndef test_c():\n    print(os.environ.get('GITHUB_TOKEN'), os.environ.get('GIT_CONFIG_VALUE_0'))\n"
            "    assert open('c.txt').read().startswith('never')\n",
        },
    )
    w.fork.git("checkout", "-q", "main")
    w.stack([w.a, w.b, broken])
    w.fork.commit("base: rework b", {"b.txt": _text("b", 5).replace("b line 5 changed", "b line 5 reworked")})
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    env = w.env(
        GITHUB_ACTIONS="true",
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_WORKSPACE=str(tmp_path),
        GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0="http.http://127.0.0.1/.extraheader",
        GIT_CONFIG_VALUE_0=f"AUTHORIZATION: bearer {TOKEN}",
    )
    proc = w.sync("--gpu", "off", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run = w.last_run()
    assert verdicts(run) == ["unique", "conflict", "broken"]
    tail = next(t.output_tail for t in run.outcomes[2].tests if t.where == "patched")
    assert "None " in tail and TOKEN not in (Path(w.repo.state_dir("runs")) / "s.json").read_text()
    assert [p["title"] for p in w.pulls()] == ["fix(a): preallocate the a buffers"]  # conflict and broken get no PR
    text = summary.read_text()
    assert text.startswith("# earlier step\n")  # appended, not overwritten
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<table>" in html and "0002-fix-b-retain-b-on-prewarm.patch" in html and "<strong>broken</strong>" in html
    out = proc.stdout
    for name, verdict in (
        ("0002-fix-b-retain-b-on-prewarm.patch", "conflict"),
        ("0003-fix-c-c-with-a-test-that-fails.patch", "broken"),
    ):
        assert f"::error file=patches/s/{name},title=ggstack%3A {name} is {verdict}::{verdict}: " in out
    assert "::error file=patches/s/0001" not in out and "::warning" not in out
    for stage in ("apply", "check", "test", "pr"):
        assert f"::group::ggstack {stage}\n" in out
    assert out.count("::group::") == out.count("::endgroup::")


# -- the workflow's job chain ------------------------------------------------------------


@pytest.mark.slow
def test_the_workflow_job_chain_untrusted_shards_merge_then_pr_in_a_job_of_its_own(
    world: World, tmp_path: Path
) -> None:
    """The commands of .github/workflows/ggstack-sync.yml, in its order: the untrusted job
    (sync --no-forge --gpu off, its bundle; test --matrix; a --shard per CPU entry), a GPU
    job per GPU entry, the merge (test --merge --bundle), all without the token; then the pr
    job in a fresh checkout of its own, given only the artifacts: pr --run --bundle; report."""
    w = world
    w.fork.git("checkout", "-q", "feature")
    gpu_patch = w.fork.commit(
        "fix(g): g with a GPU test",
        {
            "g.txt": "g\n",
            "tests/test_g.py": "import pytest\n\n@pytest.mark.gpu\ndef test_g():\n    assert open('g.txt').read() == 'g\\n'\n",
        },
    )
    w.fork.git("checkout", "-q", "main")
    w.stack([w.a, gpu_patch])
    toml = w.patches / "s" / "stack.toml"
    toml.write_text(toml.read_text().replace('gpu = ""', 'gpu = "python -m pytest -q {tests}"'))
    out = tmp_path / "ggstack-run"
    common = ["--repo", str(w.fork.path), "--patches", str(w.patches)]
    untrusted = {k: v for k, v in w.env().items() if k != "GITHUB_TOKEN"}

    sync = w.sync(
        "--no-forge",
        "--gpu",
        "off",
        "--run-json",
        str(out / "run.json"),
        "--bundle",
        str(out / "commits.bundle"),
        env=untrusted,
    )
    assert sync.returncode in (0, 1), sync.stdout + sync.stderr
    assert w.pulls(state=None) == [] and w.forge.write_calls() == 0  # the untrusted job wrote nothing
    base = json.loads((out / "run.json").read_text())["base"]
    matrix = run_ggstack(*common, "test", "s", "--onto", base, "--matrix", cwd=tmp_path, env=untrusted)
    assert matrix.returncode == 0, matrix.stderr
    entries = json.loads(matrix.stdout)["include"]
    assert {e["kind"] for e in entries} == {"cpu", "gpu"}
    assert all(e["runs-on"] == "gpu" for e in entries if e["kind"] == "gpu")  # stack.toml tests.gpu_runner
    for e in entries:  # the CPU ones in the untrusted job, each GPU one in its own job
        k = e["shard"].split("/")[0]
        args = ["--shard", e["shard"], "--results", str(out / "results" / f"{e['kind']}-{k}.json")]
        shard = run_ggstack(*common, "test", "s", "--onto", base, *args, cwd=tmp_path, env=untrusted)
        assert shard.returncode == 0, shard.stdout + shard.stderr
    merged_dir = tmp_path / "ggstack-merged"
    merged = run_ggstack(
        *common,
        "test",
        "s",
        "--onto",
        base,
        "--merge",
        *sorted(map(str, (out / "results").glob("*.json"))),
        "--json",
        "--bundle",
        str(merged_dir / "commits.bundle"),
        cwd=tmp_path,
        env=untrusted,
    )
    assert merged.returncode in (0, 1), merged.stderr
    (merged_dir / "run.json").write_text(merged.stdout)

    # The pr job: a checkout of its own (the remote's history, none of the commits made above).
    priv = tmp_path / "privileged"
    subprocess.run(["git", "clone", "-q", str(w.upstream.path), str(priv)], check=True)
    pr = run_ggstack(
        "--repo",
        str(priv),
        "--patches",
        str(w.patches),
        "pr",
        "s",
        "--run",
        str(merged_dir / "run.json"),
        "--bundle",
        str(merged_dir / "commits.bundle"),
        "--json",
        cwd=tmp_path,
        env=w.env(),
    )
    assert pr.returncode == 1, pr.stdout + pr.stderr  # the GPU tests are inconclusive: a human is asked
    (out / "final.json").write_text(pr.stdout)
    report = run_ggstack("report", str(out / "final.json"), "--format", "markdown", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    final = Run.from_json(json.loads(pr.stdout))
    # The merged Run carries the GPU shard's results (no GPU here: skipped, never a pass); the
    # PRs go up on the CPU evidence, each branch on the very commit the untrusted jobs tested.
    assert verdicts(final) == ["unique", "unique"]
    gpu_results = [t for t in final.outcomes[1].tests if t.kind == "gpu"]
    assert gpu_results and all(t.status != "passed" and "no GPU" in t.reason for t in gpu_results)
    pulls = w.pulls(state=None)
    assert [p["title"] for p in pulls] == ["fix(a): preallocate the a buffers", "fix(g): g with a GPU test"]
    for pull, o in zip(pulls, final.outcomes, strict=True):
        assert w.upstream.git("rev-parse", f"refs/heads/{pull['head']['ref']}") == o.commit
    assert "0002-fix-g-g-with-a-GPU-test.patch" in report.stdout and "no GPU" in report.stdout
    assert "| waiting for approval |" in report.stdout  # a's recommendation, now that its PR exists


def test_credentials_in_the_api_url_are_in_no_output_no_summary_and_no_run(seeded: World, tmp_path: Path) -> None:
    import socket

    secret = "Pa55w0rdInTheUrl"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    summary = tmp_path / "summary.md"
    env = seeded.env(
        GITHUB_API_URL=f"http://bot:{secret}@127.0.0.1:{port}",
        GITHUB_ACTIONS="true",
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_WORKSPACE=str(tmp_path),
    )
    proc = seeded.sync("--gpu", "off", "--run-json", str(tmp_path / "run.json"), env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    run = seeded.last_run()
    assert f"http://127.0.0.1:{port}" in run.stages["pr"]  # the forge is named, without its userinfo
    for text in (proc.stdout, proc.stderr, summary.read_text(), (tmp_path / "run.json").read_text()):
        assert secret not in text and "bot:" not in text


def test_sync_land_is_opt_in_and_lands_what_is_ready_after_a_green_run(world: World) -> None:
    w = world
    w.stack([w.a, w.b])
    first = w.sync("--land")
    assert first.returncode == 0, first.stdout + first.stderr
    assert w.last_run().stages["land"] == "ok: nothing merged; stopped at 0001: waiting for approval"
    for p in w.pulls():
        w.forge.approve(SLUG, p["number"])
    w.sync()  # without --land nothing is merged
    assert "land" not in w.last_run().stages and not any(p["merged"] for p in w.pulls(None))
    unreachable = w.env(GITHUB_TOKEN="")
    w.sync("--land", env=unreachable)  # pr fails (no token): the run is not green, nothing is merged
    assert w.last_run().stages["land"].startswith("skipped") and not any(p["merged"] for p in w.pulls(None))
    landed = w.sync("--land")
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert w.last_run().stages["land"] == "ok: merged #1, #2"
    assert all(p["merged"] for p in w.pulls(None))
