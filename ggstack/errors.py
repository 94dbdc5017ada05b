"""The two kinds of failure a user sees as a message rather than a traceback.

``UserError`` is what the user can fix (a malformed patch, an unknown ref, a
missing token): exit code 2. ``InfraError`` is the world failing under us (the
forge unreachable after retries, git itself failing): exit code 3, so that a
bot can tell "fix your input" from "try again later". Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input: the message names the file, line or ref and what to do."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.line = line


class InfraError(Exception):
    """Something outside the user's input failed (forge, git, the machine)."""

    exit_code = 3
