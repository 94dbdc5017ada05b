"""Changes to a stack's files that a kill cannot tear, and its one lock. A change is a whole new
directory switched in at once (``commit_dir``): git, quilt and the editor see all-old or all-new."""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import functools
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ggstack import git
from ggstack.errors import InfraError, UserError

KILL_AFTER_FILE_OPS = "GGSTACK_DEBUG_KILL_AFTER_FILE_OPS"
NEW_MARK = ".ggstack-new-"
OLD_MARK = ".ggstack-old-"

LOCK_WAIT = "GGSTACK_LOCK_WAIT_SECONDS"
# How long a command that edits a stack waits for another one to finish.
EDIT_LOCK_WAIT_SECONDS = 30.0


def edit_lock_wait() -> float:
    value = os.environ.get(LOCK_WAIT, "")
    if value == "":
        return EDIT_LOCK_WAIT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86400:  # NaN fails this too
        raise UserError(f"{LOCK_WAIT}={value!r}: expected a number of seconds between 0 and 86400")
    return seconds


# -- debug hooks ----------------------------------------------------------------------


def env_count(name: str, env: Mapping[str, str] | None = None) -> int:
    """0 when unset: the debug kill hooks."""
    value = (os.environ if env is None else env).get(name, "")
    if value == "":
        return 0
    if not (value.isascii() and value.isdigit()):
        raise UserError(f"{name}={value!r}: expected a whole number (a count), or unset")
    return int(value)


class _FileOps:
    """``GGSTACK_DEBUG_KILL_AFTER_FILE_OPS=N``: SIGKILL after the N-th file operation (tests)."""

    def __init__(self) -> None:
        self.limit = env_count(KILL_AFTER_FILE_OPS)
        self.done = 0

    def __call__(self) -> None:
        self.done += 1
        if self.limit and self.done >= self.limit:
            os.kill(os.getpid(), signal.SIGKILL)


# -- errors of the machine -----------------------------------------------------------------


def machine_error(e: OSError, path: str | None, *, after: str = "nothing was changed") -> InfraError | None:
    """Full or read-only filesystem, or no permission; naming ``path``, not the temporary name that failed."""
    where = path or (e.filename if isinstance(e.filename, str) else None) or "a file ggstack was writing"
    tail = f" ({after})" if after else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return InfraError(f"no space left on device: {where}{tail}")
    if e.errno == errno.EROFS:
        return InfraError(f"read-only: {where}{tail}")
    if e.errno in (errno.EACCES, errno.EPERM):
        return InfraError(f"permission denied: {where}{tail}")
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str, data: bytes) -> None:
    """Its mode is the old file's, else what the umask gives."""
    directory = os.path.dirname(path) or "."
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    except OSError as e:
        raise machine_error(e, path) or e from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)  # mkstemp makes 0600; a file of the user's repository follows the umask
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise machine_error(e, path) or e from None
        raise


# -- switching a directory ------------------------------------------------------------------


@functools.cache
def _exchange_function() -> Callable[[str, str], bool] | None:
    """Looked up when first needed (ctypes is not every command's import)."""
    import ctypes  # only a command that switches a directory needs libc

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if hasattr(libc, "renameat2"):
        at_fdcwd, flag = -100, 2

        def call(a: bytes, b: bytes) -> int:
            return libc.renameat2(at_fdcwd, a, at_fdcwd, b, flag)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):

        def call(a: bytes, b: bytes) -> int:
            return libc.renamex_np(a, b, 2)
    else:
        return None

    def exchange(a: str, b: str) -> bool:
        """False when this filesystem cannot (the caller falls back)."""
        if call(os.fsencode(a), os.fsencode(b)) == 0:
            return True
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            return False
        raise OSError(err, os.strerror(err), a)

    return exchange


def _siblings(path: str, mark: str) -> list[str]:
    parent, base = os.path.split(path)
    prefix = f".{base}{mark}"
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return []
    return sorted(os.path.join(parent, n) for n in names if n.startswith(prefix))


def readable_dir(path: str) -> str:
    """``path``, or after a kill between two renames (no exchange), the complete new one beside it."""
    if os.path.isdir(path):
        return path
    new, old = _siblings(path, NEW_MARK), _siblings(path, OLD_MARK)
    if len(new) == 1 and old:
        return new[0]
    return path


def _recover(path: str, ops: Callable[[], None]) -> None:
    """The caller holds the lock."""
    new, old = _siblings(path, NEW_MARK), _siblings(path, OLD_MARK)
    if not os.path.exists(path) and old:
        # Killed between the two renames: the new directory was complete before the first.
        if len(new) == 1:
            os.rename(new.pop(), path)
        else:
            os.rename(old.pop(), path)
        ops()
    for leftover in new + old:
        _remove_tree(leftover, ops)


def _remove_tree(path: str, ops: Callable[[], None]) -> None:
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(root, name))
            ops()
        for name in dirs:
            full = os.path.join(root, name)
            if os.path.islink(full):
                os.unlink(full)
            else:
                os.rmdir(full)
            ops()
    os.rmdir(path)
    ops()


