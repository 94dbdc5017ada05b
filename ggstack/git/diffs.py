"""Comparing, merging and patching trees in git's own machinery: merge-tree is rebase's
merge-ort, so replayed trees are git's; patches apply in a temporary index, never the user's."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TypeVar, cast

from ggstack.git.objects import SCRATCH_IDENT, Objects
from ggstack.git.runner import GitFailed, Persistent
from ggstack.threads import map_on_threads

_SPLIT_PAIRS = 64  # from this many blob pairs on, two diff-tree processes share them
_SPLIT_MERGES = 16  # from this many merges on, two merge-tree processes share them
_SPLIT_SOURCES = 16  # from this many commits on, two diff-tree processes make their patches

T = TypeVar("T")


@dataclass(frozen=True)
class TreeChange:
    """One file changed between two trees, as ``diff-tree --raw`` says it (mode 000000: absent)."""

    path: str
    old_mode: str
    old_sha: str
    new_mode: str
    new_sha: str
    status: str  # A, D, M, T


@dataclass(frozen=True)
class MergeResult:
    tree: str
    clean: bool
    conflicted_paths: tuple[str, ...]
    messages: str


# Every setting of a diff's bytes that a user's config or git's defaults could change, given:
# a stored patch (``format_patches``) and the diffs compared with it (``_SOURCE_DIFF``) are
# written the same way on any machine, so equal bytes mean an equal change.
PINNED_DIFF_CONFIG = (
    "-c", "core.quotePath=false",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.suppressBlankEmpty=false",
)  # fmt: skip
PINNED_DIFF_OPTIONS = (
    "--full-index",
    "--binary",
    "--find-renames",
    "--no-color",
    "--no-relative",
    "--unified=3",
    "--inter-hunk-context=0",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "-O/dev/null",
)

# Each commit's diff against the parent given on stdin ("<commit> <parent>"), as a patch file
# has it: full blob ids, binaries, renames; headed "commit <sha>".
COMMIT_DIFFS = (
    "diff-tree",
    "--stdin",
    "-p",
    "--full-index",
    "--binary",
    "--find-renames",
    "--no-color",
    "--format=commit %H",
)


@dataclass(frozen=True)
class ApplyFailure:
    """One file ``git apply`` refused, as its message names it: where and why."""

    path: str
    line: int | None  # the line of the file where the hunk was expected, when git gives one
    reason: str  # git's words: "patch does not apply", "does not exist in index", ...


# git apply's "error: <path>: <reason>" lines (apply.c); a reason not listed here names no file.
_APPLY_REASONS = (
    "patch does not apply",
    "does not exist in index",
    "already exists in index",
    "already exists in working directory",
    "does not match index",
    "wrong type",
    "No such file or directory",
)
_APPLY_FAILED_AT = re.compile(r"^error: patch failed: (?P<path>.+):(?P<line>[0-9]+)$")
_APPLY_REASON = re.compile(rf"^error: (?P<path>.+): (?P<reason>{'|'.join(map(re.escape, _APPLY_REASONS))})$")
_APPLY_QUOTED = re.compile(
    r"^error: (?:cannot read the current contents of|the patch applies to) '(?P<path>.+?)'(?P<reason>.*)$"
)


def apply_failures(message: str) -> list[ApplyFailure]:
    """The files a failed ``git apply`` names, each once, with the line of its first failed hunk."""
    found: dict[str, ApplyFailure] = {}
    for line in message.splitlines():
        m = _APPLY_FAILED_AT.match(line)
        if m:
            path, at, reason = m["path"], int(m["line"]), "patch does not apply"
        else:
            m = _APPLY_REASON.match(line) or _APPLY_QUOTED.match(line)
            if not m:
                continue
            path, at, reason = m["path"], None, m["reason"].strip(" .") or "does not apply"
        known = found.get(path)
        if known is None:
            found[path] = ApplyFailure(path, at, reason)
        elif known.line is None and at is not None:
            found[path] = ApplyFailure(path, at, known.reason)
    return list(found.values())


_MERGE = ("merge-tree", "--write-tree", "-z", "--name-only", "--messages")
# git cannot renormalize in a bare repository (no index to read attributes from): a user's
# ``merge.renormalize = true`` aborts merge-tree there ("BUG: attr.c: non-INDEX attr direction").
_BARE_MERGE = ("-c", "merge.renormalize=false", *_MERGE)


class Diffs(Objects):
    _merger: _Merger | None  # None: this git's merge-tree has no --stdin (2.38), or it failed

    def _start_object_processes(self) -> None:
        super()._start_object_processes()
        self._merger = _Merger(
            Persistent(self.git_dir, self.worktree or self.git_dir, [*self._merge, "--stdin"], self.merge_config)
        )

    @property
    def _merge(self) -> tuple[str, ...]:
        return _MERGE if self.worktree else _BARE_MERGE

    def object_processes(self) -> list[Persistent]:
        return super().object_processes() + ([self._merger.process] if self._merger else [])

    def after_fork(self) -> None:
        super().after_fork()
        if self._merger is not None:  # nothing of the parent's last answer is left to read
            self._merger = _Merger(self._merger.process)

    def merge_trees(self, ours: str, theirs: str) -> MergeResult:
        """``git merge-tree --write-tree`` through one long-lived process, as a process costs more than
        the merge (pytest: 50 ms vs 15 ms); else a process of its own, which says why it fails."""
        if self._merger is not None and re.fullmatch(r"[0-9a-f]+ [0-9a-f]+", f"{ours} {theirs}"):
            try:
                return self._merger.merge(ours, theirs)
            except GitFailed:
                self._merger = None
        return self._merge_once(ours, theirs)

    def _merge_once(self, ours: str, theirs: str) -> MergeResult:
        proc = self.run(*self._merge, "--end-of-options", ours, theirs, check=False, config=self.merge_config())
        if proc.returncode not in (0, 1):
            raise GitFailed(("merge-tree", ours, theirs), proc.returncode, proc.stderr.decode("utf-8", "replace"))
        out = proc.stdout.decode("utf-8", "surrogateescape")
        head, _, messages = out.partition("\0\0")
        fields = head.split("\0")
        tree = fields[0]
        paths = tuple(dict.fromkeys(p for p in fields[1:] if p))
        return MergeResult(tree, proc.returncode == 0, paths, _readable_messages(messages))

    def merge_many(self, pairs: Sequence[tuple[str, str]]) -> list[MergeResult]:
        """``merge_trees`` of each pair in one ``merge-tree --stdin`` (two side by side for many: one
        uses one core); a git without ``--stdin`` gets them one by one."""
        if len(pairs) < _SPLIT_MERGES:
            return self._merge_batch(pairs)
        even, odd = map_on_threads(self._merge_batch, [pairs[0::2], pairs[1::2]], 2)
        return _interleaved(even, odd)

    def _merge_batch(self, pairs: Sequence[tuple[str, str]]) -> list[MergeResult]:
        if not pairs:
            return []
        feed = "".join(f"{ours} {theirs}\n" for ours, theirs in pairs).encode()
        args = (*self._merge, "--stdin")
        proc = self.run(*args, input=feed, check=False, config=self.merge_config())
        if proc.returncode == 129:
            return [self.merge_trees(ours, theirs) for ours, theirs in pairs]
        if proc.returncode != 0:
            raise GitFailed(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
        out = _batched_merges(proc.stdout.decode("utf-8", "surrogateescape").split("\0"))
        if len(out) != len(pairs):
            raise GitFailed(args, 0, f"expected {len(pairs)} merges, read {len(out)}")
        return out

    def cherry_pick_tree(self, commit: str, parent: str, onto_tree: str) -> MergeResult:
        # git 2.39 has no --merge-base: a scratch commit on parent makes parent the base.
        ours = self.write_commit(onto_tree, [parent], "ggstack scratch\n", SCRATCH_IDENT, SCRATCH_IDENT)
        return self.merge_trees(ours, commit)

    def apply_to_tree(self, tree: str, patch: bytes, *, three_way: bool = False) -> tuple[str | None, str]:
        """Apply a diff to a tree in a temporary index: (new tree or None, git's message)."""
        with self.temp_index(tree) as env:
            args = ["apply", "--cached", "--whitespace=nowarn"]
            if three_way:
                args.append("--3way")
            proc = self.run(*args, "-", input=patch, env=env, check=False, config=self.merge_config())
            if proc.returncode != 0:
                return None, proc.stderr.decode("utf-8", "replace")
            return self.out("write-tree", env=env), proc.stderr.decode("utf-8", "replace")

    def reverse_apply_in_turn(self, tree: str, patches: Sequence[bytes]) -> list[str | None]:
        """Each patch reverse-applied after the ones before it that applied: the tree it leaves, or
        None. One index for all, so a patch costs one ``apply``."""
        out: list[str | None] = []
        with self.temp_index(tree) as env:
            for patch in patches:
                proc = self.run(
                    "apply", "--cached", "--reverse", "--whitespace=nowarn", "-", input=patch, env=env, check=False
                )
                out.append(self.out("write-tree", env=env) if proc.returncode == 0 else None)
        return out

    def diff_trees(self, a: str, b: str, paths: Sequence[str] = (), *, context: int | None = None) -> bytes:
        args = ["diff-tree", "-p", "--full-index", "--binary", "--find-renames", "--no-color"]
        if context is not None:
            args.append(f"-U{context}")
        args += ["--end-of-options", a, b]
        if paths:
            args += ["--", *paths]
        return self.run(*args).stdout

    def numstats(self, pairs: Sequence[tuple[str, str]]) -> list[list[tuple[str, int | None, int | None]]]:
        if not pairs:
            return []
        feed = "".join(f"{b} {a}\n" for a, b in pairs).encode()
        args = ["diff-tree", "--stdin", "--always", "-r", "--numstat", "-z", "--find-renames", "--no-color"]
        out = self.run(*args, "--format=%x01%H", input=feed).stdout.decode("utf-8", "surrogateescape")
        chunks = re.split(r"\x01[0-9a-f]{40,64}\0", out)[1:]  # one a pair (--always), header and all
        return [_numstat_rows(chunk) for chunk in chunks]

    def tree_changes(self, pairs: Sequence[tuple[str, str]]) -> list[list[TreeChange]]:
        return self.start_tree_changes(pairs)()

    def start_tree_changes(self, pairs: Sequence[tuple[str, str]]) -> Callable[[], list[list[TreeChange]]]:
        if not pairs:
            return list
        feed = "".join(f"{c} {p}\n" for c, p in pairs).encode()
        job = self.start("diff-tree", "--stdin", "-r", "--raw", "-z", "--no-renames", "--always", input=feed)
        return lambda: _tree_changes(job.wait(), len(pairs))

    def diff_blob_pairs(self, pairs: Sequence[tuple[str, str]]) -> dict[int, bytes]:
        """index -> the ``-U0`` histogram diff of each (old blob, new blob) pair that differs, as two
        scratch trees and one ``diff-tree`` (two side by side for many)."""
        indexed = list(enumerate(pairs))
        if len(indexed) < _SPLIT_PAIRS:
            return self._diff_indexed_pairs(indexed)
        halves = map_on_threads(self._diff_indexed_pairs, [indexed[0::2], indexed[1::2]], 2)
        return {**halves[0], **halves[1]}

    def _diff_indexed_pairs(self, indexed: Sequence[tuple[int, tuple[str, str]]]) -> dict[int, bytes]:
        if not indexed:
            return {}
        # Written by the persistent mktree: two trees a batch, no process each.
        trees = [self.write_tree({f"{i:07d}": ("100644", p[side]) for i, p in indexed}) for side in (0, 1)]
        raw = self.run("diff-tree", "-p", "-U0", "--histogram", "--no-renames", "--no-color", "-a", *trees).stdout
        out = {}
        for section in raw.split(b"diff --git a/")[1:]:
            out[int(section[:7])] = section
        return out

    def diffs_of_commits(self, pairs: Sequence[tuple[str, str]]) -> dict[str, bytes]:
        """commit -> its binary diff against the given parent, renames found, in one ``diff-tree``."""
        if not pairs:
            return {}
        raw = self.run(*COMMIT_DIFFS, input="".join(f"{c} {p}\n" for c, p in pairs).encode()).stdout
        out: dict[str, bytes] = {c: b"" for c, _ in pairs}
        for chunk in re.split(rb"^commit (?=(?:[0-9a-f]{40}|[0-9a-f]{64})\n)", raw, flags=re.M):
            if chunk:
                sha, _, diff = chunk.partition(b"\n")
                out[sha.decode()] = diff.lstrip(b"\n")
        return out

    def diffs_of_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[bytes]:
        if not pairs:
            return []
        feed = "".join(f"{c} {p}\n" for c, p in pairs).encode()
        raw = self.run(*COMMIT_DIFFS, "--always", input=feed).stdout
        chunks = re.split(rb"^commit (?:[0-9a-f]{40}|[0-9a-f]{64})\n", raw, flags=re.M)[1:]
        if len(chunks) != len(pairs):
            raise GitFailed(("diff-tree", "--stdin"), 0, f"expected {len(pairs)} diffs, read {len(chunks)}")
        return [chunk.lstrip(b"\n") for chunk in chunks]

    def start_source_diffs(self, pairs: Sequence[tuple[str, str]]) -> Callable[[], list[tuple[str, memoryview]]]:
        """(tree, diff as ``format_patches`` writes it) of each (commit, parent), started now (two
        processes for many); calling the result waits for them."""
        halves = [pairs] if len(pairs) < _SPLIT_SOURCES else [pairs[0::2], pairs[1::2]]
        started = [
            self.start(*_SOURCE_DIFF, input="".join(f"{c} {p}\n" for c, p in half).encode()) for half in halves if half
        ]

        def wait() -> list[tuple[str, memoryview]]:
            parts = [_source_diffs(job.wait(), len(half)) for job, half in zip(started, halves)]
            if len(parts) < 2:
                return parts[0] if parts else []
            return _interleaved(*parts)

        return wait


def _interleaved(even: list[T], odd: list[T]) -> list[T]:
    """A work's answers from two processes (even and odd items), back in the items' order."""
    return [x for two in zip(even, odd) for x in two] + even[len(odd) :]


_SOURCE_HEADER = b"\nggstack-commit "  # each commit's diff is headed "ggstack-commit <commit> <tree>"
_OBJECT_ID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_SOURCE_DIFF = (  # the diff settings ``format_patches`` pins, so equal bytes mean an equal change
    *PINNED_DIFF_CONFIG,
    "diff-tree",
    "--stdin",
    "--always",
    "-p",
    *PINNED_DIFF_OPTIONS,
    "--format=ggstack-commit %H %T",
)


def _tree_changes(raw: bytes, count: int) -> list[list[TreeChange]]:
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    out: list[list[TreeChange]] = []
    i = 0
    while i < len(fields):
        field_ = fields[i]
        if field_.startswith(":") and out:
            old_mode, new_mode, old_sha, new_sha, status = field_[1:].split(" ")
            out[-1].append(TreeChange(fields[i + 1], old_mode, old_sha, new_mode, new_sha, status[:1]))
            i += 2
            continue
        if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", field_):
            out.append([])
        i += 1
    if len(out) != count:
        raise GitFailed(("diff-tree", "--stdin"), 0, f"expected {count} commits, read {len(out)}")
    return out


def _source_diffs(raw: bytes, count: int) -> list[tuple[str, memoryview]]:
    # Cut at each header bytes.find finds: a regex tried at every byte cost more than the rest of reading.
    starts = _header_starts(raw)
    ends = [next_start - 1 for next_start in starts[1:]] + [len(raw)]  # the newline before a header is its own
    out = [_source_diff(raw, start, end, last=n == len(starts)) for n, (start, end) in enumerate(zip(starts, ends), 1)]
    if len(out) != count:
        raise GitFailed(("diff-tree", "--stdin"), 0, f"expected {count} diffs, read {len(out)}")
    return out


def _header_starts(raw: bytes) -> list[int]:
    starts = []
    at = 0 if raw.startswith(_SOURCE_HEADER[1:]) else _after(raw.find(_SOURCE_HEADER))
    while at >= 0:
        starts.append(at)
        at = _after(raw.find(_SOURCE_HEADER, at))
    return starts


def _source_diff(raw: bytes, start: int, end: int, *, last: bool) -> tuple[str, memoryview]:
    head_end = raw.find(b"\n", start, end)
    head_end = end if head_end < 0 else head_end
    head = raw[start + len(_SOURCE_HEADER) - 1 : head_end]
    commit, _, tree = head.partition(b" ")
    if not (_OBJECT_ID.fullmatch(commit) and _OBJECT_ID.fullmatch(tree)):
        raise GitFailed(("diff-tree", "--stdin"), 0, f"unexpected header {head[:100]!r}")
    body = head_end + 1
    while body < end and raw[body] == 10:
        body += 1
    # A view, not a copy (the one caller compares it and lets go): for all but the last,
    # with the newline before the next header, which is the diff's own last one.
    view = memoryview(raw)[min(body, end) : end if last else end + 1]
    return tree.decode(), view if view.nbytes or last else memoryview(b"\n")


def _after(found: int) -> int:
    return found + 1 if found >= 0 else -1


class _Merger:
    """One long-lived ``merge-tree --stdin`` asked one merge at a time. git writes a merge's closing
    NUL only with the next answer, so a no-op merge of ``ours`` with itself follows each."""

    def __init__(self, process: Persistent) -> None:
        self.process = process
        self._pending_end = False  # the end of the last self-merge is still to be read

    def merge(self, ours: str, theirs: str) -> MergeResult:
        def answer(stream: IO[bytes]) -> bytes:
            if self._pending_end and _field(stream):
                raise EOFError  # not the stream this reader expects: give the process up
            fields = _merge_fields(stream)
            if [_field(stream), _field(stream) != b"", _field(stream)] != [b"1", True, b""]:
                raise EOFError
            return b"\0".join(fields)

        out = self.process.ask(f"{ours} {theirs}\n{ours} {ours}\n".encode(), answer)
        self._pending_end = True
        return _batched_merges(out.decode("utf-8", "surrogateescape").split("\0"))[0]


def _merge_fields(stream: IO[bytes]) -> list[bytes]:
    fields = [_field(stream), _field(stream)]
    while fields[-1]:
        fields.append(_field(stream))
    while True:
        fields.append(_field(stream))
        if not fields[-1]:
            return fields
        for _ in range(int(fields[-1]) + 2):
            fields.append(_field(stream))


def _field(stream: IO[bytes]) -> bytes:
    """One NUL-terminated field; what is buffered first, so no read waits on bytes git has not sent."""
    reader = cast(io.BufferedReader, stream)
    out = bytearray()
    while True:
        buffered = reader.peek(1)
        if not buffered:
            raise EOFError
        end = buffered.find(b"\0")
        if end >= 0:
            return bytes(out + reader.read(end + 1)[:-1])
        out += reader.read(len(buffered))


def _batched_merges(fields: list[str]) -> list[MergeResult]:
    out = []
    i = 0
    while i + 1 < len(fields) and fields[i] in ("0", "1"):
        clean, tree = fields[i] == "1", fields[i + 1]
        i += 2
        paths = []
        while i < len(fields) and fields[i]:
            paths.append(fields[i])
            i += 1
        i += 1
        messages = []
        while i < len(fields) and fields[i].isdigit():
            i += 1 + int(fields[i]) + 1  # the paths, then the conflict type
            if i < len(fields):
                messages.append(fields[i].strip())
            i += 1
        i += 1  # the merge's terminating NUL
        out.append(MergeResult(tree, clean, tuple(dict.fromkeys(paths)), "\n".join(m for m in messages if m)))
    return out


def _readable_messages(raw: str) -> str:
    """merge-tree -z --messages: <count NUL paths... NUL type NUL message NUL>*; keep the messages."""
    fields = raw.split("\0")
    lines = []
    i = 0
    while i < len(fields):
        try:
            count = int(fields[i])
        except ValueError:
            break
        i += 1 + count + 1  # paths, then the conflict type
        if i < len(fields):
            lines.append(fields[i].strip())
        i += 1
    return "\n".join(line for line in lines if line)


def _numstat_rows(out: str) -> list[tuple[str, int | None, int | None]]:
    """The rows of ``diff-tree --numstat -z`` output: a rename's names follow as their own fields."""
    fields = out.split("\0")
    rows: list[tuple[str, int | None, int | None]] = []
    i = 0
    while i < len(fields):
        meta = fields[i].lstrip("\n")
        if not meta:
            i += 1
            continue
        added, deleted, path = meta.split("\t", 2)
        if not path:
            path = fields[i + 2]
            i += 2
        rows.append((path, int(added) if added.isdigit() else None, int(deleted) if deleted.isdigit() else None))
        i += 1
    return rows
