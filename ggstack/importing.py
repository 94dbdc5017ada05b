"""``ggstack import``: commits of the fork, or an existing series, become carry patches.
It decides what enters the series and hands ``series`` a new Stack; it writes nothing."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ggstack import existing_series, git
from ggstack.errors import UserError
from ggstack.import_range import (
    BEHIND,
    EMPTY,
    MERGE_OF_BASE,
    MERGE_OF_RANGE,
    ON_BASE,
    PR_MERGE,
    LeftOut,
    Selection,
    on_the_base,
    select,
)
from ggstack.model import Patch, Stack, TargetConfig
from ggstack.series import store
from ggstack.series.order import renumbered
from ggstack.series.patchfile import (
    PR_REF,
    T_CHERRY_PICKED,
    T_DROPPED,
    T_ORIGINAL_PR,
    T_STACK_PATCH_ID,
    checked_provenance,
    parse_patch,
    picked_from_line,
)


@dataclass(frozen=True)
class Imported:
    """What it noticed on the way is said in the output, never silently."""

    stack: Stack
    added: tuple[Patch, ...]
    left_out: tuple[LeftOut, ...] = ()
    upstream: tuple[str, ...] = ()  # imported commits whose patch-id A already has (git rebase skips them)
    on_base: tuple[str, ...] = ()  # imported commits the stack's base already has (a range through a merge of it)
    reassigned: tuple[Reassigned, ...] = ()  # carried Stack-Patch-Ids another patch already has


@dataclass(frozen=True)
class Reassigned:
    """Two patches with one Stack-Patch-Id would share (and fight over) one PR."""

    index: int  # of the added patch
    carried: str
    holder: str  # "stack/0001-name.patch", or the label of an earlier source of this import


def commits(
    repo: git.Repository,
    stack: Stack,
    revs: Sequence[str],
    *,
    original_pr: str | None = None,
    only: Sequence[str] = (),
    exclude: Sequence[str] = (),
    dropped: Sequence[str] = (),
    keep_merged: bool = False,
) -> Imported:
    """``revs``: shas or ``A..B`` ranges, taken as ``git rebase`` replays them. Commits whose patch-id
    ``A`` has stay (``upstream``): whether the base has them is ``check``'s judgement."""
    _check_options(original_pr, only, exclude)
    selection = select(repo, revs, stack.config.target, keep_merged=keep_merged)
    if not selection.commits:
        left = f": {_nothing_left(selection.left_out)}" if selection.left_out else ""
        raise UserError(f"{' '.join(revs)}: no commits to import{left}")
    infos, changes, empty = _changing(repo, repo.commit_infos(selection.commits), _range_hint(stack, revs, selection))
    if not infos:
        raise UserError(f"{' '.join(revs)}: no commits to import: the ones it has change nothing (an empty commit)")
    new, reassigned = _patches(repo, stack, infos, changes, original_pr, only, exclude, dropped)
    after = renumbered(stack, [*stack.patches, *new])
    added = after.patches[len(stack.patches) :]
    _refuse_duplicates(stack, added, [f"commit {i.sha[:12]}" for i in infos])
    on_base = _on_base(repo, stack, [i.sha for i in infos])
    left_out = tuple([*selection.left_out, *empty])
    return Imported(after, added, left_out, tuple(selection.upstream), on_base, tuple(reassigned))


def _check_options(original_pr: str | None, only: Sequence[str], exclude: Sequence[str]) -> None:
    if original_pr is not None and not PR_REF.match(original_pr):
        raise UserError(f"--original-pr must look like owner/repo#123 (or #123), not {original_pr!r}")
    for flag, patterns in (("--only", only), ("--exclude", exclude)):
        for pattern in patterns:
            if os.path.isabs(pattern) or ".." in pattern.split("/"):
                raise UserError(
                    f"{flag} {pattern}: a path outside the repository (paths are relative to its top, e.g. vllm/)"
                )


