"""Talking to the fork's remote: push with leases, list and fetch refs."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from ggstack.git.runner import Runner


class Remotes(Runner):
    """Pushes and fetches, each one git process."""

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
