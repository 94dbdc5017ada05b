"""How ggstack starts git: every call names its repository (``--git-dir``) and drops what an enclosing
git (a hook, ``rebase --exec``) exports, so it never reaches the user's index; C locale, no pager."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO

from ggstack.errors import InfraError

# What an enclosing git exports to say which repository, index or work tree
# is meant; ggstack always names its repository itself.
INHERITED_REPOSITORY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
    "GIT_SHALLOW_FILE",
)


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """A write that fails without saying where (a full disk) fails naming ``path``."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror, path) from None
        raise


class GitFailed(InfraError):
    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args[:3])} failed ({returncode}): {stderr.strip()[:2000]}")
        self.args_ = list(args)
        self.returncode = returncode
        self.stderr = stderr


def environment(extra: dict[str, str] | None = None, config: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment less what points at another repository or names a program of the
    user's, plus ``extra``; ``config`` goes over the user's settings (``git -c``)."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED_REPOSITORY_ENV and k not in USER_PROGRAM_ENV}
    env.update(extra or {})
    # Plumbing output must not depend on the user's locale or pager.
    env["LC_ALL"] = "C"
    env["GIT_PAGER"] = "cat"
    # Nor on settings that make `log` print more than its format asks for (gpg's verdict on
    # every signed commit, before the commit itself).
    settings = {**PLUMBING_CONFIG, **(config or {})}
    if extra and "GIT_INDEX_FILE" in extra:
        # A scratch index is no index of the user's: their post-index-change hook is not told of it.
        settings["core.hooksPath"] = os.devnull
    _configure(env, settings)
    return env


# Settings every git ggstack starts runs with, over the user's own (as ``git -c`` would):
# ``log`` printing gpg's verdict before a signed commit; ``diff-tree -p`` writing a blank
# context line as an empty line, which is no hunk line to the diffs ggstack reads and compares.
# And the user's programs that git would start for them, which ggstack's own work never wants
# (docs/git-settings.md): the fsmonitor daemon or hook started in the checkout to answer
# what changed in it (ggstack reads objects, not the checkout); gpg signing a scratch commit
# (``commit-tree`` honours commit.gpgSign: a prompt, and no longer the same object for the same
# inputs). An external diff program or textconv filter plumbing never runs, and the one
# ``git diff`` ggstack runs (in its resolve worktree) is told not to (``--no-ext-diff``).
PLUMBING_CONFIG = {
    "log.showSignature": "false",
    "diff.suppressBlankEmpty": "false",
    "core.fsmonitor": "false",
    "commit.gpgSign": "false",
}
# The same programs named by the environment instead.
USER_PROGRAM_ENV = ("GIT_EXTERNAL_DIFF",)
# The merge driver ggstack puts in place of each of the user's (``Runner.merge_config``): git's
# own 3-way text merge of the three versions, as the built-in driver makes it, run by git.
NEUTRAL_MERGE_DRIVER = "git merge-file --quiet --marker-size=%L -L ours -L base -L theirs %A %O %B"


def _configure(env: dict[str, str], settings: dict[str, str]) -> None:
    """Add ``settings`` to the environment's ``GIT_CONFIG_COUNT`` list, after any the caller set."""
    n = _count(env)
    for key, value in settings.items():
        env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"] = key, value
        n += 1
    env["GIT_CONFIG_COUNT"] = str(n)


def _count(env: Mapping[str, str]) -> int:
    try:
        return max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        return 0


def plain_git(*args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], input=input, env=environment(), capture_output=True)
    if proc.returncode != 0:
        raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc.stdout.decode("utf-8", "surrogateescape")


class NotARepository(Exception):
    """git's discovery went up to the root from a path and found no repository at all."""


# What git says then (the C locale); "(or any parent up to mount point …)" is a filesystem
# boundary git would not cross, and GIT_DISCOVERY_ACROSS_FILESYSTEM could, so not this.
_NOT_A_REPOSITORY = b"not a git repository (or any of the parent directories)"
# git could not read the user's config (``core.commentChar = ;``): no caller's "it failed, so
# the answer is no" (no such ref, not an ancestor) holds then; said with git's message instead.
_BAD_CONFIG = b"bad config"


