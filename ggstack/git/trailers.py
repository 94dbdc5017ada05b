"""Commit message trailers, read and written by ``git interpret-trailers`` (no repository needed)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence

from ggstack.git.runner import GitFailed, plain_git


def parse_trailers(messages: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The trailers of many messages in one ``git interpret-trailers``, a sentinel marking each end."""
    if not messages:
        return []
    sentinel = "Ggstack-End-Of-Message"
    scratch, files = _written(messages)
    with scratch:
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


_MEMORY = "/dev/shm"


def _written(messages: Sequence[str]) -> tuple[tempfile.TemporaryDirectory[str], list[str]]:
    """Each message in a file of its own for git, in ``/dev/shm`` unless ``TMPDIR`` says otherwise: on a busy disk,
    a 1,000-patch series' files cost 0.7 s a load, 0.04 s in memory."""
    memory = not os.environ.get("TMPDIR") and os.path.isdir(_MEMORY) and os.access(_MEMORY, os.W_OK | os.X_OK)
    for where in ([_MEMORY] if memory else []) + [None]:
        scratch = tempfile.TemporaryDirectory(prefix="ggstack-trailers-", dir=where)
        try:
            files = [os.path.join(scratch.name, f"{i}.msg") for i in range(len(messages))]
            for message, path in zip(messages, files, strict=True):
                with open(path, "wb") as f:
                    f.write(message.encode("utf-8", "surrogateescape"))
            return scratch, files
        except OSError:
            scratch.cleanup()
            if where is None:
                raise
    raise AssertionError("unreachable: the last place raises")


def add_trailers(message: str, trailers: Sequence[tuple[str, str]]) -> str:
    return add_trailers_many([(message, trailers)])[0][0]


_PLACEHOLDER = "Ggstack-Trailers-Go-Here"
# A line git could read as a trailer ("token: value", token letters, digits, '-'),
# or one that makes git's choice of the trailer block subtle (comments, cherry-pick lines).
_MAYBE_TRAILER = re.compile(r"^([A-Za-z0-9-]+\s*:|\(cherry picked from commit |#|\s)", re.M)


def add_trailers_many(
    items: Sequence[tuple[str, Sequence[tuple[str, str]]]], *, once: Sequence[str] = ()
) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each message with its trailers appended where git puts them, and the trailers it then has; one
    already there (or a ``once`` key) is not added again. All in one call, through a placeholder trailer."""
    messages = [m.rstrip("\n") + "\n" for m, _ in items]  # git appends to an unterminated last line
    out: list[tuple[str, list[tuple[str, str]]]] = []
    ask_git = []
    for i, (message, (_, trailers)) in enumerate(zip(messages, items)):
        if _no_trailer_block(message):
            out.append((message + "\n" + _lines(trailers), list(trailers)))
        else:
            out.append((message, []))
            ask_git.append(i)
    wanted = {}
    for i, have in zip(ask_git, parse_trailers([messages[i] for i in ask_git])):
        wanted[i] = _new_trailers(items[i][1], have, once)
        out[i] = (messages[i], have + wanted[i])
    asked = [i for i in ask_git if wanted[i]]
    for i, text in zip(asked, _placed([messages[i] for i in asked])):
        out[i] = (_replace_placeholder(text, wanted[i]), out[i][1])
    return out


def _lines(trailers: Sequence[tuple[str, str]]) -> str:
    return "".join(f"{k}: {v}\n" for k, v in trailers)


def _replace_placeholder(text: str, trailers: Sequence[tuple[str, str]]) -> str:
    head, found, tail = text.rpartition(f"{_PLACEHOLDER}: x\n")
    if not found:
        raise GitFailed(("interpret-trailers",), 0, "the placeholder trailer was not written")
    return head + _lines(trailers) + tail


def _no_trailer_block(message: str) -> bool:
    paragraphs = message.rstrip("\n").split("\n\n")
    return "\r" not in message and (len(paragraphs) == 1 or not _MAYBE_TRAILER.search(paragraphs[-1]))


def _new_trailers(
    trailers: Sequence[tuple[str, str]], have: Sequence[tuple[str, str]], once: Sequence[str]
) -> list[tuple[str, str]]:
    keys = {k.lower() for k, _ in have}
    pairs = {(k.lower(), v) for k, v in have}
    return [(k, v) for k, v in trailers if (k.lower(), v) not in pairs and not (k in once and k.lower() in keys)]


def _placed(messages: Sequence[str]) -> list[str]:
    if not messages:
        return []
    scratch, files = _written(messages)
    with scratch:
        for chunk in range(0, len(files), 1000):  # bounded command lines
            plain_git(
                *("-c", "trailer.where=end", "-c", "trailer.ifexists=add", "-c", "trailer.separators=:"),
                *("interpret-trailers", "--in-place", "--no-divider", "--trailer", f"{_PLACEHOLDER}: x"),
                *files[chunk : chunk + 1000],
            )
        placed = []
        for path in files:
            with open(path, "rb") as f:
                placed.append(f.read().decode("utf-8", "surrogateescape"))
    return placed
