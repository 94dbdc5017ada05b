"""Whatever a file or the forge says, ggstack answers with an exit code and a message, never a traceback.

hypothesis mutates what ggstack reads — a saved Run's JSON, a patch file, ``stack.toml``,
``series``, the forge's answers — and each case runs the real command on a real repository.
The property is the one the CLI promises: the command ends in an exit code it documents
(0/1 done, 2 bad input, 3 infrastructure; the local files are never "infrastructure"), and
nothing but ``UserError``/``InfraError`` comes out of it (anything else is a traceback).

The command runs in this process (``main.main(..., standalone_mode=False)``: the same code
path as ``python -m ggstack`` past its start-up), with git as real subprocesses: a process
per case would cost a quarter of a second before it did anything, and these are hundreds.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from gitrepo import GitRepo, run_ggstack
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ggstack.cli import main

pytestmark = pytest.mark.slow  # end to end: the suite runs it, `pytest -m "not slow"` does not

FUZZ = settings(
    max_examples=int(os.environ.get("GGSTACK_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


COMMANDS = ("report", "list", "apply", "pr")


def ggstack(*args: str) -> int:
    """The CLI, in this process: its exit code; an exception it lets out fails the test."""
    try:
        main.main(list(args), prog_name="ggstack", standalone_mode=False)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except click.ClickException as e:  # a usage error: standalone click prints it and exits with this
        code = e.exit_code
    else:
        code = 0
    event(f"{next(a for a in args if a in COMMANDS)} exit {code}")
    return code


# -- one world for every case -------------------------------------------------------------


class World:
    def __init__(self, tmp: Path) -> None:
        self.g = GitRepo.init(tmp / "fork")
        root = {f"f{i}.txt": "".join(f"f{i} line {n}\n" for n in range(12)) for i in range(3)}
        old = self.g.commit("root", root)
        self.g.git("checkout", "-q", "-b", "topic")
        for i in range(3):
            self.g.commit(f"fix {i}\n\nWhy {i}.", {f"f{i}.txt": root[f"f{i}.txt"].replace("line 4", f"fixed {i}")})
        self.g.git("checkout", "-q", "main")
        self.g.commit("upstream", {"f2.txt": root["f2.txt"].replace("line 4", "upstream")})
        self.patches = tmp / "patches"
        self.pristine = tmp / "pristine"
        for args in (["init", "s", "--repo-slug", "o/r", "--base", "main"], ["import", "s", f"{old}..topic"]):
            proc = run_ggstack("--patches", str(self.pristine), *args, cwd=self.g.path)
            assert proc.returncode == 0, proc.stderr
        proc = run_ggstack("--patches", str(self.pristine), "check", "s", "--json", cwd=self.g.path)
        assert proc.returncode in (0, 1), proc.stderr
        self.run_json = json.loads(proc.stdout)
        self.files = {p.name: p.read_text() for p in (self.pristine / "s").iterdir()}

    def fresh(self, name: str, text: str) -> None:
        """The stack as imported, but ``name`` holding ``text``."""
        shutil.rmtree(self.patches, ignore_errors=True)
        shutil.copytree(self.pristine, self.patches)
        (self.patches / "s" / name).write_bytes(text.encode("utf-8", "surrogatepass"))

    def gg(self, *args: str) -> int:
        return ggstack("--repo", str(self.g.path), "--patches", str(self.patches), *args)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("home")
    saved = dict(os.environ)
    os.environ.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_AUTHOR_NAME="A",
        GIT_AUTHOR_EMAIL="a@example.com",
        GIT_COMMITTER_NAME="C",
        GIT_COMMITTER_EMAIL="c@example.com",
    )
    for key in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_API_URL", "GITHUB_ACTIONS", "GGSTACK_PATCHES"):
        os.environ.pop(key, None)
    try:
        yield World(tmp_path_factory.mktemp("fuzz"))
    finally:
        os.environ.clear()
        os.environ.update(saved)


# -- mutations ----------------------------------------------------------------------------

ODD_TEXT = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=8),
        st.sampled_from(["\n", "\t", "\r", "\0", "-", ":", "@@", "---", "From ", "diff --git a/x b/x", "+", " "]),
    ),
    max_size=6,
).map("".join)


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    """``text`` with one to four lines deleted, doubled, replaced or cut, or odd text put in."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        how = draw(st.sampled_from(["delete", "double", "replace", "insert", "cut", "truncate", "abyss"]))
        if how == "delete" and lines:
            del lines[i]
        elif how == "double" and lines:
            lines.insert(i, lines[i])
        elif how == "replace" and lines:
            lines[i] = draw(ODD_TEXT)
        elif how == "insert":
            lines.insert(i, draw(ODD_TEXT))
        elif how == "cut" and lines and lines[i]:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif how == "truncate":
            lines = lines[:i]
        elif how == "abyss" and lines:  # nested past any parser's stack
            lines[i] = "[" * 100_000 + lines[i]
    return "\n".join(lines)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


