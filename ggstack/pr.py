"""``ggstack pr``: open, update and close the stack's pull requests.

The seed's PR should never have been opened: the base already had its change.
So this stage acts only on what ``check`` (and ``test``) decided, in four
steps: *read* the forge and the remote once (``read``: a ``Snapshot``),
*settle* the commit each needed patch's branch should hold (git only),
*plan* every step as a pure function of the Run, the stack, the snapshot and
those commits (``make_plan``: its rules are tested without a forge), and
*act* in merge order. ``--dry-run`` stops before acting, and without a token
plans against ``NoForge``. What it avoids — noise, duplicates, flapping,
late refusals — is docs/commands/pr.md; each has its place in ``make_plan``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ggstack import git, replay
from ggstack.branches import branch_namespace, branch_refs
from ggstack.cache import Map
from ggstack.errors import InfraError, UserError
from ggstack.forge import Comment, CommitFacts, Forge, MergeFacts, NativeStack, RemotePR, Review
from ggstack.forge.marker import is_closing_comment, read_marker
from ggstack.forge.order import MergeOrder, merge_order
from ggstack.model import Applied, Outcome, Patch, Progress, PRState, Run, Stack, Verdict
from ggstack.picks import Pick, materialize
from ggstack.readiness import MAINTAINERS, Readiness, readiness
from ggstack.report.bodies import Diffstat, closing_comment, pr_body, writes_body
from ggstack.report.escape import md_code
from ggstack.report.words import short
from ggstack.secrets import TOKEN_VARS

NEEDED = (Verdict.UNIQUE, Verdict.PARTIAL)  # the only verdicts that get a PR
OFFLINE = "offline: no forge was read; planned as if nothing existed on it"
_TRAILER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*: .*|\(cherry picked from commit [0-9a-f]+\))$")


def pr(
    repo: git.Repository,
    stack: Stack,
    run: Run,
    *,
    dry_run: bool = False,
    close_redundant: bool = False,
    stacked: bool | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    client: Forge | None = None,
) -> Run:
    """``ggstack pr``: read, settle, plan, and (unless ``dry_run``) act, in merge order.

    Returns a new Run: each Outcome's ``pr`` and ``run.stages["pr"]`` filled
    in. ``client`` is the forge to use (default: GitHub, or ``NoForge`` for a
    dry run without a token). Nothing is ever merged.
    """
    patches = _patches_of(run, stack)
    base_branch = pr_base(repo, stack, run.base_ref)
    forge = client or open_forge(stack, env, dry_run=dry_run)
    try:
        if forge.offline and not dry_run:
            raise UserError("no forge to write to: `pr` without --dry-run needs GITHUB_TOKEN (or GH_TOKEN)")
        snap = read(forge, repo, stack, run, base_branch=base_branch, close_redundant=close_redundant)
        chosen = settle(repo, stack, run, snap)
        plan = make_plan(
            run, stack, snap, chosen, patches, base_branch=base_branch, close_redundant=close_redundant, stacked=stacked
        )
        if not dry_run:
            act(repo, stack, run, plan, forge, progress)
        return record(run, plan, dry_run=dry_run, offline=forge.offline)
    finally:
        forge.close()


def open_forge(stack: Stack, env: Mapping[str, str] | None, *, dry_run: bool) -> Forge:
    """GitHub; for a dry run without a token, the forge on which nothing exists."""
    env = os.environ if env is None else env
    if dry_run and not any(env.get(var, "").strip() for var in TOKEN_VARS):
        from ggstack.forge.none import NoForge

        return NoForge()
    from ggstack.forge.github import GitHub  # PyGithub takes a second to import: only when it is used

    return GitHub(stack.config.target.repo, env=env)


def uses_native(stack: Stack) -> bool | None:
    """stack.toml's say on native stacks: True (on), False (off), None (auto: the forge says).
    Stacks across forks are not supported by GitHub: a fork's PRs are never a native stack."""
    if stack.config.target.fork is not None or stack.config.pr.native_stacks == "off":
        return False
    return True if stack.config.pr.native_stacks == "on" else None


def native_stacks(forge: Forge, stack: Stack) -> list[NativeStack] | None:
    """The forge's native stacks where ggstack uses them; None where it does not (or cannot)."""
    wanted = uses_native(stack)
    if wanted is False:
        return None
    found = forge.native_stacks()
    if found is None and wanted:
        raise UserError(
            f'pr.native_stacks = "on" in stack.toml, but {stack.config.target.repo} has no stacked pull requests '
            f'(GitHub answers 404 there): set it to "auto" or "off"'
        )
    return found


def _patches_of(run: Run, stack: Stack) -> dict[str, Patch]:
    missing = [o.name for o in run.outcomes if o.verdict is None]
    if missing:
        raise UserError(f"no verdict for {', '.join(missing)}: `pr` needs the Run of `check` (run check first)")
    patches = {p.name: p for p in stack.patches}
    for o in run.outcomes:
        if o.name not in patches:
            raise UserError(f"the Run names {o.name!r}, which is not in stack {stack.name!r}")
    return patches


