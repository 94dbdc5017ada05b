"""What a user reads at the terminal: text from their repository is shown as
written, never taken as rich markup (vLLM subjects start with "[misc]", "[Bugfix]")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

SUBJECT = "[misc] fix [red]the thing[/red] [/]"


def test_subjects_and_messages_with_brackets_are_printed_as_written(repo: GitRepo, tmp_path) -> None:
    repo.commit("init", {"f.txt": "a\n"})
    repo.git("branch", "old")
    repo.commit(SUBJECT, {"f.txt": "a\nb\n"})
    patches = str(tmp_path / "patches")
    assert (
        run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "old", cwd=repo.path).returncode
        == 0
    )
    assert run_ggstack("--patches", patches, "import", "s", "HEAD", cwd=repo.path).returncode == 0

    listed = run_ggstack("--patches", patches, "list", "s", cwd=repo.path)
    assert listed.returncode == 0 and SUBJECT in listed.stdout, listed.stdout + listed.stderr

    checked = run_ggstack("--patches", patches, "check", "s", "--onto", "old", cwd=repo.path)
    assert checked.returncode == 0 and SUBJECT in checked.stdout, checked.stdout + checked.stderr

    missing = run_ggstack("--patches", patches, "show", "s", "[bold]x[/bold]", cwd=repo.path)
    assert missing.returncode == 2 and "'[bold]x[/bold]'" in missing.stderr
    assert "Traceback" not in missing.stderr


# -- bad input is a message and exit 2, never a traceback -------------------------------


def _stack(repo: GitRepo, tmp_path) -> str:
    """A stack s of one patch on branch old; returns the patches directory."""
    repo.commit("init", {"f.txt": "a\n"})
    repo.git("branch", "old")
    repo.commit("second", {"f.txt": "a\nb\n"})
    patches = str(tmp_path / "patches")
    assert (
        run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "old", cwd=repo.path).returncode
        == 0
    )
    assert run_ggstack("--patches", patches, "import", "s", "HEAD", cwd=repo.path).returncode == 0
    return patches


def _fails_cleanly(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_a_negated_ref_is_an_unknown_ref_not_a_sha(repo: GitRepo, tmp_path) -> None:
    # rev-parse --verify accepts "^X" and prints "^<sha>", which is no object name.
    patches = _stack(repo, tmp_path)
    _fails_cleanly(
        run_ggstack("--patches", patches, "apply", "s", "--onto", "^old", cwd=repo.path), 2, "unknown base ref '^old'"
    )
    _fails_cleanly(run_ggstack("--patches", patches, "import", "s", "^HEAD", cwd=repo.path), 2, "unknown ref '^HEAD'")
    assert not repo.git("for-each-ref", "refs/heads/gg")


def test_a_saved_run_that_is_not_a_run_names_the_file(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    cases = {
        "list.json": ("[1, 2]", "the top level is [1, 2]"),
        "null.json": ("null", "the top level is null"),
        "old.json": ('{"base": "x"}', "no key 'base_ref'"),
        "evidence.json": (
            '{"base_ref": "old", "base": "x", "patches": [{"name": "0001", "evidence": "zz"}]}',
            "not a ggstack Run",
        ),
        "latin1.json": (b"\xff{}", "not a ggstack Run"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        _fails_cleanly(run_ggstack("report", str(path), cwd=repo.path), 2, str(path), message)
        _fails_cleanly(
            run_ggstack("--patches", patches, "pr", "s", "--run", str(path), "--dry-run", cwd=repo.path),
            2,
            str(path),
            message,
        )


def test_a_series_that_is_a_directory_is_named(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    series = tmp_path / "patches" / "s" / "series"
    series.unlink()
    series.mkdir()
    _fails_cleanly(run_ggstack("--patches", patches, "list", "s", cwd=repo.path), 2, f"{series}: series is a directory")


def test_init_where_a_file_is_in_the_way_and_results_under_a_file(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    (tmp_path / "patches" / "t").write_text("x\n")
    _fails_cleanly(
        run_ggstack("--patches", patches, "init", "t", "--repo-slug", "o/r", "--base", "old", cwd=repo.path),
        2,
        "cannot create the stack directory",
    )
    (tmp_path / "blocker").write_text("x\n")
    proc = run_ggstack(
        "--patches",
        patches,
        "test",
        "s",
        "--shard",
        "1/1",
        "--results",
        str(tmp_path / "blocker" / "r.json"),
        cwd=repo.path,
    )
    _fails_cleanly(proc, 2, "--results: cannot create its directory")


def test_a_malformed_api_url_is_a_message_without_the_token(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    token = "ghp_doNotPrintThis0123456789"
    for url in ("not a url", "ftp://x", "http://[::1", f"ftp://{token}@x"):
        proc = run_ggstack(
            "--patches",
            patches,
            "pr",
            "s",
            "--dry-run",
            cwd=repo.path,
            env={"GITHUB_TOKEN": token, "GITHUB_API_URL": url},
        )
        _fails_cleanly(proc, 2, "GITHUB_API_URL=", "is not an http(s) URL")
        assert token not in proc.stdout + proc.stderr


def test_demo_into_a_directory_under_a_file(tmp_path) -> None:
    (tmp_path / "afile").write_text("x\n")
    proc = run_ggstack("demo", str(tmp_path / "afile" / "sub"), "--gpu", "off", cwd=tmp_path)
    _fails_cleanly(proc, 2, "cannot create the demo directory")


def test_merge_of_results_edited_by_hand_names_the_file(repo: GitRepo, tmp_path) -> None:
    import json

    repo.commit("init", {"f.txt": "a\n"})
    repo.git("branch", "old")
    repo.commit("add a test", {"tests/test_x.py": "def test_x():\n    assert True\n"})
    patches = str(tmp_path / "patches")
    assert (
        run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "old", cwd=repo.path).returncode
        == 0
    )
    assert run_ggstack("--patches", patches, "import", "s", "HEAD", cwd=repo.path).returncode == 0
    good = tmp_path / "good.json"
    assert (
        run_ggstack(
            "--patches", patches, "test", "s", "--shard", "1/1", "--results", str(good), cwd=repo.path
        ).returncode
        == 0
    )
    doc = json.loads(good.read_text())
    for name, edit, message in (
        ("jobs.json", lambda d: d.update(jobs=None), '"jobs" must be a list of objects'),
        ("id.json", lambda d: d["jobs"][0].update(id=["x"]), '"jobs" must be a list of objects'),
        ("tests.json", lambda d: d["jobs"][0].update(tests=[{"bogus": 1}]), "not a test result"),
        ("types.json", lambda d: [t.update(status=5, passed="x") for t in d["jobs"][0]["tests"]], "not a test result"),
    ):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        path = tmp_path / name
        path.write_text(json.dumps(bad))
        _fails_cleanly(
            run_ggstack("--patches", patches, "test", "s", "--merge", str(path), cwd=repo.path), 2, str(path), message
        )


def test_sync_run_json_under_a_file_says_where_the_run_is(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    (tmp_path / "afile").write_text("x\n")
    proc = run_ggstack(
        "--patches", patches, "sync", "s", "--dry-run", "--run-json", str(tmp_path / "afile" / "r.json"), cwd=repo.path
    )
    _fails_cleanly(proc, 2, "--run-json: cannot write it", "ggstack/runs/s.json")


def test_a_token_with_a_line_break_inside_is_refused_unshown(repo: GitRepo, tmp_path) -> None:
    # requests would refuse the header and quote it escaped ("\n"), past the scrubbing of the raw token.
    patches = _stack(repo, tmp_path)
    env = {
        "GITHUB_TOKEN": "ghp_secretPart1\nsecretPart2",
        "GITHUB_API_URL": "http://127.0.0.1:9",
        "GGSTACK_RETRY_ATTEMPTS": "1",
    }
    proc = run_ggstack("--patches", patches, "pr", "s", "--dry-run", cwd=repo.path, env=env)
    _fails_cleanly(proc, 2, "GITHUB_TOKEN has whitespace or control characters")
    assert "secretPart" not in proc.stdout + proc.stderr


def test_unusable_retry_numbers_and_step_summary_are_messages(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    forge = {"GITHUB_TOKEN": "ghp_x", "GITHUB_API_URL": "http://127.0.0.1:9"}
    for var, value in (("GGSTACK_RETRY_BASE_SECONDS", "nan"), ("GGSTACK_FORGE_TIMEOUT", "9" * 20)):
        proc = run_ggstack("--patches", patches, "pr", "s", "--dry-run", cwd=repo.path, env={**forge, var: value})
        _fails_cleanly(proc, 2, f"{var}=")
    (tmp_path / "summary").mkdir()
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    proc = run_ggstack("--patches", patches, "sync", "s", "--dry-run", cwd=repo.path, env=env)
    _fails_cleanly(proc, 3, "GITHUB_STEP_SUMMARY=", "cannot append the report")


def test_ggstack_state_that_is_corrupt_or_in_the_way(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    assert run_ggstack("--patches", patches, "apply", "s", cwd=repo.path).returncode == 0
    caches = list((repo.path / ".git" / "ggstack" / "cache").glob("*.json"))
    assert caches
    for cache in caches:
        cache.write_text("[1]\n")  # valid JSON, not a map: as good as lost
    proc = run_ggstack("--patches", patches, "apply", "s", cwd=repo.path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    state = repo.path / ".git" / "ggstack"
    for p in sorted(state.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    state.rmdir()
    state.write_text("x\n")
    _fails_cleanly(
        run_ggstack("--patches", patches, "apply", "s", cwd=repo.path), 3, "cannot use ggstack's state directory"
    )


def test_import_of_a_file_name_that_is_not_utf8_is_refused_by_name(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    repo.commit("latin-1 name", {"ok.txt": "x\n"})
    (repo.path / b"caf\xe9.txt".decode("utf-8", "surrogateescape")).write_bytes(b"x\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "latin-1 name")
    proc = run_ggstack("--patches", patches, "import", "s", "HEAD", cwd=repo.path)
    _fails_cleanly(proc, 2, "a file name that is not UTF-8", "--exclude")


def test_import_of_a_symmetric_range_says_to_use_two_dots(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    _fails_cleanly(
        run_ggstack("--patches", patches, "import", "s", "old...HEAD", cwd=repo.path),
        2,
        "old...HEAD: A...B",
        "use A..B",
    )


def test_command_line_bytes_that_are_not_utf8(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    bad = b"\xff".decode("utf-8", "surrogateescape")  # what Python makes of a non-UTF-8 argv byte
    _fails_cleanly(
        run_ggstack("--patches", patches, "init", "t", "--repo-slug", "o/r", "--base", bad, cwd=repo.path),
        2,
        "--base",
        "is not UTF-8",
    )
    assert not (tmp_path / "patches" / "t").exists()
    _fails_cleanly(
        run_ggstack("--patches", patches, "apply", "s", "--branch-prefix", bad, cwd=repo.path),
        2,
        "--branch-prefix",
        "is not UTF-8",
    )


def test_init_with_a_quote_in_the_base_writes_a_stack_toml_that_loads(repo: GitRepo, tmp_path) -> None:
    repo.commit("init", {"f.txt": "a\n"})
    repo.git("branch", 'dev/"q"')  # git allows a double quote in a branch name
    patches = str(tmp_path / "patches")
    made = run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", 'dev/"q"', cwd=repo.path)
    assert made.returncode == 0, made.stderr
    listed = run_ggstack("--patches", patches, "list", "s", "--json", cwd=repo.path)
    assert listed.returncode == 0, listed.stderr
    applied = run_ggstack("--patches", patches, "apply", "s", "--json", cwd=repo.path)
    assert applied.returncode == 0, applied.stderr
    assert '"base_ref": "dev/\\"q\\""' in applied.stdout


def test_a_non_positive_test_timeout_is_refused_naming_the_line(repo: GitRepo, tmp_path) -> None:
    patches = tmp_path / "patches"
    assert (
        run_ggstack(
            "--patches", str(patches), "init", "s", "--repo-slug", "o/r", "--base", "main", cwd=repo.path
        ).returncode
        == 0
    )
    toml = patches / "s" / "stack.toml"
    lines = toml.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.startswith("timeout"))
    lines[number - 1] = "timeout = -5"
    toml.write_text("\n".join(lines) + "\n")
    proc = run_ggstack("--patches", str(patches), "list", "s", cwd=repo.path)
    assert proc.returncode == 2
    assert f"stack.toml:{number}: tests.timeout must be a positive number of seconds" in proc.stderr


def test_start_up_leaves_out_what_a_command_may_not_need() -> None:
    """GitPython, rich and the email package's policies are imported by the commands that use
    them, not by every start: a check of hundreds of commits is measured against git cherry."""
    code = "import sys, ggstack.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'git', 'rich', 'github'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = "import sys, ggstack.cli; print('email.policy' in sys.modules, 'ggstack.importing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


def test_the_stacks_are_found_from_a_subdirectory_at_the_top_of_the_repository(tmp_path: Path) -> None:
    """As git finds its files from anywhere in the work tree: ``patches/`` is the repository's,
    not the current directory's (``init`` in ``src/pkg`` made ``src/pkg/patches``)."""
    repo = GitRepo.init(tmp_path / "fork")
    repo.commit("root", {"src/pkg/a.py": "a = 1\n"})
    sub = repo.path / "src" / "pkg"
    made = run_ggstack("init", "s", "--repo-slug", "o/r", "--base", "main", cwd=sub)
    assert made.returncode == 0, made.stderr
    assert (repo.path / "patches" / "s" / "stack.toml").is_file() and not (sub / "patches").exists()
    listed = run_ggstack("list", "--json", cwd=sub)
    assert listed.returncode == 0 and '"s"' in listed.stdout, listed.stdout + listed.stderr