def _link_or_copy(src: str, dst: str) -> None:
    if os.path.isdir(src) and not os.path.islink(src):
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
        return
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _build(path: str, changes: Mapping[str, bytes | None], ops: Callable[[], None]) -> str:
    """Unchanged entries linked, changed ones written."""
    parent, base = os.path.split(path)
    new = tempfile.mkdtemp(prefix=f".{base}{NEW_MARK}", dir=parent or ".")
    try:
        _fill(path, new, changes, ops)
    except BaseException:  # a full disk half-way: no half-built directory stays beside the stack
        with contextlib.suppress(OSError):
            _remove_tree(new, _no_ops)
        raise
    return new


def _fill(path: str, new: str, changes: Mapping[str, bytes | None], ops: Callable[[], None]) -> None:
    ops()
    old_modes: dict[str, int] = {}
    if os.path.isdir(path):
        os.chmod(new, os.stat(path).st_mode & 0o7777)
        for entry in os.scandir(path):
            if entry.name in changes:
                old_modes[entry.name] = entry.stat(follow_symlinks=False).st_mode & 0o7777
                continue
            _link_or_copy(entry.path, os.path.join(new, entry.name))
            ops()
    else:
        os.chmod(new, 0o777 & ~_umask())
    for name, data in changes.items():
        target = os.path.join(new, name)
        if "/" in name:  # a file in a subdirectory (dropped/): that directory was linked file by file
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.lexists(target):
                os.unlink(target)  # a link to the old file: never written through
        if data is None:
            continue
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, old_modes.get(name, 0o666))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if name in old_modes:
            os.chmod(target, old_modes[name])
        ops()


def _switch(path: str, new: str, ops: Callable[[], None], *, create: bool = False) -> str | None:
    if create or not os.path.isdir(path):
        os.rename(new, path)  # onto nothing (or an empty directory): one rename
        ops()
        return None
    exchange = _exchange_function()
    if exchange is not None and exchange(new, path):
        ops()
        return new
    parent, base = os.path.split(path)
    old = os.path.join(parent, f".{base}{OLD_MARK}{os.getpid()}-{os.urandom(4).hex()}")
    os.rename(path, old)
    ops()
    os.rename(new, path)
    ops()
    return old


def commit_dir(path: str, changes: Mapping[str, bytes | None], *, create: bool = False) -> bool:
    """Name → bytes (None: delete) as one step, under the caller's lock; False when nothing would
    change. ``create``: only a new directory. A full or read-only disk is an InfraError, the old state kept."""
    # Built beside the old one (unchanged files hard-linked) and switched in with one
    # renameat2(RENAME_EXCHANGE); where the filesystem cannot, two renames, and a kill between
    # them leaves the complete new directory, which readable_dir reads and the next change moves in.
    ops = _FileOps()
    if os.path.islink(path):  # written through, it would change whatever it points at
        raise _symlinked(path)
    try:
        if not create:  # only under the lock: a leftover then is a dead process's
            _recover(path, ops)
        changes = _real_changes(path, changes)
    except OSError as e:
        raise machine_error(e, path) or e from None
    if not changes:
        return False
    previous = _build_and_switch(path, changes, ops, create)
    if previous is not None:
        with contextlib.suppress(OSError):  # the change is made; a leftover goes with the next one
            _remove_tree(previous, ops)
    return True


def _build_and_switch(
    path: str, changes: Mapping[str, bytes | None], ops: Callable[[], None], create: bool
) -> str | None:
    new: str | None = None
    try:
        new = _build(path, changes, ops)
        previous = _switch(path, new, ops, create=create)
        new = None
        return previous
    except OSError as e:
        if new is not None:
            with contextlib.suppress(OSError):
                _remove_tree(new, _no_ops)
        if create and e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(errno.EEXIST, "exists", path) from None
        raise machine_error(e, path) or e from None


def _no_ops() -> None:
    """No kill point: cleaning up after a failure."""


def _real_changes(path: str, changes: Mapping[str, bytes | None]) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    exists = os.path.isdir(path)
    for name, data in changes.items():
        if any(part in ("", ".", "..") for part in name.split("/")):
            raise ValueError(f"not a file name in the directory: {name!r}")
        if _changes(os.path.join(path, name), data, exists):
            out[name] = data
    if not exists and not out:
        out = dict(changes)  # a new directory is made even when it will be empty of changes
    return out


def _changes(full: str, data: bytes | None, dir_exists: bool) -> bool:
    if data is None:
        return os.path.lexists(full)
    if dir_exists and os.path.isfile(full):
        with open(full, "rb") as f:
            return f.read() != data
    return True


def read_dir_files(path: str, attempts: int = 5) -> tuple[str, dict[str, bytes]]:
    """Read through one handle, and again if a change switched the directory away meanwhile."""
    for _ in range(attempts):
        where = readable_dir(path)
        try:
            fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(where):
                raise _symlinked(where) from None
            raise
        try:
            files = _read_through(fd, where)
            if files is not None and _same_dir(fd, where):
                return where, files
        finally:
            os.close(fd)
    raise InfraError(f"{path} kept changing while it was read; try again")


