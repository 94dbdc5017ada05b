"""The base range (the base's own commits), read once for every candidate: one ``git log --raw``, one for messages, and
as ``git cherry`` patch-ids only of commits changing exactly a candidate's files (cached: k new commits, k diffs)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ggstack import git
from ggstack.cache import Map
from ggstack.threads import Pending, cores, map_on_threads

_PATHSPEC_LIMIT = 32
_PIPELINES = 4  # at most this many diff-tree | patch-id pipelines side by side
_PER_PIPELINE = 200  # and none for fewer commits than this: starting one costs more than it saves
_CACHE_VERSION = "v1"  # bump when the patch-id flags change

PICKED_FROM = re.compile(r"(?:\(cherry picked from commit |^Cherry-picked-from:\s*)([0-9a-f]{40,64})", re.M | re.I)
SPID = re.compile(r"^Stack-Patch-Id:\s*(\S+)\s*$", re.M | re.I)
CHANGE_ID = re.compile(r"^Change-Id:\s*(I[0-9a-f]{40})\s*$", re.M)
REVERTS = re.compile(r"This reverts commit ([0-9a-f]{40,64})")
PR_NUMBER = re.compile(r"\(#(\d+)\)\s*$")
# How a commit names the pull request it is, or backports: "title (#123)", GitHub's merge
# commit, and backport bots' "Backport PR #123: title" / "Backport of #123".
_PR_NAMED = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+) |[Bb]ackport(?:ed)?(?: of)?(?: PR)? #(\d+)", re.M)

# A commit that lands a reverted change again: git's own 'Reapply "S"' and 'Revert "Revert "S""',
# and what people write instead.
_RELAND = re.compile(
    r'^(?:\[[^\]]{1,40}\]\s*)*(?:Revert "Revert|Reapply|Re-apply|Reland|Re-land|Add back|Bring back|Restore)\s+"(.+?)"+'
    r"(?:\s*\(#\d+\))?\s*$",
    re.I,
)
# The subject a revert names: 'Revert "S"'.
REVERT_OF = re.compile(r'^(?:\[[^\]]{1,40}\]\s*)*Revert "(.+)"(?:\s*\(#\d+\))?\s*$')

FileVersions = list[tuple[str, str, str]]  # (path, old blob, new blob) of one commit
RangeLog = list[tuple[str, FileVersions]]  # range commits with the files they change, newest first


@dataclass
class BaseRange:
    commits: list[tuple[str, FileVersions]]  # range commits touching the paths, newest first
    messages: dict[str, str]  # every range commit -> its message
    authors: dict[str, str] = field(default_factory=dict)  # every range commit -> its author's email
    patch_ids: dict[str, str] = field(default_factory=dict)  # commit -> patch-id ("" for none)
    picked_from: dict[str, list[str]] = field(default_factory=dict)  # source -> range commits naming it
    spids: dict[str, list[str]] = field(default_factory=dict)  # Stack-Patch-Id -> range commits carrying it
    change_ids: dict[str, list[str]] = field(default_factory=dict)  # Gerrit Change-Id -> range commits carrying it
    reverts: dict[str, list[str]] = field(default_factory=dict)  # sha -> range commits saying they revert it
    undoes: dict[str, list[str]] = field(default_factory=dict)  # range commit -> the shas it says it reverts
    reachable: set[str] = field(default_factory=set)  # candidate sources that are ancestors of the base
    undone: dict[str, list[str]] = field(default_factory=dict)  # reachable source -> the reverts that undid it
    moves: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (its new path, the commit moving it)
    # (from, to) -> the commit that moved code out of a file that stays into another one
    moved_code: dict[tuple[str, str], str] = field(default_factory=dict)
    tips: list[str] = field(default_factory=list)  # the range (to read more of it)
    exclude: list[str] = field(default_factory=list)
    whole: RangeLog | None = None  # every range commit with its files, where the scan read them all
    _order: dict[str, int] = field(default_factory=dict)
    _read: set[str] = field(default_factory=set)
    _at: dict[str, int] | None = None
    _touching: dict[str, list[int]] = field(default_factory=dict)
    _versions: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    _by_patch_id: dict[str, list[str]] = field(default_factory=dict)
    _subjects: dict[str, list[str]] | None = None
    _prs: dict[str, list[str]] | None = None
    _relands: dict[str, list[str]] | None = None
    _exactly: dict[frozenset[str], list[str]] | None = None

    def __post_init__(self) -> None:
        self._order = {sha: i for i, sha in enumerate(self.messages)}
        self._index_commits()

    def _index_commits(self) -> None:
        self._touching, self._versions, self._at, self._exactly = {}, {}, None, None
        for i, (_, files) in enumerate(self.commits):
            for path, old, new in files:
                self._touching.setdefault(path, []).append(i)
                self._versions.setdefault(path, []).append((self.commits[i][0], old, new))
        for path, (to, sha) in sorted(self.moves.items(), key=lambda m: -self._order.get(m[1][1], 0)):
            self._chain(path, to, sha)  # oldest move first: a file moved twice is one line of versions

    def _chain(self, path: str, to: str, sha: str) -> None:
        # ``to``'s versions go on into ``path``'s from before the move, as ``blame -M`` follows it.
        joined = self._joined(path, to, sha)
        if joined is not None:
            self._versions[to] = joined

    def _joined(self, path: str, to: str, sha: str) -> list[tuple[str, str, str]] | None:
        there, here = self._versions.get(to, []), self._versions.get(path, [])
        moved_in, moved_out = _version_by(there, sha), _version_by(here, sha)
        if moved_in is None or moved_out is None:
            return None
        newer = [v for v in there if self.newer(v[0], sha)]
        older = [v for v in here if self.newer(sha, v[0])]
        return [*newer, (sha, moved_out[1], moved_in[2]), *older]

    def moved_to(self, path: str) -> str | None:
        seen = {path}
        while path in self.moves and self.moves[path][0] not in seen:
            path = self.moves[path][0]
            seen.add(path)
        return path if len(seen) > 1 else None

    # -- questions the signals ask --------------------------------------------------------

    def versions(self, path: str, moved_from: str = "") -> list[tuple[str, str, str]]:
        """(commit, old blob, new blob) of ``path``, newest first; through a move, as ``blame -C``."""
        sha = self.moved_code.get((moved_from, path)) if moved_from else None
        joined = self._joined(moved_from, path, sha) if sha else None
        # indexed once: a commit of many files is not read per path
        return joined if joined is not None else list(self._versions.get(path, ()))

    def files_changed(self, sha: str) -> FileVersions:
        if self._at is None:
            self._at = {c: i for i, (c, _) in enumerate(self.commits)}
        i = self._at.get(sha)
        return list(self.commits[i][1]) if i is not None else []

    def read_paths(self, repo: git.Repository, paths: Sequence[str]) -> None:
        """Take in the commits touching paths the scan did not know of (files judged elsewhere)."""
        todo = [p for p in paths if p not in self._read]
        self._read.update(todo)
        if not todo or not self.tips:
            return
        found = _touching(repo, self.tips[0], self.exclude, todo, self.whole)
        known = {sha for sha, _ in self.commits}
        if any(c[0] not in known for c in found):
            self.commits = _joined_in_order(self.commits, found, self._order)
            self._index_commits()

    def touching(self, paths: Iterable[str]) -> list[str]:
        idx = sorted({i for p in paths for i in self._touching.get(p, ())})
        return [self.commits[i][0] for i in idx]

    def files_of(self, sha: str) -> frozenset[str]:
        return frozenset(p for p, _, _ in self.files_changed(sha))

    def changing_exactly(self, paths: frozenset[str]) -> list[str]:
        """Range commits changing exactly ``paths`` (a revert of a patch changing them, a squash of a run), indexed once."""
        if self._exactly is None:
            self._exactly = {}
            for sha, files in self.commits:
                self._exactly.setdefault(frozenset(p for p, _, _ in files), []).append(sha)
        return self._exactly.get(paths, [])

    def newer(self, a: str, b: str) -> bool:
        """A commit outside the range is older than all of it."""
        return self._order.get(a, len(self._order)) < self._order.get(b, len(self._order))

    def in_range(self, sha: str) -> bool:
        return sha in self._order

    def with_patch_id(self, pid: str) -> list[str]:
        return self._by_patch_id.get(pid, []) if pid else []

    def subject(self, sha: str) -> str:
        return self.messages.get(sha, "").split("\n", 1)[0]

    def same_subject(self, subject: str) -> list[str]:
        key = normal_subject(subject)
        return list(self._index()[0].get(key, [])) if key else []

    def with_pr_number(self, number: str) -> list[str]:
        return list(self._index()[1].get(number, []))

    def _index(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        # Indexed once: asked of every candidate.
        if self._subjects is None or self._prs is None:
            self._subjects, self._prs = {}, {}
            for c, message in self.messages.items():
                for subject in dict.fromkeys((message.split("\n", 1)[0], merge_title(message))):
                    self._subjects.setdefault(normal_subject(subject), []).append(c)
                for number in pr_numbers(message):
                    self._prs.setdefault(number, []).append(c)
        return self._subjects, self._prs

    def relanded(self, subject: str) -> list[str]:
        """Range commits that land ``subject``'s change again ('Reapply "S"' and the like), or S again."""
        key = normal_subject(subject)
        if not key:
            return []
        if self._relands is None:
            self._relands = {}
            for c, message in self.messages.items():
                m = _RELAND.match(message.split("\n", 1)[0])
                if m:
                    self._relands.setdefault(normal_subject(m.group(1)), []).append(c)
        return list(dict.fromkeys([*self._relands.get(key, []), *self.same_subject(subject)]))

    def reverted(self, sha: str) -> list[str]:
        return self.reverts.get(sha, [])

    # -- filling in ----------------------------------------------------------------------------

    def add_patch_ids(self, repo: git.Repository, pairs: Sequence[tuple[str, str | None]], *, in_range: bool) -> None:
        self.add_patch_id_sets(repo, [(pairs, in_range)])

    def add_patch_id_sets(
        self,
        repo: git.Repository,
        sets: Sequence[tuple[Sequence[tuple[str, str | None]], bool]],
        diffs: Mapping[str, bytes] | None = None,
    ) -> None:
        """Patch-ids of several sets of (commit, parent) in one pass, through the cache."""
        cache = Map(repo, f"patch-ids-{_CACHE_VERSION}")
        todo = _uncached(cache, sets)
        found = _patch_ids(repo, list(todo.items()), diffs or {})
        for commit in todo:
            cache.put(commit, found.get(commit, ""))  # "": an empty change has no patch-id
        cache.save()
        for pairs, in_range in sets:
            for commit, _ in pairs:
                self._note_patch_id(commit, cache.get(commit) or "", in_range)

    def _note_patch_id(self, commit: str, pid: str, in_range: bool) -> None:
        self.patch_ids[commit] = pid
        if in_range and pid and commit not in self._by_patch_id.get(pid, []):
            self._by_patch_id.setdefault(pid, []).append(commit)


