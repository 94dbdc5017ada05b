"""The worktrees ggstack runs tests in, and the user's checked-out branches it must not move."""

from __future__ import annotations

import contextlib
import os

from ggstack.git.runner import Runner, plain_git


class Worktrees(Runner):
    """Temporary detached worktrees, and which branches other worktrees hold."""

    def add_worktree(self, path: str, commit: str) -> None:
        """A detached worktree of ``commit`` at ``path``; no hook of the user's runs."""
        self.run(
            "-c",
            "core.hooksPath=/dev/null",
            "worktree",
            "add",
            "--detach",
            "--force",
            "--quiet",
            "--end-of-options",
            path,
            commit,
        )

    def add_isolated_checkout(self, path: str, commit: str) -> None:
        """A repository of its own at ``path`` with ``commit`` checked out, detached.

        Its objects are this repository's (``objects/info/alternates``: nothing
        is copied), but its config, refs, stash, index and hooks are its own, so
        what a patch's tests do with git there (``git stash``, ``git config``,
        a commit, a tag) never reaches this repository; it has no refs to copy
        either, which keeps it as cheap as a worktree."""
        os.makedirs(path, exist_ok=True)
        plain_git("init", "-q", f"--object-format={getattr(self, 'object_format', 'sha1')}", path)
        with open(os.path.join(path, ".git", "objects", "info", "alternates"), "w") as f:
            f.write(os.path.abspath(os.path.join(self.common_dir, "objects")) + "\n")
        plain_git("-C", path, "-c", "core.hooksPath=/dev/null", "checkout", "-q", "--detach", commit)

    def remove_worktree(self, path: str) -> None:
        self.run("worktree", "remove", "--force", "--force", path, check=False)

    def prune_worktrees(self) -> None:
        self.run("worktree", "prune", check=False)

    def checked_out_branches(self) -> dict[str, str]:
        """Branch ref → the worktree that has it checked out (or is rebasing it):
        the branches ``git branch -f`` refuses to move. A bare repository's HEAD is none."""
        out = self.run("worktree", "list", "--porcelain", "-z").stdout.decode("utf-8", "surrogateescape")
        found: dict[str, str] = {}
        for record in out.split("\0\0"):
            fields = dict(f.partition(" ")[::2] for f in record.split("\0") if f)
            if "worktree" in fields and "branch" in fields and "bare" not in fields:
                found.setdefault(fields["branch"], fields["worktree"])
        admin = [(self.common_dir, self.worktree or self.common_dir)]
        worktrees = os.path.join(self.common_dir, "worktrees")
        for name in sorted(os.listdir(worktrees)) if os.path.isdir(worktrees) else []:
            with contextlib.suppress(OSError), open(os.path.join(worktrees, name, "gitdir"), encoding="utf-8") as f:
                admin.append((os.path.join(worktrees, name), os.path.dirname(f.read().strip())))
        for git_dir, where in admin:
            for state in ("rebase-merge", "rebase-apply"):
                with (
                    contextlib.suppress(OSError),
                    open(os.path.join(git_dir, state, "head-name"), encoding="utf-8") as f,
                ):
                    ref = f.read().strip()
                    if ref.startswith("refs/heads/"):
                        found.setdefault(ref, os.fspath(where))
        return found