def _symlinked(path: str) -> UserError:
    return UserError(
        "is a symbolic link; ggstack neither reads nor writes a stack through one (it could point "
        "anywhere: move the directory or file itself here)",
        path=path,
    )


def _read_through(fd: int, where: str) -> dict[str, bytes] | None:
    files: dict[str, bytes] = {}
    for name in os.listdir(fd):
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise _symlinked(os.path.join(where, name))
            if not stat.S_ISREG(st.st_mode):
                continue
            f_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            return None
        with os.fdopen(f_fd, "rb") as f:
            files[name] = f.read()
    return files


def _same_dir(fd: int, where: str) -> bool:
    try:
        now = os.stat(where)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


# -- the lock ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockInfo:
    pid: int
    started: str  # ISO 8601, UTC
    host: str
    proc_start: str | None = None  # /proc/<pid>/stat start time: tells a reused PID apart
    command: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "started": self.started,
            "host": self.host,
            "proc_start": self.proc_start,
            "command": self.command,
        }

    def describe(self, stack_name: str) -> str:
        here = _host()
        return (
            f"stack {stack_name!r} is locked by PID {self.pid} since {self.started}"
            f"{' on ' + self.host if self.host and self.host != here else ''} ({self.command or 'ggstack'})"
        )


def lock_path(repo: git.Repository, stack_name: str) -> str:
    return os.path.join(repo.state_dir("locks"), re.sub(r"[^A-Za-z0-9._-]", "_", stack_name) + ".lock")


@contextlib.contextmanager
def locked(
    repo: git.Repository,
    stack_name: str,
    *,
    command: str = "ggstack sync",
    wait: float = 0.0,
    warn: Callable[[str], None] | None = None,
) -> Iterator[LockInfo]:
    """A live holder is waited for up to ``wait`` seconds; a dead one's lock is taken over with a warning."""
    # The lock file (O_EXCL: PID, start time) is made, read and taken over under a flock on a guard
    # file, which the kernel releases even on SIGKILL: two runs never both take a dead holder's lock.
    path = lock_path(repo, stack_name)
    mine = LockInfo(os.getpid(), _now(), _host(), _proc_start(os.getpid()), command)
    deadline = time.monotonic() + wait
    said = False
    while True:
        holder = _try_take(path, mine, warn)
        if holder is None:
            break
        if time.monotonic() >= deadline:
            raise InfraError(
                f"{holder.describe(stack_name)}; it is still running — if it is not, remove {path}"
            ) from None
        if warn and not said:
            warn(f"waiting for the lock: {holder.describe(stack_name)}")
            said = True
        time.sleep(0.05)
    try:
        yield mine
    finally:
        with _guard(path):
            if read_lock(path) == mine:
                os.unlink(path)


def _try_take(path: str, mine: LockInfo, warn: Callable[[str], None] | None) -> LockInfo | None:
    with _guard(path):
        try:
            _create(path, mine)
            return None
        except FileExistsError:
            holder = read_lock(path)
            if holder is not None and _alive(holder):
                return holder
            if warn:
                who = f"PID {holder.pid} since {holder.started}" if holder else "an unreadable lock file"
                warn(f"taking over the stale lock of {who} (that process is gone): {path}")
            os.unlink(path)
            _create(path, mine)
            return None


def read_lock(path: str) -> LockInfo | None:
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return LockInfo(
            int(d["pid"]), str(d["started"]), str(d.get("host", "")), d.get("proc_start"), str(d.get("command", ""))
        )
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


@contextlib.contextmanager
def _guard(path: str) -> Iterator[None]:
    try:
        fd = os.open(path + ".guard", os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as e:
        raise machine_error(e, path + ".guard") or e from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def _create(path: str, info: LockInfo) -> None:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise
    except OSError as e:
        raise machine_error(e, path) or e from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(info.to_json(), f)
            f.write("\n")
    except OSError as e:  # a full disk: no half-written lock file stays behind
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise machine_error(e, path) or e from None


def _host() -> str:
    import socket  # only a command that takes a lock needs it

    return socket.gethostname()


def _alive(holder: LockInfo) -> bool:
    """A lock from another host is assumed alive."""
    if holder.host and holder.host != _host():
        return True
    return alive(holder.pid, holder.proc_start)


def alive(pid: int, start: str | None = None) -> bool:
    """A zombie is not; ``start`` (from ``/proc``) tells a reused PID apart."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _proc_start(pid)
    if start is not None and now is not None and now != start:
        return False  # the PID was reused by another process
    return not _is_zombie(pid)


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    return text.rpartition(")")[2].split()  # the command name may hold spaces and parentheses


def _proc_start(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None  # field 22: starttime


def _is_zombie(pid: int) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and bool(fields) and fields[0] in ("Z", "X")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