def test_a_reference_transaction_hook_that_refuses_is_named(repo: GitRepo, tmp_path) -> None:
    """The probe: a policy hook refusing ref writes gave git's 'ref updates aborted by hook' and no name."""
    patches = _stack(repo, tmp_path)
    hooks = tmp_path / "policy-hooks"
    hooks.mkdir()
    (hooks / "reference-transaction").write_text("#!/bin/sh\necho 'refs are frozen by policy' >&2\nexit 1\n")
    (hooks / "reference-transaction").chmod(0o755)
    repo.git("config", "core.hooksPath", str(hooks))
    before = repo.refs()
    proc = run_ggstack("--patches", patches, "apply", "s", "--onto", "old", cwd=repo.path)
    _fails_cleanly(
        proc,
        2,
        f"reference-transaction hook {hooks / 'reference-transaction'} refused",
        "refs/heads/gg/s/01-second",
        "it said: refs are frozen by policy",
        "nothing written",
    )
    assert repo.refs() == before
    repo.git("config", "--unset", "core.hooksPath")
    assert run_ggstack("--patches", patches, "apply", "s", "--onto", "old", cwd=repo.path).returncode == 0
    assert repo.refs() != before


def test_a_repo_that_is_no_repository_is_named_not_read_as_no_stack_here(tmp_path: Path) -> None:
    """--repo pointing at a path that is no repository said "no stack 's' in ./patches", naming
    the wrong place; outside any repository, with no --repo, ./patches is still where stacks are."""
    plain = tmp_path / "plain"
    plain.mkdir()
    for where in (str(plain), str(tmp_path / "missing")):
        proc = run_ggstack("--repo", where, "check", "s", cwd=tmp_path)
        assert proc.returncode == 2 and f"{where}: not a git repository" in proc.stderr, proc.stderr
        assert "no stack" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["plain"]


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["show", "s", "1"],
        ["check", "s"],
        ["apply", "s"],
        ["test", "s"],
        ["pr", "s", "--dry-run"],
        ["sync", "s"],
        ["land", "s", "--dry-run"],
        ["drop", "s"],
        ["rebase", "s"],
        ["resolve", "s", "1"],
        ["refresh", "s", "1"],
        ["edit", "s", "1"],
        ["squash", "s", "1", "2"],
        ["move", "s", "1", "--to", "2"],
        ["remove", "s", "1"],
        ["import", "s", "HEAD"],
    ],
)
def test_outside_a_repository_every_command_that_needs_one_says_so(tmp_path: Path, args: list[str]) -> None:
    """`list` there said "no stacks in …/patches" and exited 0, `check` blamed a missing stack."""
    plain = tmp_path / "plain"
    (plain / "patches" / "s").mkdir(parents=True)  # a ./patches of chance is not where the fork's stacks are
    proc = run_ggstack(*args, cwd=plain)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{plain}: not a git repository" in proc.stderr and "--repo" in proc.stderr, proc.stderr
    assert "no stack" not in proc.stderr + proc.stdout