def pr_base(repo: git.Repository, stack: Stack, base_ref: str) -> str:
    """The branch the first PR goes onto: the one the stack was replayed onto.

    A PR's base is a branch of the target repository; a Run replayed onto a
    sha or a tag has none, and its PRs would carry a change checked against
    something else than what they merge into.
    """
    target = stack.config.target
    for prefix in ("refs/heads/", f"refs/remotes/{target.remote}/"):
        if base_ref.startswith(prefix):
            return base_ref.removeprefix(prefix)
    if base_ref.startswith(f"{target.remote}/") and repo.try_resolve(f"refs/remotes/{base_ref}"):
        return base_ref.removeprefix(f"{target.remote}/")
    if repo.try_resolve(f"refs/heads/{base_ref}") or repo.try_resolve(f"refs/remotes/{target.remote}/{base_ref}"):
        return base_ref
    # A sha that is target.base's tip: the CI's test shards pin the base they test that way.
    sha = repo.try_resolve(base_ref)
    tips = (
        repo.try_resolve(f"refs/heads/{target.base}"),
        repo.try_resolve(f"refs/remotes/{target.remote}/{target.base}"),
    )
    if sha is not None and sha in tips:
        return target.base
    raise UserError(
        f"the stack was replayed onto {base_ref!r}, which is not a branch here or on {target.remote!r} "
        f"nor the tip of target.base {target.base!r}, so its PRs would have no base to match: "
        f"pass --onto a branch of {target.repo} (e.g. --onto {target.base})"
    )


def _head_owner(stack: Stack) -> str:
    target = stack.config.target
    return (target.fork or target.repo).split("/")[0]


def _needs_pr(o: Outcome) -> bool:
    return o.verdict in NEEDED and o.commit is not None


# -- reading: the forge and the remote, in one step ------------------------------------------


@dataclass
class Snapshot:
    """What the forge and the remote have that the plan needs, read before anything is decided."""

    branches: dict[str, str] = field(default_factory=dict)  # patch name -> its remote branch (no refs/heads/)
    pulls: dict[str, RemotePR] = field(default_factory=dict)  # patch name -> its open PR
    heads: dict[str, str] = field(default_factory=dict)  # remote branch -> sha
    closed: dict[str, RemotePR] = field(default_factory=dict)  # patch name -> latest closed PR of its branch
    approvals: dict[int, list[str]] = field(default_factory=dict)  # PR number -> approving maintainers
    facts: dict[int, MergeFacts] = field(default_factory=dict)  # a needed patch's open PR -> merge readiness facts
    permissions: dict[str, str] = field(default_factory=dict)  # reviewer (lower case) -> permission
    required: list[str] = field(default_factory=list)  # the checks the PR base branch requires
    stacks: list[NativeStack] | None = None  # the forge's native stacks; None: not used
    comments: dict[int, list[Comment]] = field(default_factory=dict)  # PR number -> its comments
    commits: dict[str, CommitFacts] = field(default_factory=dict)  # remote head sha -> the forge's facts
    patch_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # remote head sha -> its Stack-Patch-Ids
    foreign: dict[str, RemotePR] = field(default_factory=dict)  # patch -> a PR with its marker, another stack's head
    base_exists: bool = True  # the PR base branch is on the forge
    head_repo_exists: bool = True  # target.fork is on the forge (and visible to the token)
    offline: bool = False


class Matched(NamedTuple):
    """The forge's open PRs matched to the stack's patches (``match``)."""

    pulls: dict[str, RemotePR]  # patch name -> its open PR
    branches: dict[str, str]  # patch name -> its remote branch
    foreign: dict[str, RemotePR]  # patch name -> a PR with its marker on another stack's head


def read(
    forge: Forge, repo: git.Repository, stack: Stack, run: Run, *, base_branch: str, close_redundant: bool
) -> Snapshot:
    """Everything the plan needs from the forge and the remote; a forge that is offline is not asked."""
    if forge.offline:
        return Snapshot(branches=match(run, stack, []).branches, offline=True)
    target = stack.config.target
    pulls, branches, foreign = match(run, stack, forge.open_pulls())
    snap = Snapshot(branches=branches, pulls=pulls, foreign=foreign)
    needed = [o for o in run.outcomes if _needs_pr(o)]
    wanted = [f"refs/heads/{branches[o.name]}" for o in needed]
    remote = repo.ls_remote(target.remote, wanted) if wanted else {}  # no patterns would list every ref
    snap.heads = {ref.removeprefix("refs/heads/"): sha for ref, sha in remote.items()}
    _fetch_missing(repo, target.remote, remote)
    _read_readiness(forge, snap, stack, needed, base_branch)
    for pull in pulls.values():
        facts = snap.facts.get(pull.number)  # its reviews are read already
        snap.approvals[pull.number] = maintainer_approvals(facts.reviews) if facts else forge.approvals(pull)
    for o in needed:
        if o.name not in pulls:
            _read_closed(forge, snap, o, _head_owner(stack))
    if close_redundant:
        for o in run.outcomes:
            if o.verdict is Verdict.REPRESENTED and o.name in pulls:
                snap.comments[pulls[o.name].number] = forge.comments(pulls[o.name])
    _read_remote_commits(forge, snap, stack, needed)
    if needed:
        snap.base_exists = forge.has_branch(target.repo, base_branch)
        snap.head_repo_exists = target.fork is None or forge.has_repository(target.fork)
    return snap


def _read_readiness(forge: Forge, snap: Snapshot, stack: Stack, needed: list[Outcome], base_branch: str) -> None:
    """What ``land`` would decide of each needed patch's open PR (the view of ``report`` and ``pr --dry-run``),
    and the forge's native stacks, which the PRs are kept as where the repository has them."""
    if not needed:
        return
    for o in needed:
        if o.name in snap.pulls:
            snap.facts[snap.pulls[o.name].number] = forge.merge_facts(snap.pulls[o.name])
    if not stack.config.land.approvers:
        for f in snap.facts.values():
            for r in f.reviews:
                snap.permissions.setdefault(r.author.lower(), forge.permission(r.author))
    if snap.facts:
        snap.required = forge.required_checks(base_branch)
    snap.stacks = native_stacks(forge, stack)


