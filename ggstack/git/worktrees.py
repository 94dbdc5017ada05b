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
    """The settings of one git config file and its includes, as git reads them; none if unreadable."""
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
    def add_worktree(self, path: str, commit: str) -> None:
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
        """Objects shared through alternates, but config, refs, stash, index and hooks its own, so a
        patch's tests that use git there never reach this repository."""
        os.makedirs(path, exist_ok=True)
        plain_git("init", "-q", f"--object-format={getattr(self, 'object_format', 'sha1')}", path)
        objects = os.path.abspath(os.path.join(self.common_dir, "objects"))
        with open(os.path.join(path, ".git", "objects", "info", "alternates"), "w") as f:
            f.write(_alternate_line(objects))
        plain_git("-C", path, "-c", "core.hooksPath=/dev/null", "checkout", "-q", "--detach", commit)

    def add_resolve_worktree(self, path: str, commit: str) -> Worktree:
        self.add_worktree(path, commit)
        return self.resolve_worktree(path)

    def resolve_worktree(self, path: str) -> Worktree:
        """The resolve worktree at ``path``, locks a killed git left there cleared."""
        worktree = Worktree(path, (os.path.join(self.common_dir, "rr-cache"), self.state_dir("rr-cache")))
        worktree.clear_stale_locks()
        return worktree

    def is_whole_worktree(self, path: str) -> bool:
        """Whether ``path`` is a worktree here that ``worktree add`` finished (a kill leaves a lock)."""
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
        """Branch ref -> the worktree that has it checked out or is rebasing it (``branch -f`` refuses those)."""
        return self.start_checked_out_branches()()

    def start_checked_out_branches(self) -> Callable[[], dict[str, str]]:
        job = self.start("worktree", "list", "--porcelain", "-z")
        return lambda: self._checked_out(job.wait().decode("utf-8", "surrogateescape"))

    def _checked_out(self, out: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for record in out.split("\0\0"):
            fields = dict(f.partition(" ")[::2] for f in record.split("\0") if f)
            if "worktree" in fields and "branch" in fields and "bare" not in fields:
                found.setdefault(fields["branch"], fields["worktree"])
        for git_dir, where in self._admin_dirs():
            for ref in _rebasing(git_dir):
                found.setdefault(ref, os.fspath(where))
        return found

    def _admin_dirs(self) -> list[tuple[str, str]]:
        admin = [(self.common_dir, self.worktree or self.common_dir)]
        worktrees = os.path.join(self.common_dir, "worktrees")
        for name in sorted(os.listdir(worktrees)) if os.path.isdir(worktrees) else []:
            with contextlib.suppress(OSError), open(os.path.join(worktrees, name, "gitdir"), encoding="utf-8") as f:
                admin.append((os.path.join(worktrees, name), os.path.dirname(f.read().strip())))
        return admin


def _rebasing(git_dir: str) -> list[str]:
    refs = []
    for state in ("rebase-merge", "rebase-apply"):
        with contextlib.suppress(OSError), open(os.path.join(git_dir, state, "head-name"), encoding="utf-8") as f:
            ref = f.read().strip()
            if ref.startswith("refs/heads/"):
                refs.append(ref)
    return refs


class Worktree(Runner):
    """One of ggstack's own worktrees (never the user's), where ``resolve`` leaves a real checkout
    with conflict markers, with ``rerere`` on so a conflict resolved once is resolved again."""

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
        """rerere's records in ``rr-cache`` only while git uses them: git takes an ``rr-cache`` as
        "rerere on" for the user's later merges, so where the user has none ours move in and out."""
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
        """The lock files a killed git left here go (git refuses to start with them); a live git's stay."""
        removed = []
        for name in _LOCKS:
            path = os.path.join(self.git_dir, name)
            if os.path.exists(path) and not _lock_in_use(path, self.path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                removed.append(path)
        return removed

    def run(self, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess[bytes]:
        proc = super().run(*self._RERERE, *args, check=False, **kw)
        if check and proc.returncode != 0:
            raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
        return proc

    def cherry_pick(self, commit: str) -> tuple[list[str], list[str]]:
        """``commit``'s change into the working tree, uncommitted: (paths conflicted, paths rerere resolved)."""
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
        with self._records():
            self.run("rerere", check=False)

    def tree_of_files(self) -> str:
        self.run("add", "-A")
        return self.run("write-tree").stdout.decode().strip()


_LOCKS = ("index.lock", "MERGE_RR.lock")  # what a git killed between taking and letting go of them leaves
_LOCK_AGE = 60.0  # where /proc cannot say who holds a lock: one older than this is a dead process's


def _lock_in_use(lock: str, worktree: str) -> bool:
    """Whether a live process may hold ``lock``: it is open, or a git works in ``worktree``;
    without ``/proc``, a lock younger than a minute is taken as held."""
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
    """``path`` as an alternates line, C-quoted where a plain line cannot carry it."""
    if not any(c in path for c in '\n"\\'):
        return path + "\n"
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"\n'
