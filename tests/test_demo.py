"""The embedded default: ``ggstack demo`` tells the seed's story, and the stored
stack ``patches/gg-clean`` is exactly what ``ggstack import`` makes of the demo fork."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import exits
from ggstack.model import Run

pytestmark = pytest.mark.slow  # end to end: the suite runs it, `pytest -m "not slow"` does not

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "patches" / "gg-clean"
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_stored_stack_is_what_import_makes_of_the_demo_fork(tmp_path: Path) -> None:
    proc = run_ggstack("demo", "--export", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _files(tmp_path / "gg-clean") == _files(STORED)


def test_stored_stack_applies_with_git_am_onto_the_older_base(tmp_path: Path) -> None:
    proc = run_ggstack("demo", "--export", str(tmp_path / "unused"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # Build the fork itself, then `git am` the stored files onto dev/before in a clone.
    from ggstack import demo

    fork = demo.build_fork(str(tmp_path / "fork.git"))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--branch", "dev/before", fork.repo.git_dir, str(clone)], check=True)
    work = GitRepo(clone)
    patches = [str(STORED / name) for name in (STORED / "series").read_text().split() if name.endswith(".patch")]
    work.git("am", "-3", "--keep-non-patch", *patches)
    assert work.git("log", "--format=%s", "-3").splitlines() == [
        demo.history_subject(key) for key in reversed([imp.commit for imp in demo.history.IMPORTS])
    ]
    # The last patch's tree is the maintainer's stack branch's tree for the imported paths.
    for path in ("vllm/v1/attention/ops/dcp_alltoall.py", "tests/distributed/test_dcp_a2a.py"):
        assert work.git("rev-parse", f"HEAD:{path}") == GitRepo(fork.repo.git_dir).git(
            "rev-parse", f"refs/heads/gg/stack-src:{path}"
        )


def _demo(tmp_path: Path, base: str) -> dict:
    proc = run_ggstack("demo", str(tmp_path / "demo"), "--base", base, "--json", cwd=tmp_path, timeout=600)
    run = json.loads(proc.stdout)
    # Its exit code is the one sync would give for the same Run (1: a patch needs a human).
    assert proc.returncode == exits.exit_code(Run.from_json(run)), proc.stderr
    return run


@pytest.mark.skipif(
    not HAVE_TORCH, reason="the payload's tests need torch; without it they are inconclusive (tested in test_testrun)"
)
def test_demo_on_the_current_base_says_represented_partial_and_needed(tmp_path: Path) -> None:
    run = _demo(tmp_path, "current")
    first, second, third = run["patches"]
    consolidating = run["patches"][0]["represented_by"]

    assert first["verdict"] == "represented"
    assert first["recommendation"] == "do not open"
    kinds = {e["kind"] for e in first["evidence"]}
    assert {"content", "blame", "tests"} <= kinds
    assert len(consolidating) == 1

    assert second["verdict"] == "partial"
    assert second["remaining_diff"] and "def release_graph_buffers" not in second["remaining_diff"]
    assert consolidating[0] in second["represented_by"]

    assert third["verdict"] == "unique"
    assert third["recommendation"] == "open PR"
    assert "open" in third["pr"]["action"] and third["pr"]["action"].startswith("would")


@pytest.mark.skipif(not HAVE_TORCH, reason="the payload's tests need torch")
def test_demo_on_the_older_base_says_the_fix_is_needed(tmp_path: Path) -> None:
    run = _demo(tmp_path, "before")
    assert [p["verdict"] for p in run["patches"]] == ["unique", "unique", "unique"]
    assert [p["recommendation"] for p in run["patches"]] == ["open PR"] * 3


def test_demo_prints_the_maintainer_table(tmp_path: Path) -> None:
    proc = run_ggstack("demo", "--gpu", "off", cwd=tmp_path, timeout=600, env={"COLUMNS": ""})
    assert proc.returncode == 1, proc.stderr  # 0002 is partial: as sync, 1 when a patch needs a human
    assert "gg-clean" in proc.stdout and "dev/gilded-gnosis" in proc.stdout
    assert "0001" in proc.stdout and "0003" in proc.stdout
    # Piped: tables at 100 columns, a line a stage on stderr, and what to do next on your own fork.
    tables = proc.stdout.split("===== ")[0]
    assert max(len(line) for line in tables.splitlines()) <= 100
    for stage in ("apply", "check", "test", "pr"):
        assert f"ggstack: {stage}: 3 patches" in proc.stderr, proc.stderr
    assert "Next, on your own fork" in proc.stdout and "ggstack import my-fork origin/main..my-fork" in proc.stdout
    assert not list(tmp_path.iterdir()), "the temporary directory is removed without --keep"
