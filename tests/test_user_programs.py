"""ggstack's own git work runs none of the user's programs.

A user's config can name programs git starts on its own: an fsmonitor hook, a merge
driver or diff driver chosen by ``.gitattributes``, a textconv filter, an external diff,
gpg for signing. None is wanted where ggstack reads objects and replays patches; a merge
driver would even change the replay (one that keeps "ours" silently dropped every
patch's change, and check then called it represented). So each is switched off, the
loop runs as it does without them, and where a driver would have merged a patch's
file, apply and check say so.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

PROGRAMS = ("fsmonitor", "external", "textconv", "diffcmd", "merge", "gpg", "envdiff")


def _text(changes: dict[int, str]) -> str:
    return "".join(f"{changes.get(i, f'line {i}')}\n" for i in range(12))


def _program(tmp: Path, name: str) -> str:
    """A program that records that it ran (and, as a merge driver, keeps ours: the change is lost)."""
    path = tmp / f"{name}.sh"
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> {tmp / "ran.log"}\n' + ("exit 1\n" if name == "fsmonitor" else ""))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[GitRepo, Path, dict]:
    g = GitRepo.init(tmp_path / "fork")
    old = g.commit("base", {"f.txt": _text({}), ".gitattributes": "* diff=evil merge=evil\n"})
    g.git("checkout", "-q", "-b", "topic")
    g.commit("fork change", {"f.txt": _text({3: "fork 3"}), "tests/test_f.py": "def test_f():\n    pass\n"})
    g.git("checkout", "-q", "main")
    g.commit("upstream change", {"f.txt": _text({9: "upstream 9"})})
    settings = {
        "core.fsmonitor": _program(tmp_path, "fsmonitor"),
        "diff.external": _program(tmp_path, "external"),
        "diff.evil.textconv": _program(tmp_path, "textconv"),
        "diff.evil.command": _program(tmp_path, "diffcmd"),
        "merge.evil.driver": _program(tmp_path, "merge") + " %O %A %B",
        "commit.gpgSign": "true",
        "gpg.program": _program(tmp_path, "gpg"),
    }
    for key, value in settings.items():
        g.git("config", "--global", key, value)  # the test checkouts see global settings too
    patches = tmp_path / "patches"
    env = {"GIT_EXTERNAL_DIFF": _program(tmp_path, "envdiff")}
    for args in (["init", "s", "--repo-slug", "o/r", "--base", "main"], ["import", "s", f"{old}..topic"]):
        proc = run_ggstack("--patches", str(patches), *args, cwd=g.path, env=env)
        assert proc.returncode == 0, proc.stderr
    toml = patches / "s" / "stack.toml"
    text = toml.read_text().replace('cpu = "', f'cpu = "{sys.executable} -c pass # ', 1)
    toml.write_text(text.replace('paths = ["tests/**/test_*.py"]', 'paths = ["tests/test_*.py"]'))
    return g, patches, env


def test_no_program_of_the_users_runs_and_the_replay_is_gits_own_merge(hostile, tmp_path: Path) -> None:
    g, patches, env = hostile
    log = tmp_path / "ran.log"
    log.unlink(missing_ok=True)  # init and import ran before the settings mattered: start counting here

    def gg(*args: str) -> tuple[int, str, str]:
        proc = run_ggstack("--patches", str(patches), *args, cwd=g.path, env=env)
        return proc.returncode, proc.stdout, proc.stderr

    rc, out, err = gg("apply", "s", "--json")
    assert rc == 0, err
    patch = json.loads(out)["patches"][0]
    assert patch["applied"] == "applied"  # not "empty": the driver that keeps ours did not run
    assert g.git("show", f"{patch['commit']}:f.txt") == _text({3: "fork 3", 9: "upstream 9"}).strip()
    assert "not your merge driver, for f.txt (merge=evil)" in patch["note"]

    rc, out, err = gg("check", "s", "--json")
    assert rc == 0, err
    assert json.loads(out)["patches"][0]["verdict"] == "unique"
    assert "not your merge driver, for f.txt (merge=evil)" in err

    for args in (
        ["test", "s"],
        ["check", "--commits", "--onto", "main", "topic"],
        ["pr", "s", "--dry-run"],
        ["sync", "s", "--dry-run"],
        ["rebase", "s", "--onto", "main"],
        ["resolve", "s", "1"],
        ["refresh", "s", "1", "--abort"],
    ):
        rc, out, err = gg(*args)
        assert rc in (0, 1), (args, err)
        assert "Traceback" not in err
    ran = log.read_text() if log.exists() else ""
    assert ran == "", ran


def test_a_repository_without_merge_drivers_gets_no_note(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "fork")
    old = g.commit("base", {"f.txt": _text({})})
    g.git("checkout", "-q", "-b", "topic")
    g.commit("fork change", {"f.txt": _text({3: "fork 3"})})
    g.git("checkout", "-q", "main")
    g.commit("upstream change", {"f.txt": _text({9: "upstream 9"})})
    patches = str(tmp_path / "patches")
    for args in (["init", "s", "--repo-slug", "o/r", "--base", "main"], ["import", "s", f"{old}..topic"]):
        assert run_ggstack("--patches", patches, *args, cwd=g.path).returncode == 0
    proc = run_ggstack("--patches", patches, "apply", "s", "--json", cwd=g.path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["patches"][0]["note"] == ""
    assert not os.path.exists(tmp_path / "ran.log")
