"""The fork's remote: push with leases, list, fetch. ``stack.toml`` (a PR can edit it) names it and git reads ``-x``
as an option, so a remote is used only when configured or a URL, and after ``--end-of-options``."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence

from ggstack.errors import UserError
from ggstack.git.runner import Runner

# scheme://…, or scp-like [user@]host:path (no slash before the colon).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$|^[^/:\s-][^/:\s]*:\S*$")


class Remotes(Runner):
    def remote_names(self) -> list[str]:
        import git as gitpython  # only commands that push or fetch pay for importing it

        return [r.name for r in gitpython.Repo(self.git_dir).remotes]

    def checked_remote(self, remote: str) -> str:
        """``remote`` when it is a configured remote or a URL; else a UserError naming it."""
        if not remote.startswith("-") and (remote in self.remote_names() or _URL.match(remote)):
            return remote
        names = ", ".join(self.remote_names()) or "none"
        raise UserError(
            f"remote {remote!r} is neither a configured git remote (here: {names}) nor a URL "
            "(target.remote in stack.toml)"
        )

    def push(
        self, remote: str, refspecs: Sequence[str], leases: Sequence[str], *, atomic: bool = False
    ) -> subprocess.CompletedProcess[bytes]:
        args = ["push", "--porcelain", "--no-verify"] + (["--atomic"] if atomic else [])
        args += [f"--force-with-lease={lease}" for lease in leases]
        return self.run(*args, "--end-of-options", self.checked_remote(remote), *refspecs, check=False)

    def ls_remote(self, remote: str, refs: Sequence[str] = ()) -> dict[str, str]:
        out = self.out("ls-remote", "--end-of-options", self.checked_remote(remote), *refs)
        return {name: sha for sha, name in (line.split("\t", 1) for line in out.splitlines() if line)}

    def add_remote(self, name: str, url: str) -> None:
        self.run("remote", "add", "--end-of-options", name, url)

    def fetch_objects(self, remote: str, refs: Sequence[str]) -> bool:
        """Fetch the commits of ``refs`` writing no ref (not even FETCH_HEAD); False when refused."""
        args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules"]
        proc = self.run(*args, "--end-of-options", self.checked_remote(remote), *refs, check=False)
        return proc.returncode == 0

    def credential_settings(self) -> list[tuple[str, str]]:
        """(where, key) of each setting git would read here that hands out a credential."""
        from ggstack.secrets import credential_setting

        out = self.run("config", "--list", "--show-origin", "--includes", "-z", check=False).stdout
        items = out.decode("utf-8", "surrogateescape").split("\0")
        found = []
        for origin, entry in zip(items[0::2], items[1::2]):
            key, _, value = entry.partition("\n")
            if credential_setting(key, value):
                found.append((origin, key))
        return found

    def fetch(self, remote: str) -> None:
        self.run("fetch", "--prune", "--end-of-options", self.checked_remote(remote))
