"""``Repository``: the one object the rest of ggstack asks git questions through.

It is made of the parts in this package (objects, refs, history, diffs,
patches, worktrees, remotes), each a mixin over the one ``Runner``, so a
caller needs one object and every git process starts the same way.
"""

from __future__ import annotations

import os
import threading
import weakref

import git as gitpython

from ggstack.errors import UserError
from ggstack.git.diffs import Diffs
from ggstack.git.history import History
from ggstack.git.objects import write_pack
from ggstack.git.patches import Patches
from ggstack.git.remotes import Remotes
from ggstack.git.runner import plain_git
from ggstack.git.worktrees import Worktrees


class Repository(History, Diffs, Patches, Worktrees, Remotes):
    """A git repository, discovered from a path (the fork checkout)."""

    def __init__(self, path: str) -> None:
        try:
            self._repo = gitpython.Repo(path, search_parent_directories=True)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
            raise UserError("not a git repository (use --repo to point at the fork checkout)", path=path) from None
        self.git_dir = os.path.abspath(self._repo.git_dir)
        self.common_dir = os.path.abspath(self._repo.common_dir)
        work_tree = self._repo.working_tree_dir
        self.worktree = os.fspath(work_tree) if work_tree else None  # None for a bare repository
        self._queued: dict[str, tuple[str, bytes]] = {}  # objects made here, not yet written (see queue_object)
        self._flushing = threading.RLock()  # a git run from another thread waits for a flush under way
        # Whatever is still queued when the Repository goes (or the program
        # ends) is written then: a printed Run may name those commits.
        weakref.finalize(self, write_pack, self.git_dir, self._queued)

    @classmethod
    def init(cls, path: str, *, bare: bool = False) -> Repository:
        """A new repository at ``path`` (for the demo's miniature fork)."""
        os.makedirs(path, exist_ok=True)
        plain_git("init", "-q", "-b", "main", *(["--bare"] if bare else []), path)
        return cls(path)
