"""The checkouts test runs happen in: a repository of its own under the git dir, so a test reaches nothing of the
user's; named after the ggstack process that made it, so a later run tells a dead run's leftovers from a live one's."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator

from ggstack import git, state
from ggstack.testing import processes
from ggstack.testing.plan import TestTree

GIT_LOCK = threading.Lock()  # one Repository (its object queue, its cat-file process) is not thread-safe


@contextlib.contextmanager
def checkout(repo: git.Repository, tt: TestTree) -> Iterator[str]:
    with GIT_LOCK:
        root = repo.state_dir("worktrees")
        _stop_pytest_config_search(root)
        path = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root)
    assert tt.tree is not None, "a test tree that was never built has no worktree"
    try:
        with GIT_LOCK:
            commit = repo.commit_tree(tt.tree, [tt.parent] if tt.parent else [], "ggstack test tree\n", scratch=True)
            repo.add_isolated_checkout(path, commit)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)  # its own repository: nothing of the user's to unregister
        with contextlib.suppress(OSError):
            os.unlink(path + ".pgid")


def _stop_pytest_config_search(root: str) -> None:
    """Else a checkout without a pytest config would take the user's (the git dir is inside it)."""
    path = os.path.join(root, "pytest.ini")
    if not os.path.exists(path):
        state.write_atomic(
            path, b"# ggstack: pytest's config search stops here, outside the user's checkout\n[pytest]\n"
        )


def prune_leftovers(repo: git.Repository) -> list[str]:
    root = repo.state_dir("worktrees")
    removed = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isdir(path) and _owner_dead(name):
            processes.kill_leftover_group(path)
            _remove_worktree(repo, path)
            removed.append(path)
    for name in os.listdir(root):  # a .pgid whose worktree is gone
        if name.endswith(".pgid") and not os.path.isdir(os.path.join(root, name.removesuffix(".pgid"))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name))
    repo.prune_worktrees()
    processes.sweep(_owner_dead)
    return removed


def _owner_dead(name: str) -> bool:
    owner = name.split("-", 1)[0]
    return owner.isdigit() and not state.alive(int(owner))


def _remove_worktree(repo: git.Repository, path: str) -> None:
    repo.remove_worktree(path)
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.unlink(path + ".pgid")
