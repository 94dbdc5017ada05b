"""The README a newcomer reads in five minutes, and the docs beside it.

The README was a 1,014-line reference manual whose first generic command was
at line 124. Now it is short, its quick start runs verbatim on a fresh fork
and gives the verdicts it promises, it says how to install ggstack for your
own fork (a wheel built here installs and runs), and the reference lives in
``docs/``: a page per command, whose examples use options that exist.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
from pathlib import Path

import click
import pytest
from gitrepo import GitRepo

from ggstack.cli import main
from ggstack.model import Recommendation, Verdict

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def code_blocks(text: str, lang: str = "sh") -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_short_and_has_what_a_newcomer_needs() -> None:
    lines = README.splitlines()
    assert len(lines) <= 150, len(lines)
    headings = [line[3:] for line in lines if line.startswith("## ")]
    for title in (
        "Set up",
        "Install for your own fork",
        "Quick start",
        "The daily loop",
        "Commands",
        "Verdicts and recommendations",
        "Documentation",
    ):
        assert title in headings, title
    # CI (.ci/run) and the newcomer test run the two set-up commands: the first two code blocks.
    first, second = code_blocks(README)[:2]
    assert first.strip().endswith("ggstack demo") and "'.[demo]'" in first
    assert second.strip().endswith("python -m pytest -q") and "'.[test]'" in second
    assert "pipx install" in section(README, "Install for your own fork")
    assert "patches" in section(README, "Quick start") and "git add patches" in section(README, "Quick start")
    loop = code_blocks(section(README, "The daily loop"))[0]
    for verb in ("check", "resolve", "refresh", "drop", "rebase", "pr"):
        assert f"ggstack {verb} " in loop, verb


def test_every_link_of_the_readme_and_the_docs_is_a_file_here() -> None:
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+?)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which is not there"


def test_every_command_has_its_page_in_the_docs_the_nav_and_the_readmes_table() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    table = section(README, "Commands")
    for name in main.commands:
        page = DOCS / "commands" / f"{name}.md"
        assert page.is_file(), f"no docs page for ggstack {name}"
        assert page.read_text().startswith(f"# ggstack {name}\n"), page
        assert f"commands/{name}.md" in nav, f"mkdocs.yml's nav lacks {name}"
        assert f"(docs/commands/{name}.md)" in table, f"README's command table lacks {name}"
        assert f"ggstack {name} " in page.read_text().split("```", 2)[1], f"{page.name}: no example of its own"


def example_lines(text: str) -> list[str]:
    """Each ggstack command line of a text's sh code blocks (comments and shell around it left out)."""
    out = []
    for block in code_blocks(text):
        for raw in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", raw.strip())
            for part in re.split(r"&&|\|\||;|\|", line):
                words = shlex.split(part.split(">")[0], comments=True)
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value before the command
                if words[:1] == ["ggstack"] and len(words) > 1:
                    out.append(" ".join(shlex.quote(w) for w in words))
    return out


PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_each_pages_examples_use_commands_and_options_that_exist(page: Path) -> None:
    """Parsed by ggstack's own command line (values are not checked: run.json need not exist here)."""
    top = {o for p in main.params for o in p.opts}
    for line in example_lines(page.read_text()):
        args = shlex.split(line)[1:]
        name = next(a for a in args if not a.startswith("-") and a not in ("--repo", "--patches"))
        sub = main.commands.get(name)
        assert sub is not None, f"{page.relative_to(ROOT)}: no command {name!r}: {line}"
        known = top | {o for p in sub.params for o in p.opts} | {"--help", "-h"}
        unknown = [a.split("=")[0] for a in args if a.startswith("-") and a.split("=")[0] not in known]
        assert not unknown, f"{page.relative_to(ROOT)}: {line}: no option {unknown}"
        try:
            sub.make_context(name, args[args.index(name) + 1 :], resilient_parsing=True).close()
        except click.UsageError as e:
            pytest.fail(f"{page.relative_to(ROOT)}: {line}\n  {e.format_message()}")


def test_the_glossary_and_the_readme_name_every_verdict_and_recommendation_once() -> None:
    glossary = (DOCS / "glossary.md").read_text()
    verdicts = section(README, "Verdicts and recommendations")
    for v in Verdict:
        assert f"| `{v.value}` |" in glossary and f"| `{v.value}` |" in verdicts, v.value
    for r in Recommendation:
        assert f"| `{r.value}` |" in glossary, r.value
    assert "needed" not in re.findall(r"\| `(\w+)` \|", verdicts)  # one word per verdict: unique