def maintainer_approvals(reviews: Sequence[Review]) -> list[str]:
    """The maintainers whose latest decisive review approves (what lifts the gate): ``Forge.approvals``
    of reviews already read."""
    latest: dict[str, Review] = {}
    for r in reviews:
        if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[r.author] = r
    return sorted(a for a, r in latest.items() if r.state == "APPROVED" and r.association in MAINTAINERS)


def _fetch_missing(repo: git.Repository, remote: str, heads: dict[str, str]) -> None:
    """The remote heads a clone never had (CI's single-branch checkout), objects
    only: the plan compares the replay with them and may keep them."""
    present = repo.has_objects(heads.values())
    missing = [ref for ref, sha in heads.items() if not present[sha]]
    if missing:
        repo.fetch_objects(remote, missing)


def _read_remote_commits(forge: Forge, snap: Snapshot, stack: Stack, needed: list[Outcome]) -> None:
    """The forge's facts of each remote head that is not the replayed commit, and whose patch it carries."""
    target = stack.config.target
    for o in needed:
        sha = snap.heads.get(snap.branches[o.name])
        if sha and sha != o.commit:
            facts = forge.commit_facts(target.fork or target.repo, sha)
            if facts is not None:
                snap.commits[sha] = facts
    shas = list(snap.commits)
    for sha, trailers in zip(shas, git.parse_trailers([snap.commits[s].message for s in shas]), strict=True):
        snap.patch_ids[sha] = tuple(v for k, v in trailers if k.lower() == "stack-patch-id")


def _read_closed(forge: Forge, snap: Snapshot, o: Outcome, head_owner: str) -> None:
    closed = forge.closed_pull(head_owner, snap.branches[o.name])
    if closed is None or read_marker(closed.body) not in (None, o.stack_patch_id):
        return
    snap.closed[o.name] = closed
    if not closed.merged:
        snap.comments[closed.number] = forge.comments(closed)


def match(run: Run, stack: Stack, pulls: Sequence[RemotePR]) -> Matched:
    """Each patch's open PR (by its marker, else by its head branch), its remote branch,
    and the PRs carrying one of its markers on a head branch that is not this stack's.

    A PR is adopted by its marker only when its head is one of this stack's
    branches: another stack holding the same Stack-Patch-Id (its patch
    imported from this one's commits) must not take it over; ``pr`` refuses
    the stack rather than push there."""
    ours = _ours(stack, pulls)
    by_marker = _by_marker(stack, ours)
    namespace = branch_namespace(stack, None)
    own = _remote_branch(namespace) if namespace else None
    refs = dict(zip((p.name for p in stack.patches), branch_refs(stack), strict=True))
    matched = Matched({}, {}, {})
    for o in run.outcomes:
        default = _remote_branch(o.branch or refs[o.name])
        marked = by_marker.get(o.stack_patch_id)
        if marked is not None and marked.head_ref != default and not (own and marked.head_ref.startswith(own)):
            matched.foreign[o.name] = marked
            marked = None
        pull = marked or next((p for p in ours if read_marker(p.body) is None and p.head_ref == default), None)
        # An existing PR keeps its head branch (PRs cannot change head), e.g. after a rename.
        matched.branches[o.name] = pull.head_ref if pull else default
        if pull is not None:
            matched.pulls[o.name] = pull
    return matched


def _ours(stack: Stack, pulls: Sequence[RemotePR]) -> list[RemotePR]:
    head_owner = _head_owner(stack).lower()
    return [p for p in pulls if p.head_owner.lower() == head_owner]  # anyone may open a PR ending in a marker


def _by_marker(stack: Stack, ours: Sequence[RemotePR]) -> dict[str, RemotePR]:
    ids = {p.provenance.stack_patch_id for p in stack.patches}
    by_marker: dict[str, RemotePR] = {}
    for p in ours:  # oldest first: a later duplicate never wins
        marker = read_marker(p.body)
        if marker in ids and marker not in by_marker:
            by_marker[marker] = p
    return by_marker


def _remote_branch(ref: str) -> str:
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ref.removeprefix("refs/")


def closed_note(o: Outcome, snap: Snapshot) -> str | None:
    """Why a needed patch gets no new PR: someone merged or closed its PR. None: it may get one.

    Only a PR that ggstack itself closed as redundant (its own closing comment
    says so) may be followed by a new PR when the patch is needed again.
    """
    closed = snap.closed.get(o.name)
    if closed is None:
        return None
    if closed.merged:
        return f"its PR #{closed.number} was merged (into {closed.base_ref}); no new PR"
    if any(
        is_closing_comment(c.body, o.stack_patch_id) and c.author == closed.author
        for c in snap.comments.get(closed.number, [])
    ):
        return None
    return (
        f"its PR #{closed.number} was closed by someone else: not reopened or replaced (reopen it, or remove the patch)"
    )


# -- settling: the commit each PR branch should hold (git only) ------------------------------


@dataclass(frozen=True)
class Chosen:
    """The commit a needed patch's branch should hold, on the previous needed one."""

    commit: str | None  # None: it does not apply there; no PR action
    diffstat: Diffstat = field(default_factory=list)
    note: str = ""


