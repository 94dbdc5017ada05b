"""The hidden last line by which a rerun finds the PR it opened and the closing comment it wrote.
Only the last line counts: the text above it, from commit messages, is escaped and cannot forge one."""

from __future__ import annotations

import re

MARKER_PREFIX = "<!-- ggstack:stack-patch-id="
CLOSED_PREFIX = "<!-- ggstack:closed stack-patch-id="

_MARKER_LINE = re.compile(re.escape(MARKER_PREFIX) + r"(\S+) -->")
_CLOSED_LINE = re.compile(re.escape(CLOSED_PREFIX) + r"(\S+) base=\S* -->")


def pr_marker(stack_patch_id: str) -> str:
    return f"{MARKER_PREFIX}{stack_patch_id} -->"


def closed_marker(stack_patch_id: str, base: str) -> str:
    return f"{CLOSED_PREFIX}{stack_patch_id} base={base} -->"


def last_line(text: str) -> str:
    """The line a marker must be (``same_last_line`` compares comments by it too)."""
    lines = text.replace("\r\n", "\n").rstrip().rsplit("\n", 1)
    return lines[-1].strip()


def read_marker(body: str) -> str | None:
    found = _MARKER_LINE.fullmatch(last_line(body))
    return found.group(1) if found else None


def is_closing_comment(body: str, stack_patch_id: str) -> bool:
    found = _CLOSED_LINE.fullmatch(last_line(body))
    return found is not None and found.group(1) == stack_patch_id