def _uncached(cache: Map, sets: Sequence[tuple[Sequence[tuple[str, str | None]], bool]]) -> dict[str, str | None]:
    todo: dict[str, str | None] = {}
    for pairs, _ in sets:
        for commit, parent in pairs:
            if commit not in todo and cache.get(commit) is None:
                todo[commit] = parent
    return todo


def _version_by(versions: list[tuple[str, str, str]], sha: str) -> tuple[str, str, str] | None:
    return next((v for v in versions if v[0] == sha), None)


def normal_subject(subject: str) -> str:
    """A subject without what backports and PR merges add ("[8.3.x] ", " (#123)", code quotes)."""
    s = re.sub(r"^(\s*\[[^\]]{1,40}\]\s*)+", "", subject)
    s = re.sub(r"^(Backport|backport)( of)?( PR)?\s*#?\d*:?\s*", "", s)
    s = PR_NUMBER.sub("", s).strip().rstrip(".")
    s = " ".join(s.replace("`", "").split())
    return s.casefold() if len(s) >= 8 else ""


def merge_title(message: str) -> str:
    """A GitHub PR merge's title ("" else): what a backport bot names the pick after."""
    if not message.startswith("Merge pull request #"):
        return ""
    body = [line for line in message.split("\n")[1:] if line.strip()]
    return body[0] if body else ""


