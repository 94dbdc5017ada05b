"""A forge on which nothing exists: ``ggstack demo`` and a ``--dry-run`` without a token plan against it.
It refuses every write, so it can never stand in for a real forge by mistake."""

from __future__ import annotations

from collections.abc import Sequence

from ggstack.errors import UserError
from ggstack.forge import Comment, CommitFacts, MergeAnswer, MergeFacts, NativeStack, RemotePR


class NoForge:
    offline = True
    writes = 0

    def close(self) -> None:
        pass

    def open_pulls(self) -> list[RemotePR]:
        return []

    def closed_pull(self, head_owner: str, head_ref: str) -> RemotePR | None:
        return None

    def approvals(self, pull: RemotePR) -> list[str]:
        return []

    def comments(self, pull: RemotePR) -> list[Comment]:
        return []

    def commit_facts(self, slug: str, sha: str) -> CommitFacts | None:
        return None

    def has_branch(self, slug: str, branch: str) -> bool:
        return True  # nothing is known, so nothing is refused before a real run

    def has_repository(self, slug: str) -> bool:
        return True

    def branch_sha(self, branch: str) -> str | None:
        return None

    def merge_facts(self, pull: RemotePR) -> MergeFacts:
        raise self._refuse()  # it has no PR to read

    def required_checks(self, branch: str) -> list[str]:
        return []

    def permission(self, login: str) -> str:
        return "none"

    def merge_methods(self) -> tuple[str, ...]:
        return ("merge", "squash", "rebase")

    def native_stacks(self) -> list[NativeStack] | None:
        return None

    def merge_result(self, pull: RemotePR, uuid: str) -> MergeAnswer:
        raise self._refuse()

    def _refuse(self) -> UserError:
        return UserError("planned offline (no forge): nothing can be written; set GITHUB_TOKEN to open PRs")

    def create_pull(
        self, *, title: str, body: str, base: str, head_owner: str, head_ref: str, head: str, draft: bool
    ) -> RemotePR:
        raise self._refuse()

    def edit_pull(self, pull: RemotePR, **fields: str) -> None:
        raise self._refuse()

    def add_labels(self, pull: RemotePR, labels: Sequence[str]) -> None:
        raise self._refuse()

    def remove_label(self, pull: RemotePR, label: str) -> None:
        raise self._refuse()

    def mark_ready(self, pull: RemotePR) -> None:
        raise self._refuse()

    def comment(self, pull: RemotePR, body: str) -> None:
        raise self._refuse()

    def merge(self, pull: RemotePR, *, method: str, sha: str) -> MergeAnswer:
        raise self._refuse()

    def merge_async(self, pull: RemotePR, *, method: str, sha: str) -> MergeAnswer:
        raise self._refuse()

    def create_stack(self, numbers: Sequence[int]) -> NativeStack:
        raise self._refuse()

    def add_to_stack(self, stack: int, numbers: Sequence[int]) -> NativeStack:
        raise self._refuse()

    def unstack(self, stack: int) -> None:
        raise self._refuse()
