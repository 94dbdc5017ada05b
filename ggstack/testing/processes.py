"""The test command in a session of its own, killed whole on a timeout and after exit, with whatever escaped its group
(``setsid sleep 302 &``), found by an environment marker. The one module under ``testing`` that starts a process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

RUN_MARKER = "GGSTACK_TEST_RUN"  # in the environment of every process a test run starts: "<ggstack pid>-<tree dir>"
_KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a timed-out group


def ask(argv: list[str], env: dict[str, str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_group(
    command: str, cwd: str, env: dict[str, str], log_path: str, timeout: float, pgid_path: str
) -> tuple[int | None, bool]:
    """(exit code, timed out)."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    with open(pgid_path, "w") as f:
        f.write(str(proc.pid))  # for prune_leftovers, should ggstack die before the group
    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_KILL_GRACE)
    finally:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(pgid_path)
    return (None if timed_out else proc.returncode), timed_out


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# Processes are found through /proc, not psutil: psutil is not a dependency, and these few reads
# (an environment, a command line, a cwd) are all a sweep needs.


def sweep(owned: Callable[[str], bool]) -> list[str]:
    """What was killed, as "pid command"."""
    killed: list[str] = []
    for _ in range(3):  # a process may fork while the first pass runs
        found = [pid for pid in _proc_entries() if _marked(pid, owned)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    words = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
                os.kill(int(pid), signal.SIGKILL)
                killed.append(f"{pid} {words[:80]}")
    return killed


def _marked(pid: str, owned: Callable[[str], bool]) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return False
    prefix = RUN_MARKER.encode() + b"="
    marks = [item[len(prefix) :].decode("utf-8", "replace") for item in environ.split(b"\0") if item.startswith(prefix)]
    return any(owned(m) for m in marks)


def kill_leftover_group(path: str) -> None:
    """Only where the group still works in ``path``: a pid can be reused."""
    try:
        with open(path + ".pgid") as f:
            pgid = int(f.read().strip())
    except (OSError, ValueError):
        return
    real = os.path.realpath(path)
    for entry in _proc_entries():
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cwd = os.path.realpath(os.readlink(f"/proc/{entry}/cwd"))
        except OSError:
            continue
        if int(fields[2]) == pgid and (cwd == real or cwd.startswith(real + os.sep)):
            _kill_group(pgid, signal.SIGKILL)
            return


def _proc_entries() -> list[str]:
    try:
        return [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