def pr_numbers(message: str) -> list[str]:
    head = "\n".join(message.split("\n", 6)[:6])
    return list(dict.fromkeys(n for m in _PR_NAMED.finditer(head) for n in m.groups() if n))


@dataclass
class RangeRead:
    """The logs of a range whatever the candidates, read once where several parts share them."""

    messages: list[tuple[str, str, str]]
    whole: RangeLog


def read_range(repo: git.Repository, base: str, exclude: Sequence[str]) -> RangeRead:
    messages = Pending(repo.range_messages, [base], exclude)
    whole = repo.log_raw([base], exclude, ())
    return RangeRead(messages.result(), whole)


def scan(
    repo: git.Repository,
    base: str,
    exclude: Sequence[str],
    paths: Sequence[str],
    candidates: Sequence[tuple[str, str | None]],
    sources: Sequence[str],
    keysets: Iterable[frozenset[str]] = (),
    diffs: Mapping[str, bytes] | None = None,
    read: RangeRead | None = None,
) -> BaseRange:
    """Read ``base ^exclude`` once for all the candidates; independent walks run side by side."""
    srcs = [s for s in dict.fromkeys(sources) if s]
    pending_reach = Pending(repo.not_reachable, srcs, base)
    log, whole, commits = _logs(repo, base, exclude, paths, read)
    commits, moves = _follow_moves(
        repo, base, exclude, paths, commits, {sha: i for i, (sha, _, _) in enumerate(log)}, whole
    )
    history = BaseRange(commits, {sha: message for sha, _, message in log}, moves=moves, tips=[base], whole=whole)
    history.exclude, history._read = list(exclude), {*paths, *(to for to, _ in moves.values())}
    history.authors = {sha: email for sha, email, _ in log}
    same_files = [(sha, None) for sha in _changing_a_set(commits, set(keysets))]
    history.add_patch_id_sets(repo, [(same_files, True), (list(candidates), False)], diffs)
    _read_messages(history)
    history.reachable = set(srcs) - pending_reach.result()
    history.undone = _undone_sources(repo, history.reverts, history.reachable)
    return history


