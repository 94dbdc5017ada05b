#!/usr/bin/env python3
"""A labelled corpus for ``ggstack check``, from a real project's maintenance branches.

The truth comes from what the maintainers wrote, never from ggstack: a commit
on a release branch is a pick of a main commit when its message says
``(cherry picked from commit X)``, or ``Backport PR #N`` / ends in ``(#N)``
with the PR number of a main commit (a squash, or a merge ``Merge pull
request #N``, whose branch commits are then all picked), or has the same
``git patch-id --stable`` as a main commit. A pick whose source a later
commit reverted (``This reverts commit X``) is not represented; picked,
reverted and picked again, it is.

A commit that no pick names is then read for the other truth sources, in this
order (first that applies; each labels an item, none draws new items):

- ``forward-picked`` (represented): a main commit says ``(cherry picked from
  commit R)`` of this release commit;
- ``same-pull-request`` (represented): a commit of the other side carries the
  same Gerrit ``Pull-request:`` URL (each branch lands the PR under its own
  Change-Id);
- reported, not scored: ``pick-of-unknown`` (a pick line naming a commit not
  on main), ``names-commit`` (its message, or its PR's merge on the branch,
  names a commit of the other side by hash: a port of it, whole or part),
  ``hand-port`` (its PR's merge on the branch says it ports the other
  branch's work and names no PR it backports);
- reported: ``release-notes`` / ``version-bump`` / ``release`` (a release's
  own notes, version and docs, by its paths or its subject);
- ``same-post-image`` (represented): the other side left every file it
  touches with the same blob (git's identity of content, as a patch-id is of
  a diff; the base may have changed the file again since, not deleted it);
  ``post-image-at-base`` (reported): the base has its result, partly since
  before the fork (it undoes its own side's change); ``empty`` (reported): it
  changes no file;
- reported: ``reverts-unreceived`` (a revert of a commit of its own side that
  no pick brought to the base), ``hand-port`` (a release commit whose message
  says it ports the other branch's work, names no commit or PR),
  ``shared-notes`` (it adds a release-note file the other side added too: the
  change is there, or only its note).

Items, each ``(commit, base, truth)``:

- ``rel->main``: every release-branch commit checked onto the main tip
  (picked: represented; picked-then-reverted: not; else a class above, or
  release-only: not);
- ``main->rel``: every pick source checked onto the release tip (represented
  unless every pick was reverted there), and a sample of main commits that
  were not picked (a class above, or unpicked: not represented);
- ``before`` / ``after``: a few picks checked onto main just before and just
  after their source landed (not / represented).

With ``--squash``, also squash-merged feature branches: a branch whose
combined diff has the patch-id of one main commit (the squash), as a list of
commits to import as a stack and check onto that commit.

Written as JSON (keep it out of the repository, e.g. in /tmp) for
``benchmarks/check_accuracy.py``. Not a test: a measurement.

    python benchmarks/judgement_corpus.py --repo /tmp/corpus-pytest.git --main main \\
        --branches 8.2.x 8.3.x 8.4.x 9.0.x --out /tmp/corpus-pytest.json
    python benchmarks/judgement_corpus.py --repo /tmp/corpus-ipython.git --main main \\
        --branches 8.x 9.10.x --squash 'claude/*' --out /tmp/corpus-ipython.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

PICKED = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
PR_IN_SUBJECT = re.compile(r"\(#(\d+)\)")
BACKPORT = re.compile(r"(?i)\bbackport(?:ed)?(?: of)?(?: PR)? #(\d+)")
MERGE_PR = re.compile(r"^Merge pull request #(\d+)")
# A release commit whose message says it carries work of the other branch without naming it
# ("backport the mypy fix", "this was already in 2.0"): the maintainers say it is a port, the
# labeller cannot say of what, nor whether all of it is there; reported, not scored.
HAND_PORT = re.compile(
    r"(?i)\bback-?port(?:ed|ing|s)?\b|\balready (?:in|applied|on|there)\b|\bfrom (?:main|master)\b"
    r"|\bcoming to (?:main|master)\b|\bforward-?port"
)
# Gerrit's record of the GitHub pull request a change came from (sqlalchemy): each branch lands the same PR
# under its own Change-Id, and a pick line is not always there.
PULL_REQUEST = re.compile(r"(?m)^Pull-request:\s*(\S+/pull/\d+)\s*$")
CHANGE_ID = re.compile(r"^Change-Id:\s*(I[0-9a-f]{40})\s*$", re.M)
# Release notes: a release branch's own notes reach main by a forward-port of the notes (a commit
# "cherry-pick changelog from 1.4.54", a merge of the release branch), which the labeller cannot
# call represented or not; such commits are reported, not scored.
ANNOUNCE = re.compile(r"(^|/)(announce|release-[0-9.]+\.rst)", re.I)
VERSION_FILE = re.compile(
    r"(^|/)(conf\.py|__init__\.py|_?version\.py|release\.py|setup\.(py|cfg)|pyproject\.toml|[^/]*\.rst"
    r"|CITATION\.cff|Cargo\.(toml|lock)|package(-lock)?\.json)$"
)
BUMP_FILE = re.compile(r"(^|/)(_?version\.py|release\.py)$")
# A release commit by its subject ("Prepare release version 8.3.0", "release 7.29.0"): the branch's own
# notes, version and regenerated docs; reported, not scored, like release-notes.
RELEASE = re.compile(r"(?i)^(?:prepare |cut )?release (?:version )?v?\d+(?:\.\d+)+\S*(?:\s*\(#\d+\))?$")
# The PR a backport bot's merge names: meeseeksdev's "auto-backport-of-pr-N" branch, patchback's
# "[PR #N/abcdef12 backport]" title and "patchback/backports/8.2.x/<sha>/pr-N" branch.
BOT_BACKPORT = re.compile(r"(?i)backport-of-pr-\d+|\bPR #\d+/[0-9a-f]{7,} backport|backports/\S+/pr-\d+")
NOTES = re.compile(r"(^|/)(changelog|changes|history|whatsnew|release[-_]?notes|news)([/._-]|$)", re.I)


def git(repo: str, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", "-C", repo, *args], input=input, capture_output=True, check=True)
    return proc.stdout.decode(errors="replace")


@dataclass
class Commit:
    sha: str
    parents: list[str]
    subject: str
    message: str
    prs: set[str] = field(default_factory=set)  # the PR numbers it belongs to

    @property
    def merge(self) -> bool:
        return len(self.parents) > 1


def log(repo: str, *rev: str) -> list[Commit]:
    out = git(repo, "log", "--format=%H%x00%P%x00%B%x1e", *rev)
    commits = []
    for rec in out.split("\x1e"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, parents, message = rec.split("\x00", 2)
        commits.append(Commit(sha, parents.split(), message.split("\n", 1)[0], message))
    return commits


DELETED = "-"


def post_images(repo: str, *rev: str) -> dict[str, dict[str, tuple[str, str]]]:
    """commit → {path: (status, the blob it leaves there or DELETED)}: non-merge commits of the range, no renames."""
    out = git(repo, "log", "--no-merges", "--raw", "--no-abbrev", "--no-renames", "--format=%x00%H", *rev)
    images: dict[str, dict[str, tuple[str, str]]] = {}
    for rec in out.split("\x00")[1:]:
        sha, *lines = rec.split("\n")
        files = images.setdefault(sha.strip(), {})
        for line in lines:
            if line.startswith(":"):
                meta, path = line.split("\t", 1)
                _, _, _, blob, status = meta.split()
                files[path] = (status, DELETED if set(blob) == {"0"} else blob)
    return images


def tree(repo: str, rev: str) -> dict[str, str]:
    """path → blob of every file of rev."""
    out = git(repo, "ls-tree", "-r", "--full-tree", "-z", rev)
    return {rec.split("\t", 1)[1]: rec.split()[2] for rec in out.split("\x00") if rec}


def patch_ids(repo: str, *rev: str) -> dict[str, str]:
    """commit → patch-id (non-merge commits of the range)."""
    raw = subprocess.run(
        ["git", "-C", repo, "log", "-p", "--no-merges", "--format=commit %H", *rev], capture_output=True, check=True
    ).stdout
    out = subprocess.run(
        ["git", "-C", repo, "patch-id", "--stable"], input=raw, capture_output=True, check=True
    ).stdout.decode()
    return {c: p for p, c in (line.split() for line in out.splitlines())}


@dataclass
class Side:
    """One side of the fork: its commits since, the files each left, and its tip's tree."""

    ref: str
    commits: dict[str, Commit]
    images: dict[str, dict[str, tuple[str, str]]]  # commit → {path: (status, blob left)}
    tip: dict[str, str]
    wrote: dict[tuple[str, str], str] = field(default_factory=dict)  # (path, blob) → a commit that left it
    added_notes: dict[str, str] = field(default_factory=dict)  # release-notes file → the commit that added it
    pull_requests: dict[str, str] = field(default_factory=dict)  # a Pull-request: trailer's URL → a commit of it

    def __post_init__(self) -> None:
        for sha, files in self.images.items():
            for path, (status, blob) in files.items():
                self.wrote.setdefault((path, blob), sha)
                if status == "A" and NOTES.search(path):
                    self.added_notes.setdefault(path, sha)
        for c in self.commits.values():
            for url in PULL_REQUEST.findall(c.message):
                self.pull_requests.setdefault(url, c.sha)


