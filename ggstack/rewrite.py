"""How a rewritten patch is made anew: committer = author, so the same patch on the same
parent is the same commit on every machine."""

from __future__ import annotations

import dataclasses
import os

from ggstack import git
from ggstack.model import Patch, Stack
from ggstack.picks import split_author
from ggstack.series import patchfile


def authored_commit(repo: git.Repository, patch: Patch, tree: str, parent: str, message: str) -> str:
    name, email = split_author(patch.author)
    ident = repo.ident(name, email, patch.date)
    if ident is None:  # git refuses it: commit-tree says why
        who = (name, email, patch.date)
        return repo.commit_tree(tree, [parent], message, author=who, committer=who)
    return repo.write_commit(tree, [parent], message, ident, ident)


def patch_file(
    repo: git.Repository, stack: Stack, patch: Patch, commit: str, parent: str, number: int, total: int
) -> Patch:
    """The caller settles its provenance."""
    _, data = repo.format_patch(commit, parent, number=number, total=total)
    if patch.source_commit:
        data = data.replace(commit.encode(), patch.source_commit.encode(), 1)
    return dataclasses.replace(patchfile.parse_patch(data, os.path.join(stack.path, patch.name)), name=patch.name)
