"""The one place that runs git.

Everything above this package asks questions in ggstack's own words
(``resolve``, ``merge_trees``, ``format_patches``) through one
``Repository``; nothing else builds a git command line. It leans on git's
plumbing rather than re-implementing it: ``merge-tree --write-tree`` is the
same merge-ort that ``git rebase`` uses, so replayed trees are
byte-identical to git's; ``interpret-trailers``, ``format-patch``,
``patch-id`` and ``apply`` are used as git ships them.

Nothing here touches the user's working tree, index, HEAD or branches:
indexes are temporary files (``GIT_INDEX_FILE``), objects are written to the
object database (harmless, unreachable until a ref names them), and refs are
only ever written by ``update_refs`` in one compare-and-swap transaction.

Where things are: ``runner`` (starting git, its environment), ``objects``
(reading and writing objects, ident lines), ``fastimport`` (a chain of
commits in one process), ``refs``, ``history``,
``diffs`` (diffs, merges, ``git apply``), ``patches`` (``format-patch``,
``patch-id``), ``worktrees``, ``remotes``, ``trailers``, ``repository``.
"""

from ggstack.git.diffs import ApplyFailure, MergeResult, TreeChange, apply_failures
from ggstack.git.fastimport import ChainCommit, importable
from ggstack.git.objects import SCRATCH_IDENT, CommitInfo
from ggstack.git.patches import set_patch_number
from ggstack.git.repository import Repository, toplevel
from ggstack.git.runner import GitFailed
from ggstack.git.trailers import add_trailers, add_trailers_many, parse_trailers
from ggstack.git.worktrees import Worktree

__all__ = [
    "SCRATCH_IDENT",
    "ApplyFailure",
    "ChainCommit",
    "CommitInfo",
    "GitFailed",
    "MergeResult",
    "Repository",
    "TreeChange",
    "Worktree",
    "add_trailers",
    "add_trailers_many",
    "apply_failures",
    "importable",
    "parse_trailers",
    "set_patch_number",
    "toplevel",
]
