"""Tree entries and blob contents for the judgement, read in batches: one ``cat-file --batch`` for many, and a cache
(every signal asks again), keep many commits near ``git cherry``'s time; line searches run on a version's bytes."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import overload

from ggstack import git
from ggstack.diff import HUNK_HEADER


class Files:
    def __init__(self, repo: git.Repository) -> None:
        self.repo = repo
        self._blobs: dict[str, bytes | None] = {}
        self._lines: dict[str, list[str]] = {}
        self._sliced: set[str] = set()  # blobs a few lines were read of (see line_slice)
        self._entries: dict[str, dict[str, tuple[str, str]]] = {}
        self._aligned: dict[tuple[str, str], list[int | None]] = {}
        self._stripped: dict[str, set[str]] = {}
        self._stripped_lines: dict[str, list[str]] = {}
        # a run's lines as bytes and the index of its longest line (see _needle)
        self._asked: dict[str, int] = {}  # one-line searches of a blob's bytes so far (see _as_set)
        self._needles: dict[tuple[tuple[str, ...], bool], tuple[list[bytes], int] | None] = {}

    def entries(self, tree: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
        known = self._entries.setdefault(tree, {})
        missing = [p for p in dict.fromkeys(paths) if p not in known]
        if missing:
            got = self.repo.ls_tree(tree, missing)
            for p in missing:
                known[p] = got.get(p, ("", ""))
        return {p: known[p] for p in paths if known.get(p, ("", ""))[1]}

    def at_commits(self, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        # One ``cat-file --batch`` for all, no ``ls-tree`` a commit; the contents kept for ``lines``.
        pairs = list(dict.fromkeys(wanted))
        found: dict[tuple[str, str], str] = {}
        for (commit, path), obj in zip(pairs, self.repo.cat_file_batch([f"{c}:{p}" for c, p in pairs]), strict=True):
            if obj is not None and obj[1] == "blob":
                found[(commit, path)] = obj[0]
                self._blobs[obj[0]] = obj[2]
        return found

    def prefetch(self, shas: Sequence[str | None]) -> None:
        # One request to the long-lived ``cat-file``: a round trip each would wait on git once per blob.
        want = self._unread(shas)
        if len(want) == 1:
            self._blobs[want[0]] = self.repo.read_object(want[0])
            return
        for sha, obj in zip(want, self.repo.cat_file_batch(want), strict=True):
            self._blobs[sha] = obj[2] if obj else None

    def _unread(self, shas: Sequence[str | None]) -> list[str]:
        return [s for s in dict.fromkeys(shas) if s and not is_zero(s) and s not in self._blobs]

    def blob(self, sha: str | None) -> bytes | None:
        if not sha or is_zero(sha):
            return None
        if sha not in self._blobs:
            self.prefetch([sha])
        return self._blobs[sha]

    def prepare_alignments(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Align many (old, new) blob pairs with git's diff at once; a blob this clone lacks aligns with nothing."""
        todo = self._unaligned(pairs)
        self.prefetch([b for p in todo for b in p])
        todo = [p for p in todo if not self._aligned_with_nothing(p)]
        diffs = self.repo.diff_blob_pairs(todo)
        for i, pair in enumerate(todo):
            raw = diffs.get(i, b"").decode("utf-8", "surrogateescape")
            self._aligned[pair] = pmap_of(raw, self.count_lines(pair[0]))

    def _unaligned(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        return [p for p in dict.fromkeys(pairs) if p[0] != p[1] and p not in self._aligned]

    def _aligned_with_nothing(self, pair: tuple[str, str]) -> bool:
        if self.blob(pair[0]) is not None and self.blob(pair[1]) is not None:
            return False
        self._aligned[pair] = [None] * self.count_lines(pair[0])
        return True

    def alignment(self, old: str | None, new: str | None) -> list[int | None]:
        """For each line of ``old``, the line of ``new`` it is, or None."""
        if not old or not new:
            return [None] * self.count_lines(old)
        if old == new:
            return list(range(self.count_lines(old)))
        if (old, new) not in self._aligned:
            self.prepare_alignments([(old, new)])
        return self._aligned[(old, new)]

    def stripped(self, sha: str) -> set[str]:
        if sha not in self._stripped:
            self._stripped[sha] = set(self.stripped_lines(sha))
        return self._stripped[sha]

    def stripped_lines(self, sha: str | None) -> list[str]:
        # Kept: a search that ignores trailing whitespace asks of the same versions again and again.
        if not sha or is_zero(sha):
            return []
        if sha not in self._stripped_lines:
            lines = self.lines(sha)
            stripped = [line.rstrip() for line in lines]
            # most files have no trailing whitespace: their lines are kept once, not twice
            self._stripped_lines[sha] = lines if stripped == lines else stripped
        return self._stripped_lines[sha]

    def holders(self, shas: Sequence[str], wanted: set[str]) -> dict[str, set[str]]:
        """For each of ``wanted`` (stripped lines), the blobs of ``shas`` that have it."""
        encoded = {w.encode("ascii"): w for w in wanted if w.isascii()}
        out: dict[str, set[str]] = {}
        self.prefetch(shas)
        for sha in dict.fromkeys(shas):
            data = self.blob(sha)
            for line in self._held(sha, data, wanted, encoded) if data else ():
                out.setdefault(line, set()).add(sha)
        return out

    def _held(self, sha: str, data: bytes, wanted: set[str], encoded: dict[bytes, str]) -> set[str]:
        # An ASCII file (most are) is split as bytes, neither decoded nor kept.
        if sha in self._stripped or not data.isascii():
            return wanted & self.stripped(sha)
        return {encoded[line] for line in _ascii_stripped(data) & encoded.keys()}

    def holds(self, blob: str, run: Sequence[str], *, strip: bool) -> bool:
        """Does the blob hold the run of lines (``strip``: ignoring trailing whitespace)?"""
        if not run or is_zero(blob):
            return False
        if strip and len(run) == 1 and self._as_set(blob):
            return run[0].rstrip() in self._stripped[blob]
        needle = self._encoded(run, strip)
        if needle is not None:
            return _in_bytes(self._kept_bytes(blob), *needle, strip)
        return self._holds_in_lines(blob, run, strip)

    def _kept_bytes(self, blob: str) -> bytes:
        return (self._blobs[blob] if blob in self._blobs else self.blob(blob)) or b""

    def _holds_in_lines(self, blob: str, run: Sequence[str], strip: bool) -> bool:
        if strip:
            return find_run(self.stripped_lines(blob), [s.rstrip() for s in run], strip=False) is not None
        return find_run(self.lines(blob), list(run), strip=False) is not None

    def _encoded(self, run: Sequence[str], strip: bool) -> tuple[list[bytes], int] | None:
        key = (tuple(run), strip)
        if key not in self._needles:  # a search asks about one run in many versions: encoded once
            self._needles[key] = _needle(run, strip)
        return self._needles[key]

    def _as_set(self, blob: str) -> bool:
        # A set of the stripped lines where it is there, the lines are, or the blob was searched often
        # enough: a moved-code search asks a file's versions for each of a block's lines in turn.
        if blob in self._stripped:
            return True
        asked = self._asked[blob] = self._asked.get(blob, 0) + 1
        if blob in self._lines or asked > _SEARCHES_BEFORE_A_SET:
            self.stripped(blob)
            return True
        return False

    def count_lines(self, sha: str | None) -> int:
        """``len(lines(sha))`` counted on the bytes of a blob not split yet."""
        if not sha or is_zero(sha) or sha in self._lines:
            return len(self.lines(sha))
        data = self.blob(sha)
        return data.count(b"\n") + (not data.endswith(b"\n")) if data else 0

    def lines_when_read(self, sha: str | None) -> Sequence[str]:
        # Split only when a line is read: a pre-image is asked its length by every block placed in it,
        # a line only where the alignment kept one of the block's removed lines.
        if not sha or is_zero(sha) or sha in self._lines:
            return self.lines(sha)
        return _LinesWhenRead(self, sha)

    def line_slice(self, sha: str | None, start: int, stop: int) -> list[str]:
        """``lines(sha)[start:stop]``, the first time split only as far as ``stop``; asked again, whole."""
        if not sha or is_zero(sha) or sha in self._lines or sha in self._sliced or min(start, stop) < 0:
            return self.lines(sha)[start:stop]
        self._sliced.add(sha)
        return _split_lines_to(self.blob(sha) or b"", start, stop)

    def lines(self, sha: str | None) -> list[str]:
        if not sha or is_zero(sha):
            return []
        if sha not in self._lines:
            self._lines[sha] = split_lines(self.blob(sha))
        return self._lines[sha]


class _LinesWhenRead(Sequence[str]):
    def __init__(self, files: Files, sha: str) -> None:
        self._files, self._sha, self._len = files, sha, files.count_lines(sha)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self._files.lines(self._sha)[i]


_SEARCHES_BEFORE_A_SET = 16  # a big file's split and set cost about as much as this many searches of it


# A hunk header after a line end (the first one too, its diff given a line end before it): found
# by the regex's literal prefix search, all of a diff's in one call (a far-moved base's diffs
# are megabytes, of thousands of hunks each).
_HUNKS = re.compile("\n" + HUNK_HEADER.pattern.removeprefix("^"))


_NUMBERS: list[int] = []


def _span(old_at: str, old_n: str, new_at: str, new_n: str) -> tuple[int, int, int, int]:
    old_count, new_count = int(old_n or 1), int(new_n or 1)
    return int(old_at) - (1 if old_count else 0), old_count, int(new_at) - (1 if new_count else 0), new_count


def _numbers(stop: int) -> list[int]:
    # One shared int object per number: a check keeps thousands of alignments of long files, and an
    # int of its own per line (28 bytes past 256) was most of their memory.
    if stop > len(_NUMBERS):
        _NUMBERS.extend(range(len(_NUMBERS), max(stop, 2 * len(_NUMBERS))))
    return _NUMBERS


def _split_lines_to(data: bytes, start: int, stop: int) -> list[str]:
    if start >= stop:
        return []
    pieces = data.split(b"\n", stop)
    if len(pieces) <= stop and pieces[-1] == b"":
        pieces.pop()  # the whole blob, which ends with a line end: no line after it
    return [p.decode("utf-8", "surrogateescape") for p in pieces[start:stop]]


def pmap_of(diff: str, n_old: int) -> list[int | None]:
    """For each old line, the new line it is, from a ``-U0`` diff."""
    pmap: list[int | None] = [None] * n_old
    heads = _HUNKS.findall(diff if not diff.startswith("@@ -") else "\n" + diff)
    # no line number past the last hunk's new end and the old lines after it
    numbers = _numbers(n_old + max((int(h[2]) + int(h[3] or 1) for h in heads), default=0))
    pi = bi = 0
    for head in heads:
        old_start, old_count, new_start, new_count = _span(*head)
        end = min(old_start, n_old)
        if pi < end:  # a slice, not a loop per line: a changelog has thousands of them
            pmap[pi:end] = numbers[bi : bi + end - pi]
        pi, bi = old_start + old_count, new_start + new_count
    if pi < n_old:
        pmap[pi:] = numbers[bi : bi + n_old - pi]
    return pmap


def is_zero(sha: str) -> bool:
    return not sha.strip("0")


def split_lines(data: bytes | None) -> list[str]:
    # Interned: a file's versions through a long range share most of their lines, and a check
    # holds thousands of versions.
    if not data:
        return []
    lines = list(map(sys.intern, data.decode("utf-8", "surrogateescape").split("\n")))
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# What str.rstrip strips off an ASCII line: the ASCII characters Python counts as whitespace.
_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace())


