"""Each signal of the judgement as a small function: from the range, the candidate and what was measured, a typed fact
for the verdict table and ``Evidence`` in words for the maintainer."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from ggstack import git, replay
from ggstack.check.containment import UNREADABLE, Containment, Unit
from ggstack.check.files import is_zero
from ggstack.check.history import REVERT_OF, BaseRange, normal_subject, pr_numbers
from ggstack.check.own import describe
from ggstack.check.rules import Decision, Facts, Match, short_ids
from ggstack.diff import FileChange, paths_of
from ggstack.model import Applied, Evidence, Says, Signal


@dataclass
class Candidate:
    """One change to judge: a stored patch (materialised as a commit) or a commit of ``--commits``."""

    name: str
    commit: str
    parent: str
    changes: list[FileChange]
    sources: list[str]  # commits whose presence in the base means this change: Cherry-picked-from, the commit itself
    spid: str  # Stack-Patch-Id
    subject: str
    original_pr: str | None = None  # "owner/repo#130"
    change_id: str = ""  # Gerrit's Change-Id trailer, where the project uses one
    title: str = ""  # a PR merge's title (its subject says only "Merge pull request #N from …")
    origin: str = ""  # the commit it was imported from (a stored patch's mbox From), where this clone has it

    @property
    def paths(self) -> list[str]:
        return paths_of(self.changes)


def paths_of_all(cands: Iterable[Candidate]) -> list[str]:
    return sorted({p for c in cands for p in c.paths})


def identity(history: BaseRange, cand: Candidate) -> tuple[list[Match], Evidence]:
    """The source is an ancestor of the base, or a base commit names it (-x, Stack-Patch-Id, Change-Id)."""
    found = [*_sources(history, cand), *_named(history, cand)]
    if not found:
        detail = "no identity match: its source is not in the base and no base commit names it"
        return [], Evidence(Signal.IDENTITY, detail, data={"match": False}, says=Says.ABSENT)
    return [m for m, _ in found], _identified(found)


def _identified(found: list[tuple[Match, str]]) -> Evidence:
    live = [m.commit for m, _ in found if not m.undone_by]
    commits = list(dict.fromkeys(live or _reverts_of(found)))
    says = Says.PRESENT if live else Says.UNDONE
    data: dict[str, Any] = {"match": True} if live else {"match": False, "reverted_by": commits}
    detail = "; ".join(words for _, words in found)
    return Evidence(Signal.IDENTITY, detail, commits, data=data, says=says)


def _reverts_of(found: list[tuple[Match, str]]) -> list[str]:
    return [c for m, _ in found for c in m.undone_by]


def _sources(history: BaseRange, cand: Candidate) -> list[tuple[Match, str]]:
    out = []
    for src in dict.fromkeys(s for s in cand.sources if s):
        if src in history.reachable:
            out.append(_merged(history, cand, src))
        for c in history.picked_from.get(src, []):
            out.append(
                (Match("cherry-picked as", c), f"base commit {c[:10]} says it was cherry-picked from {src[:10]}")
            )
    return out


def _merged(history: BaseRange, cand: Candidate, src: str) -> tuple[Match, str]:
    who = "the commit itself" if src == cand.commit else "its source " + src[:10]
    undone = history.undone.get(src, [])
    but = f", but {short_ids(undone)} reverted it" if undone else ""
    # The commit itself is its change; a source it names (a pick's -x line, Cherry-picked-from)
    # is a candidate only: the fork may have adapted it (read whole or not, as a named pick).
    how = "merged as" if src == cand.commit else "source merged as"
    return Match(how, src, list(undone)), f"{who} is reachable from the base{but}"


def _named(history: BaseRange, cand: Candidate) -> list[tuple[Match, str]]:
    out = []
    for c in history.spids.get(cand.spid, []) if cand.spid else []:
        out.append((Match("Stack-Patch-Id in", c), f"base commit {c[:10]} carries its Stack-Patch-Id"))
    for c in history.change_ids.get(cand.change_id, []) if cand.change_id else []:
        if c != cand.commit:
            out.append((Match("Change-Id in", c), f"base commit {c[:10]} carries its Change-Id"))
    return out


def patch_id(history: BaseRange, cand: Candidate) -> tuple[list[Match], Evidence]:
    pid = history.patch_ids.get(cand.commit or cand.name, "")  # no commit: from the patch's own diff
    if not pid:
        detail = "no patch-id (the patch is empty or was not computed)"
        return [], Evidence(Signal.PATCH_ID, detail, data={"match": False})
    same = history.with_patch_id(pid)
    if same:
        return [Match("same patch-id as", c) for c in same], Evidence(
            Signal.PATCH_ID,
            f"same patch-id as {short_ids(same)} (an exact cherry-pick)",
            same,
            data={"match": True, "patch_id": pid},
            says=Says.PRESENT,
        )
    checked = len(history.touching(cand.paths))
    return [], Evidence(
        Signal.PATCH_ID,
        f"patch-id differs from all {checked} base commits that touch its paths",
        data={"match": False, "patch_id": pid, "checked": checked},
        says=Says.ABSENT,
    )


def undo(history: BaseRange, matches: list[Match], reversed_id: str) -> Evidence | None:
    """Mark the matches a later base commit took out: a ``git revert`` of the pick, or its reversed patch-id."""
    by_id = history.with_patch_id(reversed_id)
    for m in matches:
        if m.how in ("merged as", "source merged as"):
            continue  # its reverts (and the reverted merges that brought it) are read by the scan
        m.undone_by += [r for r in [*history.reverted(m.commit), *by_id] if history.newer(r, m.commit)]
        m.undone_by = list(dict.fromkeys(m.undone_by))
    return _undone([m for m in matches if m.undone_by], "then reverted in the base by")


def relanded(history: BaseRange, cand: Candidate, matches: list[Match]) -> Evidence | None:
    """A revert the base took and then landed again ('Reapply "S"'): the base no longer has what it did."""
    m = REVERT_OF.match(cand.subject)
    if m is None:
        return None
    marked = _mark_landed_again(history, history.relanded(m.group(1)), matches)
    return _undone(marked, "but the base landed what it reverts again in")


def _mark_landed_again(history: BaseRange, again: list[str], matches: list[Match]) -> list[Match]:
    marked = []
    for match in matches:
        if match.how not in ("merged as", "source merged as") and not match.undone_by:
            match.undone_by = [c for c in again if history.newer(c, match.commit)]
            marked += [match] if match.undone_by else []
    return marked


def _undone(undone: list[Match], words: str) -> Evidence | None:
    if not undone:
        return None
    by = list(dict.fromkeys(c for m in undone for c in m.undone_by))
    return Evidence(
        Signal.REVERT,
        f"picked as {short_ids([m.commit for m in undone])}, {words} {short_ids(by)}",
        by,
        data={"reverted_by": by, "picks": list(dict.fromkeys(m.commit for m in undone))},
        says=Says.UNDONE,
    )


def modified(history: BaseRange, cand: Candidate, matches: list[Match]) -> Evidence | None:
    touching = history.touching(cand.paths)
    for m in matches:
        if not m.undone_by:
            m.modified_by = _changed_after(history, touching, m.commit)
    since = list(dict.fromkeys(c for m in matches for c in m.modified_by))
    if not since:
        return None
    return Evidence(
        Signal.MODIFIED,
        f"its files were changed after the pick by {short_ids(since)}",
        since,
        says=Says.NOTHING,
    )


def _changed_after(history: BaseRange, touching: list[str], pick: str) -> list[str]:
    return [c for c in touching if c != pick and history.newer(c, pick)][:5]


def replayed(step: replay.Step | None, applies: bool, unreplayed: str = "", uncomputed: str = "") -> Evidence | None:
    """What replaying it said, or why it was not (``unreplayed``) or could not be (``uncomputed``)."""
    if uncomputed:
        detail = f"the replay could not be computed ({uncomputed}): judged without it"
        return Evidence(Signal.EMPTY, detail, data={"replayed": False, "computed": False}, says=Says.NOTHING)
    if step is None:
        return _not_replayed(applies, unreplayed)
    if step.applied is Applied.EMPTY:
        return Evidence(
            Signal.EMPTY, "replaying it onto the base changes nothing", data={"empty": True}, says=Says.PRESENT
        )
    if step.applied is Applied.APPLIED:
        detail = "replaying it onto the base applies cleanly and changes the base"
        return Evidence(Signal.EMPTY, detail, data={"empty": False}, says=Says.ABSENT)
    if step.conflict:
        detail = "replaying it conflicts in " + ", ".join(step.conflict.paths)
        return Evidence(Signal.CONFLICT, detail, data={"paths": step.conflict.paths})
    return None


def _not_replayed(applies: bool, unreplayed: str) -> Evidence | None:
    if unreplayed:
        return Evidence(Signal.EMPTY, unreplayed, data={"replayed": False}, says=Says.NOTHING)
    if not applies:
        return None
    detail = "applies to the base: every hunk's lines are found there in order (git apply's check, in-process)"
    return Evidence(Signal.EMPTY, detail, data={"empty": False, "replayed": False}, says=Says.ABSENT)


def reversed_(applies: bool | None, later: list[str] | None = None) -> Evidence | None:
    if applies is None:
        return None
    if applies:
        detail = "its reverse applies to the base (its post-image is there)"
        if later:
            detail += f", once the later patches it has ({', '.join(later)}) are taken out"
    else:
        detail = "its reverse does not apply to the base"
    return Evidence(
        Signal.REVERSE_APPLY, detail, data={"applies": applies}, says=Says.PRESENT if applies else Says.ABSENT
    )


def same_blobs(history: BaseRange, cand: Candidate, entries: dict[str, tuple[str, str]]) -> list[str]:
    """The range commits that left every file the patch touches as it leaves them, blob for blob."""
    if not cand.changes or _renames(cand):
        return []
    by: list[str] = []
    for fc in cand.changes:
        sha = _made_so_by(history, fc, entries)
        if sha is None:
            return []
        by.append(sha)
    return list(dict.fromkeys(by))


def _renames(cand: Candidate) -> bool:
    return any(fc.old_path and fc.new_path and fc.old_path != fc.new_path for fc in cand.changes)


def _made_so_by(history: BaseRange, fc: FileChange, entries: dict[str, tuple[str, str]]) -> str | None:
    """Where the base has the file as the patch leaves it and it was not so at the merge base."""
    path = fc.new_path or fc.old_path or ""
    if _base_differs(fc, entries.get(path)):
        return None
    versions = history.versions(path)  # (commit, old blob, new blob), newest first
    return versions[0][0] if versions and _made_in_range(versions, fc.new_blob) else None


def _made_in_range(versions: list[tuple[str, str, str]], blob: str | None) -> bool:
    return _blob(versions[0][2]) == blob and _blob(versions[-1][1]) != blob


def _base_differs(fc: FileChange, have: tuple[str, str] | None) -> bool:
    return (have[1] if have else None) != fc.new_blob or bool(have and fc.new_mode and have[0] != fc.new_mode)


def _blob(sha: str) -> str | None:
    return None if is_zero(sha) else sha


def same_blobs_evidence(by: list[str]) -> Evidence:
    detail = f"every file it touches is in the base as it leaves it (the same blobs), made so by {short_ids(by)}"
    return Evidence(Signal.POST_IMAGE, detail, by, says=Says.PRESENT)


def content(c: Containment) -> Evidence:
    if not c.judged:
        detail = "not compared line by line: the patch's pre-image is not in this repository"
        return Evidence(Signal.CONTENT, detail, data={"judged": False})
    if not c.units:
        detail = "the patch changes nothing: there is nothing to bring into the base"
        return Evidence(Signal.CONTENT, detail, fraction=1.0, data={"units": []}, says=Says.PRESENT)
    detail, says = _content_words(c)
    detail += _where_judged(c)
    data: dict[str, Any] = {"units": _units(c)}
    unread = list(dict.fromkeys(u.path for u in c.units if u.reason == UNREADABLE))
    if unread:
        detail += f"; not computed for {', '.join(unread)}: the base's version is not in this clone"
        data["uncomputed"] = unread
    return Evidence(Signal.CONTENT, detail, fraction=round(c.fraction, 4), data=data, says=says)


def _where_judged(c: Containment) -> str:
    moved = _moved_by_the_base(c)
    words = f" (judged where the base moved them: {', '.join(moved)})" if moved else ""
    if c.came_from:
        split = ", ".join(f"{p}'s code in {q}" for p, q in c.came_from.items())
        words += f" (judged where the base has what its own side moved: {split})"
    return words


def _moved_by_the_base(c: Containment) -> list[str]:
    moved = [f"{p} in {to}" for p, to in c.base_paths.items() if to != p and p not in c.renamed]
    return moved + [f"{p}'s code in {to}" for p, to in c.elsewhere.items()]


def _units(c: Containment) -> list[dict[str, Any]]:
    return [
        {
            "path": u.path,
            "what": u.what,
            "present": u.present,
            "reason": u.reason,
            "lines": u.weight,
            "by": u.by,
            **({"older_than_range": True} if u.older else {}),
        }
        for u in c.units
    ]


def _content_words(c: Containment) -> tuple[str, Says]:
    counted = c.counted
    tail = _older_words(counted)
    if c.all_present:
        return _all_there(c) + tail, Says.PRESENT if c.all_earned else Says.NOTHING
    return _some_there(counted, tail)


def _older_words(counted: list[Unit]) -> str:
    older = sum(1 for u in counted if u.present and not u.earned)
    return f" ({older} of them already there before the range: no evidence)" if older else ""


def _some_there(counted: list[Unit], tail: str) -> tuple[str, Says]:
    present = sum(1 for u in counted if u.present)
    missing = "; ".join(f"{u.path}: {u.what}: {u.reason}" for u in counted if not u.present)
    if present:
        return f"{present} of {len(counted)} changes present{tail}; missing: {missing}", Says.NOTHING
    return f"none of its {len(counted)} changes is in the base: {missing}", Says.ABSENT


def _all_there(c: Containment) -> str:
    counted = c.counted
    ws = ", ignoring trailing whitespace" if any(u.whitespace for u in counted) else ""
    pct = round(100 * c.fraction)
    detail = f"all {len(counted)} changes present in the base ({pct}% of informative lines brought by base commits){ws}"
    whole = [u.reason for u in counted if u.block is None]
    return detail + (": " + "; ".join(dict.fromkeys(whole)) if whole else "")


def own_lines(units: list[Unit]) -> Evidence:
    """The fork's own lines, named: what keeps the patch from ever being represented."""
    shown = "; ".join(describe(units))
    n = len(units)
    detail = (
        f"{n} of its changes {'is' if n == 1 else 'are'} the fork's own: missing from the base where no base commit "
        f"touched since the merge base, or in a file the base never had ({shown})"
    )
    return Evidence(Signal.CONTENT, detail, data={"own_lines": describe(units, limit=n)}, says=Says.ABSENT)