def _nothing_left(left_out: Sequence[LeftOut]) -> str:
    if any(m.why in (ON_BASE, BEHIND) for m in left_out):
        return (
            f"the base has them or a merge of the base brought them ({len(left_out)} left out; "
            "--keep-merged imports them)"
        )
    return "it holds only merges (left out, as git rebase does)"


def _range_hint(stack: Stack, revs: Sequence[str], selection: Selection) -> str:
    """A root commit in a range: likely a lower end that is not the base."""
    ranges = [r for r in revs if ".." in r and "..." not in r]
    if len(ranges) != 1:
        return ""
    tip = ranges[0].split("..", 1)[1] or "HEAD"
    return (
        f"; {ranges[0]} takes {len(selection.commits)} commit{'s' if len(selection.commits) != 1 else ''}, "
        "down to a root: "
        f"is its lower end the base ({stack.config.target.base}..{tip})?"
    )


def _changing(
    repo: git.Repository, infos: Sequence[git.CommitInfo], hint: str = ""
) -> tuple[list[git.CommitInfo], list[list[git.TreeChange]], list[LeftOut]]:
    """Empty commits are left out, as git rebase drops them."""
    _refuse_roots(infos, hint)
    changes = repo.tree_changes([(i.sha, i.parents[0]) for i in infos])
    empty = [LeftOut(i.sha, i.message.split("\n", 1)[0], EMPTY) for i, c in zip(infos, changes) if not c]
    kept = [(i, c) for i, c in zip(infos, changes) if c]
    return [i for i, _ in kept], [c for _, c in kept], empty


def _refuse_roots(infos: Sequence[git.CommitInfo], hint: str) -> None:
    for info in infos:
        if not info.parents:
            raise UserError(f"commit {info.sha[:12]} is a root commit; there is nothing to replay it onto{hint}")


def _on_base(repo: git.Repository, stack: Stack, shas: Sequence[str]) -> tuple[str, ...]:
    """A range through a branch that merged the base."""
    found = on_the_base(repo, stack.config.target, shas)
    return tuple(s for s in shas if s in found)


def from_series(repo: git.Repository, stack: Stack, path: str, *, onto: str | None = None) -> Imported:
    """Each patch applied onto the one before (``git apply`` in a temporary index), stored as that commit's import."""
    incoming = existing_series.read(repo, path)
    parent = _series_base(repo, stack, incoming, onto)
    tree = repo.resolve(parent, "tree")
    me = repo.committer_ident()
    sources = []
    # Where the series started, unless the user said: a series made on an older commit of the fork
    # (format-patch without --base) meets the base's own copy of a change and does not apply or is empty.
    started_as_recorded = onto or (incoming[0].base and parent == incoming[0].base)
    hint = "" if started_as_recorded else "; give --onto the commit the series was made on"
    for item in incoming:
        new_tree = _applied(repo, tree, item, parent, hint)
        commit = repo.write_commit(new_tree, [parent], item.message, _author_ident(repo, item, me), me)
        label = item.path + (f":{item.line}" if item.line > 1 else "")
        sources.append(_Source(commit, parent, item.message, _item_trailers(stack, item), item.source or commit, label))
        parent, tree = commit, new_tree
    new, reassigned = _stored(repo, stack, sources)
    after = renumbered(stack, [*stack.patches, *new])
    added = after.patches[len(stack.patches) :]
    _refuse_duplicates(stack, added, [s.label for s in sources])
    return Imported(after, added, reassigned=tuple(reassigned))


def _item_trailers(stack: Stack, item: existing_series.Incoming) -> list[tuple[str, str]]:
    trailers = [(T_ORIGINAL_PR, item.original_pr)] if item.original_pr else []
    picked = item.picked_from or picked_from_line(item.message)
    trailers += [(T_CHERRY_PICKED, picked)] if picked else []
    trailers += item.trailers
    content = hashlib.sha1(item.message.encode("utf-8", "surrogateescape") + b"\0" + item.diff).hexdigest()
    trailers.append((T_STACK_PATCH_ID, _stack_patch_id(stack.name, content, [])))
    return trailers


