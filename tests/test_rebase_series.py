"""``sync --rebase-series``: the bot proposes the rebased series as one PR onto the branch it lives on.

The world of tests/test_pr.py (a fork, its remote, the local GitHub-compatible
server reading that remote), with the stack stored inside the fork on a
branch ``series``, as a fork keeps it. The checkout is never touched; a rerun
that finds the same proposal makes no write call and no push.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from forge_server import FakeGitHub
from gitrepo import run_ggstack
from test_pr import TOKEN, World, _text  # noqa: F401  (TOKEN: the one conftest's forge takes)

from ggstack.series import store

HEAD = "ggstack/rebase-series/s"


@pytest.fixture
def world(tmp_path: Path, forge: FakeGitHub) -> World:
    w = World(tmp_path, forge)
    # The base moves next to a's change (in its context), so the stored diffs are out of date.
    w.fork.commit("upstream: a's first line", {"a.txt": _text("a").replace("a line 1\n", "a line one\n")})
    w.fork.git("push", "-q", "origin", "main")
    w.patches = w.fork.path / "patches"
    w.stack("s", [w.a, w.b])
    w.fork.git("checkout", "-q", "-b", "series")
    w.fork.commit("the stack", {})
    w.fork.git("push", "-q", "origin", "series")
    return w


def sync(w: World, *extra: str, env: dict[str, str] | None = None):
    argv = ["--repo", str(w.fork.path), "--patches", str(w.patches), "sync", "s", "--onto", "main"]
    return run_ggstack(*argv, "--rebase-series", *extra, cwd=w.tmp, env=env if env is not None else w.env())


def test_the_rebased_series_is_proposed_as_a_pr_onto_its_branch_and_a_rerun_is_silent(world: World) -> None:
    w = world
    user = (w.fork.sha("HEAD"), w.fork.git("status", "--porcelain"))
    proc = sync(w)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (pull,) = [p for p in w.pulls() if p["head"]["ref"] == HEAD]
    assert pull["base"]["ref"] == "series" and "rebase-series: ok: opened PR" in " ".join(proc.stderr.split())
    assert pull["title"].startswith("ggstack: rebase the series s onto main")
    # The proposal: one commit on the series branch changing only the rewritten patch files.
    head = w.upstream.git("rev-parse", HEAD)
    assert w.upstream.git("rev-parse", HEAD + "^") == w.upstream.git("rev-parse", "series")
    changed = w.upstream.git("diff", "--name-only", "series", HEAD).split()
    assert changed == [f"patches/s/{p.name}" for p in store.load(str(w.patches), "s").patches]
    first = w.upstream.git("show", f"{HEAD}:{changed[0]}")
    assert f"base-commit: {w.fork.sha('main')}" in first and "a line one" in first
    # The checkout, its patches included, is as it was.
    assert (w.fork.sha("HEAD"), w.fork.git("status", "--porcelain")) == user

    w.forge.reset_counts()
    again = sync(w)
    assert again.returncode == 0, again.stdout + again.stderr
    assert w.forge.write_calls() == 0 and w.upstream.git("rev-parse", HEAD) == head
    assert "unchanged" in " ".join(again.stderr.split())


def test_a_dry_run_proposes_nothing_and_without_a_token_it_is_refused(world: World) -> None:
    w = world
    dry = sync(w, "--dry-run", env={})
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "would propose 2 rewritten patch(es)" in " ".join(dry.stderr.split())
    assert w.pulls() == []
    no_token = sync(w, env={})
    assert no_token.returncode == 2 and "rebase-series: failed (input): no GitHub token" in no_token.stderr
