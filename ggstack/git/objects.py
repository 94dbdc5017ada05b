"""Git objects read and written only through git: one long-lived ``cat-file --batch`` reads any format (GitPython parses
SHA-1 only), ``mktree``/``hash-object`` write, so git checks every id and a replay costs a process a kind."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import IO, TypeGuard

from ggstack.errors import UserError
from ggstack.git import dates
from ggstack.git.refs import Refs
from ggstack.git.runner import GitFailed, Persistent, Started, naming, read_line

_SCRATCH_IDENT = {
    "GIT_AUTHOR_NAME": "ggstack",
    "GIT_AUTHOR_EMAIL": "ggstack@localhost",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_NAME": "ggstack",
    "GIT_COMMITTER_EMAIL": "ggstack@localhost",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}

SCRATCH_IDENT = "ggstack <ggstack@localhost> 1700000000 +0000"
_BATCH = 500  # objects a request to a persistent writer: 500 answers are far under a pipe's 64 KiB
_FIXED_DATE = "1700000000 +0000"  # the date git var is given when only the name and email need git


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
    _reader: Persistent
    _tree_writer: Persistent
    _commit_writer: Persistent
    _blob_writer: Persistent
    _idents: dict[tuple[str, str, str], str | None]
    _commits: dict[str, CommitInfo]  # commits read so far, by id: an id names one content for good

    def _start_object_processes(self) -> None:
        cwd = self.worktree or self.git_dir
        self._reader = Persistent(self.git_dir, cwd, ["cat-file", "--batch"])
        self._tree_writer = Persistent(self.git_dir, cwd, ["mktree", "-z", "--missing", "--batch"])
        # The writers are given their files by name, a line each, in the scratch directory they
        # run in: a repository path with a newline in it (which --stdin-paths cannot take) is
        # never on those lines.
        scratch = os.path.join(self.common_dir, "ggstack", "tmp")
        self._commit_writer = Persistent(self.git_dir, scratch, ["hash-object", "-w", "-t", "commit", "--stdin-paths"])
        self._blob_writer = Persistent(
            self.git_dir, scratch, ["hash-object", "-w", "-t", "blob", "--no-filters", "--stdin-paths"]
        )
        self._idents = {}
        self._commits = {}

    def object_processes(self) -> list[Persistent]:
        return [self._reader, self._tree_writer, self._commit_writer, self._blob_writer]

    def after_fork(self) -> None:
        """In a forked process: long-lived git processes of its own, started when first asked."""
        for proc in self.object_processes():
            proc.forget()

    def has_objects(self, shas: Iterable[str]) -> dict[str, bool]:
        shas = list(dict.fromkeys(shas))
        if not shas:
            return {}
        proc = self.run("cat-file", "--batch-check", input="".join(s + "\n" for s in shas).encode())
        found = {}
        for sha, line in zip(shas, proc.stdout.decode().splitlines()):
            found[sha] = not line.endswith(" missing")
        return found

    def _read(self, name: str) -> tuple[str, str, bytes] | None:
        if not name or "\n" in name:
            return None
        got: list[tuple[str, str, bytes] | None] = []

        def answer(out: IO[bytes]) -> bytes:
            got.append(_batch_answer(out))
            return b""

        self._reader.ask(name.encode("utf-8", "surrogateescape") + b"\n", answer)
        return got[0]

    def try_resolve(self, ref: str, what: str = "commit") -> str | None:
        """``Refs.try_resolve``, a commit through the long-lived ``cat-file``: every command resolves its base first."""
        # A path in a tree (``main:../x``) is never a commit, and one outside the repository ends
        # cat-file altogether ("is outside repository"): rev-parse says no to it instead.
        if what != "commit" or not ref or ref.startswith("^") or "\n" in ref or ":" in ref:
            return super().try_resolve(ref, what)
        found = self._read(f"{ref}^{{commit}}")
        return found[0] if found is not None and found[1] == "commit" else None

    def _read_known(self, sha: str, kind: str) -> bytes:
        found = self._read(sha)
        if found is None or found[1] != kind:
            raise UserError(f"{sha}: not a {kind} in {self.worktree or self.git_dir}")
        return found[2]

    def read_blob(self, sha: str) -> bytes:
        return self._read_known(sha, "blob")

    def read_object(self, sha: str) -> bytes | None:
        found = self._read(sha)
        return None if found is None else found[2]

    def commit_info(self, rev: str) -> CommitInfo:
        sha = self.resolve(rev)
        return _parse_commit(sha, self._read_known(sha, "commit").decode("utf-8", "surrogateescape"))

    def commit_infos(self, revs: Sequence[str]) -> list[CommitInfo]:
        objs = self.cat_file_batch([f"{r}^{{commit}}" for r in revs])
        infos = []
        for rev, obj in zip(revs, objs):
            if obj is None or obj[1] != "commit":
                raise UserError(f"unknown commit {rev!r} in {self.worktree or self.git_dir}")
            infos.append(_parse_commit(obj[0], obj[2].decode("utf-8", "surrogateescape")))
        return infos

    def read_commit(self, sha: str) -> CommitInfo | None:
        found = self._read(sha)
        if found is None or found[1] != "commit":
            return None
        return _parse_commit(sha, found[2].decode("utf-8", "surrogateescape"))

    def read_commits(self, shas: Iterable[str]) -> dict[str, CommitInfo]:
        """Each commit read once a run (apply, test and pr read the same replayed commits); an absent
        id or a non-commit is left out."""
        wanted = [s for s in dict.fromkeys(shas) if s and "\n" not in s]
        unread = [s for s in wanted if s not in self._commits]
        for sha, obj in zip(unread, self.cat_file_batch(unread), strict=True):
            if _is_commit(obj, sha):
                self._commits[sha] = _parse_commit(sha, obj[2].decode("utf-8", "surrogateescape"))
        return {s: self._commits[s] for s in wanted if s in self._commits}

    def cat_file_batch(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        """(sha, type, contents) for each object name, None where missing: one process keeps git's
        delta-base cache warm over a check's rounds of reads."""
        # A name with a line end would be two requests and one answer read: the shared reader
        # would answer every later request with the one before. Such a name is never asked.
        asked = [n for n in names if "\n" not in n]
        got: list[tuple[str, str, bytes] | None] = []

        def answer(stream: IO[bytes]) -> bytes:
            for _ in asked:
                got.append(_batch_answer(stream))
            return b""

        if asked:
            self._reader.stream("".join(n + "\n" for n in asked).encode("utf-8", "surrogateescape"), answer)
        answers = iter(got)
        return [None if "\n" in n else next(answers) for n in names]

    def ls_tree(self, tree: str, paths: Sequence[str] = ()) -> dict[str, tuple[str, str]]:
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
        data = self._read_known(tree, "tree")
        size = len(self.null_oid) // 2  # the object format's id length, in bytes
        entries = {}
        pos = 0
        while pos < len(data):
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
            entries[name] = (data[pos:space].decode(), data[nul + 1 : nul + 1 + size].hex())
            pos = nul + 1 + size
        return entries

    def hash_blob(self, data: bytes) -> str:
        return self._write_through(self._blob_writer, data)

    def _write_through(self, writer: Persistent, body: bytes) -> str:
        return self._write_many(writer, [body])[0]

    def _write_many(self, writer: Persistent, bodies: Sequence[bytes]) -> list[str]:
        # One request (a temporary file each), under _BATCH so git's answers fit the pipe meanwhile.
        paths: list[str] = []
        try:
            for body in bodies:
                fd, path = tempfile.mkstemp(prefix="ggstack-object-", dir=self._scratch_dir())
                paths.append(path)
                with naming(path), os.fdopen(fd, "wb") as f:
                    f.write(body)

            def answers(out: IO[bytes]) -> bytes:
                return b"\n".join(read_line(out) for _ in paths)

            names = b"".join(os.path.basename(p).encode() + b"\n" for p in paths)  # in the writer's directory
            return writer.ask(names, answers).decode().split("\n")
        finally:
            for path in paths:
                os.unlink(path)

    def hash_blobs(self, blobs: Sequence[bytes]) -> list[str]:
        return self._hash_objects("blob", blobs)

    def _hash_objects(self, kind: str, bodies: Sequence[bytes]) -> list[str]:
        if not bodies:
            return []
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as d:
            paths = []
            for i, data in enumerate(bodies):
                path = os.path.join(d, str(i))
                with naming(path), open(path, "wb") as f:
                    f.write(data)
                paths.append(path)
            names = "\n".join(os.path.basename(p) for p in paths).encode()  # no newline of the repository's path
            out = self.out("hash-object", "-w", "--no-filters", "-t", kind, "--stdin-paths", input=names, cwd=d)
        return out.split()

    def edit_tree(self, tree: str | None, changes: dict[str, tuple[str, str] | None]) -> str:
        with self.temp_index(tree) as env:
            lines = "".join(
                (f"0 {self.null_oid}\t{path}\0" if entry is None else f"{entry[0]} {entry[1]}\t{path}\0")
                for path, entry in changes.items()
            )
            self.run("update-index", "-z", "--index-info", input=lines.encode("utf-8", "surrogateescape"), env=env)
            return self.out("write-tree", env=env)

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        request = b"".join(
            f"{mode} {_TYPE_OF_MODE.get(mode, 'blob')} {sha}\t".encode()
            + name.encode("utf-8", "surrogateescape")
            + b"\0"
            for name, (mode, sha) in entries.items()
        )
        return self._tree_writer.ask(request + b"\0", read_line).decode()

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
        """Without ``committer`` it comes from the environment, as in ``git rebase``; ``scratch``
        commits get a fixed identity, so the same inputs give the same object."""
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
        ident = f"{_SCRATCH_IDENT['GIT_AUTHOR_NAME']} <{_SCRATCH_IDENT['GIT_AUTHOR_EMAIL']}> {_SCRATCH_IDENT['GIT_AUTHOR_DATE']}"
        bodies = []
        for tree, parents, message in commits:
            head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
            bodies.append((head + f"author {ident}\ncommitter {ident}\n\n{message}").encode("utf-8", "surrogateescape"))
        return self._hash_objects("commit", bodies)

    def copies_with_messages(self, items: Sequence[tuple[str, str, str]]) -> list[str]:
        """Each one-parent commit with a new message; tree, author, committer, encoding byte for byte,
        signatures left out."""
        objs = self.cat_file_batch([c for c, _, _ in items])
        bodies = []
        for (commit, parent, message), obj in zip(items, objs):
            if obj is None or obj[1] != "commit":
                raise UserError(f"unknown commit {commit!r} in {self.worktree or self.git_dir}")
            header = obj[2].split(b"\n\n", 1)[0].split(b"\n")
            keep = [h for h in header if h.split(b" ", 1)[0] in (b"tree", b"author", b"committer", b"encoding")]
            keep.insert(1, b"parent " + parent.encode())
            body = b"\n".join(keep) + b"\n\n" + message.encode("utf-8", "surrogateescape")
            bodies.append(body)
        return self._hash_objects("commit", bodies)

    def committer_ident(self) -> str:
        """``Name <email> <epoch> <tz>`` for new commits, as ``commit-tree`` would take it (``git var``, once)."""
        return self.start_committer_ident()()

    def start_committer_ident(self) -> Callable[[], str]:
        job = self.start("var", "GIT_COMMITTER_IDENT")

        def wait() -> str:
            returncode, out = job.ended()
            if returncode != 0:
                raise UserError(
                    "git has no committer identity: set user.name and user.email (git config) "
                    "or GIT_COMMITTER_NAME / GIT_COMMITTER_EMAIL"
                )
            return out.decode("utf-8", "surrogateescape").strip()

        return wait

    def ident(self, name: str, email: str, date: str) -> str | None:
        """The ident line ``commit-tree`` would write for this author, None where git refuses it; ``git
        var`` once per name and email, the date read here where git keeps it as it is."""
        when = dates.stamp(date)
        if when is None:
            return self._git_var_ident(name, email, date)
        who = self._git_var_ident(name, email, _FIXED_DATE)
        if who is None or not who.endswith("> " + _FIXED_DATE):
            return self._git_var_ident(name, email, date)
        return who[: -len(_FIXED_DATE)] + when

    def prepare_idents(self, authors: Iterable[tuple[str, str]]) -> None:
        """``git var`` of each new (name, email) at once, side by side, for ``ident``."""
        keys = [(name, email, _FIXED_DATE) for name, email in dict.fromkeys(authors)]
        started = [(key, self._start_git_var(*key)) for key in keys if key not in self._idents]
        for key, job in started:
            returncode, out = job.ended()
            line = out.decode("utf-8", "surrogateescape").strip()
            self._idents[key] = line if returncode == 0 and line else None

    def _start_git_var(self, name: str, email: str, date: str) -> Started:
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
        return self.start("var", "GIT_AUTHOR_IDENT", env=env)

    def _git_var_ident(self, name: str, email: str, date: str) -> str | None:
        key = (name, email, date)
        if key not in self._idents:
            env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
            proc = self.run("var", "GIT_AUTHOR_IDENT", env=env, check=False)
            line = proc.stdout.decode("utf-8", "surrogateescape").strip()
            self._idents[key] = line if proc.returncode == 0 and line else None
        return self._idents[key]

    def write_commit(self, tree: str, parents: Sequence[str], message: str, author: str, committer: str) -> str:
        return self.write_commits([(tree, parents, message, author, committer)])[0]

    def write_commits(self, commits: Sequence[tuple[str, Sequence[str], str, str, str]]) -> list[str]:
        ids: list[str] = []
        for start in range(0, len(commits), _BATCH):
            bodies = []
            for tree, parents, message, author, committer in commits[start : start + _BATCH]:
                head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
                bodies.append(
                    f"{head}author {author}\ncommitter {committer}\n\n{message}".encode("utf-8", "surrogateescape")
                )
            ids += self._write_many(self._commit_writer, bodies)
        return ids


def _is_commit(obj: tuple[str, str, bytes] | None, sha: str) -> TypeGuard[tuple[str, str, bytes]]:
    return obj is not None and obj[1] == "commit" and obj[0] == sha  # a full id, not a name that may move


def _batch_answer(stream: IO[bytes]) -> tuple[str, str, bytes] | None:
    parts = read_line(stream).decode("utf-8", "surrogateescape").split(" ")
    if len(parts) != 3 or not parts[2].isdigit():
        return None  # "<name> missing" / "ambiguous"
    size = int(parts[2])
    body = stream.read(size + 1)
    if len(body) != size + 1:
        raise EOFError
    return parts[0], parts[1], body[:-1]


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


_TYPE_OF_MODE = {"40000": "tree", "160000": "commit"}


def close_all(processes: Sequence[Persistent]) -> None:
    for proc in processes:
        proc.close()
