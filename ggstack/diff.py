"""git's unified diff (``--full-index``), read once for everyone.

A stored patch is checked with it at load (every hunk's line counts, nothing
outside a hunk) and the judgement reads the same structure: file changes,
their hunks, and the change blocks inside the hunks (a run of removed and
added lines between context lines), which is the unit ``check`` judges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ZERO_RE = re.compile(r"^0+$")
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    """A diff that git would not apply as written; ``line`` is 0-based in the text given."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Block:
    """One run of removed/added lines inside a hunk, between context lines."""

    p0: int  # 0-based index in the pre-image of the first removed line (or the insertion point)
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    @property
    def p1(self) -> int:
        return self.p0 + len(self.removed)


@dataclass
class Hunk:
    header: str
    old_start: int
    old_lines: list[str] = field(default_factory=list)  # context and removed lines: what `git apply` looks for
    new_lines: list[str] = field(default_factory=list)  # context and added lines: what `git apply -R` looks for
    blocks: list[Block] = field(default_factory=list)

    @property
    def label(self) -> str:
        return "hunk " + self.header.split(" @@")[0] + " @@"


@dataclass
class FileChange:
    old_path: str | None  # None: added by the patch
    new_path: str | None  # None: deleted by the patch
    old_mode: str | None
    new_mode: str | None
    old_blob: str | None  # None: no pre-image (added), or not given
    new_blob: str | None
    binary: bool
    hunks: list[Hunk]

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or "?"

    @property
    def paths(self) -> list[str]:
        return [p for p in dict.fromkeys((self.old_path, self.new_path)) if p]


def parse(diff: bytes | str) -> list[FileChange]:
    """A ``git diff --full-index`` as file changes, hunks and change blocks."""
    text = diff.decode("utf-8", "surrogateescape") if isinstance(diff, bytes) else diff
    sections = re.split(r"^(?=diff --git )", text, flags=re.M)
    return [_file_change(s.split("\n")) for s in sections if s.startswith("diff --git ")]


def paths_of(change_set: list[FileChange]) -> list[str]:
    """Every path a change set touches, old and new names, in order."""
    return list(dict.fromkeys(p for fc in change_set for p in fc.paths))