def settle(repo: git.Repository, stack: Stack, run: Run, snap: Snapshot) -> dict[str, Chosen]:
    """Make each needed patch's commit sit on the previous needed one, and
    keep the remote's commit where it is the same change.

    ``apply`` chains every patch that applied; a patch without a PR (broken,
    held, represented yet applied) would ride along in the next PR, so the
    next one is replayed onto the previous needed commit instead. And a
    replay on another machine (the CI bot's fresh clone) makes new commit
    objects for the same change (the committer date differs): when the
    remote head has the same tree, parent and message, it is kept, so an
    unchanged branch is not pushed again.
    """
    picks: dict[str, Pick] | None = None
    previous = run.base
    chosen: dict[str, Chosen] = {}
    pairs: dict[str, tuple[str, str]] = {}  # name -> (previous, commit): diffstats read in one process
    here = repo.has_objects(snap.heads.values())  # one process for every remote head
    needed = _to_settle(run, snap)
    replayed = repo.read_commits(o.commit or "" for o in needed)  # one process, not a round trip a patch
    for o in needed:
        assert o.commit is not None
        commit, info = o.commit, replayed.get(o.commit) or _commit(repo, o.commit)
        if info.parents[:1] != (previous,):
            picks = picks or {p.name: p for p in materialize(repo, stack)}
            replayer = replay.Replayer(repo, previous)
            try:
                step = replayer.try_pick(picks[o.name])
            finally:
                replayer.close()
            if step.applied is not Applied.APPLIED or step.commit is None:
                note = f"does not apply on the previous needed patch alone ({step.applied.value}): no PR action"
                chosen[o.name] = Chosen(None, note=note)
                continue
            commit, info = step.commit, _commit(repo, step.commit)
        pairs[o.name] = (previous, commit)
        remote = snap.heads.get(snap.branches[o.name])
        facts = snap.commits.get(remote or "")
        same = facts and (facts.tree, facts.parents) == (info.tree, (previous,)) and _same(facts.message, info.message)
        if same and remote and here.get(remote):  # a head this clone could not fetch is replaced
            commit = remote
        chosen[o.name] = Chosen(commit)
        previous = commit
    for name, diffstat in zip(pairs, _diffstats(repo, list(pairs.values())), strict=True):
        chosen[name] = dataclasses.replace(chosen[name], diffstat=diffstat)
    return chosen


def _diffstats(repo: git.Repository, pairs: list[tuple[str, str]]) -> list[Diffstat]:
    """What each (previous, commit) changes; the ones the last run read come from its cache.

    Two commit ids name one diffstat for good, so a rerun on the same base
    reads none (it was one diff-tree over the whole stack); the cache keeps
    the pairs of the last run only.
    """
    cache = Map(repo, "diffstats")
    keys = [f"{a}:{b}" for a, b in pairs]
    known = {k: d for k in keys if (d := _cached_diffstat(cache.get(k))) is not None}
    todo = [(k, pair) for k, pair in zip(keys, pairs, strict=True) if k not in known]
    for (key, _), diffstat in zip(todo, repo.numstats([pair for _, pair in todo]), strict=True):
        known[key] = diffstat
        cache.put(key, json.dumps(diffstat))
    cache.retain(keys)
    cache.save()
    return [known[k] for k in keys]


def _cached_diffstat(text: str | None) -> Diffstat | None:
    """A diffstat from the cache; None where there is none or it is not one (a corrupt file costs time only)."""
    try:
        rows = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(rows, list) or not all(_diffstat_row(r) for r in rows):
        return None
    return [(path, added, deleted) for path, added, deleted in rows]


def _diffstat_row(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and all(n is None or (isinstance(n, int) and not isinstance(n, bool)) for n in row[1:])
    )


def _to_settle(run: Run, snap: Snapshot) -> list[Outcome]:
    """The patches that may get a PR: needed, replayed, and no PR of theirs someone else merged or closed."""
    return [o for o in run.outcomes if _needs_pr(o) and closed_note(o, snap) is None]


def _commit(repo: git.Repository, sha: str) -> git.CommitInfo:
    """A commit ``apply`` or the replay just made: read through the persistent reader."""
    info = repo.read_commit(sha)
    return info if info is not None else repo.commit_info(sha)  # not a full id, or absent: git's own error


def _same(a: str, b: str) -> bool:
    return a.rstrip("\n") == b.rstrip("\n")


# -- the plan: pure --------------------------------------------------------------------------


@dataclass
class Step:
    kind: str  # push | open | edit | label | unlabel | ready | comment | close | would-close
    words: str  # what the plan prints
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Slot:
    """One patch in the plan: what it is, what the forge and remote have, what to do."""

    outcome: Outcome  # a copy: the Run given to ``pr`` is not changed
    patch: Patch
    branch: str  # the remote branch name (without refs/heads/)
    commit: str | None  # the commit its branch should hold; None: no PR action
    remote_sha: str | None
    pull: RemotePR | None
    approved_by: list[str] = field(default_factory=list)
    state: PRState | None = None
    steps: list[Step] = field(default_factory=list)
    summary: str = ""
    diffstat: Diffstat = field(default_factory=list)
    note: str = ""
    # Rendered only where it is needed: to compare with the open PR's, to open
    # or update it. An offline plan of n PRs renders none of its n bodies of n lines.
    body: str | None = None
    readiness: Readiness | None = None  # an open PR's: what ``land`` would decide now

    @property
    def needed(self) -> bool:
        return self.outcome.verdict in NEEDED and self.commit is not None


