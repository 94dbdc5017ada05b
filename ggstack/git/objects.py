"""Reading and writing git objects.

Objects are read through GitPython's persistent ``cat-file --batch``
process, so reading a thousand blobs costs one process, not a thousand.
Objects a replay makes are queued and written together as one pack before git
next runs or reads, so hundreds of small commits and trees cost one process
and one file. New commits and trees are written in git's own format; ids are
git's by definition, and every flush checks git can read them back.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import git as gitpython

from ggstack.errors import UserError
from ggstack.git.refs import ZERO, Refs
from ggstack.git.runner import GitFailed, environment

_SCRATCH_IDENT = {
    "GIT_AUTHOR_NAME": "ggstack",
    "GIT_AUTHOR_EMAIL": "ggstack@localhost",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_NAME": "ggstack",
    "GIT_COMMITTER_EMAIL": "ggstack@localhost",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}

SCRATCH_IDENT = "ggstack <ggstack@localhost> 1700000000 +0000"


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_date: str  # raw "<epoch> <tz>"
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


class Objects(Refs):
    """The object database: reads through one persistent process, writes queued as one pack."""

    _repo: gitpython.Repo
    _queued: dict[str, tuple[str, bytes]]  # objects made here, not yet written (see queue_object)
    _flushing: threading.RLock  # a git run from another thread waits for a flush under way

    def has_objects(self, shas: Iterable[str]) -> dict[str, bool]:
        shas = list(dict.fromkeys(shas))
        if not shas:
            return {}
        proc = self.run("cat-file", "--batch-check", input="".join(s + "\n" for s in shas).encode())
        found = {}
        for sha, line in zip(shas, proc.stdout.decode().splitlines()):
            found[sha] = not line.endswith(" missing")
        return found

    def _stream(self, sha: str):
        """An object through GitPython's persistent cat-file (which sees new
        packs), or from the queue if it was made here and not written yet."""
        if sha in self._queued:
            kind, body = self._queued[sha]
            return _Queued(kind.encode(), body)
        return self._repo.odb.stream(bytes.fromhex(sha))

    def read_blob(self, sha: str) -> bytes:
        return self._stream(sha).read()

    def read_object(self, sha: str) -> bytes | None:
        """An object's contents through the persistent cat-file, None if it is not here."""
        try:
            return self._stream(sha).read()
        except (ValueError, gitpython.BadName, gitpython.BadObject, OSError):
            return None

    def commit_info(self, rev: str) -> CommitInfo:
        sha = self.resolve(rev)
        return _parse_commit(sha, self._stream(sha).read().decode("utf-8", "surrogateescape"))

    def commit_infos(self, revs: Sequence[str]) -> list[CommitInfo]:
        """``commit_info`` of many revisions in one process; UserError naming an unknown one."""
        objs = self.cat_file_batch([f"{r}^{{commit}}" for r in revs])
        infos = []
        for rev, obj in zip(revs, objs):
            if obj is None or obj[1] != "commit":
                raise UserError(f"unknown commit {rev!r} in {self.worktree or self.git_dir}")
            infos.append(_parse_commit(obj[0], obj[2].decode("utf-8", "surrogateescape")))
        return infos

    def read_commit(self, sha: str) -> CommitInfo | None:
        """The commit ``sha`` (a full id) through the persistent cat-file, or
        None when it is absent (say, pruned); no rev-parse process."""
        try:
            stream = self._stream(sha)
        except (ValueError, gitpython.BadObject, gitpython.BadName, OSError):
            return None
        if stream.type != b"commit":
            return None
        return _parse_commit(sha, stream.read().decode("utf-8", "surrogateescape"))

    def cat_file_batch(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        """(sha, type, contents) for each object name (``sha``, ``rev:path``,
        ``rev^{commit}``), None where it is missing: one ``cat-file --batch``."""
        if not names:
            return []
        data = self.run(
            "cat-file", "--batch", input="".join(n + "\n" for n in names).encode("utf-8", "surrogateescape")
        ).stdout
        out: list[tuple[str, str, bytes] | None] = []
        pos = 0
        for _ in names:
            eol = data.index(b"\n", pos)
            header = data[pos:eol].decode("utf-8", "surrogateescape")
            pos = eol + 1
            parts = header.split(" ")
            if len(parts) != 3 or not parts[2].isdigit():
                out.append(None)  # "<name> missing" / "ambiguous"
                continue
            size = int(parts[2])
            out.append((parts[0], parts[1], data[pos : pos + size]))
            pos += size + 1
        return out

    def ls_tree(self, tree: str, paths: Sequence[str] = ()) -> dict[str, tuple[str, str]]:
        """path -> (mode, sha) for the blobs of ``tree`` (limited to ``paths``)."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", "--end-of-options", tree, "--", *paths).stdout.decode(
            "utf-8", "surrogateescape"
        )
        entries = {}
        for rec in out.split("\0"):
            if rec:
                meta, path = rec.split("\t", 1)
                mode, _, sha = meta.split(" ")
                entries[path] = (mode, sha)
        return entries

    def tree_entries(self, tree: str) -> dict[str, tuple[str, str]]:
        """name -> (mode, sha) of one tree object, through the persistent cat-file."""
        data = self._stream(tree).read()
        entries = {}
        pos = 0
        while pos < len(data):
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
            entries[name] = (data[pos:space].decode(), data[nul + 1 : nul + 21].hex())
            pos = nul + 21
        return entries

    def hash_blob(self, data: bytes) -> str:
        return self.out("hash-object", "-w", "--stdin", input=data)

    def hash_blobs(self, blobs: Sequence[bytes]) -> list[str]:
        """Write many blobs in one ``git hash-object --stdin-paths`` call."""
        return self._hash_objects("blob", blobs)

    def _hash_objects(self, kind: str, bodies: Sequence[bytes]) -> list[str]:
        """Write objects of one ``kind`` in one ``git hash-object --stdin-paths`` call
        (git validates each; one temporary file an object, one process for all)."""
        if not bodies:
            return []
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as d:
            paths = []
            for i, data in enumerate(bodies):
                path = os.path.join(d, str(i))
                with open(path, "wb") as f:
                    f.write(data)
                paths.append(path)
            out = self.out(
                "hash-object", "-w", "--no-filters", "-t", kind, "--stdin-paths", input="\n".join(paths).encode()
            )
        return out.split()

    def edit_tree(self, tree: str | None, changes: dict[str, tuple[str, str] | None]) -> str:
        """``tree`` with ``changes`` (path -> (mode, blob) or None to delete) applied."""
        with self.temp_index(tree) as env:
            lines = "".join(
                (f"0 {ZERO}\t{path}\0" if entry is None else f"{entry[0]} {entry[1]}\t{path}\0")
                for path, entry in changes.items()
            )
            self.run("update-index", "-z", "--index-info", input=lines.encode("utf-8", "surrogateescape"), env=env)
            return self.out("write-tree", env=env)

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """A tree object of name -> (mode, sha), in git's order; queued (see ``queue_object``)."""

        def order(name: str) -> bytes:
            return name.encode("utf-8", "surrogateescape") + (b"/" if entries[name][0] == "40000" else b"")

        body = b"".join(
            entries[n][0].encode() + b" " + n.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(entries[n][1])
            for n in sorted(entries, key=order)
        )
        return self.queue_object("tree", body)

    def commit_tree(
        self,
        tree: str,
        parents: Sequence[str],
        message: str,
        *,
        author: tuple[str, str, str] | None = None,
        committer: tuple[str, str, str] | None = None,
        scratch: bool = False,
    ) -> str:
        """Write a commit object. ``author``/``committer``: (name, email, date).

        Without ``committer`` the committer comes from the environment, as in
        ``git rebase``; ``scratch`` commits get a fixed identity so that the
        same inputs give the same object (and no config is needed).
        """
        env: dict[str, str] = dict(_SCRATCH_IDENT) if scratch else {}
        if author:
            env.update(GIT_AUTHOR_NAME=author[0], GIT_AUTHOR_EMAIL=author[1], GIT_AUTHOR_DATE=author[2])
        if committer:
            env.update(
                GIT_COMMITTER_NAME=committer[0], GIT_COMMITTER_EMAIL=committer[1], GIT_COMMITTER_DATE=committer[2]
            )
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        try:
            return self.out(*args, input=message.encode("utf-8", "surrogateescape"), env=env)
        except GitFailed as e:
            if "Please tell me who you are" in e.stderr or "empty ident" in e.stderr:
                raise UserError(
                    "git has no committer identity: set user.name and user.email (git config) "
                    "or GIT_COMMITTER_NAME / GIT_COMMITTER_EMAIL"
                ) from None
            raise

    def hash_commits(self, commits: Sequence[tuple[str, Sequence[str], str]]) -> list[str]:
        """Scratch commits (tree, parents, message) with ggstack's fixed identity,
        written in one ``hash-object --stdin-paths`` call."""
        ident = f"{_SCRATCH_IDENT['GIT_AUTHOR_NAME']} <{_SCRATCH_IDENT['GIT_AUTHOR_EMAIL']}> {_SCRATCH_IDENT['GIT_AUTHOR_DATE']}"
        bodies = []
        for tree, parents, message in commits:
            head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
            bodies.append((head + f"author {ident}\ncommitter {ident}\n\n{message}").encode("utf-8", "surrogateescape"))
        return self._hash_objects("commit", bodies)

    def committer_ident(self) -> str:
        """``Name <email> <epoch> <tz>`` for new commits, from the environment
        and config as ``commit-tree`` would take it (``git var``, once a run)."""
        proc = self.run("var", "GIT_COMMITTER_IDENT", check=False)
        if proc.returncode != 0:
            raise UserError(
                "git has no committer identity: set user.name and user.email (git config) "
                "or GIT_COMMITTER_NAME / GIT_COMMITTER_EMAIL"
            )
        return proc.stdout.decode("utf-8", "surrogateescape").strip()

    def write_commit(self, tree: str, parents: Sequence[str], message: str, author: str, committer: str) -> str:
        """A commit object from ready ident lines (see ``ident``); queued, see ``queue_object``."""
        head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        body = f"{head}author {author}\ncommitter {committer}\n\n{message}"
        return self.queue_object("commit", body.encode("utf-8", "surrogateescape"))

    def queue_object(self, kind: str, body: bytes) -> str:
        """The id of a new object, which is written with the others queued as
        one pack (``index-pack --stdin``) before git next runs or reads: a
        replay's hundreds of small objects cost one process and one file,
        not a process or a file each. The id is git's by definition (the
        SHA-1 of the object), and ``flush_objects`` checks git agrees."""
        sha = hashlib.sha1(b"%s %d\0" % (kind.encode(), len(body)) + body).hexdigest()
        self._queued.setdefault(sha, (kind, body))
        return sha

    def flush_objects(self) -> None:
        """Write the queued objects, as one pack."""
        with self._flushing:  # taken even when empty: another thread's flush may be under way
            queued = dict(self._queued)
            self._queued.clear()  # in place: the finalizer holds this dict
            if not queued:
                return
            self.run("index-pack", "--stdin", "--strict", input=_pack(queued.values()))
            found = self.has_objects(list(queued))
            if not all(found.values()):
                raise GitFailed(("index-pack", "--stdin"), 0, "objects written as a pack are not readable back")


def _parse_commit(sha: str, raw: str) -> CommitInfo:
    header, _, message = raw.partition("\n\n")
    tree, parents, author, committer = "", [], "", ""
    for line in header.splitlines():
        key, _, value = line.partition(" ")
        if key == "tree":
            tree = value
        elif key == "parent":
            parents.append(value)
        elif key == "author":
            author = value
        elif key == "committer":
            committer = value
    an, ae, ad = _split_ident(author)
    cn, ce, cd = _split_ident(committer)
    return CommitInfo(sha, tree, tuple(parents), an, ae, ad, cn, ce, cd, message)


def _split_ident(ident: str) -> tuple[str, str, str]:
    m = re.match(r"^(.*?) <(.*)> (\d+ [+-]\d{4})$", ident)
    if not m:
        return ident, "", ""
    return m.group(1), m.group(2), m.group(3)


@dataclass(frozen=True)
class _Queued:
    """A queued object, read like a GitPython stream."""

    type: bytes
    body: bytes

    def read(self) -> bytes:
        return self.body


def write_pack(git_dir: str, queued: dict[str, tuple[str, bytes]]) -> None:
    """The queued objects, written when their Repository is gone."""
    if queued:
        objects = list(queued.values())
        queued.clear()
        subprocess.run(
            ["git", "--git-dir", git_dir, "index-pack", "--stdin", "--strict"],
            input=_pack(objects),
            env=environment(),
            capture_output=True,
        )


_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}