def rev_parse_at(path: str, *args: str, answered: bool = False) -> list[str] | None:
    """``rev-parse`` in ``path`` before a repository is named: its lines, None where git says no,
    NotARepository where there is none there or above."""
    proc = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", *args], cwd=path, env=environment(), capture_output=True
    )
    if proc.returncode != 0:
        if _NOT_A_REPOSITORY in proc.stderr:
            raise NotARepository(path)
        if _BAD_CONFIG in proc.stderr:
            raise GitFailed(("rev-parse", *args), proc.returncode, proc.stderr.decode("utf-8", "replace"))
        if not answered:
            return None
    return proc.stdout.decode("utf-8", "surrogateescape").splitlines()


class Runner:
    git_dir: str
    common_dir: str
    worktree: str | None
    null_oid: str  # the object format's all-zero id: 40 digits for sha1, 64 for sha256
    _merge_settings: tuple[dict[str, str], str | None] | None = None  # read once: merge_drivers

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
        cwd: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            ["git", "--git-dir", self.git_dir, *args],
            input=input,
            env=environment(env, config),
            cwd=cwd or self.worktree or self.git_dir,
            capture_output=True,
        )
        if proc.returncode != 0 and (check or _BAD_CONFIG in proc.stderr):
            raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
        return proc

    def merge_drivers(self) -> tuple[dict[str, str], str | None]:
        """The user's merge drivers (name -> command) and ``merge.default``; read once."""
        if self._merge_settings is None:
            proc = self.run("config", "-z", "--get-regexp", r"^merge\.(.+\.driver|default)$", check=False)
            drivers: dict[str, str] = {}
            default = None
            for entry in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
                key, _, value = entry.partition("\n")
                if key.startswith("merge.") and key.endswith(".driver") and len(key) > len("merge..driver"):
                    drivers[key[len("merge.") : -len(".driver")]] = value
                elif key == "merge.default":
                    default = value
            self._merge_settings = (drivers, default)
        return self._merge_settings

    def merge_config(self) -> dict[str, str]:
        """git's own text merge in place of the user's merge drivers: a replay runs none of their
        programs, and is the same for every maintainer and for the bot."""
        return {f"merge.{name}.driver": NEUTRAL_MERGE_DRIVER for name in self.merge_drivers()[0]}

    def driven_paths(self, paths: Sequence[str]) -> dict[str, str]:
        """Of ``paths``, those the user's config merges with a driver of theirs: path -> driver."""
        drivers, default = self.merge_drivers()
        if not drivers or not paths:
            return {}
        feed = "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
        out = self.run("check-attr", "-z", "--stdin", "merge", input=feed).stdout.decode("utf-8", "surrogateescape")
        fields = out.split("\0")
        found = {}
        for path, value in zip(fields[0::3], fields[2::3]):
            name = default if value == "unspecified" else value
            if name in drivers:
                found[path] = name
        return found

    def run_as(self, *args: str, input: bytes) -> tuple[int, subprocess.CompletedProcess[bytes]]:
        """``run`` that also gives the pid and never raises (``fast-import`` leaves a file named after it)."""
        with subprocess.Popen(
            ["git", "--git-dir", self.git_dir, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(),
            cwd=self.worktree or self.git_dir,
        ) as proc:
            out, err = proc.communicate(input)
        return proc.pid, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def start(self, *args: str, input: bytes = b"", env: dict[str, str] | None = None) -> Started:
        return Started(["git", "--git-dir", self.git_dir, *args], input, self.worktree or self.git_dir, env)

    def out(self, *args: str, **kw) -> str:
        return self.run(*args, **kw).stdout.decode("utf-8", "surrogateescape").strip()

    def popen(self, *args: str, stdin=None) -> subprocess.Popen:
        return subprocess.Popen(
            ["git", "--git-dir", self.git_dir, *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment(),
            cwd=self.worktree or self.git_dir,
        )

    @contextlib.contextmanager
    def temp_index(self, tree: str | None = None) -> Iterator[dict[str, str]]:
        fd, path = tempfile.mkstemp(prefix="ggstack-index-", dir=self._scratch_dir())
        os.close(fd)
        os.unlink(path)  # git wants to create it itself
        env = {"GIT_INDEX_FILE": path}  # and hooks off (``environment``)
        try:
            if tree:
                self.run("read-tree", tree, env=env)
            yield env
        finally:
            for p in (path, path + ".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)

    def _scratch_dir(self) -> str:
        path = os.path.join(self.common_dir, "ggstack", "tmp")
        os.makedirs(path, exist_ok=True)
        return path

    def state_dir(self, *parts: str) -> str:
        path = os.path.join(self.common_dir, "ggstack", *parts)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTDIR):
                raise  # a full or read-only git dir: said as such where the command ends
            # Something else took the name: ggstack's own state, not the user's input.
            raise InfraError(
                f"cannot use ggstack's state directory {path}: {e.strerror} (move aside what is in the way)"
            ) from None
        return path


class Started:
    """A git process running while ggstack works; temporary files, not pipes, so neither waits on the
    other until ``wait``, and a kill leaves nothing behind."""

    def __init__(self, argv: list[str], input: bytes, cwd: str, env: dict[str, str] | None = None) -> None:
        self._args = argv[3:]
        self._error = ""
        self._out = tempfile.TemporaryFile()  # noqa: SIM115 (read and closed by ended)
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        with tempfile.TemporaryFile() as feed:
            feed.write(input)
            feed.seek(0)
            self._proc = subprocess.Popen(
                argv, stdin=feed, stdout=self._out, stderr=self._err, env=environment(env), cwd=cwd
            )

    def wait(self) -> bytes:
        returncode, out = self.ended()
        if returncode != 0:
            raise GitFailed(self._args, returncode, self._error)
        return out

    def ended(self) -> tuple[int, bytes]:
        returncode = self._proc.wait()
        out, err = self._out, self._err
        try:
            out.seek(0)
            err.seek(0)
            error = err.read()
            self._error = error.decode("utf-8", "replace")
            if returncode != 0 and _BAD_CONFIG in error:
                raise GitFailed(self._args, returncode, self._error)
            return returncode, out.read()
        finally:
            out.close()
            err.close()


class Persistent:
    """One long-lived git process asked one question at a time: a replay's thousands of reads and
    writes cost a process each kind, not one each."""

    def __init__(
        self, git_dir: str, cwd: str, args: Sequence[str], config: Callable[[], Mapping[str, str]] | None = None
    ) -> None:
        self._argv = ["git", "--git-dir", git_dir, *args]
        self._cwd = cwd
        self._config = config  # settings over the user's, asked when the process starts
        self._proc: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None
        self._lock = threading.Lock()  # one question and its answer at a time

    def ask(self, request: bytes, answer: Callable[[IO[bytes]], bytes]) -> bytes:
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                return answer(proc.stdout)
            except (OSError, ValueError, EOFError):
                self.close_locked()
                raise self._failed() from None

    def stream(self, request: bytes, answer: Callable[[IO[bytes]], bytes]) -> bytes:
        """``ask`` for a request of any size, written from a thread so neither side waits on a full pipe."""
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            stdin = proc.stdin
            failed: list[BaseException] = []

            def write() -> None:
                try:
                    stdin.write(request)
                    stdin.flush()
                except (OSError, ValueError) as e:
                    failed.append(e)

            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            try:
                reply = answer(proc.stdout)
            except (OSError, ValueError, EOFError):
                proc.kill()  # a writer blocked on a full pipe fails now, and lets go of stdin
                writer.join()
                self.close_locked()
                raise self._failed() from None
            writer.join()
            if failed:
                self.close_locked()
                raise self._failed() from None
            return reply

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
            self._proc = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._errors,
                env=environment({"GIT_FLUSH": "1"}, self._config() if self._config else None),  # an answer a question
                cwd=self._cwd,
            )
        return self._proc

    def _failed(self) -> GitFailed:
        err = b""
        if self._errors is not None:
            self._errors.seek(0)
            err = self._errors.read()
        return GitFailed(self._argv[3:], -1, err.decode("utf-8", "replace") or "the process ended")

    def close(self) -> None:
        with self._lock:
            self.close_locked()

    def forget(self) -> None:
        """In a forked process: let go of the parent's pipes without ending it."""
        proc, self._proc = self._proc, None
        self._lock = threading.Lock()  # a lock the parent held at the fork would stay held here
        for pipe in (proc.stdin, proc.stdout) if proc is not None else ():
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()  # this process's copy: the parent's git does not see it close

    def close_locked(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def read_line(stream: IO[bytes]) -> bytes:
    line = stream.readline()
    if not line.endswith(b"\n"):
        raise EOFError
    return line[:-1]