@dataclass
class Plan:
    slots: list[Slot]
    stacked: bool
    gate: str | None  # the approval gate in words, None when the stack has none
    head_owner: str
    fork: bool
    base: str  # the branch the first (or, flat, every) PR goes onto

    @functools.cached_property
    def needed(self) -> list[Slot]:
        """The slots that get a PR, in merge order (a slot's commit is settled before the plan)."""
        return [s for s in self.slots if s.needed]


def make_plan(
    run: Run,
    stack: Stack,
    snap: Snapshot,
    chosen: Mapping[str, Chosen],
    patches: Mapping[str, Patch],
    *,
    base_branch: str,
    close_redundant: bool,
    stacked: bool | None,
) -> Plan:
    """Every step for every patch, from what was read and settled; nothing is read or written here."""
    slots = [_slot(o, patches[o.name], snap, chosen) for o in run.outcomes]
    _refuse_what_the_forge_would(stack, snap, slots, base_branch)
    target = stack.config.target
    plan = Plan(
        slots,
        _stacked_mode(stacked, stack, slots, base_branch),
        _gate_words(stack),
        _head_owner(stack),
        target.fork is not None,
        base_branch,
    )
    _plan_needed(run, stack, plan)
    _plan_others(run, plan, snap, close_redundant)
    _plan_native(plan, snap)
    for s in plan.needed:
        facts = snap.facts.get(s.pull.number) if s.pull is not None else None
        if facts is not None:
            s.readiness = readiness(facts, stack.config.land, snap.permissions, snap.required, base_branch)
    return plan


def _extends(plan: Plan, st: NativeStack) -> bool:
    """Whether the needed PRs are ``st``'s open ones (on the same base) and maybe more on top;
    the step adding those more, if any."""
    numbers = [s.pull.number if s.pull is not None and s.pull.state == "open" else None for s in plan.needed]
    current = [n for n in st.pulls if n not in st.merged]
    if st.base_ref != plan.base or numbers[: len(current)] != current:
        return False
    rest = plan.needed[len(current) :]
    if rest:
        names = [s.outcome.name for s in rest]
        words = f"add {', '.join(names)} to native stack {st.number}"
        plan.needed[-1].steps.append(Step("stack-add", words, {"stack": str(st.number), "names": ",".join(names)}))
    return True


def _plan_native(plan: Plan, snap: Snapshot) -> None:
    """Where the forge keeps native stacks: the needed PRs as one, bottom first — made once they are two,
    extended as patches are added on top, dissolved and made again when the series changed otherwise
    (a PR's base cannot change inside a stack). The steps ride on the top PR; ``act`` does them first
    (dissolving) and last (making, extending, once every PR is open and based)."""
    if snap.stacks is None or not plan.stacked or plan.fork or not plan.needed:
        return
    needed, top = plan.needed, plan.needed[-1]
    ours = {s.pull.number for s in plan.slots if s.pull is not None and s.pull.state == "open"}
    touching = [st for st in snap.stacks if ours & (set(st.pulls) - set(st.merged))]
    if len(touching) == 1 and _extends(plan, touching[0]):
        return
    for st in touching:
        words = f"unstack native stack {st.number} (the series changed)"
        top.steps.append(Step("stack-dissolve", words, {"stack": str(st.number)}))
    if len(needed) >= 2:
        words = f"stack the {len(needed)} PRs as one native stack, {needed[0].outcome.name} at the bottom"
        top.steps.append(Step("stack-create", words, {"names": ",".join(s.outcome.name for s in needed)}))


def _slot(o: Outcome, patch: Patch, snap: Snapshot, chosen: Mapping[str, Chosen]) -> Slot:
    branch = snap.branches[o.name]
    pull = snap.pulls.get(o.name)
    # One level: the plan only sets the copy's fields (its pr, its commit), never edits a list in place.
    slot = Slot(dataclasses.replace(o), patch, branch, None, snap.heads.get(branch), pull)
    if pull is not None:
        slot.approved_by = list(snap.approvals.get(pull.number, []))
    note = closed_note(o, snap) if _needs_pr(o) and pull is None else None
    if note is not None:
        slot.note, slot.pull = note, snap.closed[o.name]
    elif o.name in chosen:
        c = chosen[o.name]
        slot.commit, slot.diffstat, slot.note = c.commit, c.diffstat, c.note
    return slot


def _refuse_what_the_forge_would(stack: Stack, snap: Snapshot, slots: list[Slot], base_branch: str) -> None:
    """What would fail after pushing, refused before it: nothing is pushed or opened."""
    target = stack.config.target
    for s in slots:
        pull = snap.foreign.get(s.outcome.name)
        if pull is not None:
            raise UserError(
                f"PR #{pull.number} ({pull.url}) carries the Stack-Patch-Id of {s.outcome.name}, but its head branch "
                f"{pull.head_ref} is not one of stack {stack.name!r}'s ({s.branch}): it is another stack's PR. "
                f"ggstack will not adopt it or push to its branch; give {s.outcome.name} an id of its own "
                f"(`ggstack remove` it, then `ggstack import` its commit again), then rerun"
            )
    needed = [s for s in slots if s.needed]
    for s in needed:
        facts = snap.commits.get(s.remote_sha or "")
        if (
            s.remote_sha != s.commit
            and facts is not None
            and s.outcome.stack_patch_id not in snap.patch_ids.get(s.remote_sha or "", ())
        ):
            # Not a commit ggstack made of this patch: a reviewer's fixup, say. Never overwritten.
            first = facts.message.splitlines()[0] if facts.message else "no message"
            raise UserError(
                f"someone else pushed {(s.remote_sha or '')[:10]} ({first!r}) to {s.branch} on {target.remote!r}; "
                f"ggstack will not overwrite it: fold that change into {s.outcome.name} (or delete the branch), then rerun"
            )
    if needed and not snap.head_repo_exists:
        raise UserError(
            f"target.fork {target.fork!r} is not on the forge (or the token cannot see it): the PR heads would "
            f"live there; fix target.fork in stack.toml, or give the token access to it"
        )
    if needed and not snap.base_exists:
        raise UserError(
            f"the PR base {base_branch!r} is not a branch of {target.repo} on the forge (the stack was replayed "
            f"onto it): push it to {target.repo} first, or pass --onto a branch it has (target.base is {target.base!r})"
        )


