"""The worktrees ggstack runs tests and resolves conflicts in, and the user's checked-out branches it must not move."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator

from ggstack.git.runner import GitFailed, Runner, plain_git, rev_parse_at


def config_file_entries(path: str) -> list[tuple[str, str | None]]:
    """The settings of one git config file and of the files it includes, as git reads them
    (a key without ``=`` has the value None); none where git cannot read it."""
    try:
        out = plain_git("config", "--file", path, "--includes", "--list", "-z")
    except GitFailed:
        return []
    entries: list[tuple[str, str | None]] = []
    for item in out.split("\0"):
        if item:
            key, newline, value = item.partition("\n")
            entries.append((key, value if newline else None))
    return entries


def render_config(entries: list[tuple[str, str | None]]) -> str:
    """A git config file that sets ``entries`` (as ``config_file_entries`` reads them), in order."""
    lines: list[str] = []
    for key, value in entries:
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        header = f'[{section} "{_quoted(subsection)}"]' if subsection else f"[{section}]"
        lines += [header, f"\t{name}" if value is None else f'\t{name} = "{_quoted(value)}"']
    return "\n".join(lines) + "\n" if lines else ""


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


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
        objects = os.path.abspath(os.path.join(self.common_dir, "objects"))
        with open(os.path.join(path, ".git", "objects", "info", "alternates"), "w") as f:
            f.write(_alternate_line(objects))
        plain_git("-C", path, "-c", "core.hooksPath=/dev/null", "checkout", "-q", "--detach", commit)

    def add_resolve_worktree(self, path: str, commit: str) -> Worktree:
        """A detached worktree of ``commit`` at ``path`` for resolving a conflict (``ggstack resolve``)."""
        self.add_worktree(path, commit)
        return self.resolve_worktree(path)

    def resolve_worktree(self, path: str) -> Worktree:
        """The resolve worktree at ``path``, its rerere records kept in ggstack's own directory;
        the locks a killed git left in it are cleared (``Worktree.clear_stale_locks``)."""
        worktree = Worktree(path, (os.path.join(self.common_dir, "rr-cache"), self.state_dir("rr-cache")))
        worktree.clear_stale_locks()
        return worktree

    def is_whole_worktree(self, path: str) -> bool:
        """``path`` is a worktree of this repository as ``worktree add`` left it when it ended:
        its ``.git`` names an admin directory here that names it back, and no lock says
        "initializing" (a kill inside ``worktree add`` leaves that)."""
        try:
            with open(os.path.join(path, ".git"), encoding="utf-8") as f:
                admin = os.path.join(path, f.read().strip().removeprefix("gitdir: "))  # relative: to the worktree
            with open(os.path.join(admin, "gitdir"), encoding="utf-8") as f:
                back = os.path.join(admin, f.read().strip())  # and to the admin directory
        except (OSError, UnicodeDecodeError):
            return False
        here = os.path.realpath(os.path.join(self.common_dir, "worktrees"))
        return (
            os.path.dirname(os.path.realpath(admin)) == here
            and os.path.realpath(back) == os.path.realpath(os.path.join(path, ".git"))
            and not os.path.exists(os.path.join(admin, "locked"))
            and os.path.exists(os.path.join(admin, "HEAD"))
        )

    def remove_worktree(self, path: str) -> None:
        self.run("worktree", "remove", "--force", "--force", path, check=False)

    def prune_worktrees(self) -> None:
        self.run("worktree", "prune", check=False)

    def checked_out_branches(self) -> dict[str, str]:
        """Branch ref → the worktree that has it checked out (or is rebasing it):
        the branches ``git branch -f`` refuses to move. A bare repository's HEAD is none."""
        return self.start_checked_out_branches()()

    def start_checked_out_branches(self) -> Callable[[], dict[str, str]]:
        """``checked_out_branches``, its ``worktree list`` started now and run while the caller
        works; calling what this returns waits for it (and reads the rebases under way then)."""
        job = self.start("worktree", "list", "--porcelain", "-z")
        return lambda: self._checked_out(job.wait().decode("utf-8", "surrogateescape"))

    def _checked_out(self, out: str) -> dict[str, str]:
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


