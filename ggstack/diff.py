"""git's unified diff (``--full-index``), read once for everyone: checked at load, and read by the
judgement as file changes, hunks and change blocks (the unit ``check`` judges)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ZERO_RE = re.compile(r"^0+$")
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    """``line`` is 0-based in the text given."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Block:
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
    """A line at a time: a big diff is held as its lines' text once."""
    text = diff.decode("utf-8", "surrogateescape") if isinstance(diff, bytes) else diff
    lines = _Lines(text, 0)
    changes = []
    while lines.more():
        if lines.line().startswith("diff --git "):
            changes.append(_file_change(lines))
        else:
            lines.next()
    return changes


def paths_of(change_set: list[FileChange]) -> list[str]:
    return list(dict.fromkeys(p for fc in change_set for p in fc.paths))


def diff_end(text: str, start: int = 0) -> int:
    """Where what follows the diff (base-commit, signature) starts, -1 where nothing does. In place:
    a 50 MB diff is not split into a million strings read once."""
    lines = _Lines(text, start)
    while lines.more():
        line = lines.line()
        if line.startswith("@@"):
            _skip_hunk(lines)
        elif line.startswith("GIT binary patch"):
            lines.next()
            _skip_binary(lines)
        elif _ends_diff(line) and not (line == "" and lines.diff_follows()):
            return lines.pos
        elif _outside_hunk(line):
            # A hunk line outside any hunk: its header is missing or broken,
            # or the hunk before it claims fewer lines than it has.
            raise DiffError(
                f"diff line outside any hunk ({line[:40]!r}): a hunk header is broken or its line counts are too small",
                lines.number,
            )
        else:
            lines.next()
    return -1


class _Lines:
    """As ``str.split("\\n")`` has them, walked without the split."""

    def __init__(self, text: str, start: int) -> None:
        self.text, self.pos, self.number = text, start, 0
        self._end, self._end_of = 0, -1  # where the line at _end_of ends: found once, not by each reader
        self._diff_at = -2  # where the next "diff --git" line starts after pos (-1: none), once asked

    def more(self) -> bool:
        return self.pos <= len(self.text)

    def _eol(self) -> int:
        if self._end_of != self.pos:
            end = self.text.find("\n", self.pos)
            self._end, self._end_of = (end if end >= 0 else len(self.text)), self.pos
        return self._end

    def line(self) -> str:
        return self.text[self.pos : self._eol()]

    def body(self) -> str:
        return self.text[self.pos + 1 : self._eol()]

    def tag(self) -> str:
        """Without reading the line."""
        return self.text[self.pos : self.pos + 1].replace("\n", "")

    def next(self) -> None:
        self.pos = self._eol() + 1
        self.number += 1

    def diff_follows(self) -> bool:
        """An empty line between two files' diffs is not the end."""
        if self._diff_at == -2 or (0 <= self._diff_at < self.pos):
            self._diff_at = self.text.find("\ndiff --git ", self.pos)
        return self._diff_at >= 0


def _ends_diff(line: str) -> bool:
    return line == "" or line.startswith("base-commit: ") or line == "-- "


def _outside_hunk(line: str) -> bool:
    return line.startswith((" ", "+", "-")) and not line.startswith(("+++ ", "--- ")) and line != "-- "


def _skip_hunk(lines: _Lines) -> None:
    header = lines.line()
    old, new = _claimed_counts(header, lines.number)
    lines.next()
    while old > 0 or new > 0:
        if not lines.more():
            raise DiffError("hunk ends early: the file is truncated", lines.number)
        tag = lines.tag()
        if tag not in (" ", "", "-", "+", "\\"):
            raise DiffError(
                f"hunk line count does not match its header (unexpected {lines.line()[:40]!r})", lines.number
            )
        old -= tag in (" ", "", "-")
        new -= tag in (" ", "", "+")
        if old < 0 or new < 0:
            # A hand-edited hunk: its lines and the counts in its header disagree, one way or the other.
            shown = header.split(" @@", 1)[0] + " @@"
            raise DiffError(
                f"hunk {shown!r}: its lines do not add up to the counts in its header "
                "(fix the counts, or regenerate the patch)",
                lines.number,
            )
        lines.next()
    while lines.more() and lines.tag() == "\\":
        lines.next()