def side(repo: str, ref: str, since: str, commits: list[Commit]) -> Side:
    return Side(ref, {c.sha: c for c in commits}, post_images(repo, f"{since}..{ref}"), tree(repo, ref))


def own_pr(c: Commit) -> str | None:
    """The PR a main commit landed by: a merge's number, else the last (#N) of the subject."""
    m = MERGE_PR.match(c.subject)
    if m:
        return m.group(1)
    nums = PR_IN_SUBJECT.findall(c.subject)
    return nums[-1] if nums else None


def title(c: Commit) -> str:
    """The PR title a commit stands for: a merge's first body line, else the subject; without what
    backports add ("[8.3.x] ", "Backport PR #N: ", a trailing "(#N)")."""
    t = c.subject
    if MERGE_PR.match(t):
        body = [line for line in c.message.split("\n")[1:] if line.strip()]
        t = body[0] if body else ""
    t = re.sub(r"^(\s*\[[^\]]{1,40}\]\s*)+", "", t)
    t = re.sub(r"^(?i:backport)( of)?( PR)?\s*#?\d*:?\s*", "", t)
    t = re.sub(r"(\s*\(#\d+\))+\s*$", "", t).strip().rstrip(".")
    return t.casefold() if len(t) >= 12 else ""


def named_prs(c: Commit) -> set[str]:
    """Every PR a release commit names: (#N) of the subject (original and backport PR), Backport PR #N."""
    return set(PR_IN_SUBJECT.findall(c.subject)) | set(BACKPORT.findall(c.message))


