"""``ggstack edit`` and ``squash``: change a stored patch's message, or make two neighbours one.

A patch file is regenerated, never patched up by hand: the patch is
materialised as the commit it is (on its recorded parent), given the new
message (or, for a squash, the two changes as one tree), and written again
by ``git format-patch`` — so the file stays what ``git am`` and quilt accept.
What must not be lost (the subject, the one ``Stack-Patch-Id`` PRs are matched
by, the provenance trailers' shapes, a squash's ``Squashed:``) is checked
before anything is written; docs/commands/edit.md and squash.md have the rules.
"""

from __future__ import annotations

import os
import re

from ggstack import git, replay, series
from ggstack.errors import UserError
from ggstack.model import Applied, Patch, Stack
from ggstack.picks import Pick, materialize, remember_materialized
from ggstack.rewrite import authored_commit, patch_file

T_SQUASHED = "Squashed"
_TRAILER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*): (.*)$")
_SHA = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})$")  # sha1 or sha256, as the repository is

EDIT_HELP = """
# Edit the message of {name}. Lines starting with '#' are left out.
# The first line is the subject. Keep the trailers at the end: its
# Stack-Patch-Id ({spid}) must stay as it is; Original-PR is owner/repo#N,
# Cherry-picked-from a full sha.
"""


def editable(patch: Patch) -> str:
    """The text the editor opens: the message, then how to edit it."""
    return patch.message.rstrip("\n") + "\n" + EDIT_HELP.format(name=patch.name, spid=patch.provenance.stack_patch_id)


def cleaned(text: str) -> str:
    """What the user wrote: comment lines out, blank lines at the ends trimmed (as ``git commit``)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n") if not line.startswith("#")]
    return "\n".join(lines).strip("\n") + "\n"


def check_message(message: str, patch: Patch, path: str) -> None:
    """The message is a patch's message: a subject, its own Stack-Patch-Id, well-formed provenance."""
    if not message.strip() or not message.split("\n", 1)[0].strip():
        raise UserError("the message has no subject (its first line is empty)", path=path)
    trailers = git.parse_trailers([message])[0]
    ids = [v for k, v in trailers if k.lower() == series.T_STACK_PATCH_ID.lower()]
    spid = patch.provenance.stack_patch_id
    if ids != [spid]:
        said = ", ".join(ids) or "none"
        raise UserError(
            f"the message must keep its one trailer {series.T_STACK_PATCH_ID}: {spid} (it has: {said})", path=path
        )
    for key, value in trailers:
        _check_provenance(key.lower(), value, path)


def _check_provenance(key: str, value: str, path: str) -> None:
    if key == series.T_ORIGINAL_PR.lower() and not series.PR_REF.match(value):
        raise UserError(f"{series.T_ORIGINAL_PR}: {value!r} is not owner/repo#N (or #N)", path=path)
    if key == series.T_CHERRY_PICKED.lower() and not _SHA.match(value):
        raise UserError(
            f"{series.T_CHERRY_PICKED}: {value!r} is not a full sha (40 hex digits, or 64 in a sha256 repository)",
            path=path,
        )


def _materialized(repo: git.Repository, stack: Stack, patch: Patch) -> Pick:
    pick = materialize(repo, stack)[stack.patches.index(patch)]
    if pick.commit is None or pick.parent is None:
        raise UserError(
            f"its recorded base {(patch.base_commit or '?')[:12]} is not in this repository: fetch it first",
            path=os.path.join(stack.path, patch.name),
        )
    return pick


def _regenerated(
    repo: git.Repository, stack: Stack, patch: Patch, tree: str, parent: str, message: str, number: int, total: int
) -> Patch:
    """The patch file git writes for ``tree`` on ``parent`` with ``message`` (author and date kept);
    the commit it is from is remembered as its materialisation (see ``remember_materialized``)."""
    commit = authored_commit(repo, patch, tree, parent, message)
    new = patch_file(repo, stack, patch, commit, parent, number, total)
    new = series.checked_provenance(new, git.parse_trailers([new.message])[0], os.path.join(stack.path, patch.name))
    remember_materialized(repo, [(new, commit)])
    return new


