"""Commit message trailers, read and written by ``git interpret-trailers`` (no repository needed)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

from ggstack.git.runner import plain_git


def parse_trailers(messages: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The trailers of many messages, in one ``git interpret-trailers`` call.

    git reads each message from its own file; a sentinel trailer appended
    to every file marks where one message's trailers end in the output.
    """
    if not messages:
        return []
    sentinel = "Ggstack-End-Of-Message"
    with tempfile.TemporaryDirectory(prefix="ggstack-trailers-") as d:
        files = []
        for i, msg in enumerate(messages):
            path = os.path.join(d, f"{i}.msg")
            with open(path, "wb") as f:
                f.write(msg.encode("utf-8", "surrogateescape"))
            files.append(path)
        out = plain_git(
            "-c",
            "trailer.where=end",
            "-c",
            "trailer.ifexists=add",
            "-c",
            "trailer.separators=:",
            "interpret-trailers",
            "--only-trailers",
            "--unfold",
            "--no-divider",
            "--trailer",
            f"{sentinel}: x",
            *files,
        )
    result: list[list[tuple[str, str]]] = [[]]
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key == sentinel:
            result.append([])
        elif key:
            result[-1].append((key.strip(), value.strip()))
    return result[: len(messages)]


def add_trailers(message: str, trailers: Sequence[tuple[str, str]]) -> str:
    """``message`` with ``trailers`` appended by ``git interpret-trailers``."""
    args = ["-c", "trailer.where=end", "-c", "trailer.ifexists=addIfDifferent", "interpret-trailers", "--no-divider"]
    for key, value in trailers:
        args += ["--trailer", f"{key}: {value}"]
    return plain_git(*args, input=message.encode("utf-8", "surrogateescape"))