def _ascii_stripped(data: bytes) -> set[bytes]:
    return {line.rstrip(_ASCII_SPACE) for line in data.split(b"\n")}


def run_in_bytes(data: bytes, run: Sequence[str], *, strip: bool) -> bool | None:
    """``find_run`` of ``run`` in the blob's ``split_lines``, answered on its bytes."""
    needle = _needle(run, strip)
    return None if needle is None else _in_bytes(data, *needle, strip)


def _needle(run: Sequence[str], strip: bool) -> tuple[list[bytes], int] | None:
    """The run's lines as bytes and the index of the longest (where a search starts); None: bytes cannot say."""
    try:
        want = [(s.rstrip() if strip else s).encode("utf-8", "surrogateescape") for s in run]
    except UnicodeEncodeError:
        return None
    anchor = max(range(len(want)), key=lambda i: len(want[i]), default=None)
    if anchor is None or not want[anchor] or any(b"\n" in w for w in want):
        return None
    return want, anchor


def _in_bytes(data: bytes, want: list[bytes], anchor: int, strip: bool) -> bool:
    line = want[anchor]
    at = 0 if data.startswith(line) else data.find(b"\n" + line) + 1 or -1
    while at >= 0:
        start = _lines_back(data, at, anchor)
        if start is not None and _lines_at(data, start, want, strip):
            return True
        at = data.find(b"\n" + line, at) + 1 or -1
    return False


