"""``Repository``: the one object ggstack asks git through, a mixin per part of this package
over one ``Runner``, so every git process starts the same way."""

from __future__ import annotations

import os
import weakref

from ggstack.errors import UserError
from ggstack.git.bundles import Bundles
from ggstack.git.diffs import Diffs
from ggstack.git.fastimport import FastImport
from ggstack.git.history import History
from ggstack.git.objects import close_all
from ggstack.git.patches import Patches
from ggstack.git.remotes import Remotes
from ggstack.git.runner import NotARepository, plain_git, rev_parse_at
from ggstack.git.worktrees import Worktrees


class Repository(History, Diffs, FastImport, Patches, Worktrees, Remotes, Bundles):
    def __init__(self, path: str) -> None:
        try:
            found = _discover(path) or _discover_with_gitpython(path)
        except NotARepository:  # git's word on it is final: no GitPython to import to hear it again
            raise UserError(_NOT_A_REPOSITORY, path=path) from None
        self.git_dir, self.common_dir, self.worktree, self.object_format = found
        self.null_oid = "0" * (64 if self.object_format == "sha256" else 40)
        self._start_object_processes()
        # The long-lived git processes end with the Repository (or the program).
        weakref.finalize(self, close_all, self.object_processes())

    @classmethod
    def init(cls, path: str, *, bare: bool = False) -> Repository:
        os.makedirs(path, exist_ok=True)
        plain_git("init", "-q", "-b", "main", *(["--bare"] if bare else []), path)
        return cls(path)


_NOT_A_REPOSITORY = "not a git repository (use --repo to point at the fork checkout)"
Found = tuple[str, str, str | None, str]  # git dir, common dir, work tree (None: bare), object format


def _discover(path: str) -> Found | None:
    """One ``rev-parse`` (no GitPython to import); None for the odd cases (inside a git dir, through a
    symbolic link), which GitPython's discovery settles as it always has."""
    if not os.path.isdir(path) or os.path.realpath(path) != os.path.abspath(path):
        return None
    # One rev-parse for both kinds: where there is no work tree, git answers the first four
    # and then says no to --show-toplevel.
    args = ("--is-bare-repository", "--git-dir", "--git-common-dir", "--show-object-format", "--show-toplevel")
    out = rev_parse_at(path, *args, answered=True) or []
    if len(out) == 4 and out[0] == "true":
        return _bare(path, out)
    return _in_work_tree(out)


def _in_work_tree(out: list[str]) -> Found | None:
    if len(out) != 5 or out[0] != "false" or out[3] not in ("sha1", "sha256"):
        return None
    _, git_dir, common_dir, object_format, top = out
    dotgit = os.path.join(top, ".git")
    if git_dir != dotgit and not (os.path.isfile(dotgit) and not os.path.islink(dotgit)):
        return None  # .git is a link, or the work tree is configured elsewhere (core.worktree)
    return git_dir, common_dir, top, object_format


def _bare(path: str, out: list[str]) -> Found | None:
    if out[1] != os.path.abspath(path) or out[3] not in ("sha1", "sha256"):
        return None
    return out[1], out[2], None, out[3]


def _discover_with_gitpython(path: str) -> Found:
    import git as gitpython  # a tenth of a second to import: only where rev-parse could not say

    try:
        repo = gitpython.Repo(path, search_parent_directories=True)
    except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
        raise UserError(_NOT_A_REPOSITORY, path=path) from None
    work_tree = repo.working_tree_dir
    with repo.config_reader("repository") as config:  # sha1 or sha256 (``extensions.objectFormat``)
        value = str(config.get_value("extensions", "objectformat", "sha1")).lower()
    if value not in ("sha1", "sha256"):
        raise UserError(f"extensions.objectFormat = {value!r}: an object format git does not know")
    return (
        os.path.abspath(repo.git_dir),
        os.path.abspath(repo.common_dir),
        os.fspath(work_tree) if work_tree else None,  # None for a bare repository
        value,
    )