def edit(repo: git.Repository, stack: Stack, key: str, text: str) -> tuple[Stack, Patch]:
    """The stack with ``key``'s message replaced by ``text`` (as the editor left it); not saved."""
    patch = stack.find(key)
    path = os.path.join(stack.path, patch.name)
    message = cleaned(text)
    check_message(message, patch, path)
    if message == patch.message:
        return stack, patch
    pick = _materialized(repo, stack, patch)
    tree = repo.resolve(pick.commit or "", "tree")
    index = stack.patches.index(patch)
    new = _regenerated(repo, stack, patch, tree, pick.parent or "", message, index + 1, len(stack.patches))
    patches = list(stack.patches)
    patches[index] = new
    return series.renumbered(stack, patches), new


# -- squash ----------------------------------------------------------------------------------


def _is_trailer(line: str) -> bool:
    return bool(_TRAILER.match(line)) or line.startswith("(cherry picked from commit ")


def split_trailers(message: str) -> tuple[str, list[tuple[str, str]]]:
    """(the message without its trailer block, the trailers): the block is the run of
    ``Key: value`` (or git's ``(cherry picked from commit …)``) lines that ends the last
    paragraph — all of it, or its end after text ("Body.\nSigned-off-by: …", which git
    takes for a trailer block too, so import appended its trailers there)."""
    text = message.rstrip("\n")
    head, sep, last = text.rpartition("\n\n")
    lines = last.split("\n")
    start = len(lines)
    while start > 0 and _is_trailer(lines[start - 1]):
        start -= 1
    if not sep or start == len(lines):
        return text, []
    block, prose = lines[start:], lines[:start]
    trailers = [(m.group(1), m.group(2)) for m in map(_TRAILER.match, block) if m]
    cherry = [("Cherry-picked-from", line[27:-1]) for line in block if line.startswith("(cherry picked from commit ")]
    return ("\n\n".join([head, "\n".join(prose)]) if prose else head), trailers + cherry


def squashed_message(first: Patch, second: Patch) -> str:
    """``first``'s message with ``second``'s text after it; the provenance of both, one Stack-Patch-Id."""
    text_a, trailers_a = split_trailers(first.message)
    text_b, trailers_b = split_trailers(second.message)
    spid = series.T_STACK_PATCH_ID.lower()
    kept = [(k, v) for k, v in trailers_a if k.lower() != spid]
    for k, v in trailers_b:
        if k.lower() != spid and (k, v) not in kept:
            kept.append((k, v))
    kept.append((T_SQUASHED, f"{second.provenance.stack_patch_id} ({second.subject})"))
    kept.append((series.T_STACK_PATCH_ID, first.provenance.stack_patch_id))
    return f"{text_a}\n\n{text_b}\n\n" + "".join(f"{k}: {v}\n" for k, v in kept)


def squash(repo: git.Repository, stack: Stack, key_a: str, key_b: str) -> tuple[Stack, Patch, Patch]:
    """The stack with two neighbouring patches as one (the earlier one's place, name and identity); not saved."""
    a, b = stack.find(key_a), stack.find(key_b)
    i, j = sorted((stack.patches.index(a), stack.patches.index(b)))
    if j != i + 1:
        raise UserError(f"{a.name} and {b.name} are not neighbours: squash two consecutive patches (move one first)")
    first, second = stack.patches[i], stack.patches[j]
    pick_a = _materialized(repo, stack, first)
    pick_b = _materialized(repo, stack, second)
    replayer = replay.Replayer(repo, pick_a.commit or "")
    try:
        step = replayer.try_pick(pick_b)
    finally:
        replayer.close()
    if step.applied is Applied.CONFLICT:
        paths = ", ".join(step.conflict.paths) if step.conflict else "?"
        raise UserError(
            f"{second.name} does not apply on {first.name} alone (conflicts in {paths}): nothing was written"
        )
    message = squashed_message(first, second)
    new = _regenerated(repo, stack, first, step.tree, pick_a.parent or "", message, i + 1, len(stack.patches) - 1)
    patches = [*stack.patches[:i], new, *stack.patches[j + 1 :]]
    after = series.renumbered(stack, patches)
    return after, after.patches[i], second
