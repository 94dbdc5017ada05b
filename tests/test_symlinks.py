"""A stack is read and written only where it is: never through a symbolic link.

``patches/<stack>`` (or a file in it) that is a symlink can point anywhere — another
stack, a directory outside the repository; a change written through it would rebuild
and delete files there. So a symlink in a stack is refused (exit 2), nothing written.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_apply import STACK, Fork, lines


def _fork(tmp_path: Path) -> Fork:
    return Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f3.txt": lines("f3", l3="up")}],
    )


def _snapshot(where: Path) -> dict[str, bytes]:
    return {str(p.relative_to(where)): p.read_bytes() for p in sorted(where.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "args", [["move", STACK, "2", "--to", "1"], ["remove", STACK, "1"], ["list", STACK], ["apply", STACK]]
)
def test_a_symlinked_stack_directory_is_refused_and_its_target_untouched(tmp_path: Path, args: list[str]) -> None:
    fork = _fork(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(fork.patches / STACK), elsewhere)
    (fork.patches / STACK).symlink_to(elsewhere)
    before = _snapshot(elsewhere)
    refs = fork.g.refs()
    proc = fork.ggstack(*args)
    assert proc.returncode == 2, proc.stderr
    assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(elsewhere) == before and os.path.islink(fork.patches / STACK)
    assert fork.g.refs() == refs


@pytest.mark.parametrize("which", ["series", "stack.toml", "patch"])
def test_a_symlinked_file_in_a_stack_is_refused(tmp_path: Path, which: str) -> None:
    fork = _fork(tmp_path)
    stack = fork.patches / STACK
    name = fork.patch_files()[0].name if which == "patch" else which
    outside = tmp_path / "outside"
    shutil.copy(stack / name, outside)
    (stack / name).unlink()
    (stack / name).symlink_to(outside)
    before = outside.read_bytes()
    for args in (["move", STACK, "2", "--to", "1"], ["list", STACK]):
        proc = fork.ggstack(*args)
        assert proc.returncode == 2, proc.stderr
        assert "symbolic link" in proc.stderr and name in proc.stderr and "Traceback" not in proc.stderr
    assert outside.read_bytes() == before and (stack / name).is_symlink()
