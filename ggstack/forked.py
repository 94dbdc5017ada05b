"""Work split over forked processes, for cores threads can't use (a check is mostly Python); a part's value or error
comes back pickled. Not ``ProcessPoolExecutor``: it pickles the function, whose live git processes only fork carries."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ggstack.errors import InfraError, UserError

T = TypeVar("T")
U = TypeVar("U")


def map_in_forks(fn: Callable[[U], T], parts: Sequence[U], in_child: Callable[[], None]) -> list[T]:
    """The first part runs here meanwhile. ``in_child`` gives a child long-lived processes of its own
    (git's ``cat-file --batch``) where it would share the parent's pipes."""
    # A fork copies the process, not its threads: with another thread at work, the parts run here.
    if len(parts) <= 1 or not hasattr(os, "fork") or threading.active_count() > 1:
        return [fn(p) for p in parts]
    children: list[tuple[int, int]] = []  # (pid, the read end of its pipe)
    lifeline = os.pipe()  # written by nobody: its end, when this process ends, ends the children
    done = False
    try:
        for part in parts[1:]:
            children.append(_fork(fn, part, in_child, lifeline))
        values = [fn(parts[0]), *(_collect(pid, fd) for pid, fd in children)]
        done = True
        return values
    finally:
        for pid, fd in children:
            _end(pid, fd, kill=not done)
        for fd in lifeline:
            os.close(fd)


def _fork(fn: Callable[[U], T], part: U, in_child: Callable[[], None], lifeline: tuple[int, int]) -> tuple[int, int]:
    import pickle  # here, not at the top: a check of a few commits never forks, and start-up is most of its time

    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    os.close(r)  # the child, from here to os._exit: nothing it does returns to the caller's code
    os.close(lifeline[1])
    threading.Thread(target=_end_with_the_parent, args=(lifeline[0],), daemon=True).start()
    try:
        in_child()
        reply: tuple[str, object] = ("value", fn(part))
    except UserError as e:
        reply = ("user", str(e))
    except InfraError as e:
        reply = ("infra", str(e))
    except BaseException:  # a bug (or an interrupt): its traceback goes with it
        import traceback

        reply = ("bug", traceback.format_exc())
    status = 0
    try:
        with os.fdopen(w, "wb") as out:
            pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # the parent is gone: nobody to tell
        status = 1
    os._exit(status)  # no exit handlers: they are the parent's (its git processes, its temporary files)


def _end_with_the_parent(lifeline: int) -> None:
    """The parent killed (a CI job cancelled), nothing is left computing for nobody."""
    while os.read(lifeline, 1):
        pass
    os._exit(1)


def _collect(pid: int, fd: int) -> Any:
    import pickle

    with os.fdopen(os.dup(fd), "rb") as f:
        data = f.read()
    if not data:
        _, status = os.waitpid(pid, 0)
        raise InfraError(f"a forked part of this run ended without an answer ({_how(status)})")
    kind, value = pickle.loads(data)
    if kind == "value":
        return value
    if kind == "user":
        raise UserError(str(value))
    if kind == "infra":
        raise InfraError(str(value))
    raise RuntimeError(f"in a forked part of this run:\n{value}")


def _end(pid: int, fd: int, *, kill: bool) -> None:
    os.close(fd)
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):  # reaped already (it ended without an answer)
        pass


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
