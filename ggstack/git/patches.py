"""Patch files as git writes them (``format-patch``) and their identity (``patch-id``).

Every setting that changes ``format-patch`` output is pinned, so a stored
patch regenerated on another machine, with another user's config, is the
same bytes.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence

from ggstack.git.diffs import COMMIT_DIFFS, PINNED_DIFF_CONFIG, PINNED_DIFF_OPTIONS
from ggstack.git.runner import GitFailed, Runner

# Every option of ``git format-patch`` whose default a user's config could
# change is given, so the stored bytes depend on the commits only.
_FORMAT_PATCH_ARGS = (
    *PINNED_DIFF_CONFIG,
    "-c", "format.signOff=false",
    "-c", "format.from=false",
    "-c", "format.forceInBodyFrom=false",
    "-c", "format.encodeEmailHeaders=true",
    "-c", "i18n.logOutputEncoding=UTF-8",
    "format-patch",
    *PINNED_DIFF_OPTIONS,
    "--no-signature",
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
    "--filename-max-length=64",
)  # fmt: skip


class Patches(Runner):
    """``format-patch`` of many commits, ``patch-id`` of many, and mail as ``git am`` reads it."""

    def format_patches(
        self, commits: Sequence[tuple[str, str]], paths: Sequence[str] = ()
    ) -> dict[str, tuple[str, bytes]]:
        """``git format-patch --full-index`` of many one-parent commits, each
        against its parent, in one call: commit -> (git's file name, contents).

        ``commits`` are (commit, parent) pairs; each file ends, as
        ``--base=<parent>`` writes it, with that parent's ``base-commit:``
        line (``--base`` itself takes one base for a whole series).
        ``--no-signature`` keeps the bytes independent of the git version, and
        every ``format.*``/``diff.*`` setting that changes the output is pinned
        to git's default, so regenerating a stored patch on another machine
        (with another user's git config) changes nothing. ``paths`` limit
        every diff (literal paths, not globs).
        """
        if not commits:
            return {}
        parents = dict(commits)
        out: dict[str, tuple[str, bytes]] = {}
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as out_dir:
            calls = [
                group[chunk : chunk + 2000]  # format-patch reads no --stdin: bounded command lines
                for group in _unchained(parents)
                for chunk in range(0, len(group), 2000)
            ]
            for n, shas in enumerate(calls):
                # "C^!" is C alone (one sha alone would be format-patch's "since C").
                chunk_dir = os.path.join(out_dir, str(n))  # each call numbers its files from 0001
                args = [*_FORMAT_PATCH_ARGS, "-o", chunk_dir, "--end-of-options"]
                args += [c + "^!" for c in shas]
                if paths:
                    args += ["--", *paths]
                self.run(*args, env={"GIT_LITERAL_PATHSPECS": "1"})
            written = [(d, n) for d in os.listdir(out_dir) for n in os.listdir(os.path.join(out_dir, d))]
            for chunk_name, name in written:
                with open(os.path.join(out_dir, chunk_name, name), "rb") as f:
                    data = f.read()
                m = re.match(rb"From ([0-9a-f]{40}|[0-9a-f]{64}) ", data)
                sha = m.group(1).decode() if m else ""
                if sha not in parents:
                    raise GitFailed(("format-patch",), 0, f"wrote {name}, of no commit asked for")
                out[sha] = (name, data + f"\nbase-commit: {parents[sha]}\n".encode())
        if len(out) != len(parents):
            raise GitFailed(("format-patch",), 0, f"asked for {len(parents)} patches, got {len(out)}")
        return out

    def format_patch(
        self, commit: str, base: str, paths: Sequence[str] = (), number: int = 1, total: int = 1
    ) -> tuple[str, bytes]:
        """One commit's patch file against ``base`` (its ``base-commit:``), numbered ``number``/``total``."""
        name, data = self.format_patches([(commit, base)], paths)[commit]
        return name, set_patch_number(data, number, total)

    def mails(self, path: str) -> list[bytes]:
        """The messages of an mbox file (``git mailsplit``, which knows mbox's
        ``>From`` quoting), in order."""
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as out_dir:
            self.run("mailsplit", f"-o{out_dir}", "--", os.path.abspath(path))
            mails = []
            for name in sorted(os.listdir(out_dir)):
                with open(os.path.join(out_dir, name), "rb") as f:
                    mails.append(f.read())
        return mails

    def mailinfo(self, mail: bytes) -> tuple[dict[str, str], str, bytes]:
        """What ``git am`` reads from one message (``git mailinfo -b``: only
        the ``[PATCH …]`` prefix comes off the subject): its headers (Author,
        Email, Subject, Date), the message body, and the patch."""
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as d:
            msg, patch = os.path.join(d, "msg"), os.path.join(d, "patch")
            out = self.run("mailinfo", "-b", "-u", msg, patch, input=mail).stdout.decode("utf-8", "surrogateescape")
            with open(msg, "rb") as f:
                body = f.read().decode("utf-8", "surrogateescape")
            with open(patch, "rb") as f:
                diff = f.read()
        info = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        return info, body, diff

    def patch_ids_of_commits(self, pairs: Sequence[tuple[str, str | None]]) -> dict[str, str]:
        """commit -> ``git patch-id --stable`` of its diff against the given parent
        (None: its own parent): one ``diff-tree --stdin`` streamed into one
        ``patch-id``. Empty changes have none."""
        if not pairs:
            return {}
        with tempfile.TemporaryFile() as feed:
            feed.write("".join(f"{c} {p}\n" if p else f"{c}\n" for c, p in pairs).encode())
            feed.seek(0)
            diff = self.popen(*COMMIT_DIFFS, stdin=feed)
            assert diff.stdout is not None  # popen always pipes stdout
            pid = self.popen("patch-id", "--stable", stdin=diff.stdout)
            diff.stdout.close()  # so that diff-tree gets SIGPIPE if patch-id exits
            out, _ = pid.communicate()
            diff.wait()
        return _read_patch_ids(out)

    def patch_ids_of_texts(self, texts: Sequence[bytes]) -> list[str]:
        """``git patch-id --stable`` of diffs that are no commit's (a stored patch whose recorded
        base is not here), in order; "" for one with no change. patch-id reads a
        ``commit <id>`` line before each diff: each is given a number as its id."""
        width = len(getattr(self, "null_oid", "0" * 40))
        ids = self.patch_ids_of_diffs({f"{k + 1:0{width}x}": t for k, t in enumerate(texts)})
        return [ids.get(f"{k + 1:0{width}x}", "") for k in range(len(texts))]

    def patch_ids_of_diffs(self, diffs: Mapping[str, bytes]) -> dict[str, str]:
        """commit -> ``git patch-id --stable`` of a diff already read as ``diffs_of_commits``
        gives it (the same bytes ``patch_ids_of_commits`` streams): no second ``diff-tree``."""
        if not diffs:
            return {}
        feed = b"".join(b"commit " + c.encode() + b"\n" + d for c, d in diffs.items())
        return _read_patch_ids(self.run("patch-id", "--stable", input=feed).stdout)


def _read_patch_ids(out: bytes) -> dict[str, str]:
    """``git patch-id``'s "<patch-id> <commit>" lines as commit -> patch-id."""
    return {commit: patch_id for patch_id, commit in (line.split() for line in out.decode().splitlines())}


_SUBJECT_NUMBER = re.compile(rb"^Subject: \[PATCH(?: \d+/\d+)?\]", re.M)


def set_patch_number(data: bytes, number: int, total: int) -> bytes:
    """Rewrite the ``[PATCH n/m]`` of a format-patch file (and only that): the same bytes where
    it is already that, else one new copy (the rest joined from where it is, not sliced first)."""
    label = b"Subject: " + f"[PATCH {number}/{total}]".encode()
    m = _SUBJECT_NUMBER.search(data)
    if m is None or m.group(0) == label:
        return data
    return b"".join((memoryview(data)[: m.start()], label, memoryview(data)[m.end() :]))


def _unchained(parents: dict[str, str]) -> list[list[str]]:
    """The commits in groups where none is another's parent: in one call, ``B^!`` after ``A^!``
    with A B's parent would take A out again (``^A``). A stack's copies form such a chain where
    a copy is its commit itself (a message that carries every trailer already)."""
    groups: list[tuple[list[str], set[str], set[str]]] = []  # (members, members as a set, their parents)
    for sha, parent in parents.items():
        group = next((g for g in groups if parent not in g[1] and sha not in g[2]), None)
        if group is None:
            group = ([], set(), set())
            groups.append(group)
        group[0].append(sha)
        group[1].add(sha)
        group[2].add(parent)
    return [members for members, _, _ in groups]