def _series_base(
    repo: git.Repository, stack: Stack, incoming: Sequence[existing_series.Incoming], onto: str | None
) -> str:
    if onto:
        return repo.resolve(onto)
    recorded = incoming[0].base
    if recorded and repo.try_resolve(recorded):
        return recorded
    target = stack.config.target
    for ref in (target.base, f"{target.remote}/{target.base}"):
        sha = repo.try_resolve(ref)
        if sha:
            return sha
    raise UserError(
        f"no base to apply the series onto: the stack's base {target.base!r} is not in this repository; give --onto REV"
    )


def _applied(repo: git.Repository, tree: str, item: existing_series.Incoming, parent: str, hint: str = "") -> str:
    new_tree, why = repo.apply_to_tree(tree, item.diff)
    if new_tree is None:
        new_tree, _ = repo.apply_to_tree(tree, item.diff, three_way=True)
    if new_tree is None:
        raise UserError(
            f"does not apply onto {parent[:12]} (the base, then the patches before it): {why.strip()}{hint}",
            path=item.path,
            line=item.line,
        )
    if new_tree == tree:
        raise UserError(
            f"changes nothing on {parent[:12]} (the base, then the patches before it): an empty patch, "
            f"or one that commit already has{hint}",
            path=item.path,
            line=item.line,
        )
    return new_tree


def _author_ident(repo: git.Repository, item: existing_series.Incoming, me: str) -> str:
    name, email, date = me.rsplit(" ", 2)[0], "", " ".join(me.rsplit(" ", 2)[1:])
    if item.author:
        name, email = item.author
    else:
        name, _, email = name.partition(" <")
        email = email.rstrip(">")
    ident = repo.ident(name, email, item.date or date)
    if ident is None:
        raise UserError(
            f"author {name!r} <{email}> with date {item.date!r}: git cannot read it", path=item.path, line=item.line
        )
    return ident


def notes(done: Imported) -> list[str]:
    out = _merge_notes(done) + _empty_notes(done) + _am_break_notes(done) + _reassigned_notes(done)
    out += _base_notes(done)
    return out + _kept_notes(done)


def _merge_notes(done: Imported) -> list[str]:
    out = []
    for why in (MERGE_OF_BASE, MERGE_OF_RANGE):
        merges = [m for m in done.left_out if m.why == why]
        if merges:
            what = "merge" if len(merges) == 1 else "merges"
            listed = ", ".join(f"{m.commit[:12]} {m.subject!r}" for m in merges)
            out.append(f"left out {len(merges)} {what}{why.removeprefix('merge')}: {listed}")
    return out


def _am_break_notes(done: Imported) -> list[str]:
    breaks = [(patch, line) for patch in done.added if (line := _am_break(patch.message))]
    if len(breaks) > 3:  # a bot's messages (dependabot's "---"): one line, not one a patch
        cut = ", ".join(p.name for p, _ in breaks[:5]) + (f" and {len(breaks) - 5} more" if len(breaks) > 5 else "")
        return [
            f"{len(breaks)} messages have a line git am ends them at (such as {breaks[0][1][1]!r}); ggstack reads "
            f"whole messages, `git am` of those files keeps what comes before: {cut}"
        ]
    return [
        f"{patch.name}: its message has a line git am ends it at (line {line[0]}: {line[1]!r}); "
        "ggstack reads the whole message, `git am` of the file keeps what comes before"
        for patch, line in breaks
    ]


def _kept_notes(done: Imported) -> list[str]:
    out = []
    names = {p.source_commit: p.name for p in done.added}
    if done.on_base:
        out.append(
            f"{len(done.on_base)} imported commit(s) are already on the stack's base "
            f"{done.stack.config.target.base!r} (`ggstack check` calls them represented): "
            f"{_first_ten(names, done.on_base)}"
        )
    if done.upstream:
        out.append(
            f"kept {len(done.upstream)} already upstream by patch-id (git rebase would skip them; "
            f"`ggstack check` judges them): {_first_ten(names, done.upstream)}"
        )
    return out


