"""A full or read-only filesystem under ``patches/`` or the git dir: exit 3 naming the path, nothing half-written.

Root ignores file modes (``chmod -w`` stops nobody here), so these make the
writes fail for real: each case runs ggstack in a mount namespace of its own
(``unshare -m``) where the directory is bind-mounted read-only, or is a small
tmpfs filled to its last block. No other process sees those mounts, and they
go with the namespace. Where mount namespaces are not allowed (not root, no
CAP_SYS_ADMIN, no ``unshare``) the tests are skipped, saying why.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

STACK = "s"

# A directory's files and folders, printed as JSON: what "nothing half-written" compares.
_FINGERPRINT = """
import hashlib, json, os, sys
root, out = sys.argv[1], {}
for dirpath, dirnames, filenames in os.walk(root):
    for d in dirnames:
        out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
    for f in filenames:
        p = os.path.join(dirpath, f)
        with open(p, "rb") as fh:
            out[os.path.relpath(p, root)] = hashlib.sha1(fh.read()).hexdigest()
print(json.dumps(out, sort_keys=True))
"""


@functools.cache
def _why_not() -> str | None:
    """None when a private mount namespace with a tmpfs can be made here, else why not."""
    with tempfile.TemporaryDirectory(prefix="ggstack-mnt-") as d:
        try:
            proc = subprocess.run(
                ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(d)}"],
                capture_output=True,
                text=True,
            )
        except OSError as e:
            return f"no unshare: {e.strerror}"
    return None if proc.returncode == 0 else f"no private mount namespace here: {proc.stderr.strip()[:200]}"


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def _read_only(d: Path) -> str:
    q = shlex.quote(str(d))
    return f"mount --bind {q} {q}\nmount -o remount,bind,ro {q}\n"


def _full(d: Path, spare: Path) -> str:
    """``d`` on a 2 MiB tmpfs holding what it held, then filled to its last block."""
    q, s = shlex.quote(str(d)), shlex.quote(str(spare))
    return (
        f"cp -a {q} {s}\nmount -t tmpfs -o size=2m tmpfs {q}\ncp -a {s}/. {q}\n"
        f"dd if=/dev/zero of={q}/.filler bs=4096 2>/dev/null || true\n"
    )


class Fork:
    """A fork with a stack of two patches imported, and a third commit to import."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.g = GitRepo.init(tmp / "fork")
        self.patches = tmp / "patches"
        self.g.commit("root", {f"f{i}.txt": f"f{i}\n" for i in range(4)})
        self.g.git("checkout", "-q", "-b", "topic")
        for i in (1, 2, 3):
            self.g.commit(f"patch {i}", {f"f{i}.txt": f"f{i}\npatch {i}\n"})
        self.g.git("checkout", "-q", "main")
        for args in (("init", STACK, "--repo-slug", "o/r", "--base", "main"), ("import", STACK, "main..topic~1")):
            proc = run_ggstack("--patches", str(self.patches), *args, cwd=self.g.path)
            assert proc.returncode == 0, proc.stderr
        self.gitdir = self.g.path / ".git"

    def confined(self, mount: str, watched: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict, dict]:
        """ggstack ARGS with ``mount`` done in a namespace of its own; ``watched`` fingerprinted before and after."""
        out = Path(tempfile.mkdtemp(prefix="out-", dir=self.tmp))
        (out / "fp.py").write_text(_FINGERPRINT)
        py, fp, w = shlex.quote(sys.executable), shlex.quote(str(out / "fp.py")), shlex.quote(str(watched))
        cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "ggstack", "--patches", str(self.patches), *args))
        script = (
            f"set -e\n{mount}{py} {fp} {w} > {out}/before.json\nset +e\n"
            f"{cmd} > {out}/stdout 2> {out}/stderr\necho $? > {out}/rc\n{py} {fp} {w} > {out}/after.json\n"
        )
        setup = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            cwd=self.g.path,
            env={**os.environ, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert setup.returncode == 0 and (out / "rc").exists(), setup.stderr
        proc = subprocess.CompletedProcess(
            args, int((out / "rc").read_text()), (out / "stdout").read_text(), (out / "stderr").read_text()
        )
        return proc, json.loads((out / "before.json").read_text()), json.loads((out / "after.json").read_text())


# The commands that change patches/<stack>/ (init: a new stack beside it).
CHANGES = [
    ("import", ("import", STACK, "topic~1..topic"), STACK),
    ("move", ("move", STACK, "2", "--to", "1"), STACK),
    ("remove", ("remove", STACK, "0002-patch-2.patch"), STACK),
    ("init", ("init", "t", "--repo-slug", "o/r", "--base", "main"), "t"),
]


@pytest.mark.parametrize("how", ["read-only", "full"])
@pytest.mark.parametrize(("command", "args", "stack"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_stack_change_on_a_read_only_or_full_patches_directory_is_exit_3_naming_it_with_nothing_written(
    tmp_path: Path, how: str, command: str, args: tuple[str, ...], stack: str
) -> None:
    fork = Fork(tmp_path)
    mount = _read_only(fork.patches) if how == "read-only" else _full(fork.patches, tmp_path / "spare")
    proc, before, after = fork.confined(mount, fork.patches, *args)
    assert proc.returncode == 3, proc.stderr
    said = "read-only" if how == "read-only" else "no space left on device"
    assert f"{said}: {fork.patches / stack} (nothing was changed)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert after == before  # no half-written file, no temporary left, no empty directory from init


@pytest.mark.parametrize("how", ["read-only", "full"])
@pytest.mark.parametrize(
    "args",
    [("sync", STACK, "--dry-run"), ("import", STACK, "topic~1..topic"), ("move", STACK, "2", "--to", "1")],
    ids=["sync", "import", "move"],
)
def test_a_lock_that_cannot_be_written_in_the_git_dir_is_exit_3_naming_it(
    tmp_path: Path, how: str, args: tuple[str, ...]
) -> None:
    fork = Fork(tmp_path)
    mount = _read_only(fork.gitdir) if how == "read-only" else _full(fork.gitdir, tmp_path / "spare")
    proc, before, after = fork.confined(mount, fork.gitdir, *args)
    assert proc.returncode == 3, proc.stderr
    lock = fork.gitdir / "ggstack" / "locks" / f"{STACK}.lock"
    # Read-only: even the guard file beside the lock cannot be opened; full: the lock's bytes cannot be written.
    said = f"read-only: {lock}.guard" if how == "read-only" else f"no space left on device: {lock}"
    assert f"{said} (nothing was changed)" in proc.stderr and "Traceback" not in proc.stderr
    assert after == before  # no empty or half-written lock file left behind


@pytest.mark.parametrize("how", ["read-only", "full"])
def test_check_with_a_git_dir_it_cannot_write_is_exit_3_with_no_traceback(tmp_path: Path, how: str) -> None:
    fork = Fork(tmp_path)
    mount = _read_only(fork.gitdir) if how == "read-only" else _full(fork.gitdir, tmp_path / "spare")
    proc, before, after = fork.confined(mount, fork.gitdir / "refs", "check", STACK, "--no-cache")
    assert proc.returncode == 3, proc.stderr
    words = ("read-only: ",) if how == "read-only" else ("no space left on device: ", "out of diskspace")  # git's
    assert any(w in proc.stderr.lower() for w in words) and str(fork.gitdir) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert after == before


def test_the_fingerprint_sees_a_change(tmp_path: Path) -> None:
    """The harness itself: a stack change that can be written is seen (so ``after == before`` can fail)."""
    fork = Fork(tmp_path)
    proc, before, after = fork.confined("", fork.patches, "remove", STACK, "0002-patch-2.patch")
    assert proc.returncode == 0, proc.stderr
    assert after != before and f"{STACK}/0002-patch-2.patch" in before and f"{STACK}/0002-patch-2.patch" not in after