def _pack(objects: Iterable[tuple[str, bytes]]) -> bytes:
    """A version-2 pack of whole (undeltified) objects, as index-pack reads it."""
    objects = list(objects)
    out = [b"PACK", struct.pack(">II", 2, len(objects))]
    for kind, body in objects:
        size = len(body)
        byte = (_PACK_TYPES[kind] << 4) | (size & 0x0F)
        size >>= 4
        header = bytearray()
        while size:
            header.append(byte | 0x80)
            byte = size & 0x7F
            size >>= 7
        header.append(byte)
        out += [bytes(header), zlib.compress(body, 1)]
    data = b"".join(out)
    return data + hashlib.sha1(data).digest()


# -- ident lines, as git writes them --------------------------------------------

_CRUD = set(" .,:;<>\"\\'") | {chr(c) for c in range(33)}


def ident(name: str, email: str, date: str) -> str | None:
    """The ident line git would write for ``GIT_AUTHOR_NAME/EMAIL/DATE``
    (crud trimmed as ident.c does; the date as raw ``<epoch> <tz>`` or RFC
    2822), or None where only git itself can say (then use ``commit_tree``)."""
    name, email = _without_crud(name), _without_crud(email)
    when = _raw_date(date)
    if not name or when is None:
        return None
    return f"{name} <{email}> {when}"


def _without_crud(s: str) -> str:
    start, end = 0, len(s)
    while start < end and s[start] in _CRUD:
        start += 1
    while end > start and s[end - 1] in _CRUD:
        end -= 1
    return "".join(c for c in s[start:end] if c not in "\n<>")


def _raw_date(date: str) -> str | None:
    import email.utils

    if re.fullmatch(r"\d+ [+-]\d{4}", date):
        return date
    parsed = email.utils.parsedate_tz(date)
    if parsed is None or parsed[9] is None:
        return None
    offset = parsed[9]
    sign = "-" if offset < 0 else "+"
    offset = abs(offset)
    return f"{email.utils.mktime_tz(parsed)} {sign}{offset // 3600:02d}{offset % 3600 // 60:02d}"
