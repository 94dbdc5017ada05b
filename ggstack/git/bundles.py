"""Commits carried from the job that runs patch code to the job that holds the token, as a git
bundle written here (``bundle create`` takes only refs) and read back objects only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ggstack.git.runner import GitFailed, Runner


class Bundles(Runner):
    object_format: str

    def bundle_bytes(self, tips: Mapping[str, str], basis: Sequence[str]) -> bytes:
        """A bundle of ``tips`` (name -> commit) with what they have that ``basis`` has not."""
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
        """The bundle's objects into this repository, no ref written: name -> commit; GitFailed where
        it is no bundle or lacks a commit it stands on."""
        self.run("bundle", "verify", "-q", "--end-of-options", path)
        out = self.out("bundle", "unbundle", "--end-of-options", path)
        named: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            if not name or len(sha) != len(self.null_oid):
                raise GitFailed(("bundle", "unbundle", path), 0, f"unexpected line {line!r}")
            named[name] = sha
        return named