def split_diff(text: str) -> tuple[str, str]:
    """Check every hunk header and line count of the diff at the start of
    ``text``; return (the diff, what follows it: base-commit, signature)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("@@"):
            i = _skip_hunk(lines, i)
        elif line.startswith("GIT binary patch"):
            i = _skip_binary(lines, i + 1)
        elif _ends_diff(line) and not (line == "" and any(s.startswith("diff --git ") for s in lines[i:])):
            return "\n".join(lines[:i]) + "\n", "\n".join(lines[i:])
        elif _outside_hunk(line):
            # A hunk line outside any hunk: its header is missing or broken,
            # or the hunk before it claims fewer lines than it has.
            raise DiffError(
                f"diff line outside any hunk ({line[:40]!r}): a hunk header is broken or its line counts are too small",
                i,
            )
        else:
            i += 1
    return "\n".join(lines) + "\n", ""


def _ends_diff(line: str) -> bool:
    return line == "" or line.startswith("base-commit: ") or line == "-- "


def _outside_hunk(line: str) -> bool:
    return line.startswith((" ", "+", "-")) and not line.startswith(("+++ ", "--- ")) and line != "-- "


def _skip_hunk(lines: list[str], i: int) -> int:
    m = HUNK_HEADER.match(lines[i])
    if not m:
        raise DiffError(f"broken hunk header {lines[i][:60]!r}", i)
    old = int(m.group(2)) if m.group(2) is not None else 1
    new = int(m.group(4)) if m.group(4) is not None else 1
    start = i
    i += 1
    while old > 0 or new > 0:
        if i >= len(lines):
            raise DiffError("hunk ends early: the file is truncated", i)
        tag = lines[i][:1]
        if tag not in (" ", "", "-", "+", "\\"):
            raise DiffError(f"hunk line count does not match its header (unexpected {lines[i][:40]!r})", i)
        old -= tag in (" ", "", "-")
        new -= tag in (" ", "", "+")
        if old < 0 or new < 0:
            # A hand-edited hunk: its lines and the counts in its header disagree, one way or the other.
            header = lines[start].split(" @@", 1)[0] + " @@"
            raise DiffError(
                f"hunk {header!r}: its lines do not add up to the counts in its header "
                "(fix the counts, or regenerate the patch)",
                i,
            )
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i


def _skip_binary(lines: list[str], i: int) -> int:
    blocks = 0
    while i < len(lines) and blocks < 2:
        blocks += lines[i] == ""
        i += 1
    return i


# -- one file's section ---------------------------------------------------------------------


def _file_change(lines: list[str]) -> FileChange:
    header = "\n".join(s for s in lines if s.startswith(("diff --git ", "rename from ", "rename to ")))
    names = paths(header)
    meta = _Meta()
    i = 1
    while i < len(lines) and not lines[i].startswith("@@"):
        meta.read(lines[i])
        i += 1
    hunks: list[Hunk] = []
    while i < len(lines):
        m = HUNK_HEADER.match(lines[i])
        if m:
            hunk, i = _hunk(lines, i, int(m.group(1)), int(m.group(2) or 1))
            hunks.append(hunk)
        else:
            i += 1
    return FileChange(
        old_path=None if meta.added else names[0],
        new_path=None if meta.deleted else names[-1],
        old_mode=None if meta.added else meta.old_mode,
        new_mode=None if meta.deleted else meta.new_mode,
        old_blob=None if meta.added or not meta.old_blob or ZERO_RE.match(meta.old_blob) else meta.old_blob,
        new_blob=None if meta.deleted or not meta.new_blob or ZERO_RE.match(meta.new_blob) else meta.new_blob,
        binary=meta.binary,
        hunks=hunks,
    )


@dataclass
class _Meta:
    added: bool = False
    deleted: bool = False
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    old_blob: str | None = None
    new_blob: str | None = None

    def read(self, line: str) -> None:
        if line.startswith("new file mode "):
            self.added, self.new_mode = True, line.split()[-1]
        elif line.startswith("deleted file mode "):
            self.deleted, self.old_mode = True, line.split()[-1]
        elif line.startswith("old mode "):
            self.old_mode = line.split()[-1]
        elif line.startswith("new mode "):
            self.new_mode = line.split()[-1]
        elif line.startswith("index "):
            parts = line.split()
            self.old_blob, _, self.new_blob = parts[1].partition("..")
            if len(parts) > 2:
                self.old_mode = self.old_mode or parts[2]
                self.new_mode = self.new_mode or parts[2]
        elif line.startswith(("GIT binary patch", "Binary files ")):
            self.binary = True


def _hunk(lines: list[str], i: int, old_start: int, old_count: int) -> tuple[Hunk, int]:
    p = old_start - 1 if old_count > 0 else old_start
    hunk = Hunk(lines[i], old_start)
    block: Block | None = None
    i += 1
    while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\") and not lines[i].startswith("@@"):
        tag, body = lines[i][:1], lines[i][1:]
        if tag == " ":
            block = None
            hunk.old_lines.append(body)
            hunk.new_lines.append(body)
            p += 1
        elif tag in "-+":
            if block is None:
                block = Block(p)
                hunk.blocks.append(block)
            if tag == "-":
                block.removed.append(body)
                hunk.old_lines.append(body)
                p += 1
            else:
                block.added.append(body)
                hunk.new_lines.append(body)
        i += 1
    return hunk, i


# -- paths, as git quotes them ----------------------------------------------------------------


def paths(diff: str) -> list[str]:
    """Every path a diff touches, old and new names, in order."""
    found: list[str] = []
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            found += _split_diff_git_line(line[len("diff --git ") :])
        elif line.startswith(("rename from ", "copy from ")) and found:
            # Exact, where "a/X b/Y" of a renamed file is ambiguous (X may hold " b/").
            found[-2] = unquote(line.split(" ", 2)[2])
        elif line.startswith(("rename to ", "copy to ")) and found:
            found[-1] = unquote(line.split(" ", 2)[2])
    return list(dict.fromkeys(p for p in found if p))


def _split_diff_git_line(rest: str) -> tuple[str, str]:
    if rest.startswith('"'):
        a, after = _read_quoted(rest)
        b = unquote(after.strip())
        return a[2:], b[2:]
    if rest.endswith('"'):
        idx = rest.index(' "')
        return rest[:idx][2:], unquote(rest[idx + 1 :])[2:]
    # Unquoted "a/X b/Y": when X == Y (no rename) the split is at the middle.
    half = (len(rest) - 1) // 2
    if rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return rest[2:half], rest[half + 3 :]
    a, _, b = rest.partition(" b/")
    return a[2:], b


def _read_quoted(s: str) -> tuple[str, str]:
    i = 1
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == '"':
            return unquote(s[: i + 1]), s[i + 1 :]
        i += 1
    return unquote(s), ""


_ESCAPES = {
    "n": b"\n",
    "t": b"\t",
    '"': b'"',
    "\\": b"\\",
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "r": b"\r",
    "v": b"\v",
}


def unquote(s: str) -> str:
    """git's C-style path quoting, undone."""
    if not (s.startswith('"') and s.endswith('"')):
        return s
    out = bytearray()
    body = s[1:-1]
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out += _ESCAPES[nxt]
                i += 2
                continue
            if nxt.isdigit():
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out += c.encode("utf-8")
        i += 1
    return out.decode("utf-8", "surrogateescape")