def _stacked_mode(stacked: bool | None, stack: Stack, slots: list[Slot], base_branch: str) -> bool:
    """The flag if given; else the mode the open PRs were opened in; else stack.toml.

    With the heads in a fork there is no stacking: a PR's base must be a branch
    of the target repository, and the patches' branches live in the fork.
    """
    target = stack.config.target
    if target.fork is not None:
        if stacked:
            raise UserError(
                f"--stacked needs the patch branches in {target.repo}, but target.fork puts them in "
                f"{target.fork}: fork PRs are flat (use --flat, or push to {target.repo})"
            )
        return False
    if stacked is not None:
        return stacked
    later = [s.pull for s in [s for s in slots if s.needed][1:] if s.pull is not None]
    if later:
        return any(p.base_ref != base_branch for p in later)
    return stack.config.pr.stacked


def _gate_words(stack: Stack) -> str | None:
    policy = stack.config.pr
    if not policy.approval_gate:
        return None
    words = (["draft"] if policy.draft else []) + [f"label {md_code(label)}" for label in policy.labels]
    return ", ".join(words) or "approval"


def _plan_needed(run: Run, stack: Stack, plan: Plan) -> None:
    """The PR of each needed patch, in merge order: its state, its steps, then its body."""
    needed = plan.needed
    previous: Slot | None = None
    for n, s in enumerate(needed, 1):
        base = previous.branch if plan.stacked and previous else plan.base
        s.state = _new_state(s, stack, plan, base, n, len(needed))
        s.outcome.pr = s.state  # the bodies of its neighbours read its number
        s.summary = summary_of(s.patch)
        if s.commit != s.remote_sha:
            s.steps.append(
                Step(
                    "push",
                    f"push {s.branch} {short(s.remote_sha) or '(new)'} → {short(s.commit)} (--force-with-lease)",
                )
            )
        s.steps += _open_steps(s, stack, plan, n, len(needed), base) if s.pull is None else _gate_steps(s, stack, plan)
        previous = s
    order = _order(plan)
    for s in needed:
        if s.pull is not None:
            s.body = body_of(run, plan, s, order)
            fields = _changed_fields(s)
            if fields:
                words = ", ".join(f"base {s.pull.base_ref} → {v}" if k == "base" else k for k, v in fields.items())
                s.steps.append(Step("edit", f"update {words}", fields))


def _new_state(s: Slot, stack: Stack, plan: Plan, base: str, n: int, total: int) -> PRState:
    policy, pull = stack.config.pr, s.pull
    return PRState(
        number=pull.number if pull else None,
        url=pull.url if pull else None,
        state="open" if pull else "planned",
        draft=pull.draft if pull else (policy.draft and plan.gate is not None),
        approved=bool(s.approved_by),
        head=f"{plan.head_owner}:{s.branch}" if plan.fork else s.branch,
        base=base,
        title=s.patch.subject,
        labels=list(pull.labels) if pull else (list(policy.labels) if plan.gate else []),
        approved_by=list(s.approved_by),
        position=n,
        total=total,
        diffstat=list(s.diffstat),
    )


def _open_steps(s: Slot, stack: Stack, plan: Plan, n: int, total: int, base: str) -> list[Step]:
    assert s.state is not None
    gate = f" as {plan.gate}" if plan.gate else ""
    steps = [Step("open", f"open PR {n} of {total}: {s.state.head} → {base}{gate}")]
    if plan.gate and stack.config.pr.labels:
        steps.append(Step("label", f"label {', '.join(stack.config.pr.labels)}"))
    return steps


def _gate_steps(s: Slot, stack: Stack, plan: Plan) -> list[Step]:
    """An open PR's gate: lifted once a maintainer approved, else kept (a lost label put back)."""
    assert s.pull is not None
    if plan.gate is None:
        return []
    approved, steps = bool(s.approved_by), []
    if approved and s.pull.draft:
        steps.append(Step("ready", f"approved by {', '.join(s.approved_by)}: mark ready for review"))
    for label in stack.config.pr.labels:
        has = any(label.lower() == x.lower() for x in s.pull.labels)
        if approved and has:
            steps.append(Step("unlabel", f"approved: remove label {label}", {"label": label}))
        elif not approved and not has:
            steps.append(Step("label", f"label {label}", {"label": label}))
    return steps


def _order(plan: Plan) -> MergeOrder:
    """The merge-order list every body shows, with the PR numbers known now."""
    return merge_order([x.outcome for x in plan.needed])


def body_of(run: Run, plan: Plan, s: Slot, order: MergeOrder | None = None) -> str:
    """The body of a needed slot's PR (``order``: the plan's merge order, built once for many bodies)."""
    order = order or _order(plan)
    return pr_body(
        run,
        s.outcome,
        summary=s.summary,
        diffstat=s.diffstat,
        order=order,
        gate=plan.gate,
        onto=plan.base,
    )


