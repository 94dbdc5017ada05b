"""The one place that runs git.

Everything above this module asks questions in ggstack's own words
(``resolve``, ``merge_trees``, ``format_patch``); nothing else builds a git
command line. It leans on git's plumbing rather than re-implementing it:
``merge-tree --write-tree`` is the same merge-ort that ``git rebase`` uses, so
replayed trees are byte-identical to git's; ``interpret-trailers``,
``format-patch``, ``patch-id`` and ``apply`` are used as git ships them.

Nothing here touches the user's working tree, index, HEAD or branches:
indexes are temporary files (``GIT_INDEX_FILE``), objects are written to the
object database (harmless, unreachable until a ref names them), and refs are
only ever written by ``update_refs`` in one compare-and-swap transaction.

Objects are read through GitPython's persistent ``cat-file --batch`` process,
so reading a thousand blobs costs one process, not a thousand.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import subprocess
import tempfile
import threading
import weakref
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import git as gitpython

from ggstack.errors import InfraError, UserError

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ZERO = "0" * 40

# Identity for the scratch commits merge-tree needs; they are never referenced.
_SCRATCH_IDENT = {
    "GIT_AUTHOR_NAME": "ggstack",
    "GIT_AUTHOR_EMAIL": "ggstack@localhost",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_NAME": "ggstack",
    "GIT_COMMITTER_EMAIL": "ggstack@localhost",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


class GitFailed(InfraError):
    """git exited non-zero where the caller did not expect it."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args[:3])} failed ({returncode}): {stderr.strip()[:2000]}")
        self.args_ = list(args)
        self.returncode = returncode
        self.stderr = stderr


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


@dataclass(frozen=True)
class TreeChange:
    """One file changed between two trees, as ``diff-tree --raw`` says it (mode 000000: absent)."""

    path: str
    old_mode: str
    old_sha: str
    new_mode: str
    new_sha: str
    status: str  # A, D, M, T


@dataclass(frozen=True)
class MergeResult:
    tree: str
    clean: bool
    conflicted_paths: tuple[str, ...]
    messages: str


