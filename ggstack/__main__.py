"""``python -m ggstack`` and the ``ggstack`` command."""

import atexit
import contextlib
import os
import sys
import threading
import weakref

from ggstack.gcpause import paused


def run() -> None:
    with paused(keep=True):  # start-up builds thousands of objects, none of them garbage
        from ggstack.cli import main
    try:
        main()
    except SystemExit as done:
        if done.code is not None and not isinstance(done.code, int):
            raise
        _end(done.code or 0)


def _end(code: int) -> None:
    """Exit without the interpreter's teardown where nothing is left for it: it costs a check of one
    commit a few percent of its time and frees nothing (git's long-lived processes end with their input)."""
    if threading.active_count() > 1 or sys.gettrace() or sys.getprofile() or _asked_at_exit():
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _asked_at_exit() -> bool:
    """Has anything but ``weakref.finalize`` (whose finalizers end the long-lived git processes,
    as this process's end does) asked to run at exit? Where CPython cannot say, yes."""
    count = getattr(atexit, "_ncallbacks", None)
    weakrefs = getattr(weakref.finalize, "_registered_with_atexit", True)
    return count is None or count() > int(weakrefs)


if __name__ == "__main__":
    run()