def _changed_fields(s: Slot) -> dict[str, str]:
    assert s.pull is not None and s.state is not None
    fields = {}
    if s.pull.title != s.state.title:
        fields["title"] = s.state.title or ""
    if s.pull.body.replace("\r\n", "\n") != s.body:
        fields["body"] = s.body or ""
    if s.pull.base_ref != s.state.base:
        fields["base"] = s.state.base or ""
    return fields


def _plan_others(run: Run, plan: Plan, snap: Snapshot, close_redundant: bool) -> None:
    """Patches without a PR to open: close the redundant ones' PRs, leave the rest."""
    for s in plan.slots:
        if s.needed or s.pull is None:
            continue
        o, pull = s.outcome, s.pull
        s.state = PRState(
            number=pull.number,
            url=pull.url,
            state="merged" if pull.merged else pull.state,
            draft=pull.draft,
            approved=bool(s.approved_by),
            head=pull.head_ref,
            base=pull.base_ref,
            title=pull.title,
            labels=list(pull.labels),
            approved_by=list(s.approved_by),
        )
        if o.verdict is Verdict.REPRESENTED:
            s.state.comment = closing_comment(run, o)
            s.steps += _close_steps(s, snap, close_redundant)
        elif o.verdict in (Verdict.CONFLICT, Verdict.BROKEN):
            s.state.note = f"{o.verdict.value}: needs rework; PR left as it is"
        elif o.verdict is Verdict.INCONCLUSIVE:
            s.state.note = "inconclusive: held; PR left as it is"
        elif o.verdict in NEEDED:
            s.state.note = s.note or "no replayed commit: PR left as it is"


def _close_steps(s: Slot, snap: Snapshot, close_redundant: bool) -> list[Step]:
    assert s.pull is not None
    o = s.outcome
    via = ", ".join(short(c) for c in o.represented_by) or "the base"
    if not close_redundant:
        return [Step("would-close", f"would close: represented by {via} (pass --close-redundant)")]
    # Whatever base it was checked on: one closing comment a PR, also across a moving base.
    steps = []
    if not any(is_closing_comment(c.body, o.stack_patch_id) for c in snap.comments.get(s.pull.number, [])):
        steps.append(Step("comment", f"comment: represented by {via}, with the evidence"))
    return [*steps, Step("close", f"close #{s.pull.number}")]


def bodies(run: Run, stack: Stack) -> dict[str, str]:
    """The body of each PR the Run's plan opens or edits the body of, rendered from the Run and the stack.

    The same rendering the plan sends: the merge order is the Run's PRs by
    position (with the numbers it knows), the diffstat the one recorded, the
    summary and the gate the stack's, the base the first PR's.
    """
    states = {o.name: o.pr for o in run.outcomes if o.pr and o.pr.position}
    planned = sorted((o for o in run.outcomes if o.name in states), key=lambda o: states[o.name].position or 0)
    if not planned:
        return {}
    order, gate, onto = merge_order(planned), _gate_words(stack), states[planned[0].name].base
    patches = {p.name: p for p in stack.patches}
    return {
        o.name: pr_body(
            run,
            o,
            summary=summary_of(patches[o.name]),
            diffstat=states[o.name].diffstat,
            order=order,
            gate=gate,
            onto=onto,
        )
        for o in planned
        if o.name in patches and writes_body(states[o.name])
    }


def summary_of(patch: Patch) -> str:
    """The patch message without subject and trailers: the PR's summary."""
    paragraphs = patch.body.split("\n\n")
    if paragraphs and all(_TRAILER.match(line) for line in paragraphs[-1].strip().splitlines()):
        paragraphs = paragraphs[:-1]
    text = "\n\n".join(paragraphs)
    return "\n".join(line for line in text.splitlines() if not line.startswith("(cherry picked from commit ")).strip()


def record(run: Run, plan: Plan, *, dry_run: bool, offline: bool) -> Run:
    """A new Run with what the plan did (or would do) in each Outcome's ``pr``."""
    outcomes = []
    for slot in plan.slots:
        o = slot.outcome
        if slot.state is not None:
            slot.state.actions = [step.words for step in slot.steps]
            slot.state.action = _summary_action(slot, dry_run)
            if slot.readiness is not None:
                r = slot.readiness
                slot.state.approval, slot.state.checks = r.approval, list(r.checks)
                slot.state.mergeable, slot.state.next_action = r.mergeable, r.next_action
        o.pr = slot.state
        if slot.needed:
            o.commit = slot.commit
        outcomes.append(o)
    stage = ("dry-run" + (f" ({OFFLINE})" if offline else "")) if dry_run else "ok"
    return dataclasses.replace(run, outcomes=outcomes, stages={**run.stages, "pr": stage})


def _summary_action(slot: Slot, dry_run: bool) -> str:
    kinds = list(dict.fromkeys(step.kind for step in slot.steps))
    if not kinds:
        return "nothing"
    return ("would " if dry_run and kinds != ["would-close"] else "") + ", ".join(kinds)


# -- acting -------------------------------------------------------------------------------


class _Ticker:
    """Progress over the plan's steps, one kind of step of one slot at a time."""

    def __init__(self, plan: Plan, progress: Progress | None) -> None:
        self.total = sum(len(s.steps) for s in plan.slots)
        self.done = 0
        self.progress = progress

    def __call__(self, s: Slot, kind: str) -> None:
        self.done += sum(1 for step in s.steps if step.kind == kind)
        if self.progress:
            self.progress(min(self.done, self.total), self.total, f"{s.outcome.name}: {kind}")