class Worktree(Runner):
    """One of ggstack's own worktrees (never the user's): git run inside it.

    ``resolve`` leaves the user a real checkout with conflict markers to edit
    with their own tools; the commands here are the few it needs there, with
    git's ``rerere`` on so that a conflict resolved once is resolved again.
    Its git is the runner's, named by the worktree's own git dir (its index,
    its HEAD) and run in the worktree, which git then takes as the work tree.
    """

    _RERERE = ("-c", "rerere.enabled=true", "-c", "rerere.autoUpdate=false", "-c", "core.hooksPath=/dev/null")

    def __init__(self, path: str, rerere: tuple[str, str] | None = None) -> None:
        found = rev_parse_at(path, "--git-dir", "--git-common-dir")
        if found is None or len(found) != 2:
            raise GitFailed(("rev-parse", "--git-dir"), 128, f"{path} is no worktree git can find")
        self.git_dir, self.common_dir = found
        self.path = self.worktree = path
        self.rerere = rerere  # (the repository's rr-cache, where ggstack keeps its records between uses)

    @contextlib.contextmanager
    def _records(self) -> Iterator[None]:
        """rerere's records in the repository's ``rr-cache`` only while git reads or writes them.

        git keeps them in the common git dir and treats an ``rr-cache`` there as "rerere on" for
        every later merge of the user's; where the user has none, ggstack's are moved in for the
        one command and back out (a rename each way), so the user's own merges stay as they were.
        A user who has an ``rr-cache`` already shares it, as any rerere user would."""
        if self.rerere is None or os.path.lexists(self.rerere[0]):
            yield
            return
        theirs, ours = self.rerere
        if os.path.isdir(ours):
            os.rename(ours, theirs)
        else:
            os.makedirs(theirs)
        try:
            yield
        finally:
            if os.path.isdir(ours):  # another ggstack put its own back meanwhile: keep that one
                shutil.rmtree(theirs, ignore_errors=True)
            else:
                os.rename(theirs, ours)

    def clear_stale_locks(self) -> list[str]:
        """Remove the lock files a killed git left in this worktree's git dir (``index.lock``,
        rerere's ``MERGE_RR.lock``), with which git refuses to start. The worktree is ggstack's
        own and used under the stack's lock, so a lock no live git holds is a dead one's;
        one that a git still holds (open, or a git working here) is left to it."""
        removed = []
        for name in _LOCKS:
            path = os.path.join(self.git_dir, name)
            if os.path.exists(path) and not _lock_in_use(path, self.path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                removed.append(path)
        return removed

    def run(self, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess[bytes]:
        """``Runner.run`` with rerere on and no hook of the user's; a failure names ``args`` alone."""
        proc = super().run(*self._RERERE, *args, check=False, **kw)
        if check and proc.returncode != 0:
            raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
        return proc

    def cherry_pick(self, commit: str) -> tuple[list[str], list[str]]:
        """``commit``'s change into the working tree, uncommitted (merge-ort, as ``apply``):
        (paths left conflicted, paths rerere resolved from a recorded resolution)."""
        with self._records():
            proc = self.run(
                "cherry-pick", "--no-commit", "--strategy=ort", commit, check=False, config=self.merge_config()
            )
        text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and "conflict" not in text.lower()):
            raise GitFailed(("cherry-pick", commit), proc.returncode, text)
        reused = re.findall(r"^Resolved '(.+)' using previous resolution\.$", text, re.M)
        return [p for p in self.unmerged_paths() if p not in reused], reused

    def unmerged_paths(self) -> list[str]:
        out = self.run("diff", "--no-ext-diff", "--no-textconv", "--name-only", "--diff-filter=U", "-z").stdout.decode(
            "utf-8", "surrogateescape"
        )
        return sorted({p for p in out.split("\0") if p})

    def record_resolution(self) -> None:
        """Let rerere remember how the conflicts were resolved (before they are staged)."""
        with self._records():
            self.run("rerere", check=False)

    def tree_of_files(self) -> str:
        """Everything in the working tree staged, as a tree (the resolution)."""
        self.run("add", "-A")
        return self.run("write-tree").stdout.decode().strip()


_LOCKS = ("index.lock", "MERGE_RR.lock")  # what a git killed between taking and letting go of them leaves
_LOCK_AGE = 60.0  # where /proc cannot say who holds a lock: one older than this is a dead process's


def _lock_in_use(lock: str, worktree: str) -> bool:
    """Whether a live process may still hold ``lock``: one has it open (git keeps the file open
    until it commits or rolls back), or a git works in ``worktree`` (``git commit`` waiting on
    an editor has closed it). Without ``/proc``, a lock younger than a minute is taken as held."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    if not pids:
        with contextlib.suppress(OSError):
            return time.time() - os.stat(lock).st_mtime < _LOCK_AGE
        return False
    lock, worktree = os.path.realpath(lock), os.path.realpath(worktree)
    return any(_holds(pid, lock) or _git_working_in(pid, worktree) for pid in pids)


def _holds(pid: str, path: str) -> bool:
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for fd in names:
        with contextlib.suppress(OSError):
            if os.readlink(os.path.join(fds, fd)) == path:
                return True
    return False


def _git_working_in(pid: str, worktree: str) -> bool:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            if not f.read().startswith("git"):
                return False
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == worktree or cwd.startswith(worktree + os.sep)


def _alternate_line(path: str) -> str:
    """``path`` as a line of ``objects/info/alternates``: C-quoted (as git reads it since 2.11)
    where it holds a newline, a quote or a backslash, which a plain line cannot carry."""
    if not any(c in path for c in '\n"\\'):
        return path + "\n"
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"\n'
