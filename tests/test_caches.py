"""The caches (ggstack/cache.py) only ever cost time: an entry that is not what ggstack
wrote — not JSON, JSON of another shape, values of the wrong type — is computed
again, the result is the one a clean run gives, and the entry is good again after.

Each test corrupts the real entry files a first run made, in each way, and reruns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git

FIXED_DATE = {"GIT_COMMITTER_DATE": "1700100000 +0000"}
GARBAGE = [
    b"\xff{not json",
    b"[1, 2, 3]",
    b'{"outcomes": 5, "status": 7, "base": 1, "key": null, "passed": ["x"]}',
]
CODE = "def add(a, b):\n    return a - b\n"
TEST = """import os

from calc import add


def test_add():
    with open(os.environ["RUNLOG"], "a") as f:
        f.write("ran\\n")
    assert add(2, 3) == 5
"""


class Fork:
    """``main`` moved on from ``old``; stack ``s`` is the fix of add() and its test, and a
    second patch that ``main`` has cherry-picked (so ``check`` has a verdict to keep)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.g, self.patches = tmp, GitRepo.init(tmp / "fork"), tmp / "patches"
        self.runlog = tmp / "runlog"
        old = self.g.commit("calc", {"calc.py": CODE, "README": "calc\n", "NOTES": "notes\n"})
        self.g.git("checkout", "-q", "-b", "topic")
        self.g.commit("fix add()", {"calc.py": CODE.replace("-", "+"), "tests/test_calc.py": TEST})
        notes = self.g.commit("more notes", {"NOTES": "notes\nmore\n"})
        self.g.git("checkout", "-q", "main")
        self.g.commit("upstream", {"README": "calc, the calculator\n"})
        self.g.git("cherry-pick", notes)
        self.gg("init", "s", "--repo-slug", "o/r", "--base", "main")
        self.gg("import", "s", f"{old}..topic")
        toml = self.patches / "s" / "stack.toml"
        command = json.dumps("{python} -m pytest -q -p no:cacheprovider {tests}")
        env = f'{{ RUNLOG = "{self.runlog}", PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }}'
        toml.write_text(
            toml.read_text().replace('cpu = "python -m pytest -q {tests}"', f"cpu = {command}\nenv = {env}")
        )
        self.cache = Path(git.Repository(str(self.g.path)).common_dir) / "ggstack" / "cache"

    def gg(self, *args: str, rc: int = 0) -> str:
        proc = run_ggstack("--patches", str(self.patches), *args, cwd=self.g.path, env=FIXED_DATE)
        assert proc.returncode == rc, proc.stderr
        return proc.stdout

    def entries(self, *names: str) -> dict[Path, object]:
        """Every entry file of the named caches (a file or a directory of them), as JSON."""
        files = [p for n in names for p in ([self.cache / n] if n.endswith(".json") else (self.cache / n).iterdir())]
        assert files and all(f.is_file() for f in files)
        return {f: json.loads(f.read_bytes()) for f in files}


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def corrupt(files: dict[Path, object], garbage: bytes) -> None:
    for f in files:
        f.write_bytes(garbage)


def test_a_corrupt_replay_entry_is_replayed_again(fork: Fork) -> None:
    first = json.loads(fork.gg("apply", "s", "--json"))
    kept = fork.entries("materialized.json", "replayed.json")
    for garbage in GARBAGE:
        corrupt(kept, garbage)
        assert json.loads(fork.gg("apply", "s", "--json")) == first, garbage
        assert fork.entries("materialized.json", "replayed.json") == kept, garbage


def test_a_corrupt_verdict_entry_is_judged_again(fork: Fork) -> None:
    first = fork.gg("check", "s", "--onto", "main", "--json")
    assert [p["verdict"] for p in json.loads(first)["patches"]][1] == "represented"
    names = ("check", "check-last-base", "patch-ids-v1.json")
    kept = fork.entries(*names)
    for garbage in GARBAGE:
        corrupt(kept, garbage)
        assert fork.gg("check", "s", "--onto", "main", "--json") == first, garbage
        assert fork.entries(*names) == kept, garbage


def _results(run: str) -> list[tuple[str, str, str, list[str]]]:
    return [(p["name"], t["where"], t["status"], t["passed"]) for p in json.loads(run)["patches"] for t in p["tests"]]


def test_a_corrupt_test_result_entry_is_run_again(fork: Fork) -> None:
    first = fork.gg("test", "s", "--onto", "main", "--json")
    ran = fork.runlog.read_text().count("ran")
    assert ran >= 2 and ("patched", "passed", ["tests.test_calc::test_add"]) in [r[1:] for r in _results(first)]
    kept = fork.entries("tests")
    assert len(kept) == ran
    for n, garbage in enumerate(GARBAGE, 2):
        corrupt(kept, garbage)
        assert _results(fork.gg("test", "s", "--onto", "main", "--json")) == _results(first), garbage
        assert fork.runlog.read_text().count("ran") == ran * n  # every corrupt one ran again
        again = fork.entries("tests")
        assert again.keys() == kept.keys() and all(isinstance(v, dict) for v in again.values())
    # And they are good again: the next run reads every one.
    assert all(
        t["cached"]
        for p in json.loads(fork.gg("test", "s", "--onto", "main", "--json"))["patches"]
        for t in p["tests"]
        if t["status"] != "no-tests"
    )
    assert fork.runlog.read_text().count("ran") == ran * len(GARBAGE) + ran