def act(repo: git.Repository, stack: Stack, run: Run, plan: Plan, forge: Forge, progress: Progress | None) -> None:
    """Carry the plan out: push, open in merge order, fix bodies and bases, gates, closes."""
    tick = _Ticker(plan, progress)
    _push(repo, stack, [s for s in plan.needed if any(st.kind == "push" for st in s.steps)])
    for s in plan.needed:
        tick(s, "push")
    for s in plan.needed:  # open in merge order, so each base exists and earlier numbers are known
        if s.pull is None:
            _open(run, stack, plan, s, forge)
            tick(s, "open")
            tick(s, "label")
    order = _order(plan)
    _native_steps(plan, forge, tick, "stack-dissolve")  # before any base changes: not inside a stack
    for s in plan.needed:  # with every number known, each body, title and base once
        _update(run, plan, s, forge, order)
        tick(s, "edit")
        _gate(s, forge)
    for s in plan.slots:
        if s.needed or s.pull is None or s.state is None:
            continue
        for step in s.steps:
            if step.kind == "comment":
                forge.comment(s.pull, s.state.comment or "")
            elif step.kind == "close":
                forge.edit_pull(s.pull, state="closed")
                s.state.state = "closed"
            tick(s, step.kind)
    _native_steps(plan, forge, tick, "stack-create", "stack-add")


def _native_steps(plan: Plan, forge: Forge, tick: _Ticker, *kinds: str) -> None:
    """The native stack's steps of these kinds (they ride on the top PR's slot)."""
    if not plan.needed:
        return
    top = plan.needed[-1]
    by_name = {s.outcome.name: s for s in plan.needed}
    for step in top.steps:
        if step.kind not in kinds:
            continue
        pulls = [by_name[n].pull for n in step.fields.get("names", "").split(",") if n]
        numbers = [p.number for p in pulls if p is not None]
        if step.kind == "stack-dissolve":
            forge.unstack(int(step.fields["stack"]))
        elif step.kind == "stack-create":
            forge.create_stack(numbers)
        else:
            forge.add_to_stack(int(step.fields["stack"]), numbers)
        tick(top, step.kind)


def _open(run: Run, stack: Stack, plan: Plan, s: Slot, forge: Forge) -> None:
    assert s.state is not None
    s.pull = forge.create_pull(
        title=s.state.title or s.patch.subject,
        body=body_of(run, plan, s),  # the numbers opened so far
        base=s.state.base or plan.base,
        head_owner=plan.head_owner,
        head_ref=s.branch,
        head=s.state.head or s.branch,
        draft=bool(s.state.draft),
    )
    s.state.number, s.state.url, s.state.state = s.pull.number, s.pull.url, "open"
    labels = stack.config.pr.labels if plan.gate else ()
    missing = [x for x in labels if x.lower() not in {y.lower() for y in s.pull.labels}]
    if missing:
        forge.add_labels(s.pull, missing)
        s.pull.labels += missing


def _update(run: Run, plan: Plan, s: Slot, forge: Forge, order: MergeOrder) -> None:
    assert s.state is not None and s.pull is not None
    s.body = body_of(run, plan, s, order)
    fields = _changed_fields(s)
    if fields:
        forge.edit_pull(s.pull, **fields)
        s.pull.title, s.pull.body, s.pull.base_ref = s.state.title or "", s.body, s.state.base or ""
        if not any(st.kind == "edit" for st in s.steps):
            s.steps.append(Step("edit", f"update {', '.join(fields)}", fields))


def _gate(s: Slot, forge: Forge) -> None:
    """Lift the gate of an approved PR, or put back a label an interrupted run lost."""
    assert s.pull is not None and s.state is not None
    for step in s.steps:
        if step.kind == "ready":
            forge.mark_ready(s.pull)
            s.state.draft = False
        elif step.kind == "unlabel":
            forge.remove_label(s.pull, step.fields["label"])
            s.state.labels = [x for x in s.state.labels if x.lower() != step.fields["label"].lower()]
        elif step.kind == "label" and step.fields.get("label"):
            forge.add_labels(s.pull, [step.fields["label"]])
            s.state.labels.append(step.fields["label"])


def _push(repo: git.Repository, stack: Stack, slots: Sequence[Slot]) -> None:
    """One atomic ``git push --force-with-lease`` of every branch that moved.

    The lease is the remote head the plan saw: if anyone pushed since, nothing
    is pushed and the user is told which branch moved.
    """
    if not slots:
        return
    remote = stack.config.target.remote
    refspecs = [f"{s.commit}:refs/heads/{s.branch}" for s in slots]
    leases = [f"refs/heads/{s.branch}:{s.remote_sha or ''}" for s in slots]
    proc = repo.push(remote, refspecs, leases, atomic=True)
    if proc.returncode == 0:
        return
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace").strip()
    rejected = [
        line.split("\t")[1].split(":")[-1] for line in out.splitlines() if line.startswith("!") and "\t" in line
    ]
    if rejected and ("stale info" in out or "fetch first" in out or "rejected" in out):
        raise UserError(
            f"git push to {remote!r} refused ({', '.join(rejected)}): someone pushed to these branches since "
            f"ggstack looked; nothing was pushed — rerun `ggstack pr` to plan from the new state"
        )
    raise InfraError(f"git push to {remote!r} failed: {err[-2000:] or out[-2000:]}")
