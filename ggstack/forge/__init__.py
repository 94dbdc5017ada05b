"""The forge: where the stack's pull requests live, as ggstack needs it.

``pr`` plans and acts through these few calls, so a forge other than GitHub
(or none at all: ``none.NoForge``, for planning offline) is one class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ggstack.secrets import TOKEN_VARS as TOKEN_VARS  # re-exported

Forge = Any  # the protocol comes next; until then, what GitHub and NoForge both answer


@dataclass
class RemotePR:
    """An open PR as the forge has it (facts the forge owns: read each run)."""

    number: int
    url: str
    draft: bool
    title: str
    body: str
    head_owner: str
    head_ref: str
    base_ref: str
    labels: list[str]
    marker: str | None  # the Stack-Patch-Id in its body, if any
    state: str = "open"
    merged: bool = False
    approved_by: list[str] = field(default_factory=list)
    handle: Any = field(default=None, repr=False)  # the PyGithub PullRequest