def _base_notes(done: Imported) -> list[str]:
    target = done.stack.config.target
    out = []
    on_base = [m for m in done.left_out if m.why == ON_BASE]
    if on_base:
        out.append(
            f"left out {len(on_base)} commit{'s' * (len(on_base) > 1)} already on the stack's base {target.base!r} "
            f"(the range reaches them through a merge of it; --keep-merged imports them): {_listed(on_base)}"
        )
    behind = [m for m in done.left_out if m.why == BEHIND]
    if behind:
        out.append(
            f"left out {len(behind)} commit{'s' * (len(behind) > 1)} that a merge of the base brought in, which "
            f"{target.base!r} here does not have: the base ref looks behind the branch that was merged "
            f"(`git fetch {target.remote}`, then import again; --keep-merged imports them): {_listed(behind)}"
        )
    return out


def _listed(left_out: Sequence[LeftOut]) -> str:
    shown = ", ".join(f"{m.commit[:12]} {m.subject!r}" for m in left_out[:10])
    return shown + (f" and {len(left_out) - 10} more" if len(left_out) > 10 else "")


def _first_ten(names: Mapping[str | None, str], commits: Sequence[str]) -> str:
    """A list, not a 4,000-character line."""
    listed = ", ".join(names.get(c, c[:12]) for c in commits[:10])
    return listed + (f" and {len(commits) - 10} more" if len(commits) > 10 else "")


def _empty_notes(done: Imported) -> list[str]:
    empty = [m for m in done.left_out if m.why == EMPTY]
    if not empty:
        return []
    listed = ", ".join(f"{m.commit[:12]} {m.subject!r}" for m in empty)
    return [f"left out {len(empty)} empty commit{'s' * (len(empty) > 1)} (they change nothing): {listed}"]


def _reassigned_notes(done: Imported) -> list[str]:
    return [
        f"{done.added[r.index].name}: given a new {T_STACK_PATCH_ID} "
        f"{done.added[r.index].provenance.stack_patch_id}; the one its source carried, {r.carried}, "
        f"is {r.holder}'s (one id, one PR)"
        for r in done.reassigned
    ]


def _am_break(message: str) -> tuple[int, str] | None:
    """The first body line ``git am`` takes for the start of the patch (mailinfo's patchbreak)."""
    for n, line in enumerate(message.split("\n")[1:], 2):
        if line.startswith(("diff -", "Index: ")) or re.match(r"---(\s*$| \S)", line):
            return n, line
    return None


def _refuse_duplicates(stack: Stack, added: Sequence[Patch], labels: Sequence[str]) -> None:
    existing = {p.provenance.stack_patch_id: p.name for p in stack.patches}
    first: dict[str, str] = {}
    for patch, label in zip(added, labels):
        spid = patch.provenance.stack_patch_id
        if spid in existing:
            raise UserError(
                f"{label} is already in the stack as {existing[spid]} "
                f"(same {T_STACK_PATCH_ID}: imported before, or made from that patch); nothing was imported"
            )
        if spid in first:
            raise UserError(f"{first[spid]} and {label} carry the same {T_STACK_PATCH_ID} {spid}; import one of them")
        first[spid] = label


def _patches(
    repo: git.Repository,
    stack: Stack,
    infos: Sequence[git.CommitInfo],
    changes: Sequence[Sequence[git.TreeChange]],
    original_pr: str | None,
    only: Sequence[str],
    exclude: Sequence[str],
    dropped: Sequence[str],
) -> tuple[list[Patch], list[Reassigned]]:
    kept_of = []
    sources = []
    for info, changed in zip(infos, changes):
        kept, left_out = _kept_paths(info.sha, [c.path for c in changed], only, exclude)
        kept_of.append(kept)
        message = _merge_message(info.message) if len(info.parents) > 1 else info.message
        pr = original_pr or _pr_from_message(info.message, stack.config.target)
        trailers = _commit_trailers(stack, info, pr, kept, _dropped_texts(left_out, dropped))
        sources.append(_Source(info.sha, info.parents[0], message, trailers, info.sha, f"commit {info.sha[:12]}"))
    limit = sorted({p for kept in kept_of for p in kept}) if (only or exclude) else []
    return _stored(repo, stack, sources, limit)


