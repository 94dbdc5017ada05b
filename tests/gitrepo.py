"""Building real git histories for tests, and running ggstack as a user does.

Test code may run git directly: it builds the world ggstack is pointed at
and checks what git itself says about the result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_DATE = 1_700_000_000


class GitRepo:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tick = 0

    @classmethod
    def init(cls, path: Path, *, bare: bool = False) -> GitRepo:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        args = ["git", "init", "-q", "-b", "main"] + (["--bare"] if bare else []) + [str(path)]
        subprocess.run(args, check=True)
        return cls(path)

    def git(self, *args: str, input: bytes | str | None = None, check: bool = True, env: dict | None = None) -> str:
        if isinstance(input, str):
            input = input.encode()
        proc = subprocess.run(
            ["git", "-C", str(self.path), *args], input=input, capture_output=True, env={**os.environ, **(env or {})}
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
        return proc.stdout.decode("utf-8", "surrogateescape").strip()

    def write(self, path: str, content: bytes | str, mode: int | None = None) -> None:
        full = self.path / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            os.chmod(full, mode)

    def read(self, path: str) -> str:
        return (self.path / path).read_text()

    def commit(
        self, message: str, files: dict[str, bytes | str | None] | None = None, *, author: str | None = None
    ) -> str:
        """Write ``files`` (None deletes), stage everything, commit; returns the sha.

        Dates advance one minute a commit, so histories are reproducible.
        """
        for path, content in (files or {}).items():
            if content is None:
                self.git("rm", "-q", "--", path)
            else:
                self.write(path, content)
        self.git("add", "-A")
        self._tick += 1
        date = f"{_DATE + 60 * self._tick} +0000"
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        args = ["commit", "-q", "--allow-empty", "-m", message]
        if author:
            args += ["--author", author]
        self.git(*args, env=env)
        return self.sha("HEAD")

    def sha(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", rev + "^{commit}")

    def tree(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", rev + "^{tree}")

    def refs(self) -> str:
        return self.git("for-each-ref", "--format=%(objectname) %(refname)")


def run_ggstack(
    *args: str, cwd: Path | str, env: dict | None = None, input: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m ggstack ARGS`` in ``cwd``, as a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "ggstack", *args],
        cwd=str(cwd),
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