def test_repo_and_patches_work_after_the_subcommand_too(repo: GitRepo, tmp_path) -> None:
    """The probe: `ggstack check --repo X` was 'No such option: --repo'; only `ggstack --repo X check` worked."""
    patches = _stack(repo, tmp_path)
    before = run_ggstack("--repo", str(repo.path), "--patches", patches, "list", "s", "--json", cwd=tmp_path)
    after = run_ggstack("list", "s", "--json", "--repo", str(repo.path), "--patches", patches, cwd=tmp_path)
    assert before.returncode == after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == json.loads(before.stdout) and json.loads(after.stdout)["s"]
    # The one after the subcommand wins, as the later of two options does.
    proc = run_ggstack(
        "--repo",
        str(tmp_path),
        "apply",
        "s",
        "--onto",
        "old",
        "--repo",
        str(repo.path),
        "--patches",
        patches,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert repo.git("for-each-ref", "refs/heads/gg")
    assert "--repo" in run_ggstack("check", "--help", cwd=tmp_path).stdout


def test_a_token_reexec_does_not_import_the_working_directorys_modules(repo: GitRepo, tmp_path) -> None:
    """The probe: with GITHUB_TOKEN set, `ggstack list` run inside pydantic/ (which has a json.py)
    died in the re-exec that hides the token: `python -m` put the directory first on sys.path.
    Only the commands that run a patch's code start again now: `test --matrix` is one."""
    patches = _stack(repo, tmp_path)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "json.py").write_text("raise ImportError('the checkout json.py, not the standard library one')\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "ggstack",
            "--repo",
            str(repo.path),
            "--patches",
            patches,
            "test",
            "s",
            "--matrix",
        ],
        cwd=package,
        capture_output=True,
        text=True,
        env={**os.environ, "GITHUB_TOKEN": "ghp_not_for_the_checkouts_eyes"},
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout) == {"include": []}