def _commit_trailers(
    stack: Stack, info: git.CommitInfo, pr: str | None, kept: Sequence[str], dropped: Sequence[str]
) -> list[tuple[str, str]]:
    """Only a pick gets ``Cherry-picked-from``: a fork's own commit is named by the mbox "From " line."""
    trailers = [(T_ORIGINAL_PR, pr)] if pr else []
    picked = picked_from_line(info.message)
    trailers += [(T_CHERRY_PICKED, picked)] if picked else []
    trailers += [(T_DROPPED, text) for text in dropped]
    trailers.append((T_STACK_PATCH_ID, _stack_patch_id(stack.name, info.sha, kept)))
    return trailers


@dataclass(frozen=True)
class _Source:
    commit: str
    parent: str
    message: str
    trailers: list[tuple[str, str]]
    named: str  # the commit the mbox "From " line names: where the patch was taken from
    label: str  # what an error names: "commit 1234abcd", or the file it was read from


def _stored(
    repo: git.Repository, stack: Stack, sources: Sequence[_Source], limit: Sequence[str] = ()
) -> tuple[list[Patch], list[Reassigned]]:
    """Scratch copies carrying the messages with their trailers, and one ``format-patch`` of all of them."""
    messages, reassigned = _unshared_ids(stack, sources)
    done = git.add_trailers_many([(m, s.trailers) for m, s in zip(messages, sources)], once=(T_STACK_PATCH_ID,))
    scratch = repo.copies_with_messages([(s.commit, s.parent, m) for s, (m, _) in zip(sources, done)])
    files = repo.format_patches([(c, s.parent) for c, s in zip(scratch, sources)], limit)
    patches = []
    for source, c in zip(sources, scratch):
        fname, data = files.pop(c)  # one file's bytes at a time: a big patch is not held twice
        # The mbox "From " line names the commit the patch was taken from, not our scratch copy.
        at = data.find(c.encode())
        if at >= 0:
            data = b"".join((memoryview(data)[:at], source.named.encode(), memoryview(data)[at + len(c) :]))
        patches.append(parse_patch(data, os.path.join(stack.path, fname)))
    return _checked(patches, [t for _, t in done], [s.label for s in sources]), reassigned


def _unshared_ids(stack: Stack, sources: Sequence[_Source]) -> tuple[list[str], list[Reassigned]]:
    """A carried Stack-Patch-Id another stack or an earlier source has gets a new one."""
    key = T_STACK_PATCH_ID.lower()
    maybe = [i for i, s in enumerate(sources) if key in s.message.lower()]
    messages = [s.message for s in sources]
    if not maybe:
        return messages, []
    used = _used_ids(stack)
    reassigned = []
    for i, trailers in zip(maybe, git.parse_trailers([messages[i] for i in maybe]), strict=True):
        for carried in _carried_ids(trailers):
            if carried in used:
                messages[i] = _without_id(messages[i], carried)
                reassigned.append(Reassigned(i, carried, used[carried]))
            else:
                used[carried] = sources[i].label
    return messages, reassigned


def _carried_ids(trailers: Sequence[tuple[str, str]]) -> list[str]:
    return [value for key, value in trailers if key.lower() == T_STACK_PATCH_ID.lower()]


def _without_id(message: str, carried: str) -> str:
    line = re.compile(rf"^{re.escape(T_STACK_PATCH_ID)}\s*:\s*{re.escape(carried)}[ \t]*\n?", re.M | re.I)
    return line.sub("", message)


