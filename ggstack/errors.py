"""The failures a user sees as a message, not a traceback: ``UserError`` (fix your input, exit 2)
and ``InfraError`` (the world failed, try again later, exit 3). Anything else is a bug."""

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