class Branch:
    """One release branch against main: its commits, main's since the fork, and who picked what."""

    def __init__(self, repo: str, main: str, name: str) -> None:
        self.repo, self.main, self.name = repo, main, name
        self.rel = [c for c in log(repo, f"{main}..{name}") if not c.merge]
        self.main_side = log(repo, f"{name}..{main}")
        self.by_sha = {c.sha: c for c in self.main_side}
        self.by_pr: dict[str, list[Commit]] = {}
        for c in self.main_side:
            pr = own_pr(c)
            if pr:
                self.by_pr.setdefault(pr, []).append(c)
        self.main_pid = patch_ids(repo, f"{name}..{main}")
        self.rel_pid = patch_ids(repo, f"{main}..{name}")
        self.by_title: dict[str, list[Commit]] = {}
        for c in self.main_side:
            if title(c):
                self.by_title.setdefault(title(c), []).append(c)
        self.by_change_id = {cid: c.sha for c in self.main_side for cid in CHANGE_ID.findall(c.message)}
        self.pid_main: dict[str, str] = {}
        for sha, pid in self.main_pid.items():
            self.pid_main.setdefault(pid, sha)
        self.reverted_main = {m: c.sha for c in self.main_side for m in REVERTS.findall(c.message)}
        self.reverted_rel = {m: c.sha for c in self.rel for m in REVERTS.findall(c.message)}
        self.sides = {
            "rel->main": (side(repo, name, main, self.rel), side(repo, main, name, self.main_side)),
            "main->rel": (side(repo, main, name, self.main_side), side(repo, name, main, self.rel)),
        }
        rel_shas = {c.sha for c in self.rel}
        # release commits a main commit says it cherry-picked ("forward port" by pick line)
        self.forward_picks = {
            sha: c.sha
            for c in self.main_side
            for short in PICKED.findall(c.message)
            for sha in rel_shas
            if sha.startswith(short)
        }
        # the merge that brought each release commit onto the branch (its PR's merge), first-parent merges only
        self.merge_of: dict[str, Commit] = {}
        for m in log(repo, "--merges", "--first-parent", f"{main}..{name}"):
            for sha in git(repo, "rev-list", "--no-merges", f"{m.parents[0]}..{m.sha}").split():
                if sha in rel_shas:
                    self.merge_of.setdefault(sha, m)

    def resolve(self, short: str) -> str | None:
        for sha in self.by_sha:
            if sha.startswith(short):
                return sha
        return None

    def marked(self, c: Commit, direction: str) -> Label | None:
        """What the maintainers wrote about a commit that no pick names: the other side's pick line naming
        it, the same pull request landed on both sides (Gerrit's Pull-request: trailer), a pick line naming
        a commit the labeller cannot find, a commit of the other side named in its message or its PR's
        merge, a hand backport PR (a merge that says it ports work and names no PR)."""
        other = self.sides[direction][1]
        if direction == "rel->main" and c.sha in self.forward_picks:
            return (
                True,
                "forward-picked",
                f"{self.main}'s {self.forward_picks[c.sha][:10]} says it is cherry-picked from it",
            )
        for url in PULL_REQUEST.findall(c.message):
            if url in other.pull_requests:
                return True, "same-pull-request", f"{other.ref}'s {other.pull_requests[url][:10]} landed {url} too"
        shorts = PICKED.findall(c.message)
        if direction == "rel->main" and shorts:
            return (
                None,
                "pick-of-unknown",
                f"says it is cherry-picked from {shorts[0][:10]}, not a commit of {self.main}",
            )
        merge = self.merge_of.get(c.sha) if direction == "rel->main" else None
        for text, where in ((c.message, "its message"), (merge.message if merge else "", "its PR's merge")):
            named = names_commit(text, other)
            if named:
                return None, "names-commit", f"{where} names {other.ref}'s {named[:10]}: a port of it, whole or part"
        if merge and HAND_PORT.search(merge.message) and not hands_named(merge):
            return None, "hand-port", f"a commit of {merge.subject[:70]!r}, whose merge says it ports work"
        return None

    def unnamed(self, c: Commit, direction: str, received: Callable[[str], bool]) -> Label | None:
        """A label for a commit that no pick names, from the other truth sources, in this order: the other
        side's pick lines and hand-port merges, a release's notes or version, the files it leaves, a revert
        of what the base never received, a port by message, a release note both sides added."""
        own, base = self.sides[direction]
        kind = unscored(self.repo, c.sha)
        if kind is None and RELEASE.match(c.subject):
            kind = ("release", "its subject says it is a release: the branch's own notes, version and docs")
        port = None
        if direction == "rel->main" and HAND_PORT.search(c.message):
            port = (None, "hand-port", "says it ports the other branch's work, names no commit or PR")
        return (
            self.marked(c, direction)
            or ((None, *kind) if kind else None)
            or same_files(c, own, base)
            or reverts_unreceived(c, own, received)
            or port
            or shared_notes(c, own, base)
        )

    def members(self, merge: Commit) -> list[str]:
        """A merge's branch commits (those on main's side of the fork)."""
        shas = git(self.repo, "rev-list", "--no-merges", f"{merge.parents[0]}..{merge.sha}").split()
        return [s for s in shas if s in self.by_sha]

    def source(self, r: Commit) -> tuple[list[str], str] | None:
        """The main commits r picks, and how the labeller knows."""
        for short in PICKED.findall(r.message):
            sha = self.resolve(short)
            if sha:
                return [sha], "cherry-picked-from"
            if (
                subprocess.run(
                    ["git", "-C", self.repo, "merge-base", "--is-ancestor", short, self.main], capture_output=True
                ).returncode
                == 0
            ):
                return [git(self.repo, "rev-parse", short).strip()], "cherry-picked-from (older main)"
        if r.subject.startswith('Revert "'):  # a revert names the PR it reverts: match the revert itself
            same = self.by_title.get(title(r), [])
            return ([same[0].sha], "same revert title") if same else None
        for cid in CHANGE_ID.findall(r.message):  # Gerrit keeps the change's id through a cherry-pick
            if cid in self.by_change_id:
                return [self.by_change_id[cid]], "Change-Id"
        for pr in sorted(named_prs(r)):
            hits = self.by_pr.get(pr)
            if hits:
                return [c.sha for c in hits], f"PR #{pr}"
        pid = self.rel_pid.get(r.sha)
        if pid and pid in self.pid_main:
            return [self.pid_main[pid]], "patch-id"
        same = self.by_title.get(title(r), [])
        plain = [c for c in same if not c.merge]
        one = plain if len(plain) == 1 else same if len(same) == 1 else []
        if one:  # the backport bot's "[8.3.x] <PR title> (#backport PR)"
            return [one[0].sha], "same PR title"
        return None


