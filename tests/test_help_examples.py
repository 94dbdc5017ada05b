"""Every ``--help`` example runs, as written, on a generic fork.

Every one of the 19 help texts used the demo's names (``gg-clean``,
``origin/dev/gilded-gnosis``, ``ef7cae43b2``) in its examples, which nobody can
run on their own fork. Here each command's examples are read from its
``--help`` and run verbatim by a plain shell in a fork laid out as a
maintainer's: upstream's ``main`` as ``origin/main``, the carry patches on
the branch ``my-fork``, the stack ``my-fork`` (the forge is the local
GitHub-compatible server, for ``pr`` and ``land``). An example "runs" when
ggstack answers 0 or 1 (1: a patch needs a human), never 2 or 3.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from forge_server import FakeGitHub
from gitrepo import GitRepo, run_ggstack

from ggstack.cli import main

TOKEN = "help-examples-token"
SLUG = "you/your-fork"


def help_text(name: str | None) -> str:
    args = [name, "--help"] if name else ["--help"]
    proc = subprocess.run([sys.executable, "-m", "ggstack", *args], capture_output=True, text=True, check=True)
    return proc.stdout


def examples(text: str) -> list[str]:
    """The example lines of a help text: the indented lines under "Examples:" that run ggstack."""
    block = text.split("Examples:", 1)[1] if "Examples:" in text else ""
    lines = []
    for line in block.splitlines()[1:]:
        if not line.startswith("  ") or not line.strip():
            break
        command = re.sub(r"\s+#.*$", "", line.strip())
        if "ggstack " in command:
            lines.append(command)
    return lines


COMMANDS = sorted(main.commands)


def test_every_command_has_generic_examples_and_the_main_help_says_how_to_complete() -> None:
    for name in COMMANDS:
        lines = examples(help_text(name))
        assert lines, f"ggstack {name} --help has no example"
        demo_names = [line for line in lines if re.search(r"gg-clean|gilded|ef7cae|639aeff", line)]
        if name == "demo":
            continue
        assert not demo_names, f"ggstack {name} --help: examples with the demo's names: {demo_names}"
        assert any("my-fork" in line for line in lines), f"ggstack {name} --help: no example on my-fork"
    top = help_text(None)
    assert "_GGSTACK_COMPLETE=bash_source ggstack" in top and "my-fork" in top and "origin/main" in top


def test_every_command_that_takes_a_stack_completes_its_name_and_onto_completes_refs(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("base", {"a.txt": "a\n"})
    fork.git("branch", "my-fork")
    fork.git("update-ref", "refs/remotes/origin/main", "main")
    assert run_ggstack("init", "my-fork", "--repo-slug", SLUG, "--base", "main", cwd=fork.path).returncode == 0
    for name in COMMANDS:
        command = main.commands[name]
        params = {p.name: p for p in command.params}
        if "stack" in params:
            words = f"ggstack {name} my"
            assert _complete(words, fork.path) == ["my-fork"], f"ggstack {name}: STACK does not complete"
        if "onto" in params:
            words = f"ggstack {name} my-fork --onto origin/"
            assert _complete(words, fork.path) == ["origin/main"], f"ggstack {name}: --onto does not complete"


def _complete(words: str, cwd: Path) -> list[str]:
    """What bash completion offers for the last word, as the installed ``ggstack`` answers it."""
    env = {**os.environ, "_GGSTACK_COMPLETE": "bash_complete", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(words.split()) - 1)
    ggstack = os.path.join(os.path.dirname(sys.executable), "ggstack")
    proc = subprocess.run([ggstack], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line.startswith("plain,")]


# -- the examples, run ---------------------------------------------------------------------------


def _fork(tmp: Path, stack: str) -> Path:
    """origin (bare) with main; a clone whose branch my-fork has three carry patches on the main it
    forked from; origin/main since took the first (a cherry-pick). ``stack``: "none", "empty" (init
    only) or "full" (the branch imported)."""
    origin = tmp / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    seed = GitRepo.init(tmp / "seed")
    seed.commit(
        "base",
        {f"src/{n}.py": "".join(f"{n}{i} = {i}\n" for i in range(20)) for n in "abc"} | {"ci/config.yml": "jobs: 1\n"},
    )
    seed.git("push", "-q", str(origin), "main")
    subprocess.run(["git", "clone", "-q", str(origin), str(tmp / "fork")], check=True)
    fork = GitRepo(tmp / "fork")
    fork.git("checkout", "-q", "-b", "my-fork")
    picks = []
    for n in "abc":
        files = {f"src/{n}.py": "".join(f"{n}{i} = {i * 10 if i == 3 else i}\n" for i in range(20))}
        if n == "b":  # the middle one also tweaks CI, which an import may leave out (--only src/)
            files["ci/config.yml"] = "jobs: 2\n"
        picks.append(fork.commit(f"fix({n}): {n}3 is thirty", files))
    seed.git("fetch", "-q", str(origin), "main")
    seed.git("fetch", "-q", str(tmp / "fork"), picks[0])
    seed.git("cherry-pick", picks[0])
    seed.git("push", "-q", str(origin), "main")
    fork.git("fetch", "-q", "origin")
    fork.git("branch", "-q", "-f", "main", "origin/main")
    outgoing = tmp / "old-patches"
    fork.git("format-patch", "-q", "-o", str(outgoing), "my-fork~1..my-fork")  # the last patch, as files
    if stack != "none":
        assert run_ggstack("init", "my-fork", "--repo-slug", SLUG, "--base", "main", cwd=fork.path).returncode == 0
    if stack == "full":
        assert run_ggstack("import", "my-fork", "origin/main..my-fork", cwd=fork.path).returncode == 0
    return fork.path


def _run_examples(name: str, fork: Path, forge: FakeGitHub) -> list[str]:
    failures = []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
    env |= {"PATH": os.path.dirname(sys.executable) + os.pathsep + env["PATH"], "EDITOR": "true", "VISUAL": "true"}
    for line in examples(help_text(name)):
        said = re.match(r"ggstack (\S+)", line)
        run_env = dict(env)
        if said and said.group(1) in ("pr", "land"):  # the token only where the forge is written or read
            run_env |= {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": forge.url}
        proc = subprocess.run(
            ["/bin/sh", "-c", line], cwd=fork, env=run_env, capture_output=True, text=True, timeout=600
        )
        if proc.returncode not in (0, 1) or "Traceback" in proc.stderr or "Usage:" in proc.stderr:
            failures.append(f"{line}\n  exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return failures


STATE = {"init": "none", "import": "empty"}


@pytest.mark.slow
@pytest.mark.parametrize("name", [c for c in COMMANDS if c != "demo"])
def test_every_help_example_runs_on_a_generic_fork(tmp_path: Path, name: str) -> None:
    fork = _fork(tmp_path, STATE.get(name, "full"))
    with FakeGitHub(TOKEN) as forge:
        forge.add_repo(SLUG, str(tmp_path / "origin.git"))
        failures = _run_examples(name, fork, forge)
    assert not failures, "\n".join(failures)


def test_the_demos_examples_parse() -> None:
    """The demo's own examples are the demo (two minutes each: test_demo runs it); they parse."""
    for line in examples(help_text("demo")):
        args = line.split()[1:]
        ctx = main.make_context("ggstack", list(args), resilient_parsing=False)
        sub = main.get_command(ctx, args[0])
        assert isinstance(sub, click.Command)
        sub.make_context(args[0], args[1:], parent=ctx)


def test_every_command_takes_json() -> None:
    """`report --format json` was the one way out where every other command had --json."""
    lacking = [name for name in COMMANDS if "--json" not in {o for p in main.commands[name].params for o in p.opts}]
    assert not lacking, f"no --json: {lacking}"


def test_report_json_is_its_format_json(tmp_path: Path) -> None:
    from test_report import every_verdict_run

    from ggstack.report.json import run_json

    path = tmp_path / "run.json"
    path.write_text(run_json(every_verdict_run()))
    by_flag = run_ggstack("report", str(path), "--json", cwd=tmp_path)
    by_format = run_ggstack("report", str(path), "--format", "json", cwd=tmp_path)
    assert by_flag.returncode == 0 and by_flag.stdout == by_format.stdout == run_json(every_verdict_run())
    both = run_ggstack("report", str(path), "--json", "--format", "markdown", cwd=tmp_path)
    assert both.returncode == 2 and "do not go together" in both.stderr
