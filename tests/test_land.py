"""``ggstack land``: an approved stack merged bottom-up, each PR checked again at the last moment.

The world is test_pr's: a fork whose remote is a bare repository, the local
GitHub-compatible server reading that same repository (merges are real git
commits there), and ggstack run as a subprocess driving PyGithub over HTTP.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from forge_server import FakeGitHub
from gitrepo import run_ggstack
from test_pr import SLUG, TOKEN, World


@pytest.fixture
def forge() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN) as server:
        yield server


@pytest.fixture
def world(tmp_path: Path, forge: FakeGitHub) -> World:
    return World(tmp_path, forge)


def land(w: World, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = run_ggstack(
        "--repo", str(w.fork.path), "--patches", str(w.patches), "land", "s", *args, cwd=w.tmp, env=env or w.env()
    )
    assert TOKEN not in proc.stdout + proc.stderr
    return proc


def landed(w: World, *args: str, code: int = 0, **kw) -> subprocess.CompletedProcess[str]:
    proc = land(w, *args, **kw)
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc


def opened(w: World, commits: list[str], *, config: dict[str, str] | None = None) -> list[dict]:
    """Stack ``s`` of ``commits``, its PRs opened by ``ggstack pr`` (gated: draft and labelled)."""
    w.stack("s", commits, config=config)
    w.ok()
    return w.pulls()


def approve_all(w: World) -> None:
    for p in w.pulls():
        w.forge.approve(SLUG, p["number"])


def main_subjects(w: World) -> list[str]:
    return w.upstream.git("log", "--format=%s", "main").splitlines()


# -- the classic path ----------------------------------------------------------------------------


def test_an_approved_three_pr_stack_lands_bottom_up_each_merged_once(world: World) -> None:
    w = world
    pa, pb, pc = opened(w, [w.a, w.b, w.c])
    approve_all(w)
    proc = landed(w)
    merged = {p["number"]: p for p in w.pulls(None)}
    assert all(merged[p["number"]]["merged"] for p in (pa, pb, pc)), proc.stdout
    # Bottom-up, one merge each, every PR onto main by then (land retargeted #2 and #3), its gate lifted.
    assert main_subjects(w)[:3] == [
        f"Merge pull request #{p['number']} from upstream/{p['head']['ref']}" for p in (pc, pb, pa)
    ]
    assert len(w.forge.merge_calls()) == 3
    assert all(merged[p["number"]]["base"]["ref"] == "main" for p in (pa, pb, pc))
    assert not any(merged[p["number"]]["draft"] or merged[p["number"]]["labels"] for p in (pa, pb, pc))
    for name in ("a.txt", "b.txt", "c.txt"):
        assert "changed" in w.upstream.git("show", f"main:{name}")
    # A rerun finds nothing to do and writes nothing.
    w.forge.reset_counts()
    assert "nothing left to land" in landed(w).stdout
    assert w.forge.write_calls() == 0