def _claimed_counts(header: str, number: int) -> tuple[int, int]:
    m = HUNK_HEADER.match(header)
    if not m:
        raise DiffError(f"broken hunk header {header[:60]!r}", number)
    old = int(m.group(2)) if m.group(2) is not None else 1
    new = int(m.group(4)) if m.group(4) is not None else 1
    return old, new


def _skip_binary(lines: _Lines) -> None:
    blocks = 0
    while lines.more() and blocks < 2:
        blocks += lines.tag() == "" and lines.line() == ""
        lines.next()


# -- one file's section ---------------------------------------------------------------------


def _file_change(lines: _Lines) -> FileChange:
    header = [lines.line()]
    lines.next()
    meta = _Meta()
    while lines.more():
        line = lines.line()
        if line.startswith(("@@", "diff --git ")):
            break
        if line.startswith(("rename from ", "rename to ")):
            header.append(line)
        meta.read(line)
        lines.next()
    names = paths("\n".join(header))
    return FileChange(
        old_path=None if meta.added else names[0],
        new_path=None if meta.deleted else names[-1],
        old_mode=None if meta.added else meta.old_mode,
        new_mode=None if meta.deleted else meta.new_mode,
        old_blob=None if meta.added else _blob(meta.old_blob),
        new_blob=None if meta.deleted else _blob(meta.new_blob),
        binary=meta.binary,
        hunks=_hunks(lines),
    )


def _blob(given: str | None) -> str | None:
    return None if not given or ZERO_RE.match(given) else given


def _hunks(lines: _Lines) -> list[Hunk]:
    hunks: list[Hunk] = []
    while lines.more():
        line = lines.line()
        if line.startswith("diff --git "):
            break
        m = HUNK_HEADER.match(line)
        if m:
            hunks.append(_hunk(lines, int(m.group(1)), int(m.group(2) or 1)))
        else:
            lines.next()
    return hunks


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
            self.old_blob, self.new_blob, mode = _index_line(line)
            self.old_mode = self.old_mode or mode
            self.new_mode = self.new_mode or mode
        elif line.startswith(("GIT binary patch", "Binary files ")):
            self.binary = True


def _index_line(line: str) -> tuple[str, str, str | None]:
    """``index OLD..NEW [MODE]``: the blobs, and the mode where the file kept it."""
    parts = line.split()
    old, _, new = parts[1].partition("..")
    return old, new, parts[2] if len(parts) > 2 else None


def _hunk(lines: _Lines, old_start: int, old_count: int) -> Hunk:
    p = old_start - 1 if old_count > 0 else old_start
    hunk = Hunk(lines.line(), old_start)
    block: Block | None = None
    lines.next()
    while lines.more():
        tag = lines.tag()
        if tag not in (" ", "-", "+", "\\"):
            break
        body = lines.body()
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
        lines.next()
    return hunk


# -- paths, as git quotes them ----------------------------------------------------------------


_NAMING_LINE = re.compile(r"^(diff --git |rename from |copy from |rename to |copy to )(.*)$", re.M)


def paths(diff: str) -> list[str]:
    """Only the lines that name one are read: a big diff is not split into its lines."""
    found: list[str] = []
    for m in _NAMING_LINE.finditer(diff):
        kind, rest = m.group(1), m.group(2)
        if kind == "diff --git ":
            found += _split_diff_git_line(rest)
        elif kind in ("rename from ", "copy from ") and found:
            # Exact, where "a/X b/Y" of a renamed file is ambiguous (X may hold " b/").
            found[-2] = unquote(rest)
        elif kind in ("rename to ", "copy to ") and found:
            found[-1] = unquote(rest)
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
    """By hand: the stdlib's ``unicode_escape`` reads an octal escape as a character, not a UTF-8 byte."""
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