def _changing_a_set(commits: RangeLog, keysets: AbstractSet[frozenset[str]]) -> list[str]:
    # Only these can share a candidate's patch-id: the rest need no diff.
    return [sha for sha, fs in commits if frozenset(p for p, _, _ in fs) in keysets]


def _logs(
    repo: git.Repository, base: str, exclude: Sequence[str], paths: Sequence[str], read: RangeRead | None
) -> tuple[list[tuple[str, str, str]], RangeLog | None, RangeLog]:
    if read is not None:
        return read.messages, read.whole, _touching(repo, base, exclude, paths, read.whole)
    pending_log = Pending(repo.range_messages, [base], exclude)
    # Past a few dozen paths git matches every pathspec against every changed file of every
    # commit: reading the whole range once, and filtering it here for each set of paths, is faster.
    whole = repo.log_raw([base], exclude, ()) if len(paths) > _PATHSPEC_LIMIT else None
    commits = _touching(repo, base, exclude, paths, whole)
    return pending_log.result(), whole, commits


def _touching(
    repo: git.Repository, base: str, exclude: Sequence[str], paths: Sequence[str], whole: RangeLog | None = None
) -> RangeLog:
    if whole is None and len(paths) <= _PATHSPEC_LIMIT:
        return repo.log_raw([base], exclude, paths) if paths else []
    every = whole if whole is not None else repo.log_raw([base], exclude, ())
    return _touching_any(every, set(paths))


def _touching_any(commits: RangeLog, wanted: set[str]) -> RangeLog:
    return [(c, fs) for c, fs in commits if any(p in wanted for p, _, _ in fs)]


_HOPS = 3  # a file moved more often than this within the range is followed no further


def _follow_moves(
    repo: git.Repository,
    base: str,
    exclude: Sequence[str],
    paths: Sequence[str],
    commits: list[tuple[str, FileVersions]],
    order: Mapping[str, int],
    whole: RangeLog | None = None,
) -> tuple[list[tuple[str, FileVersions]], dict[str, tuple[str, str]]]:
    """The candidates' files the range moved (path -> (new path, commit)), their new paths' commits added."""
    moves: dict[str, tuple[str, str]] = {}
    todo = list(paths)
    for _ in range(_HOPS):
        found = _renamed(repo, _deleted(commits, todo))
        if not found:
            break
        moves.update(found)
        todo = [new for new, _ in found.values()]
        commits = _joined_in_order(commits, _touching(repo, base, exclude, todo, whole), order)
    return commits, moves


def _renamed(repo: git.Repository, gone: dict[str, str]) -> dict[str, tuple[str, str]]:
    renamed = repo.renames(list(dict.fromkeys(gone.values()))) if gone else {}
    return {p: (new, sha) for p, sha in gone.items() for old, new in renamed.get(sha, []) if old == p}


def _joined_in_order(commits: RangeLog, more: RangeLog, order: Mapping[str, int]) -> RangeLog:
    known = {sha for sha, _ in commits}
    return sorted([*commits, *(c for c in more if c[0] not in known)], key=lambda c: order.get(c[0], 0))


