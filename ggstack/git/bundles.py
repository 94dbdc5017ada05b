"""Commits carried from one CI job to another as a git bundle, and read back objects only.

The stage that runs a patch's tests holds no token, and the stage that holds
the token runs no patch code (docs/bot.md): the commits the first made
travel to the second as a file. A bundle is git's own format for that (a
header naming the commits, then a pack), so ``git bundle verify`` and ``git
fetch`` read it too; ggstack writes it itself because ``git bundle create``
takes only refs, and the commits are objects no ref names. Read back, its
objects go into the repository and no ref is written (``bundle unbundle``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ggstack.git.runner import GitFailed, Runner


class Bundles(Runner):
    """Write the commits of a Run as a bundle; read one back, objects only."""

    object_format: str

    def bundle_bytes(self, tips: Mapping[str, str], basis: Sequence[str]) -> bytes:
        """A bundle of ``tips`` (name → commit) with everything they have that ``basis``
        has not: its prerequisites are the commits of ``basis`` they stand on."""
        if not tips:
            raise ValueError("a bundle names at least one commit")
        revs = [*dict.fromkeys(tips.values()), *(f"^{b}" for b in basis)]
        out = self.out("rev-list", "--boundary", *revs, "--")
        prerequisites = sorted({line[1:] for line in out.splitlines() if line.startswith("-")})
        pack = self.run("pack-objects", "--revs", "--stdout", "-q", input="\n".join(revs).encode() + b"\n").stdout
        if self.object_format == "sha1":
            header = "# v2 git bundle\n"
        else:
            header = f"# v3 git bundle\n@object-format={self.object_format}\n"
        header += "".join(f"-{sha}\n" for sha in prerequisites)
        header += "".join(f"{sha} {name}\n" for name, sha in tips.items())
        return (header + "\n").encode() + pack

    def unbundle(self, path: str) -> dict[str, str]:
        """The objects of the bundle at ``path`` into this repository, no ref written; the
        commits it names (name → commit). A GitFailed where it is no bundle or git lacks a
        commit it stands on (its message says which)."""
        self.run("bundle", "verify", "-q", "--end-of-options", path)
        out = self.out("bundle", "unbundle", "--end-of-options", path)
        named: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            if not name or len(sha) != len(self.null_oid):
                raise GitFailed(("bundle", "unbundle", path), 0, f"unexpected line {line!r}")
            named[name] = sha
        return named