def test_an_unknown_base_names_what_was_tried_and_both_ways_out(repo: GitRepo, tmp_path) -> None:
    patches = _stack(repo, tmp_path)
    for command in ("apply", "check"):
        proc = run_ggstack("--patches", patches, command, "s", "--onto", "nosuch", cwd=repo.path)
        _fails_cleanly(proc, 2, "unknown base ref 'nosuch': not a commit here nor origin/nosuch", "target.base")
        assert "pass --onto)" not in proc.stderr  # it was given with --onto


def test_init_outside_a_repository_warns_that_the_other_commands_need_the_fork(tmp_path) -> None:
    elsewhere = tmp_path / "not-a-checkout"
    elsewhere.mkdir()
    made = run_ggstack("init", "s", "--repo-slug", "o/r", "--base", "main", cwd=elsewhere)
    assert made.returncode == 0 and (elsewhere / "patches" / "s" / "stack.toml").is_file()
    assert "is not a git repository" in made.stderr and "--repo" in made.stderr


def test_a_range_down_to_a_root_commit_asks_whether_its_lower_end_is_the_base(tmp_path) -> None:
    """A branch that merged the base, imported from the fork's tip: the range reaches an unrelated root."""
    repo = GitRepo.init(tmp_path / "fork")
    repo.commit("base", {"f.txt": "a\n"})
    repo.git("checkout", "-q", "-b", "fork")
    repo.commit("fork work", {"g.txt": "g\n"})
    repo.git("checkout", "-q", "--orphan", "other")
    repo.commit("other root", {"h.txt": "h\n"})
    repo.git("checkout", "-q", "-b", "topic", "fork")
    repo.git("merge", "-q", "--allow-unrelated-histories", "--no-edit", "other")
    patches = str(tmp_path / "patches")
    gg = ["--repo", str(repo.path), "--patches", patches]
    assert run_ggstack(*gg, "init", "s", "--repo-slug", "o/r", "--base", "main", cwd=tmp_path).returncode == 0
    proc = run_ggstack(*gg, "import", "s", "fork..topic", cwd=tmp_path)
    _fails_cleanly(proc, 2, "is a root commit", "fork..topic takes 1 commit, down to a root", "(main..topic)?")


