"""A forge on which nothing exists: planning offline, without a token or network."""

from __future__ import annotations

from ggstack.forge import RemotePR


class NoForge:
    """A forge on which nothing exists yet: no PRs, reviews or comments.

    It lets ``pr --dry-run`` plan without a token or network (``ggstack demo``).
    """

    writes = 0

    def close(self) -> None:
        pass

    def scrub(self, text: str) -> str:
        return text

    def open_pulls(self) -> list[RemotePR]:
        return []

    def find_open_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        return None

    def find_closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        return None

    def approvals(self, pull: RemotePR) -> list[str]:
        return []

    def commit_facts(self, slug: str, sha: str) -> None:
        return None

    def comment_bodies(self, pull: RemotePR) -> list[str]:
        return []