class Repository:
    """A git repository, discovered from a path (the fork checkout)."""

    def __init__(self, path: str) -> None:
        try:
            self._repo = gitpython.Repo(path, search_parent_directories=True)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
            raise UserError("not a git repository (use --repo to point at the fork checkout)", path=path) from None
        self.git_dir = os.path.abspath(self._repo.git_dir)
        self.common_dir = os.path.abspath(self._repo.common_dir)
        self.worktree = self._repo.working_tree_dir  # None for a bare repository
        self._queued: dict[str, tuple[str, bytes]] = {}  # objects made here, not yet written (see queue_object)
        self._flushing = threading.RLock()  # a git run from another thread waits for a flush under way
        # Whatever is still queued when the Repository goes (or the program
        # ends) is written then: a printed Run may name those commits.
        weakref.finalize(self, _write_pack, self.git_dir, self._queued)

    @classmethod
    def init(cls, path: str, *, bare: bool = False) -> Repository:
        """A new repository at ``path`` (for the demo's miniature fork)."""
        os.makedirs(path, exist_ok=True)
        _plain_git("init", "-q", "-b", "main", *(["--bare"] if bare else []), path)
        return cls(path)

    # -- running --------------------------------------------------------

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        self.flush_objects()  # what git is asked about must be in the object database
        full_env = os.environ.copy()
        # An inherited GIT_INDEX_FILE (say, from a hook) would be the user's index.
        full_env.pop("GIT_INDEX_FILE", None)
        full_env.update(env or {})
        # Plumbing output must not depend on the user's locale or pager.
        full_env["LC_ALL"] = "C"
        full_env["GIT_PAGER"] = "cat"
        proc = subprocess.run(
            ["git", "--git-dir", self.git_dir, *args],
            input=input,
            env=full_env,
            cwd=cwd or self.worktree or self.git_dir,
            capture_output=True,
        )
        if check and proc.returncode != 0:
            raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
        return proc

    def out(self, *args: str, **kw) -> str:
        return self.run(*args, **kw).stdout.decode("utf-8", "surrogateescape").strip()

    def popen(self, *args: str, stdin=None) -> subprocess.Popen:
        self.flush_objects()
        env = {**os.environ, "LC_ALL": "C", "GIT_PAGER": "cat"}
        return subprocess.Popen(
            ["git", "--git-dir", self.git_dir, *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self.worktree or self.git_dir,
        )

    # -- refs and objects -----------------------------------------------

    def resolve(self, ref: str, what: str = "commit") -> str:
        """The full sha of ``ref``, or a UserError naming it."""
        sha = self.try_resolve(ref, what)
        if sha is None:
            raise UserError(f"unknown ref {ref!r}: not a {what} in {self.worktree or self.git_dir}")
        return sha

    def try_resolve(self, ref: str, what: str = "commit") -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{{what}}}", check=False)
        sha = proc.stdout.decode().strip() if proc.returncode == 0 else ""
        # "^X" passes --verify and prints "^<sha>": a negated range end, not one object.
        return sha if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) else None

    def ref_value(self, ref: str) -> str | None:
        """The sha a ref points at right now, without peeling; None if absent."""
        proc = self.run("rev-parse", "--verify", "--quiet", ref, check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def refs(self, prefix: str) -> dict[str, str]:
        out = self.out("for-each-ref", "--format=%(objectname) %(refname)", prefix)
        return {name: sha for sha, name in (line.split(" ", 1) for line in out.splitlines() if line)}

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

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        proc = self.run("merge-base", a, b, check=False)
        return proc.stdout.decode().strip() or None

    def is_shallow(self) -> bool:
        return os.path.exists(os.path.join(self.common_dir, "shallow"))

    def rev_list(self, *args: str) -> list[str]:
        return self.out("rev-list", *args).split()

    def ls_tree(self, tree: str, paths: Sequence[str] = ()) -> dict[str, tuple[str, str]]:
        """path -> (mode, sha) for the blobs of ``tree`` (limited to ``paths``)."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", tree, "--", *paths).stdout.decode(
            "utf-8", "surrogateescape"
        )
        entries = {}
        for rec in out.split("\0"):
            if rec:
                meta, path = rec.split("\t", 1)
                mode, _, sha = meta.split(" ")
                entries[path] = (mode, sha)
        return entries

    def diff_names(self, a: str, b: str) -> list[str]:
        out = self.run("diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b).stdout.decode(
            "utf-8", "surrogateescape"
        )
        return [p for p in out.split("\0") if p]

    # -- writing objects --------------------------------------------------

    def hash_blob(self, data: bytes) -> str:
        return self.out("hash-object", "-w", "--stdin", input=data)

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

    def mktree(self, entries: dict[str, tuple[str, str]]) -> str:
        """A tree from path -> (mode, sha), through a temporary index."""
        with self.temp_index() as env:
            lines = "".join(f"{mode} {sha}\t{path}\0" for path, (mode, sha) in entries.items())
            self.run("update-index", "-z", "--index-info", input=lines.encode("utf-8", "surrogateescape"), env=env)
            return self.out("write-tree", env=env)

    def diff_blob_pairs(self, pairs: Sequence[tuple[str, str]]) -> dict[int, bytes]:
        """index -> the ``-U0`` histogram diff of each (old blob, new blob) pair that differs:
        every pair is a file of two scratch trees, so all of them cost two ``mktree`` and one ``diff-tree``."""
        if not pairs:
            return {}
        names = [f"{i:07d}" for i in range(len(pairs))]
        trees = [
            self.run(
                "mktree",
                "--missing",
                input="".join(f"100644 blob {p[side]}\t{n}\n" for n, p in zip(names, pairs)).encode(),
            )
            .stdout.decode()
            .strip()
            for side in (0, 1)
        ]
        raw = self.run("diff-tree", "-p", "-U0", "--histogram", "--no-renames", "--no-color", "-a", *trees).stdout
        out = {}
        for section in raw.split(b"diff --git a/")[1:]:
            out[int(section[:7])] = section
        return out

    # -- temporary index ----------------------------------------------------

    @contextlib.contextmanager
    def temp_index(self, tree: str | None = None) -> Iterator[dict[str, str]]:
        """An index file of our own (never the user's), optionally read from ``tree``."""
        fd, path = tempfile.mkstemp(prefix="ggstack-index-", dir=self._scratch_dir())
        os.close(fd)
        os.unlink(path)  # git wants to create it itself
        env = {"GIT_INDEX_FILE": path}
        try:
            if tree:
                self.run("read-tree", tree, env=env)
            yield env
        finally:
            for p in (path, path + ".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)

    def apply_to_tree(self, tree: str, patch: bytes, *, three_way: bool = False) -> tuple[str | None, str]:
        """Apply a diff to a tree in a temporary index: (new tree or None, git's message)."""
        with self.temp_index(tree) as env:
            args = ["apply", "--cached", "--whitespace=nowarn"]
            if three_way:
                args.append("--3way")
            proc = self.run(*args, "-", input=patch, env=env, check=False)
            if proc.returncode != 0:
                return None, proc.stderr.decode("utf-8", "replace")
            return self.out("write-tree", env=env), proc.stderr.decode("utf-8", "replace")

    def apply_check(self, tree: str, patch: bytes, *, reverse: bool = False) -> bool:
        """Does ``patch`` (or its reverse) apply cleanly to ``tree``?"""
        with self.temp_index(tree) as env:
            args = ["apply", "--cached", "--check", "--whitespace=nowarn"]
            if reverse:
                args.append("--reverse")
            return self.run(*args, "-", input=patch, env=env, check=False).returncode == 0

    def _scratch_dir(self) -> str:
        path = os.path.join(self.common_dir, "ggstack", "tmp")
        os.makedirs(path, exist_ok=True)
        return path

    def state_dir(self, *parts: str) -> str:
        """ggstack's own directory under the git dir (caches, locks, worktrees)."""
        path = os.path.join(self.common_dir, "ggstack", *parts)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:  # something else took the name: ggstack's own state, not the user's input
            raise InfraError(
                f"cannot use ggstack's state directory {path}: {e.strerror} (move aside what is in the way)"
            ) from None
        return path

    # -- merging --------------------------------------------------------

    def merge_trees(self, ours: str, theirs: str) -> MergeResult:
        """``git merge-tree --write-tree`` of two commits (merge-ort, as rebase uses)."""
        proc = self.run("merge-tree", "--write-tree", "-z", "--name-only", "--messages", ours, theirs, check=False)
        if proc.returncode not in (0, 1):
            raise GitFailed(("merge-tree", ours, theirs), proc.returncode, proc.stderr.decode("utf-8", "replace"))
        out = proc.stdout.decode("utf-8", "surrogateescape")
        head, _, messages = out.partition("\0\0")
        fields = head.split("\0")
        tree = fields[0]
        paths = tuple(dict.fromkeys(p for p in fields[1:] if p))
        return MergeResult(tree, proc.returncode == 0, paths, _readable_messages(messages))

    # -- patches ----------------------------------------------------------

    def format_patch(
        self, commit: str, base: str, paths: Sequence[str] = (), number: int = 1, total: int = 1
    ) -> tuple[str, bytes]:
        """``git format-patch --full-index`` of one commit: (git's file name, contents).

        ``--no-signature`` keeps the bytes independent of the git version, and
        every ``format.*``/``diff.*`` setting that changes the output is pinned
        to git's default, so regenerating a stored patch on another machine
        (with another user's git config) changes nothing.
        """
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as out_dir:
            args = [
                "-c",
                "core.quotePath=false",
                "-c",
                "diff.noprefix=false",
                "-c",
                "diff.mnemonicPrefix=false",
                "-c",
                "diff.suppressBlankEmpty=false",
                "-c",
                "format.signOff=false",
                "-c",
                "format.from=false",
                "-c",
                "format.forceInBodyFrom=false",
                "-c",
                "format.encodeEmailHeaders=true",
                "-c",
                "i18n.logOutputEncoding=UTF-8",
                "format-patch",
                "--full-index",
                "--binary",
                "--no-signature",
                "--no-color",
                "--find-renames",
                f"--base={base}",
                "--numbered",
                "--subject-prefix=PATCH",
                "--suffix=.patch",
                "--no-cover-letter",
                "--no-thread",
                "--no-notes",
                "--no-attach",
                "--no-add-header",
                "--no-to",
                "--no-cc",
                "--no-relative",
                "--unified=3",
                "--inter-hunk-context=0",
                "--diff-algorithm=myers",
                "--indent-heuristic",
                "-O/dev/null",
                "--filename-max-length=64",
                f"--start-number={number}",
                "-o",
                out_dir,
                "-1",
                commit,
            ]
            if paths:
                args += ["--", *paths]
            self.run(*args)
            (name,) = os.listdir(out_dir)
            with open(os.path.join(out_dir, name), "rb") as f:
                data = f.read()
        return name, set_patch_number(data, number, total)

    def diff_trees(self, a: str, b: str, paths: Sequence[str] = (), *, context: int | None = None) -> bytes:
        args = ["diff-tree", "-p", "--full-index", "--binary", "--find-renames", "--no-color"]
        if context is not None:
            args.append(f"-U{context}")
        args += [a, b]
        if paths:
            args += ["--", *paths]
        return self.run(*args).stdout

    def numstat(self, a: str, b: str) -> list[tuple[str, int | None, int | None]]:
        """(path, added, deleted) per file from ``a`` to ``b``; None counts for a binary file."""
        out = self.run("diff-tree", "-r", "--numstat", "-z", "--find-renames", "--no-color", a, b).stdout.decode(
            "utf-8", "surrogateescape"
        )
        fields = out.split("\0")
        rows: list[tuple[str, int | None, int | None]] = []
        i = 0
        while i < len(fields):
            meta = fields[i]
            if not meta:
                i += 1
                continue
            added, deleted, path = meta.split("\t", 2)
            if not path:  # a rename: the old and the new name follow as their own fields
                path = fields[i + 2]
                i += 2
            rows.append((path, int(added) if added.isdigit() else None, int(deleted) if deleted.isdigit() else None))
            i += 1
        return rows

    # -- patch-id --------------------------------------------------------

    def patch_ids_of_range(self, rev_range: Sequence[str], paths: Sequence[str] = ()) -> dict[str, str]:
        """commit -> ``git patch-id --stable`` for every non-merge commit of the range.

        One streaming pass: ``git log -p`` piped into one ``git patch-id``.
        """
        args = [
            "log",
            "-p",
            "--no-merges",
            "--format=commit %H",
            "--full-index",
            "--no-color",
            "--no-renames",
            *rev_range,
        ]
        if paths:
            args += ["--", *paths]
        log = self.popen(*args)
        pid = self.popen("patch-id", "--stable", stdin=log.stdout)
        assert log.stdout is not None
        log.stdout.close()  # so that log gets SIGPIPE if patch-id exits
        out, _ = pid.communicate()
        log.wait()
        result = {}
        for line in out.decode().splitlines():
            patch_id, commit = line.split()
            result[commit] = patch_id
        return result

    def patch_id_of_diff(self, diff: bytes) -> str | None:
        out = self.out("patch-id", "--stable", input=diff)
        return out.split()[0] if out else None

    # -- updating refs ----------------------------------------------------

    def update_refs(self, updates: Sequence[tuple[str, str | None, str | None]], message: str) -> None:
        """Write refs in one ``update-ref --stdin`` transaction, compare-and-swap.

        Each update is (ref, new sha or None to delete, expected old sha or
        None for "must not exist"). Either every ref moves or none does.
        """
        if not updates:
            return
        lines = ["start"]
        for ref, new, old in updates:
            old_v = old or ZERO
            if new is None:
                lines.append(f"delete {ref} {old_v}")
            else:
                lines.append(f"update {ref} {new} {old_v}")
        lines += ["prepare", "commit", ""]
        proc = self.run("update-ref", "--stdin", "-m", message, input="\n".join(lines).encode(), check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise UserError(f"refs were not updated (nothing written): {err}")

    # -- worktrees (for tests) ---------------------------------------------

    def add_worktree(self, path: str, commit: str) -> None:
        """A detached worktree of ``commit`` at ``path``; no hook of the user's runs."""
        self.run("-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--force", "--quiet", path, commit)

    def remove_worktree(self, path: str) -> None:
        self.run("worktree", "remove", "--force", "--force", path, check=False)

    def prune_worktrees(self) -> None:
        self.run("worktree", "prune", check=False)

    # -- the user's state (read only) ----------------------------------------

    def in_progress_operation(self) -> str | None:
        for name, what in (
            ("rebase-merge", "rebase"),
            ("rebase-apply", "rebase/am"),
            ("MERGE_HEAD", "merge"),
            ("CHERRY_PICK_HEAD", "cherry-pick"),
        ):
            if os.path.exists(os.path.join(self.git_dir, name)):
                return what
        return None

    def checked_out_branches(self) -> dict[str, str]:
        """Branch ref → the worktree that has it checked out (or is rebasing it):
        the branches ``git branch -f`` refuses to move. A bare repository's HEAD is none."""
        out = self.run("worktree", "list", "--porcelain", "-z").stdout.decode("utf-8", "surrogateescape")
        found: dict[str, str] = {}
        for record in out.split("\0\0"):
            fields = dict(f.partition(" ")[::2] for f in record.split("\0") if f)
            if "worktree" in fields and "branch" in fields and "bare" not in fields:
                found.setdefault(fields["branch"], fields["worktree"])
        admin = [(self.common_dir, self.worktree or self.common_dir)]
        worktrees = os.path.join(self.common_dir, "worktrees")
        for name in sorted(os.listdir(worktrees)) if os.path.isdir(worktrees) else []:
            with contextlib.suppress(OSError), open(os.path.join(worktrees, name, "gitdir"), encoding="utf-8") as f:
                admin.append((os.path.join(worktrees, name), os.path.dirname(f.read().strip())))
        for git_dir, where in admin:
            for state in ("rebase-merge", "rebase-apply"):
                with (
                    contextlib.suppress(OSError),
                    open(os.path.join(git_dir, state, "head-name"), encoding="utf-8") as f,
                ):
                    ref = f.read().strip()
                    if ref.startswith("refs/heads/"):
                        found.setdefault(ref, os.fspath(where))
        return found

    # -- remotes ----------------------------------------------------------

    def push(
        self, remote: str, refspecs: Sequence[str], leases: Sequence[str], *, atomic: bool = False
    ) -> subprocess.CompletedProcess[bytes]:
        args = ["push", "--porcelain", "--no-verify"] + (["--atomic"] if atomic else [])
        args += [f"--force-with-lease={lease}" for lease in leases]
        return self.run(*args, remote, *refspecs, check=False)

    def ls_remote(self, remote: str, refs: Sequence[str] = ()) -> dict[str, str]:
        out = self.out("ls-remote", remote, *refs)
        return {name: sha for sha, name in (line.split("\t", 1) for line in out.splitlines() if line)}

    def add_remote(self, name: str, url: str) -> None:
        self.run("remote", "add", name, url)

    def fetch(self, remote: str) -> None:
        self.run("fetch", "--prune", remote)

    def blame_porcelain(self, commit: str, path: str, ranges: Sequence[tuple[int, int]] = ()) -> str:
        args = ["blame", "--porcelain"]
        for start, end in ranges:
            args += ["-L", f"{start},{end}"]
        args += [commit, "--", path]
        return self.out(*args)

    # -- batch reads for ``check`` (one process for many objects) -----------------

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

    def commit_infos(self, revs: Sequence[str]) -> list[CommitInfo]:
        """``commit_info`` of many revisions in one process; UserError naming an unknown one."""
        objs = self.cat_file_batch([f"{r}^{{commit}}" for r in revs])
        infos = []
        for rev, obj in zip(revs, objs):
            if obj is None or obj[1] != "commit":
                raise UserError(f"unknown commit {rev!r} in {self.worktree or self.git_dir}")
            infos.append(_parse_commit(obj[0], obj[2].decode("utf-8", "surrogateescape")))
        return infos

    def diffs_of_commits(self, pairs: Sequence[tuple[str, str]]) -> dict[str, bytes]:
        """commit -> its diff against the given parent (``--full-index --binary``,
        renames found), for many (commit, parent) pairs in one ``diff-tree --stdin``."""
        if not pairs:
            return {}
        args = [
            "diff-tree",
            "--stdin",
            "-p",
            "--full-index",
            "--binary",
            "--find-renames",
            "--no-color",
            "--format=commit %H",
        ]
        raw = self.run(*args, input="".join(f"{c} {p}\n" for c, p in pairs).encode()).stdout
        out: dict[str, bytes] = {c: b"" for c, _ in pairs}
        for chunk in re.split(rb"^commit (?=[0-9a-f]{40}\n)", raw, flags=re.M):
            if chunk:
                sha, _, diff = chunk.partition(b"\n")
                out[sha.decode()] = diff.lstrip(b"\n")
        return out

    def patch_ids_of_commits(self, pairs: Sequence[tuple[str, str | None]]) -> dict[str, str]:
        """commit -> ``git patch-id --stable`` of its diff against the given parent
        (None: its own parent): one ``diff-tree --stdin`` streamed into one
        ``patch-id``. Empty changes have none."""
        if not pairs:
            return {}
        args = [
            "diff-tree",
            "--stdin",
            "-p",
            "--full-index",
            "--binary",
            "--find-renames",
            "--no-color",
            "--format=commit %H",
        ]
        with tempfile.TemporaryFile() as feed:
            feed.write("".join(f"{c} {p}\n" if p else f"{c}\n" for c, p in pairs).encode())
            feed.seek(0)
            diff = self.popen(*args, stdin=feed)
            pid = self.popen("patch-id", "--stable", stdin=diff.stdout)
            assert diff.stdout is not None
            diff.stdout.close()
            out, _ = pid.communicate()
            diff.wait()
        result = {}
        for line in out.decode().splitlines():
            patch_id, commit = line.split()
            result[commit] = patch_id
        return result

    def log_raw(
        self, tips: Sequence[str], exclude: Sequence[str], paths: Sequence[str]
    ) -> list[tuple[str, list[tuple[str, str, str]]]]:
        """(commit, [(path, old blob, new blob), ...every file it changes]) for
        every non-merge commit reachable from ``tips`` but not ``exclude`` that
        touches ``paths``, newest first: one ``git log --raw`` (no diffs).
        A missing side is the zero id."""
        feed = "".join(t + "\n" for t in tips) + "".join("^" + e + "\n" for e in exclude)
        feed += "--\n" + "".join(p + "\n" for p in paths)
        args = [
            "log",
            "--raw",
            "-z",
            "--no-merges",
            "--full-history",
            "--full-diff",
            "--no-abbrev",
            "--no-renames",
            "--format=%x01%H",
            "--stdin",
        ]
        raw = self.run(*args, input=feed.encode("utf-8", "surrogateescape")).stdout.decode("utf-8", "surrogateescape")
        out = []
        for chunk in raw.split("\x01")[1:]:
            fields = chunk.split("\0")
            sha = fields[0].strip()
            files = []
            for i in range(1, len(fields) - 1, 2):
                meta = fields[i].strip()
                if meta.startswith(":"):
                    parts = meta.split()
                    files.append((fields[i + 1], parts[2], parts[3]))
            out.append((sha, files))
        return out

    def not_reachable(self, shas: Sequence[str], tip: str) -> set[str]:
        """Which of ``shas`` are not ancestors of ``tip`` (one rev-list for all)."""
        if not shas:
            return set()
        present = {s for s, ok in self.has_objects(shas).items() if ok}
        feed = "".join(s + "\n" for s in present) + f"^{tip}\n"
        reach = set(self.out("rev-list", "--stdin", input=feed.encode()).split()) if present else set()
        return {s for s in shas if s not in present or s in reach}

    def messages_matching(self, tips: Sequence[str], exclude: Sequence[str], pattern: str) -> list[tuple[str, str]]:
        """(commit, message) of the commits of the range whose message matches
        the extended regex ``pattern`` (git log's --grep, so one process)."""
        feed = "".join(t + "\n" for t in tips) + "".join("^" + e + "\n" for e in exclude)
        raw = self.run("log", "--stdin", "-E", f"--grep={pattern}", "--format=%H%x00%B%x00", input=feed.encode()).stdout
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        return [(fields[i].strip(), fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def range_messages(self, tips: Sequence[str], exclude: Sequence[str]) -> list[tuple[str, str, str]]:
        """(commit, author email, message) of every commit of the range, newest first, in one ``git log``."""
        feed = "".join(t + "\n" for t in tips) + "".join("^" + e + "\n" for e in exclude)
        raw = self.run("log", "--stdin", "--format=%H%x00%ae%x00%B%x00", input=feed.encode()).stdout
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        return [(fields[i].strip(), fields[i + 1], fields[i + 2]) for i in range(0, len(fields) - 2, 3)]

    def blame_lines(
        self, commit: str, path: str, ranges: Sequence[tuple[int, int]], since: str | None = None
    ) -> dict[int, tuple[str, bool]]:
        """final line number -> (commit that brought the line, is-boundary) for
        the 1-based inclusive ``ranges`` of ``path`` at ``commit``; lines older
        than ``since`` are boundary lines (``git blame since..commit``)."""
        args = ["blame", "--porcelain"]
        for start, end in ranges:
            args += ["-L", f"{start},{end}"]
        args += [f"{since}..{commit}" if since else commit, "--", path]
        out = self.out(*args)
        lines: dict[int, tuple[str, bool]] = {}
        boundary: set[str] = set()
        current: list[tuple[str, int]] = []
        for line in out.splitlines():
            m = re.match(r"^([0-9a-f]{40}) \d+ (\d+)(?: (\d+))?$", line)
            if m:
                current.append((m.group(1), int(m.group(2))))
            elif line == "boundary" and current:
                boundary.add(current[-1][0])
        for sha, final in current:
            lines[final] = (sha, sha in boundary)
        return lines

    def reverse_apply_to_tree(self, tree: str, patch: bytes) -> str | None:
        """``tree`` with ``patch`` reverse-applied (``git apply -R``), or None if it does not apply."""
        with self.temp_index(tree) as env:
            proc = self.run(
                "apply", "--cached", "--reverse", "--whitespace=nowarn", "-", input=patch, env=env, check=False
            )
            if proc.returncode != 0:
                return None
            return self.out("write-tree", env=env)

    def hash_commits(self, commits: Sequence[tuple[str, Sequence[str], str]]) -> list[str]:
        """Scratch commits (tree, parents, message) with ggstack's fixed identity,
        written in one ``hash-object --stdin-paths`` call."""
        ident = f"{_SCRATCH_IDENT['GIT_AUTHOR_NAME']} <{_SCRATCH_IDENT['GIT_AUTHOR_EMAIL']}> {_SCRATCH_IDENT['GIT_AUTHOR_DATE']}"
        bodies = []
        for tree, parents, message in commits:
            head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
            bodies.append((head + f"author {ident}\ncommitter {ident}\n\n{message}").encode("utf-8", "surrogateescape"))
        return self._hash_objects("commit", bodies)

    # -- replay: commits without a process each, refs in one read ------------------

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

    def ref_values(self, refs: Sequence[str]) -> dict[str, str]:
        """refname -> sha for those of the full ``refs`` that exist: one for-each-ref."""
        if not refs:
            return {}
        wanted = set(refs)
        out = self.out("for-each-ref", "--format=%(objectname) %(refname)", *refs)
        found = (line.split(" ", 1) for line in out.splitlines() if line)
        return {name: sha for sha, name in found if name in wanted}

    def tree_changes(self, pairs: Sequence[tuple[str, str]]) -> list[list[TreeChange]]:
        """The file-level changes (no rename detection) of each (commit,
        parent): one ``diff-tree --stdin -r --raw``."""
        if not pairs:
            return []
        raw = self.run(
            "diff-tree",
            "--stdin",
            "-r",
            "--raw",
            "-z",
            "--no-renames",
            "--always",
            input="".join(f"{c} {p}\n" for c, p in pairs).encode(),
        ).stdout
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        out: list[list[TreeChange]] = []
        i = 0
        while i < len(fields):
            field_ = fields[i]
            if field_.startswith(":") and out:
                old_mode, new_mode, old_sha, new_sha, status = field_[1:].split(" ")
                out[-1].append(TreeChange(fields[i + 1], old_mode, old_sha, new_mode, new_sha, status[:1]))
                i += 2
                continue
            if re.fullmatch(r"[0-9a-f]{40}", field_):
                out.append([])
            i += 1
        if len(out) != len(pairs):
            raise GitFailed(("diff-tree", "--stdin"), 0, f"expected {len(pairs)} commits, read {len(out)}")
        return out

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

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """A tree object of name -> (mode, sha), in git's order; queued (see ``queue_object``)."""

        def order(name: str) -> bytes:
            return name.encode("utf-8", "surrogateescape") + (b"/" if entries[name][0] == "40000" else b"")

        body = b"".join(
            entries[n][0].encode() + b" " + n.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(entries[n][1])
            for n in sorted(entries, key=order)
        )
        return self.queue_object("tree", body)

    def source_diffs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, bytes]]:
        """(tree of the commit, its diff from the given parent) for each
        (commit, parent), as ``format_patch`` writes the diff: one ``diff-tree --stdin``."""
        if not pairs:
            return []
        args = [  # the diff settings ``format_patch`` pins, so equal bytes mean an equal change
            "-c",
            "core.quotePath=false",
            "-c",
            "diff.noprefix=false",
            "-c",
            "diff.mnemonicPrefix=false",
            "-c",
            "diff.suppressBlankEmpty=false",
            "diff-tree",
            "--stdin",
            "--always",
            "-p",
            "--full-index",
            "--binary",
            "--find-renames",
            "--no-color",
            "--no-relative",
            "--unified=3",
            "--inter-hunk-context=0",
            "--diff-algorithm=myers",
            "--indent-heuristic",
            "-O/dev/null",
            "--format=ggstack-commit %H %T",
        ]
        raw = self.run(*args, input="".join(f"{c} {p}\n" for c, p in pairs).encode()).stdout
        chunks = re.split(rb"^ggstack-commit [0-9a-f]{40} (?=[0-9a-f]{40}\n)", raw, flags=re.M)[1:]
        out = []
        for chunk in chunks:
            tree, _, diff = chunk.partition(b"\n")
            out.append((tree.decode(), diff.lstrip(b"\n")))
        if len(out) != len(pairs):
            raise GitFailed(("diff-tree", "--stdin"), 0, f"expected {len(pairs)} diffs, read {len(out)}")
        return out


# -- trailers (no repository needed) --------------------------------------------


def _plain_git(*args: str, input: bytes | None = None) -> str:
    env = {**os.environ, "LC_ALL": "C"}
    proc = subprocess.run(["git", *args], input=input, env=env, capture_output=True)
    if proc.returncode != 0:
        raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc.stdout.decode("utf-8", "surrogateescape")


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
        out = _plain_git(
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
    return _plain_git(*args, input=message.encode("utf-8", "surrogateescape"))


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


def _readable_messages(raw: str) -> str:
    """merge-tree -z --messages: <count NUL paths... NUL type NUL message NUL>*; keep the messages."""
    fields = raw.split("\0")
    lines = []
    i = 0
    while i < len(fields):
        try:
            count = int(fields[i])
        except ValueError:
            break
        i += 1 + count + 1  # paths, then the conflict type
        if i < len(fields):
            lines.append(fields[i].strip())
        i += 1
    return "\n".join(line for line in lines if line)


_SUBJECT_NUMBER = re.compile(rb"^Subject: \[PATCH(?: \d+/\d+)?\]", re.M)


def set_patch_number(data: bytes, number: int, total: int) -> bytes:
    """Rewrite the ``[PATCH n/m]`` of a format-patch file (and only that)."""
    label = f"[PATCH {number}/{total}]".encode()
    return _SUBJECT_NUMBER.sub(b"Subject: " + label, data, count=1)


# -- writing objects from a long-lived process (replay) ------------------------------

SCRATCH_IDENT = "ggstack <ggstack@localhost> 1700000000 +0000"


@dataclass(frozen=True)
class _Queued:
    """A queued object, read like a GitPython stream."""

    type: bytes
    body: bytes

    def read(self) -> bytes:
        return self.body


def _write_pack(git_dir: str, queued: dict[str, tuple[str, bytes]]) -> None:
    """The queued objects, written when their Repository is gone."""
    if queued:
        objects = list(queued.values())
        queued.clear()
        subprocess.run(
            ["git", "--git-dir", git_dir, "index-pack", "--stdin", "--strict"],
            input=_pack(objects),
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