Label = tuple[bool | None, str, str]  # truth (None: reported, not scored), class, why


def same_files(c: Commit, own: Side, base: Side) -> Label | None:
    """What the commit leaves in the files it touches, against what the base's side left there (blob ids:
    git's own identity of content, as a patch-id is of a diff)."""
    files = own.images.get(c.sha, {})
    if not files:
        return None, "empty", "changes no file"
    if any(blob != DELETED and path not in base.tip for path, (_, blob) in files.items()):
        return None  # a file the base no longer has: moot or moved elsewhere, not for this rule to say
    by = {base.wrote.get((path, blob)) for path, (_, blob) in files.items()}
    if None not in by:
        names = ", ".join(sorted(b[:10] for b in by if b)[:3])
        return True, "same-post-image", f"{base.ref}'s {names} left every file it touches as it does (same blobs)"
    if all(base.tip.get(path, DELETED) == blob or (path, blob) in base.wrote for path, (_, blob) in files.items()):
        return (
            None,
            "post-image-at-base",
            (
                f"{base.ref} has what it leaves in every file it touches, some since before the fork: it undoes its own "
                "side's change there"
            ),
        )
    return None


def hands_named(merge: Commit) -> bool:
    """A merge that names the PR it backports (a bot's backport PR: its commits past the pick are adaptations)."""
    return bool(BOT_BACKPORT.search(merge.message) or named_prs(merge) - {own_pr(merge)})


