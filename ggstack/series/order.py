"""The series reordered, each patch's file name and ``[PATCH n/m]`` renumbered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ggstack import git
from ggstack.errors import UserError
from ggstack.model import Patch, Stack


def renumbered(stack: Stack, patches: Sequence[Patch]) -> Stack:
    total = len(patches)
    out = []
    for i, p in enumerate(patches, 1):
        name = f"{i:04d}-{p.slug}.patch"
        raw = git.set_patch_number(p.raw, i, total)
        out.append(replace(p, name=name, raw=raw))
    return replace(stack, patches=tuple(out))


def remove(stack: Stack, key: str) -> tuple[Stack, Patch]:
    victim = stack.find(key)
    return renumbered(stack, [p for p in stack.patches if p is not victim]), victim


def move(stack: Stack, key: str, to: int) -> Stack:
    patch = stack.find(key)
    if not 1 <= to <= len(stack.patches):
        raise UserError(f"--to must be between 1 and {len(stack.patches)}")
    rest = [p for p in stack.patches if p is not patch]
    rest.insert(to - 1, patch)
    return renumbered(stack, rest)