def left_out(blocks: list[str]) -> Evidence:
    """The blocks a partial's remaining diff cannot carry."""
    shown = "; ".join(blocks[:5]) + (f"; and {len(blocks) - 5} more" if len(blocks) > 5 else "")
    detail = (
        f"the remaining diff leaves out {len(blocks)} block(s) with no clean place in the base (the base "
        f"changed their place its own way, or the file would not parse with them), to port by hand: {shown}"
    )
    return Evidence(Signal.CONTENT, detail, data={"left_out": blocks}, says=Says.NOTHING)


def blame(c: Containment) -> Evidence | None:
    """Which base commits brought the present lines in, with shares of the informative lines."""
    counts, older = _brought_weights(c)
    total = sum(counts.values()) + older
    if not total or not counts:
        return None
    shares = {sha: round(n / total, 4) for sha, n in sorted(counts.items(), key=lambda kv: -kv[1])}
    return Evidence(
        Signal.BLAME,
        _blame_words(shares, older, total),
        list(shares),
        data={"shares": shares, "older_than_merge_base": round(older / total, 4)},
        says=Says.PRESENT,
    )


def _blame_words(shares: dict[str, float], older: float, total: float) -> str:
    if not older and len(shares) == 1:
        return f"100% of added lines come from {next(iter(shares))[:10]}"
    parts = [f"{round(100 * f)}% {sha[:10]}" for sha, f in shares.items()]
    if older:
        parts.append(f"{round(100 * older / total)}% older than the range")
    return "added lines come from " + ", ".join(parts)