HEX = re.compile(r"\b[0-9a-f]{7,40}\b")


def names_commit(text: str, other: Side) -> str | None:
    """A commit of the other side that the text names by its hash (not in a pick or revert line)."""
    text = REVERTS.sub("", PICKED.sub("", text))
    for word in HEX.findall(text):
        for sha in other.commits:
            if sha.startswith(word):
                return sha
    return None


def reverts_unreceived(c: Commit, own: Side, received: Callable[[str], bool]) -> Label | None:
    """A revert of its own side's commit that the base never received: nothing of it to undo there."""
    for short in REVERTS.findall(c.message):
        hits = [sha for sha in own.commits if sha.startswith(short)]
        if hits and not received(hits[0]):
            return None, "reverts-unreceived", f"reverts {hits[0][:10]}, which no pick brought to the base"
    return None


def shared_notes(c: Commit, own: Side, base: Side) -> Label | None:
    """It adds a release-note file that the base's side added too: the base has the change, or only its note."""
    for path, (status, _) in own.images.get(c.sha, {}).items():
        if status == "A" and path in base.added_notes:
            return None, "shared-notes", f"{base.ref}'s {base.added_notes[path][:10]} adds its note {path} too"
    return None


def unscored(repo: str, sha: str) -> tuple[str, str] | None:
    """A commit the labeller cannot call: a release's notes (they reach the other branch by a
    forward-port of the notes, "cherry-pick changelog from 1.4.54"), or only a version bump
    ("back to dev": each branch bumps its own version, and the other's bump has some of its lines)."""
    paths = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split()
    notes = [p for p in paths if NOTES.search(p) or ANNOUNCE.search(p)]
    rest = [p for p in paths if p not in notes]
    if notes and len(rest) <= 6 and all(VERSION_FILE.search(p) for p in rest):
        return "release-notes", "only release notes (and a version bump)"
    if paths and len(paths) <= 2 and all(BUMP_FILE.search(p) for p in paths):
        return "version-bump", "only a version file"
    return None