def _lines_back(data: bytes, pos: int, k: int) -> int | None:
    for _ in range(k):
        if pos == 0:
            return None
        pos = data.rfind(b"\n", 0, pos - 1) + 1
    return pos


def _lines_at(data: bytes, pos: int, want: list[bytes], strip: bool) -> bool:
    for line in want:
        if pos >= len(data) or not data.startswith(line, pos):
            return False  # no line left (what follows the last line end is none), or another one
        end = data.find(b"\n", pos + len(line))
        end = len(data) if end < 0 else end
        if not _line_ends(data[pos + len(line) : end], strip):
            return False
        pos = end + 1
    return True


def _line_ends(rest: bytes, strip: bool) -> bool:
    return not rest or (strip and rest.decode("utf-8", "surrogateescape").isspace())


def is_text(data: bytes | None) -> bool:
    return data is None or b"\0" not in data[:8000]


def find_run(haystack: list[str], needle: list[str], *, strip: bool) -> int | None:
    if not needle or len(needle) > len(haystack):
        return None
    if strip:
        haystack = [s.rstrip() for s in haystack]
        needle = [s.rstrip() for s in needle]
    return _first_run(haystack, needle)


def _first_run(haystack: list[str], needle: list[str]) -> int | None:
    first, size, last = needle[0], len(needle), len(haystack) - len(needle)
    i = 0
    while True:
        try:
            i = haystack.index(first, i, last + 1)  # C speed: most files are long, most needles rare
        except ValueError:
            return None
        if haystack[i : i + size] == needle:
            return i
        i += 1