def test_check_commits_given_a_range_says_it_takes_commits(repo: GitRepo, tmp_path) -> None:
    repo.commit("one", {"f.txt": "a\n"})
    repo.commit("two", {"f.txt": "b\n"})
    proc = run_ggstack("check", "--onto", "HEAD", "--commits", "HEAD~1..HEAD", cwd=repo.path)
    _fails_cleanly(proc, 2, "--commits takes commits, not a range: HEAD~1..HEAD", "git rev-list")


def test_the_ggstack_command_starts_as_python_m_ggstack_does(tmp_path: Path) -> None:
    """The console script's entry (pyproject's ``[project.scripts]``) is ``python -m ggstack``'s
    start-up: the collector paused while the modules load, and what they made frozen (gcpause),
    not ``cli.main`` called bare."""
    import tomllib

    with open(Path(__file__).parents[1] / "pyproject.toml", "rb") as fh:
        module, _, func = tomllib.load(fh)["project"]["scripts"]["ggstack"].partition(":")
    # Something asked to run at exit keeps the interpreter's own exit (a SystemExit to catch here).
    code = (
        f"import atexit, gc, sys\nfrom {module} import {func}\nsys.argv = ['ggstack', '--version']\n"
        f"atexit.register(print, 'at exit')\n"
        f"try:\n    {func}()\nexcept SystemExit as e:\n    print(e.code, gc.get_freeze_count())"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.stdout.endswith("at exit\n"), proc.stdout + proc.stderr
    lines = proc.stdout.removesuffix("at exit\n")
    version, status, frozen = lines.rsplit("\n", 2)[0], *lines.split()[-2:]
    assert "ggstack" in version and status in ("0", "None") and int(frozen) > 1000, proc.stdout + proc.stderr


def test_the_command_ends_without_teardown_its_output_and_status_intact(tmp_path: Path) -> None:
    """Done, the command exits at once (no interpreter teardown: no thread at work, nothing asked
    to run at exit): what it printed is all there, piped, and its exit status is the command's."""
    ok = subprocess.run([sys.executable, "-m", "ggstack", "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0 and ", version " in ok.stdout and ok.stdout.endswith("\n")
    bad = subprocess.run(
        [sys.executable, "-m", "ggstack", "--repo", str(tmp_path), "check", "--commits", "HEAD"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "--commits needs --onto" in bad.stderr
    # A finalizer (as the long-lived git processes have) is not run: there was no teardown.
    code = (
        "import sys, weakref, ggstack.__main__ as m\nclass T: ...\nt = T()\n"
        "weakref.finalize(t, print, 'torn down')\nsys.argv = ['ggstack', '--version']\nm.run()"
    )
    fast = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert fast.returncode == 0 and fast.stdout.startswith("ggstack, version"), fast.stdout + fast.stderr
    assert "torn down" not in fast.stdout