def branch_items(b: Branch, rng: random.Random, unpicked: float, before: int) -> list[dict]:
    items: list[dict] = []
    main_tip = git(b.repo, "rev-parse", b.main).strip()
    rel_tip = git(b.repo, "rev-parse", b.name).strip()
    picked_main: dict[str, str] = {}  # main commit → the release commit that picked it
    members: dict[str, str] = {}  # commits of a merged PR whose merge was picked (the pick squashes them)
    picks: dict[str, list[str]] = {}  # main commit → every release commit that picked it, newest first
    pairs = []
    sources = {r.sha: b.source(r) for r in b.rel}

    def received_rel(sha: str) -> bool:
        return sources.get(sha) is not None or sha in b.forward_picks

    for r in b.rel:
        src = sources[r.sha]
        item: dict[str, object] = {
            "commit": r.sha,
            "subject": r.subject,
            "base": main_tip,
            "base_ref": b.main,
            "head": b.name,
            "direction": "rel->main",
        }
        if src is None:
            truth, cls, why = b.unnamed(r, "rel->main", received_rel) or (
                False,
                "release-only",
                "no pick marker, PR or patch-id",
            )
            items.append(item | {"truth": truth, "class": cls, "why": why})
            continue
        shas, why = src
        reverted = [b.reverted_main[s] for s in shas if s in b.reverted_main]
        if reverted:
            items.append(
                item
                | {
                    "truth": False,
                    "class": "picked-then-reverted",
                    "why": f"{why}; source reverted on {b.main} by {reverted[0][:10]}",
                    "pair": shas,
                }
            )
        else:
            items.append(item | {"truth": True, "class": "picked", "why": why, "pair": shas})
        pairs.append((r, shas))
        for s in shas:
            c = b.by_sha.get(s)
            picked_main[s] = r.sha
            picks.setdefault(s, []).append(r.sha)
            if c is not None and c.merge:
                for m in b.members(c):
                    members.setdefault(m, r.sha)
    for s in picked_main:
        c = b.by_sha.get(s)
        if c is None:
            continue
        # picked, reverted, picked again: the branch has it if any of its picks stands
        standing = [p for p in picks[s] if p not in b.reverted_rel]
        r_sha = standing[0] if standing else picks[s][0]
        undone = None if standing else b.reverted_rel[r_sha]
        item = {
            "commit": s,
            "subject": c.subject,
            "base": rel_tip,
            "base_ref": b.name,
            "head": b.main,
            "direction": "main->rel",
            "pair": [r_sha],
        }
        if undone:
            items.append(
                item
                | {
                    "truth": False,
                    "class": "picked-then-reverted",
                    "why": f"pick {r_sha[:10]} reverted on {b.name} by {undone[:10]}",
                }
            )
        else:
            items.append(item | {"truth": True, "class": "picked", "why": f"picked as {r_sha[:10]}"})
    for s, r_sha in members.items():
        if s in picked_main:
            continue
        c = b.by_sha[s]
        # One commit of a squashed pick: its lines may have been changed by the PR's later commits,
        # so "represented" is not clear-cut; reported, not scored.
        items.append(
            {
                "commit": s,
                "subject": c.subject,
                "base": rel_tip,
                "base_ref": b.name,
                "head": b.main,
                "direction": "main->rel",
                "pair": [r_sha],
                "truth": None,
                "class": "pr-member",
                "why": f"one commit of a PR picked as {r_sha[:10]}",
            }
        )
    rest = [c for c in b.main_side if not c.merge and c.sha not in picked_main and c.sha not in members]
    k = min(len(rest), round(unpicked * max(1, len(picked_main))))
    for c in rng.sample(rest, k):
        truth, cls, why = b.unnamed(c, "main->rel", lambda sha: sha in picked_main or sha in members) or (
            False,
            "unpicked",
            "not named by any release commit",
        )
        items.append(
            {
                "commit": c.sha,
                "subject": c.subject,
                "base": rel_tip,
                "base_ref": b.name,
                "head": b.main,
                "direction": "main->rel",
                "truth": truth,
                "class": cls,
                "why": why,
            }
        )
    singles = [(r, shas[0]) for r, shas in pairs if len(shas) == 1 and shas[0] in b.by_sha]
    for r, s in rng.sample(singles, min(before, len(singles))):
        first_parent = b.by_sha[s].parents[0]
        common = {"commit": r.sha, "subject": r.subject, "head": b.name, "direction": "rel->main", "pair": [s]}
        items.append(
            common
            | {
                "base": first_parent,
                "base_ref": f"{s[:10]}^",
                "truth": False,
                "class": "before",
                "why": "main just before its source landed",
            }
        )
        if s not in b.reverted_main:
            items.append(
                common
                | {
                    "base": s,
                    "base_ref": s[:10],
                    "truth": True,
                    "class": "after",
                    "why": "main just after its source landed",
                }
            )
    return items


