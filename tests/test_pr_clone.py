"""``pr`` and ``sync`` from a clone that never had ggstack's last objects.

A CI checkout is ``git clone --single-branch --branch main``: it has none of
the PR head branches another clone pushed, and its replay makes new commit
objects (another clock). The plan compares with the remote heads, so ggstack
fetches them (no ref written); an unchanged branch is then not pushed again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from forge_server import FakeGitHub
from gitrepo import run_ggstack
from test_pr import TOKEN, World, seeded, world  # noqa: F401  (the fixtures; TOKEN: the one conftest's forge takes)

LATER = {"GIT_COMMITTER_DATE": "1800000000 +0000"}


def _clone(w: World) -> Path:
    clone = w.tmp / "ci-clone"  # --no-local: a local clone would copy every object, reachable or not
    subprocess.run(
        ["git", "clone", "-q", "--no-local", "--single-branch", "--branch", "main", str(w.upstream.path), str(clone)],
        check=True,
    )
    return clone


def _gg(w: World, clone: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ggstack(
        "--repo", str(clone), "--patches", str(w.patches), command, "s", "--onto", "main", *args,
        cwd=w.tmp, env={**w.env(), **LATER},
    )  # fmt: skip


def test_pr_from_a_single_branch_clone_plans_and_pushes_nothing_new(seeded: World) -> None:  # noqa: F811
    w = seeded
    w.ok()
    heads = w.remote_heads()
    clone = _clone(w)
    refs_before = subprocess.run(["git", "-C", str(clone), "for-each-ref"], capture_output=True, text=True).stdout
    w.forge.reset_counts()

    preview = _gg(w, clone, "pr", "--dry-run")
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "not a tree" not in preview.stderr
    acted = _gg(w, clone, "pr")
    assert acted.returncode == 0, acted.stdout + acted.stderr
    assert w.forge.write_calls() == 0
    assert w.remote_heads() == heads  # the heads pushed from the other clone stay
    refs_after = subprocess.run(["git", "-C", str(clone), "for-each-ref"], capture_output=True, text=True).stdout
    assert [r for r in refs_after.splitlines() if "refs/ggstack/" not in r and "refs/heads/gg/" not in r] == [
        r for r in refs_before.splitlines()
    ]


def test_sync_from_a_single_branch_clone_runs_through(seeded: World, forge: FakeGitHub) -> None:  # noqa: F811
    w = seeded
    w.ok()
    heads = w.remote_heads()
    clone = _clone(w)
    w.forge.reset_counts()
    proc = _gg(w, clone, "sync", "--fetch")
    assert "not a tree" not in proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert w.forge.write_calls() == 0
    assert w.remote_heads() == heads