def _deleted(commits: list[tuple[str, FileVersions]], paths: Sequence[str]) -> dict[str, str]:
    newest = _newest_versions(commits, set(paths))
    return {p: sha for p, (sha, new) in newest.items() if set(new) == {"0"}}


def _newest_versions(commits: list[tuple[str, FileVersions]], wanted: set[str]) -> dict[str, tuple[str, str]]:
    newest: dict[str, tuple[str, str]] = {}
    for sha, files in commits:
        for path, _, new in files:
            if path in wanted and path not in newest:
                newest[path] = (sha, new)
    return newest


def _patch_ids(
    repo: git.Repository, pairs: Sequence[tuple[str, str | None]], diffs: Mapping[str, bytes]
) -> dict[str, str]:
    # Split over the cores: diff-tree and patch-id are single-threaded, and a base range of
    # thousands of commits is most of a cold check.
    known = {c: diffs[c] for c, _ in pairs if c in diffs}
    rest = [pair for pair in pairs if pair[0] not in known]
    chunks = _per_pipeline(rest)
    if len(chunks) + bool(known) <= 1:
        return repo.patch_ids_of_diffs(known) if known else repo.patch_ids_of_commits(rest)
    hashed = Pending(repo.patch_ids_of_diffs, known)
    found = map_on_threads(repo.patch_ids_of_commits, chunks, len(chunks))
    return {commit: pid for part in [*found, hashed.result()] for commit, pid in part.items()}


def _per_pipeline(pairs: Sequence[tuple[str, str | None]]) -> list[Sequence[tuple[str, str | None]]]:
    parts = max(1, min(_PIPELINES, cores(), len(pairs) // _PER_PIPELINE))
    size = max(1, -(-len(pairs) // parts))
    return [pairs[k : k + size] for k in range(0, len(pairs), size)]


_PICK_MARKERS = ("cherry picked from", "herry-picked-from")


def _read_messages(history: BaseRange) -> None:
    for commit, message in history.messages.items():
        for src in _named_in(message, _PICK_MARKERS, PICKED_FROM):
            history.picked_from.setdefault(src, []).append(commit)
        for spid in _named_in(message, ("tack-Patch-Id",), SPID):
            history.spids.setdefault(spid, []).append(commit)
        for cid in _named_in(message, ("Change-Id:",), CHANGE_ID):
            history.change_ids.setdefault(cid, []).append(commit)
        for undone in _named_in(message, ("This reverts commit",), REVERTS):
            history.reverts.setdefault(undone, []).append(commit)
            history.undoes.setdefault(commit, []).append(undone)


def _named_in(message: str, markers: tuple[str, ...], pattern: re.Pattern[str]) -> list[str]:
    # A substring test first: most messages name nothing, and it costs far less than the pattern.
    return pattern.findall(message) if any(m in message for m in markers) else []


def _undone_sources(repo: git.Repository, reverts: dict[str, list[str]], sources: set[str]) -> dict[str, list[str]]:
    """source -> the range commits that reverted it, directly or by reverting the merge bringing it in."""
    out: dict[str, list[str]] = {}
    merges = _reverted_merges(repo, reverts, sources)
    for undone, by in reverts.items():
        for src in _sources_undone(repo, undone, sources, merges):
            out.setdefault(src, []).extend(by)
    return out


def _reverted_merges(
    repo: git.Repository, reverts: dict[str, list[str]], sources: set[str]
) -> dict[str, git.CommitInfo]:
    others = [u for u in reverts if u not in sources]
    if not sources or not others:
        return {}
    # A process of its own, not the persistent reader: the scan may run beside the content's reads.
    present = [u for u, ok in repo.has_objects(others).items() if ok]
    return _merges_among(repo, present) if present else {}


def _merges_among(repo: git.Repository, shas: list[str]) -> dict[str, git.CommitInfo]:
    return {i.sha: i for i in repo.commit_infos(shas) if len(i.parents) > 1}


def _sources_undone(
    repo: git.Repository, undone: str, sources: set[str], merges: dict[str, git.CommitInfo]
) -> AbstractSet[str]:
    if undone in sources:
        return {undone}
    info = merges.get(undone)
    if info is None:
        return set()
    brought = set(repo.rev_list(*info.parents[1:], *("^" + p for p in info.parents[:1])))
    return sources & brought
