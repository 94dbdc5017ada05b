"""The one place that runs git, through one ``Repository``: plumbing rather than re-implementation,
and never the user's working tree, index, HEAD or branches (ARCHITECTURE.md maps the modules)."""

from ggstack.git.diffs import ApplyFailure, MergeResult, TreeChange, apply_failures
from ggstack.git.fastimport import ChainCommit, TreeCommit, importable
from ggstack.git.objects import SCRATCH_IDENT, CommitInfo
from ggstack.git.patches import set_patch_number
from ggstack.git.repository import Repository
from ggstack.git.runner import GitFailed
from ggstack.git.trailers import add_trailers, add_trailers_many, parse_trailers
from ggstack.git.worktrees import Worktree, config_file_entries, render_config

__all__ = [
    "SCRATCH_IDENT",
    "ApplyFailure",
    "ChainCommit",
    "CommitInfo",
    "GitFailed",
    "MergeResult",
    "Repository",
    "TreeChange",
    "TreeCommit",
    "Worktree",
    "add_trailers",
    "add_trailers_many",
    "apply_failures",
    "config_file_entries",
    "importable",
    "parse_trailers",
    "render_config",
    "set_patch_number",
]