def _brought_weights(c: Containment) -> tuple[dict[str, float], float]:
    counts: dict[str, float] = {}
    older = 0.0
    for u in c.counted:
        if not u.present:
            continue
        weight = max(u.weight, 1)
        if u.by:
            for sha in u.by:
                counts[sha] = counts.get(sha, 0.0) + weight / len(u.by)
        else:
            older += weight
    return counts, older


def hints(history: BaseRange, cand: Candidate, known: set[str]) -> tuple[list[str], Evidence | None]:
    """Base commits with the same subject, or naming the patch's PR, not already ``known``: never a verdict."""
    same = _with_its_subject(history, cand, known)
    numbers = [cand.original_pr.rpartition("#")[2]] if cand.original_pr else pr_numbers(cand.subject)
    by_pr = _naming_its_pr(history, cand, numbers, known)
    # The PR's first: its number names one change, where a title can recur (a bot's "Update the
    # pin" PR opened again and again); callers read the first few.
    found = list(dict.fromkeys(by_pr + same))
    if not found:
        return [], None
    return found, Evidence(Signal.HINT, _hint_words(same, by_pr, numbers), found, data={"hint": "subject-or-pr"})


def _with_its_subject(history: BaseRange, cand: Candidate, known: set[str]) -> list[str]:
    return [c for s in (cand.subject, cand.title) if s for c in history.same_subject(s) if c not in known]


