"""Commits written by one ``git fast-import``: a chain of trivial picks as one stream, where ``mktree``/``hash-object``
cost a round trip a tree level. Its stream's ref is reset before the end: no ref is written."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ggstack.git.runner import GitFailed, Runner

_REF = b"refs/ggstack/fast-import"  # named by the stream, never written (reset at its end)
# An ident fast-import's raw date format takes as it is (a zone past 1400 it refuses).
_IDENT = re.compile(r"[^<>\n]+ <[^<>\n]*> [0-9]+ [+-](?P<zone>[0-9]{4})")


@dataclass(frozen=True)
class ChainCommit:
    """One commit of a chain: path -> (mode, sha), or None removed (path "" with a tree's mode: the whole tree)."""

    edits: Mapping[str, tuple[str, str] | None]
    message: str
    author: str  # ready ident lines (``Objects.ident``)
    committer: str


def importable(ident: str) -> bool:
    """Whether fast-import writes this ident line exactly as given."""
    m = _IDENT.fullmatch(ident)
    return m is not None and int(m["zone"]) <= 1400


@dataclass(frozen=True)
class TreeCommit:
    tree: str
    parent: str
    message: str
    author: str
    committer: str


class FastImport(Runner):
    def write_chain(self, start: str, commits: Sequence[ChainCommit]) -> list[tuple[str, str]]:
        """(commit, tree) of each commit, the first on ``start``, each on the one before; one process."""
        if not commits:
            return []
        lines = self._fast_import(_stream(start, commits), 2 * len(commits))
        return [(lines[2 * n], lines[2 * n + 1].split("\t")[0].split(" ")[2]) for n in range(len(commits))]

    def write_tree_commits(self, commits: Sequence[TreeCommit]) -> list[str]:
        """Commits each on its own tree and parent, in one ``fast-import``: no temporary file an object."""
        if not commits:
            return []
        out = bytearray()
        for n, c in enumerate(commits, 1):
            out += _header(n, c.author, c.committer, c.message, c.parent.encode())
            out += b'M 040000 %s ""\n\nget-mark :%d\n' % (c.tree.encode(), n)
        return self._fast_import(bytes(out + b"reset %s\ndone\n" % _REF), len(commits))

    def _fast_import(self, stream: bytes, answers: int) -> list[str]:
        # It writes no ref, yet asks the reference-transaction hook about its empty transaction:
        # the repository's hooks have nothing to judge here (ggstack's ref writes still meet them).
        pid, proc = self.run_as(
            "-c", "core.hooksPath=/dev/null", "fast-import", "--quiet", "--done", "--date-format=raw", input=stream
        )
        if proc.returncode != 0:
            with contextlib.suppress(OSError):  # its report is for git's developers, not left in the user's git dir
                os.unlink(os.path.join(self.git_dir, f"fast_import_crash_{pid}"))
            raise GitFailed(["fast-import"], proc.returncode, proc.stderr.decode("utf-8", "replace"))
        lines = proc.stdout.decode().splitlines()
        if len(lines) != answers:
            raise GitFailed(["fast-import"], 0, f"{len(lines)} answers to {answers} questions")
        return lines


def _header(n: int, author: str, committer: str, message: str, parent: bytes) -> bytes:
    data = message.encode("utf-8", "surrogateescape")
    return b"commit %s\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s\nfrom %s\n" % (
        _REF,
        n,
        author.encode("utf-8", "surrogateescape"),
        committer.encode("utf-8", "surrogateescape"),
        len(data),
        data,
        parent,
    )


def _stream(start: str, commits: Sequence[ChainCommit]) -> bytes:
    out = bytearray()
    for n, c in enumerate(commits, 1):
        out += _header(n, c.author, c.committer, c.message, start.encode() if n == 1 else b":%d" % (n - 1))
        for path, entry in c.edits.items():
            quoted = _quote(path)
            out += (
                b"D %s\n" % quoted
                if entry is None
                else b"M %s %s %s\n" % (entry[0].encode(), entry[1].encode(), quoted)
            )
        out += b'\nget-mark :%d\nls :%d ""\n' % (n, n)
    return bytes(out + b"reset %s\ndone\n" % _REF)


def _quote(path: str) -> bytes:
    """A path as fast-import reads it: as it is, or C-quoted where it could be misread."""
    raw = path.encode("utf-8", "surrogateescape")
    if raw and b"\n" not in raw and not raw.startswith(b'"'):
        return raw
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