@pytest.mark.skipif(
    shutil.which("mkdocs") is None and not Path(sys.executable).with_name("mkdocs").exists(),
    reason="mkdocs not installed ('.[docs]')",
)
def test_the_docs_build_strict(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).with_name("mkdocs"))
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "commands" / "check" / "index.html").is_file()


# -- install for your own fork: a wheel, built here, installed elsewhere ----------------------


def test_a_wheel_built_from_the_checkout_installs_and_runs(tmp_path: Path) -> None:
    """README: `pip wheel --no-deps -w dist /path/to/ggstack`, then install the wheel. The venv
    sees this suite's packages through one .pth line (the dependencies, no network); ggstack
    itself comes from the wheel, not from this checkout."""
    isolation = ["--no-build-isolation"] if _have("setuptools") else []  # setuptools here: no index needed
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("ggstack-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # its own pip (ensurepip: no network)
    packages = next((venv / "lib").glob("python3*/site-packages"))
    (packages / "_suite.pth").write_text("\n".join(site.getsitepackages()) + "\n")  # the dependencies
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ggstack; print(ggstack.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(packages), where.stdout + where.stderr
    version = subprocess.run([str(venv / "bin" / "ggstack"), "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("ggstack, version "), version.stdout + version.stderr


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# -- the quick start, verbatim --------------------------------------------------------------


def _fresh_fork(tmp: Path) -> Path:
    """upstream (origin) with main; your-fork, a clone whose branch my-fork carries three patches:
    one upstream took since (a cherry-pick), one upstream took half of, one its own."""
    upstream = tmp / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(upstream)], check=True)
    seed = GitRepo.init(tmp / "seed")
    lines = {f"src/{n}.py": "".join(f"{n}{i} = {i}\n" for i in range(30)) for n in "abc"}
    seed.commit("project", lines)
    seed.git("push", "-q", str(upstream), "main")
    subprocess.run(["git", "clone", "-q", str(upstream), str(tmp / "your-fork")], check=True)
    fork = GitRepo(tmp / "your-fork")
    fork.git("checkout", "-q", "-b", "my-fork")
    picks = []
    for n in "abc":
        text = lines[f"src/{n}.py"].replace(f"{n}3 = 3", f"{n}3 = 33").replace(f"{n}20 = 20", f"{n}20 = 220")
        picks.append(fork.commit(f"fix({n}): {n}3 and {n}20", {f"src/{n}.py": text}))
    seed.git("fetch", "-q", str(tmp / "your-fork"), "my-fork")
    seed.git("cherry-pick", picks[0])  # upstream took the first whole
    half = lines["src/b.py"].replace("b3 = 3", "b3 = 33")
    seed.commit("upstream: b3 is 33", {"src/b.py": half})  # and half of the second
    seed.git("push", "-q", str(upstream), "main")
    return fork.path


def test_the_readmes_quick_start_verbatim_on_a_fresh_fork_gives_the_verdicts_it_promises(tmp_path: Path) -> None:
    _fresh_fork(tmp_path)
    block = code_blocks(section(README, "Quick start"))[0]
    ggstack_dir = os.path.dirname(shutil.which("ggstack") or str(Path(sys.executable).with_name("ggstack")))
    env = {**os.environ, "PATH": ggstack_dir + os.pathsep + os.environ["PATH"], "COLUMNS": "120"}
    proc = subprocess.run(["/bin/sh", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout
    # What README says check prints: one row a patch, represented, partial, unique.
    rows = {n: next(line for line in out.splitlines() if re.match(rf"^\W*000{n} ", line)) for n in (1, 2, 3)}
    assert "represented" in rows[1] and "do not open" in rows[1], out
    assert "partial" in rows[2] and "open PR" in rows[2], out
    assert "unique" in rows[3] and "open PR" in rows[3], out
    fork = GitRepo(tmp_path / "your-fork")
    # patches/ committed on a branch of its own; my-fork untouched.
    assert fork.git("rev-parse", "--abbrev-ref", "HEAD") == "ggstack"
    committed = fork.git("ls-tree", "-r", "--name-only", "HEAD", "patches/my-fork").splitlines()
    assert "patches/my-fork/stack.toml" in committed and len([c for c in committed if c.endswith(".patch")]) == 3
    assert fork.git("status", "--porcelain") == ""
    assert "patches" not in fork.git("ls-tree", "--name-only", "my-fork").split()
