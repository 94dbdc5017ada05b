"""Naming objects and moving refs: only through ``update_refs``, one compare-and-swap transaction."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from ggstack.errors import UserError
from ggstack.git.runner import Runner


class Refs(Runner):
    def resolve(self, ref: str, what: str = "commit") -> str:
        sha = self.try_resolve(ref, what)
        if sha is None:
            raise UserError(f"unknown ref {ref!r}: not a {what} in {self.worktree or self.git_dir}")
        return sha

    def try_resolve(self, ref: str, what: str = "commit") -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{{what}}}", check=False)
        sha = proc.stdout.decode().strip() if proc.returncode == 0 else ""
        # "^X" passes --verify and prints "^<sha>": a negated range end, not one object.
        return sha if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) else None

    def head_branch(self) -> str | None:
        proc = self.run("symbolic-ref", "-q", "HEAD", check=False)
        ref = proc.stdout.decode("utf-8", "surrogateescape").strip()
        return ref.removeprefix("refs/heads/") if proc.returncode == 0 and ref.startswith("refs/heads/") else None

    def refs(self, prefix: str) -> dict[str, str]:
        out = self.out("for-each-ref", "--format=%(objectname) %(refname)", "--end-of-options", prefix)
        return {name: sha for sha, name in (line.split(" ", 1) for line in out.splitlines() if line)}

    def ref_values(self, refs: Sequence[str]) -> dict[str, str]:
        return self.start_ref_values(refs)()

    def start_ref_values(self, refs: Sequence[str]) -> Callable[[], dict[str, str]]:
        if not refs:
            return dict
        wanted = set(refs)
        job = self.start("for-each-ref", "--format=%(objectname) %(refname)", "--end-of-options", *refs)

        def wait() -> dict[str, str]:
            out = job.wait().decode("utf-8", "surrogateescape")
            found = (line.split(" ", 1) for line in out.splitlines() if line)
            return {name: sha for sha, name in found if name in wanted}

        return wait

    def update_refs(self, updates: Sequence[tuple[str, str | None, str | None]], message: str) -> None:
        """One ``update-ref --stdin`` transaction of (ref, new sha or None to delete, expected old sha or
        None for "must not exist"): every ref moves or none does."""
        if not updates:
            return
        lines = ["start"]
        for ref, new, old in updates:
            old_v = old or self.null_oid  # the null id: "must not exist"
            if new is None:
                lines.append(f"delete {ref} {old_v}")
            else:
                lines.append(f"update {ref} {new} {old_v}")
        lines += ["prepare", "commit", ""]
        # No reflog is started for a ref only ggstack writes (it is rebuilt from the patches at
        # every apply; 74 branches' logs were half of apply's ref writing); git still appends to
        # one that exists, such as the log a user's own commit on the branch started.
        proc = self.run(
            "-c",
            "core.logAllRefUpdates=false",
            "update-ref",
            "--stdin",
            "-m",
            message,
            input="\n".join(lines).encode(),
            check=False,
        )
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            if (
                "aborted by" in err and "hook" in err
            ):  # git ≥ 2.40 "… by hook"; before, "… by the reference-transaction hook"
                raise UserError(self._hook_refused([ref for ref, _, _ in updates], err))
            raise UserError(f"refs were not updated (nothing written): {err}")

    def _hook_refused(self, refs: Sequence[str], err: str) -> str:
        """A refusing ``reference-transaction`` hook, named by its path (``core.hooksPath`` too)."""
        hook = self.out("rev-parse", "--git-path", "hooks/reference-transaction").strip()
        hook = os.path.join(self.worktree or self.git_dir, hook)
        names = ", ".join(refs[:3]) + (f" and {len(refs) - 3} more" if len(refs) > 3 else "")
        said = "; ".join(dict.fromkeys(line for line in err.splitlines() if line and not line.startswith("fatal: ")))
        return (
            f"refs were not updated (nothing written): the repository's reference-transaction hook "
            f"{os.path.normpath(hook)} refused to let ggstack write {names}" + (f" — it said: {said}" if said else "")
        )