@st.composite
def mutated_json(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one part (found by a random walk from the top) replaced, removed or nested deep."""
    value = json.loads(json.dumps(value))
    holder: Any = None
    key: Any = None
    node = value
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        holder = node
        key = draw(st.sampled_from(sorted(node)) if isinstance(node, dict) else st.integers(0, len(node) - 1))
        node = node[key]
    how = draw(st.sampled_from(["replace", "remove", "deep"]))
    new = draw(JSON_VALUES) if how == "replace" else [[[[[[node]]]]]] * 2 if how == "deep" else None
    if holder is None:
        return new
    if how == "remove":
        del holder[key]
    else:
        holder[key] = new
    return value


# -- the properties -----------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_a_saved_run_of_any_shape_is_reported_or_refused(world: World, data: st.DataObject, tmp_path: Path) -> None:
    run = data.draw(mutated_json(world.run_json))
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(run))
    fmt = data.draw(st.sampled_from(["table", "markdown", "json"]))
    assert ggstack("report", str(saved), "--format", fmt) in (0, 2)


@FUZZ
@given(data=st.data())
def test_a_saved_run_of_any_bytes_is_reported_or_refused(world: World, data: st.DataObject, tmp_path: Path) -> None:
    text = json.dumps(world.run_json, indent=1)
    saved = tmp_path / "run.json"
    saved.write_bytes(data.draw(mutated(text)).encode("utf-8", "surrogatepass") + data.draw(st.binary(max_size=8)))
    assert ggstack("report", str(saved)) in (0, 2)


@FUZZ
@given(data=st.data())
def test_a_damaged_patch_file_is_loaded_applied_or_refused(world: World, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(n for n in world.files if n.endswith(".patch"))))
    world.fresh(name, data.draw(mutated(world.files[name])))
    assert world.gg("list", "s", "--json") in (0, 2)
    assert world.gg("apply", "s", "--json", "--branch-prefix", "refs/ggstack/fuzz") in (0, 1, 2)


TOML_VALUES = st.one_of(
    ODD_TEXT.map(json.dumps),
    st.integers().map(str),
    st.sampled_from(["true", "[]", '["a", 1]', "{}", "1.5", "nan", '"base:../../x"', '"refs/tags/v{index}"']),
)


@FUZZ
@given(data=st.data())
def test_a_damaged_stack_toml_is_loaded_applied_or_refused(world: World, data: st.DataObject) -> None:
    text = world.files["stack.toml"]
    if data.draw(st.booleans()):
        text = data.draw(mutated(text))
    else:  # a known key, a value of any kind
        keys = ["repo", "remote", "base", "fork", "template", "draft", "labels", "paths", "cpu", "gpu", "timeout"]
        key, value = data.draw(st.sampled_from(keys)), data.draw(TOML_VALUES)
        text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line for line in text.split("\n"))
    world.fresh("stack.toml", text)
    assert world.gg("list", "s", "--json") in (0, 2)
    assert world.gg("apply", "s", "--json") in (0, 1, 2)


@FUZZ
@given(data=st.data())
def test_any_series_is_loaded_applied_or_refused(world: World, data: st.DataObject) -> None:
    names = sorted(n for n in world.files if n.endswith(".patch"))
    entries = [
        data.draw(st.sampled_from([n, n, n, f"{n} -p1", f"{n} # why", f"  {n}\t", f"{n} -p0", f"-p1 {n}", f"{n} -R"]))
        for n in data.draw(st.permutations(names))
    ]
    odd = st.sampled_from(["# a comment", "", "  ", "missing.patch", "../stack.toml", "stack.toml", "-p1"]) | ODD_TEXT
    for _ in range(data.draw(st.integers(0, 2))):
        entries.insert(data.draw(st.integers(0, len(entries))), data.draw(odd))
    world.fresh("series", "\n".join(entries) + data.draw(st.sampled_from(["\n", "", "\n\n", "\r\n"])))
    assert world.gg("list", "s", "--json") in (0, 2)
    assert world.gg("apply", "s", "--json") in (0, 1, 2)


# -- the forge ----------------------------------------------------------------------------

ENDPOINTS = [
    ("GET", r"/repos/[^/]+/[^/]+$"),
    ("GET", r"/pulls$"),
    ("POST", r"/pulls$"),
    ("PATCH", r"/pulls/\d+$"),
    ("GET", r"/reviews$"),
    ("POST", r"/labels$"),
    ("GET", r"/comments$"),
    ("POST", r"graphql"),
    ("*", r"."),
]


@FUZZ
@given(data=st.data())
def test_any_answer_of_the_forge_is_a_run_or_a_clear_failure(
    data: st.DataObject, forge_world: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_pr import TOKEN

    w = forge_world
    w.forge.clear_faults()
    method, path = data.draw(st.sampled_from(ENDPOINTS))
    status = data.draw(st.sampled_from([200, 201, 204, 301, 400, 401, 403, 404, 409, 410, 422, 500, 502]))
    if data.draw(st.booleans()):
        body = data.draw(
            st.binary(max_size=30) | mutated(json.dumps({"number": 1, "head": {"ref": "x"}})).map(str.encode)
        )
        w.forge.inject(method, path, status=status, raw=body, times=data.draw(st.integers(1, 3)))
    else:
        body = data.draw(JSON_VALUES)
        w.forge.inject(method, path, status=status, body=body, times=data.draw(st.integers(1, 3)))
    capsys.readouterr()
    code = ggstack("--repo", str(w.fork.path), "--patches", str(w.patches), "pr", "s", "--onto", "main")
    out = capsys.readouterr()
    assert code in (0, 1, 2, 3), out.err
    assert TOKEN not in out.out + out.err


@pytest.fixture
def forge_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from forge_server import FakeGitHub
    from test_pr import FAST, TOKEN
    from test_pr import World as PRWorld

    with FakeGitHub(TOKEN) as forge:
        w = PRWorld(tmp_path, forge)
        w.stack("s", [w.x, w.a, w.b])
        for key, value in {**w.env(), **FAST, "GGSTACK_RETRY_ATTEMPTS": "2"}.items():
            monkeypatch.setenv(key, value)
        yield w
