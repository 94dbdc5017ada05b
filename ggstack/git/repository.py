"""``Repository``: the one object the rest of ggstack asks git questions through.

It is made of the parts in this package (objects, refs, history, diffs,
patches, worktrees, remotes), each a mixin over the one ``Runner``, so a
caller needs one object and every git process starts the same way.
"""

from __future__ import annotations

import os
import weakref

import git as gitpython

from ggstack.errors import UserError
from ggstack.git.diffs import Diffs
from ggstack.git.history import History
from ggstack.git.objects import close_all
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
        self.object_format = self._object_format()
        self.null_oid = "0" * (64 if self.object_format == "sha256" else 40)
        self._start_object_processes()
        # The long-lived git processes end with the Repository (or the program).
        weakref.finalize(self, close_all, self.object_processes())

    def _object_format(self) -> str:
        """sha1 or sha256, from the repository's config (``extensions.objectFormat``)."""
        with self._repo.config_reader("repository") as config:
            value = str(config.get_value("extensions", "objectformat", "sha1")).lower()
        if value not in ("sha1", "sha256"):
            raise UserError(f"extensions.objectFormat = {value!r}: an object format git does not know")
        return value

    @classmethod
    def init(cls, path: str, *, bare: bool = False) -> Repository:
        """A new repository at ``path`` (for the demo's miniature fork)."""
        os.makedirs(path, exist_ok=True)
        plain_git("init", "-q", "-b", "main", *(["--bare"] if bare else []), path)
        return cls(path)