def squash_items(repo: str, main: str, pattern: str) -> list[dict]:
    """Feature branches squash-merged into main: the combined diff's patch-id equals a main commit's."""
    out = []
    refs = git(repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{pattern}").split()
    for ref in refs:
        found = subprocess.run(["git", "-C", repo, "merge-base", main, ref], capture_output=True, text=True)
        fork = found.stdout.strip()
        if found.returncode != 0 or not fork:
            continue  # an unrelated history (a docs site's orphan branch): nothing of main's to be squashed into
        commits = git(repo, "rev-list", "--reverse", "--first-parent", "--no-merges", f"{fork}..{ref}").split()
        if len(commits) < 2 or git(repo, "rev-list", "--merges", f"{fork}..{ref}").strip():
            continue
        paths = git(repo, "diff", "--name-only", fork, ref).split()
        if not paths:
            continue
        combined = git(repo, "diff", fork, ref).encode()
        pid = git(repo, "patch-id", "--stable", input=combined).split()
        if not pid:
            continue
        since = patch_ids(repo, f"{ref}..{main}", "--", *paths)
        squash = [c for c, p in since.items() if p == pid[0]]
        if squash:
            out.append(
                {
                    "branch": ref,
                    "commits": commits,
                    "squash": squash[0],
                    "base": squash[0],
                    "subject": git(repo, "log", "-1", "--format=%s", squash[0]).strip(),
                }
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--main", default="main")
    ap.add_argument("--branches", nargs="+", required=True)
    ap.add_argument("--unpicked", type=float, default=1.0, help="unpicked main commits per pick source")
    ap.add_argument("--before", type=int, default=5, help="before/after items per branch")
    ap.add_argument("--squash", nargs="*", help="ref patterns of feature branches, e.g. 'claude/*'")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    items = []
    for name in args.branches:
        b = Branch(args.repo, args.main, name)
        mine = branch_items(b, rng, args.unpicked, args.before)
        counts: dict[str, int] = {}
        for it in mine:
            counts[it["class"]] = counts.get(it["class"], 0) + 1
        print(f"{name}: {len(b.rel)} release commits, {len(b.main_side)} main commits since; {counts}", file=sys.stderr)
        items += mine
    squash = (
        [sq for pattern in args.squash for sq in squash_items(args.repo, args.main, pattern)] if args.squash else []
    )
    corpus = {
        "repo": args.repo,
        "main": args.main,
        "branches": args.branches,
        "seed": args.seed,
        "items": items,
        "squash": squash,
    }
    with open(args.out, "w") as fh:
        json.dump(corpus, fh, indent=1)
    print(
        f"{len(items)} items ({sum(bool(i['truth']) for i in items)} represented), {len(squash)} squashed branches "
        f"→ {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
