"""A big patch is held about once as bytes and once as text, not once a parsing step.

Loading a stack reads each patch file whole (its bytes are kept: the file is rewritten
byte for byte) and its diff as text; every other copy — the text of the whole file, what
follows the headers, a list of its lines, the diff cut out of it — is what made a 50 MB
patch cost ten times its size. tracemalloc counts what Python allocates, so the figure
does not depend on the machine (``benchmarks/patch_memory.py`` measures whole commands).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from gitrepo import GitRepo, run_ggstack

from ggstack.series import patchfile, store

MB = 1024 * 1024


def _stack_with_a_big_patch(tmp_path: Path, size: int = 8 * MB) -> tuple[Path, int]:
    g = GitRepo.init(tmp_path / "fork")
    g.commit("base", {"a.txt": "a\n"})
    g.git("branch", "base")
    lines, n = [], 0
    while n < size:
        line = f"generated line {len(lines)} " + "x" * (len(lines) % 70) + "\n"
        lines.append(line)
        n += len(line)
    g.commit("add a generated file", {"big.txt": "".join(lines)})
    patches = tmp_path / "patches"
    for args in (["init", "s", "--repo-slug", "o/r", "--base", "base"], ["import", "s", "base..main"]):
        proc = run_ggstack("--patches", str(patches), *args, cwd=g.path)
        assert proc.returncode == 0, proc.stderr
    return patches, sum(p.stat().st_size for p in (patches / "s").glob("*.patch"))


def test_loading_a_big_patch_holds_its_bytes_and_its_diff_and_little_else(tmp_path: Path) -> None:
    patches, size = _stack_with_a_big_patch(tmp_path)
    tracemalloc.start()
    try:
        stack = store.load(str(patches), "s")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(stack.patches[0].diff) > size * 0.9
    assert peak < 2.3 * size, f"peak {peak / size:.1f}x the patch file"


def test_parsing_a_big_patch_makes_one_copy_its_diff(tmp_path: Path) -> None:
    patches, size = _stack_with_a_big_patch(tmp_path)
    path = next((patches / "s").glob("*.patch"))
    raw = path.read_bytes()
    tracemalloc.start()
    try:
        patch = patchfile.parse_patch(raw, str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert patch.paths == ("big.txt",)
    assert peak < 1.3 * size, f"peak {peak / size:.1f}x the patch file"


def test_applying_a_big_patch_compares_gits_diff_of_it_where_it_is(tmp_path: Path) -> None:
    """``apply`` checks that the stored diff is its source commit's: git's diff is read once
    and compared a piece at a time, not cut out, stripped and encoded whole (a copy each)."""
    from ggstack import git, replay

    patches, size = _stack_with_a_big_patch(tmp_path)
    stack = store.load(str(patches), "s")
    repo = git.Repository(str(tmp_path / "fork"))
    tracemalloc.start()
    try:
        run = replay.apply(repo, stack, "base", write=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [o.applied.value for o in run.outcomes if o.applied] == ["applied"]
    assert peak < 1.5 * size, f"peak {peak / size:.1f}x the patch file"