def _used_ids(stack: Stack) -> dict[str, str]:
    """The stack's own are ``_refuse_duplicates``'s: its own patch imported again is refused."""
    patches_dir = os.path.dirname(stack.path)
    used: dict[str, str] = {}
    for name in store.list_stacks(patches_dir):
        if name == stack.name:
            continue
        try:
            other = store.load(patches_dir, name)
        except UserError:
            continue
        used |= {p.provenance.stack_patch_id: f"{name}/{p.name}" for p in other.patches}
    return used


def _checked(patches: list[Patch], trailers_of: Sequence[list[tuple[str, str]]], labels: Sequence[str]) -> list[Patch]:
    checked = []
    for patch, trailers, label in zip(patches, trailers_of, labels):
        try:
            checked.append(checked_provenance(patch, trailers, None))
        except UserError as e:  # the message carried a second or a malformed one
            raise UserError(f"{label}: {e}") from None
    return checked


def _kept_paths(
    sha: str, changed: Sequence[str], only: Sequence[str], exclude: Sequence[str]
) -> tuple[list[str], list[str]]:
    kept = [p for p in changed if _selected(p, only, exclude)]
    _refuse_not_utf8(sha, kept)
    if not kept:
        raise UserError(
            f"importing {sha[:12]} would leave an empty patch (--only/--exclude keep none of: {', '.join(changed) or 'no files'})"
        )
    return kept, [p for p in changed if p not in kept]


def _refuse_not_utf8(sha: str, paths: Sequence[str]) -> None:
    for path in paths:
        if store.not_utf8(path):
            raise UserError(
                f"commit {sha[:12]} changes {path.encode('utf-8', 'surrogateescape')!r}, a file name that is not UTF-8 "
                "(a patch file is UTF-8); leave it out with --exclude"
            )


def _selected(path: str, only: Sequence[str], exclude: Sequence[str]) -> bool:
    if only and not any(_matches(path, pat) for pat in only):
        return False
    return not any(_matches(path, pat) for pat in exclude)


def _matches(path: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    return path == pattern or path.startswith(pattern + "/") or fnmatch.fnmatchcase(path, pattern)


def _dropped_texts(left_out: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The given ones, and a plain one for each left-out path no text covers."""
    named = [_named_paths(t, left_out) for t in texts]
    uncovered = [p for p in left_out if not any(p in n for n in named)]
    out = []
    for text, paths in zip(texts, named):
        if not paths and uncovered:
            text = f"{text} ({uncovered.pop(0)})"
        out.append(text)
    out += [f"left out at import ({p})" for p in uncovered]
    return out


def _named_paths(text: str, left_out: Sequence[str]) -> set[str]:
    m = re.search(r"\(([^()]*)\)\s*$", text)
    names = [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []
    return {p for p in left_out if any(_matches(p, n) for n in names)}


def _pr_from_message(message: str, target: TargetConfig) -> str | None:
    """A subject's ``(#N)`` is a squash merge's, often upstream's: ``target.repo``'s only where PRs
    go there from a fork. A GitHub merge in the range was made where its PRs are merged."""
    subject = message.split("\n", 1)[0]
    m = re.search(r"\(#(\d+)\)\s*$", subject)
    if m:
        return f"{target.repo}#{m.group(1)}" if target.fork else f"#{m.group(1)}"
    m = re.match(r"^Merge pull request #(\d+) from ([^/\s]+)/", subject)
    if m:
        return f"{target.repo}#{m.group(1)}"
    return None


def _merge_message(message: str) -> str:
    if not PR_MERGE.match(message):
        return message
    subject, _, body = message.partition("\n")
    body = body.strip("\n")
    if body:
        title, _, rest = body.partition("\n")
        return title + "\n\n" + (rest.strip("\n") + "\n\n" if rest.strip() else "") + subject + "\n"
    return message


def _stack_patch_id(stack: str, sha: str, kept: Iterable[str]) -> str:
    """Deterministic: importing the same history again writes the same bytes."""
    h = hashlib.sha1(f"{stack}\0{sha}\0{chr(0).join(kept)}".encode()).hexdigest()
    return "I" + h
