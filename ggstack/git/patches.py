"""Patch files as git writes them (``format-patch``) and their identity (``patch-id``); every
setting that changes the output is pinned, so a stored patch regenerates to the same bytes."""

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
    def format_patches(
        self, commits: Sequence[tuple[str, str]], paths: Sequence[str] = ()
    ) -> dict[str, tuple[str, bytes]]:
        """commit -> (file name, contents), each ending with its parent's ``base-commit:``, in one call;
        pinned settings keep the bytes the same on every machine. ``paths`` limit every diff."""
        if not commits:
            return {}
        parents = dict(commits)
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as out_dir:
            for n, shas in enumerate(_format_patch_calls(parents)):
                # "C^!" is C alone (one sha alone would be format-patch's "since C").
                chunk_dir = os.path.join(out_dir, str(n))  # each call numbers its files from 0001
                args = [*_FORMAT_PATCH_ARGS, "-o", chunk_dir, "--end-of-options"]
                args += [c + "^!" for c in shas]
                if paths:
                    args += ["--", *paths]
                self.run(*args, env={"GIT_LITERAL_PATHSPECS": "1"})
            out = _written_patches(out_dir, parents)
        if len(out) != len(parents):
            raise GitFailed(("format-patch",), 0, f"asked for {len(parents)} patches, got {len(out)}")
        return out

    def format_patch(
        self, commit: str, base: str, paths: Sequence[str] = (), number: int = 1, total: int = 1
    ) -> tuple[str, bytes]:
        name, data = self.format_patches([(commit, base)], paths)[commit]
        return name, set_patch_number(data, number, total)

    def mails(self, path: str) -> list[bytes]:
        """The messages of an mbox file, by ``git mailsplit`` (which knows ``>From`` quoting)."""
        with tempfile.TemporaryDirectory(dir=self._scratch_dir()) as out_dir:
            self.run("mailsplit", f"-o{out_dir}", "--", os.path.abspath(path))
            mails = []
            for name in sorted(os.listdir(out_dir)):
                with open(os.path.join(out_dir, name), "rb") as f:
                    mails.append(f.read())
        return mails

    def mailinfo(self, mail: bytes) -> tuple[dict[str, str], str, bytes]:
        """What ``git am`` reads from one message (``mailinfo -b``): headers, body and patch."""
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
        """commit -> ``patch-id --stable`` of its diff against the given parent, one ``diff-tree
        --stdin`` into one ``patch-id``; empty changes have none."""
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
        """``patch-id --stable`` of diffs that are no commit's, in order; "" for no change."""
        width = len(getattr(self, "null_oid", "0" * 40))
        ids = self.patch_ids_of_diffs({f"{k + 1:0{width}x}": t for k, t in enumerate(texts)})
        return [ids.get(f"{k + 1:0{width}x}", "") for k in range(len(texts))]

    def patch_ids_of_diffs(self, diffs: Mapping[str, bytes]) -> dict[str, str]:
        """commit -> patch-id of a diff already read by ``diffs_of_commits``: no second ``diff-tree``."""
        if not diffs:
            return {}
        feed = b"".join(b"commit " + c.encode() + b"\n" + d for c, d in diffs.items())
        return _read_patch_ids(self.run("patch-id", "--stable", input=feed).stdout)


def _read_patch_ids(out: bytes) -> dict[str, str]:
    return {commit: patch_id for patch_id, commit in (line.split() for line in out.decode().splitlines())}


_SUBJECT_NUMBER = re.compile(rb"^Subject: \[PATCH(?: \d+/\d+)?\]", re.M)


def set_patch_number(data: bytes, number: int, total: int) -> bytes:
    """Rewrite only the ``[PATCH n/m]`` of a format-patch file; the same bytes where it already is."""
    label = b"Subject: " + f"[PATCH {number}/{total}]".encode()
    m = _SUBJECT_NUMBER.search(data)
    if m is None or m.group(0) == label:
        return data
    return b"".join((memoryview(data)[: m.start()], label, memoryview(data)[m.end() :]))


def _format_patch_calls(parents: dict[str, str]) -> list[list[str]]:
    return [
        group[chunk : chunk + 2000]  # format-patch reads no --stdin: bounded command lines
        for group in _unchained(parents)
        for chunk in range(0, len(group), 2000)
    ]


def _written_patches(out_dir: str, parents: dict[str, str]) -> dict[str, tuple[str, bytes]]:
    out: dict[str, tuple[str, bytes]] = {}
    written = [(d, n) for d in os.listdir(out_dir) for n in os.listdir(os.path.join(out_dir, d))]
    for chunk_name, name in written:
        with open(os.path.join(out_dir, chunk_name, name), "rb") as f:
            data = f.read()
        m = re.match(rb"From ([0-9a-f]{40}|[0-9a-f]{64}) ", data)
        sha = m.group(1).decode() if m else ""
        if sha not in parents:
            raise GitFailed(("format-patch",), 0, f"wrote {name}, of no commit asked for")
        out[sha] = (name, data + f"\nbase-commit: {parents[sha]}\n".encode())
    return out


def _unchained(parents: dict[str, str]) -> list[list[str]]:
    # Groups where none is another's parent: B^! after A^!, A being B's parent, would take A out again.
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
