"""Patch files as git writes them (``format-patch``) and their identity (``patch-id``).

Every setting that changes ``format-patch`` output is pinned, so a stored
patch regenerated on another machine, with another user's config, is the
same bytes.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence

from ggstack.git.runner import Runner


class Patches(Runner):
    """``format-patch`` of one commit and ``patch-id`` of many."""

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
                "--end-of-options",
                commit,
            ]
            if paths:
                args += ["--", *paths]
            self.run(*args)
            (name,) = os.listdir(out_dir)
            with open(os.path.join(out_dir, name), "rb") as f:
                data = f.read()
        return name, set_patch_number(data, number, total)

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
            assert diff.stdout is not None  # popen always pipes stdout
            pid = self.popen("patch-id", "--stable", stdin=diff.stdout)
            diff.stdout.close()  # so that diff-tree gets SIGPIPE if patch-id exits
            out, _ = pid.communicate()
            diff.wait()
        result = {}
        for line in out.decode().splitlines():
            patch_id, commit = line.split()
            result[commit] = patch_id
        return result


_SUBJECT_NUMBER = re.compile(rb"^Subject: \[PATCH(?: \d+/\d+)?\]", re.M)


def set_patch_number(data: bytes, number: int, total: int) -> bytes:
    """Rewrite the ``[PATCH n/m]`` of a format-patch file (and only that)."""
    label = f"[PATCH {number}/{total}]".encode()
    return _SUBJECT_NUMBER.sub(b"Subject: " + label, data, count=1)
