"""The one place that runs git.

Everything above this package asks questions in ggstack's own words
(``resolve``, ``merge_trees``, ``format_patches``) through one ``Repository``;
nothing else builds a git command line. It leans on git's plumbing rather than
re-implementing it (``merge-tree --write-tree`` is rebase's merge-ort, so
replayed trees are git's), and never touches the user's working tree, index,
HEAD or branches: indexes are temporary files, new objects are unreachable
until a ref names them, and refs change only in ``update_refs``' one
compare-and-swap transaction. ARCHITECTURE.md maps the modules.
"""

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