def _naming_its_pr(history: BaseRange, cand: Candidate, numbers: list[str], known: set[str]) -> list[str]:
    return [c for n in numbers if n for c in history.with_pr_number(n) if c not in known and c != cand.commit]


def _hint_words(same: list[str], by_pr: list[str], numbers: list[str]) -> str:
    words = []
    if same:
        words.append(f"{short_ids(same)} {'has' if len(set(same)) == 1 else 'have'} the same subject")
    if by_pr:
        words.append(f"{short_ids(by_pr)} {'names' if len(set(by_pr)) == 1 else 'name'} PR #{', #'.join(numbers)}")
    return "; ".join(words)


def superseded(
    repo: git.Repository, cand: Candidate, author: str, changed: list[str], known: AbstractSet[str]
) -> tuple[list[str], Evidence | None]:
    """Of the base commits that changed the patch's lines another way, those by its author or with its title."""
    changed = [c for c in changed if c not in known]
    if not changed:
        return [], None
    found = _by_author_or_title(repo, changed, author, normal_subject(cand.subject))
    if not found:
        return [], None
    detail = f"superseded? {short_ids(found)}, by the same author or with the same title, changed its lines another way"
    return found, Evidence(Signal.HINT, detail, found, data={"hint": "superseded"})


def _by_author_or_title(repo: git.Repository, shas: list[str], author: str, title: str) -> list[str]:
    return [
        info.sha
        for info in repo.commit_infos(shas)
        if (author and info.author_email == author) or (title and normal_subject(info.message.split("\n")[0]) == title)
    ]


def grouped(names: list[str], by: list[str], how: str) -> Evidence:
    first_last = names[0] if len(names) == 1 else f"{names[0]}–{names[-1]}"
    return Evidence(
        Signal.GROUP,
        f"{first_last} together are in the base as {short_ids(by)}: {how}",
        by,
        data={"group": names},
        says=Says.PRESENT,
    )


def decided(d: Decision) -> Evidence:
    return Evidence(Signal.RULE, f"{d.rule}: {d.why}", d.represented_by, data={"rule": d.rule})


def facts_of(c: Containment, step: replay.Step | None, applies: bool, reverse: bool | None) -> Facts:
    replay_state = step.applied if step is not None else (Applied.APPLIED if applies else None)
    return Facts(content=c, replay=replay_state, reverse=reverse)
