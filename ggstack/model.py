"""The vocabulary of DESIGN.md as types: Stack, Patch, Provenance, Outcome, Run.

Every stage takes and returns these values; every report, PR body and exit
code is rendered from a Run (which round-trips through JSON), never
recomputed. Keeping them plain frozen-ish dataclasses with no behaviour
beyond (de)serialisation is what lets the stages stay pure.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


class Verdict(str, enum.Enum):
    """What a patch is on a base."""

    UNIQUE = "unique"  # needed, applies
    CONFLICT = "conflict"  # needed, does not apply
    REPRESENTED = "represented"  # the base already has it
    PARTIAL = "partial"  # some hunks present: remaining_diff is what is left
    BROKEN = "broken"  # applies, but its tests fail with it
    INCONCLUSIVE = "inconclusive"  # e.g. GPU tests skipped: never a pass


class Applied(str, enum.Enum):
    """What replaying one patch did (the ``apply`` stage)."""

    APPLIED = "applied"
    EMPTY = "empty"  # changes nothing on this base ("patch contents already upstream")
    CONFLICT = "conflict"
    SKIPPED = "skipped"  # not replayed (e.g. excluded by --only)


class Recommendation(str, enum.Enum):
    OPEN_PR = "open PR"
    UPDATE_PR = "update PR"
    CLOSE_PR = "close PR"
    DO_NOT_OPEN = "do not open"
    REWORK = "rework"
    HOLD = "hold"  # e.g. for GPU results
    HUMAN_LOOK = "human look"  # the signals disagree
    WAIT_APPROVAL = "waiting for approval"


@dataclass(frozen=True)
class Provenance:
    """Where a patch came from and what of it was left out (git trailers)."""

    stack_patch_id: str
    original_pr: str | None = None  # "owner/repo#130"
    cherry_picked_from: str | None = None  # full sha
    dropped: tuple[str, ...] = ()  # "CUTLASS pin (cmake/cutlass.cmake)"


@dataclass(frozen=True)
class Patch:
    """One entry of the series: a ``git format-patch`` file, parsed.

    ``raw`` is the file exactly as stored, so that saving an unmodified stack
    rewrites no byte; the other fields are what was read out of it.
    """

    name: str  # file name: "0001-fix-dcp-preallocate.patch"
    subject: str
    message: str  # full commit message: subject, body, trailers
    author: str  # "Name <email>"
    date: str  # RFC 2822, as format-patch writes it
    diff: str  # from the first "diff --git" to the end of the diff
    provenance: Provenance
    source_commit: str | None  # the sha on the mbox "From " line
    base_commit: str | None  # "base-commit:": the original parent
    paths: tuple[str, ...]  # every path the diff touches (old and new names)
    raw: bytes = field(repr=False, compare=False, default=b"")

    @property
    def index(self) -> int:
        return int(self.name.split("-", 1)[0])

    @property
    def slug(self) -> str:
        stem = self.name.removesuffix(".patch")
        return stem.split("-", 1)[1] if "-" in stem else stem

    @property
    def body(self) -> str:
        """The message without its subject line."""
        return self.message.partition("\n")[2].strip("\n")


@dataclass(frozen=True)
class TargetConfig:
    repo: str  # "owner/name" on the forge
    remote: str = "origin"  # git remote the branches are pushed to
    base: str = "main"  # base branch on the forge
    fork: str | None = None  # "fork-owner/name" when PR heads live in a fork


@dataclass(frozen=True)
class PRPolicy:
    draft: bool = True
    labels: tuple[str, ...] = ("do-not-merge",)
    approval_gate: bool = True
    stacked: bool = True


@dataclass(frozen=True)
class TestConfig:
    paths: tuple[str, ...] = ("tests/**/test_*.py",)
    cpu: str = "python -m pytest -q {tests}"
    gpu: str = ""
    timeout: int = 900
    gpu_runner: str = "gpu"  # GitHub Actions runs-on label for GPU jobs
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class StackConfig:
    target: TargetConfig
    branch_template: str = "gg/{stack}/{index:02d}-{slug}"
    pr: PRPolicy = PRPolicy()
    tests: TestConfig = TestConfig()


@dataclass(frozen=True)
class Stack:
    """One series for one target: ``patches/<name>/``."""

    name: str
    path: str  # the stack directory
    config: StackConfig
    patches: tuple[Patch, ...]
    series_raw: bytes = field(repr=False, compare=False, default=b"")

    def find(self, key: str) -> Patch:
        """A patch by 1-based index, file name, or file name without .patch."""
        from ggstack.errors import UserError

        for i, patch in enumerate(self.patches, 1):
            if key in (str(i), f"{i:04d}", patch.name, patch.name.removesuffix(".patch")):
                return patch
        raise UserError(f"no patch {key!r} in stack {self.name!r} (see `ggstack list {self.name}`)")


class Signal(str, enum.Enum):
    """The kinds of evidence: each signal of the judgement, and the tests."""

    IDENTITY = "identity"  # the source is in the base, or a base commit names it
    PATCH_ID = "patch-id"  # `git patch-id --stable` equal to a base commit's
    EMPTY = "empty"  # replaying it changes nothing (or: applies and changes the base)
    CONFLICT = "conflict"  # replaying it conflicts
    REVERSE_APPLY = "reverse-apply"  # its post-image is in the base (`git apply -R`)
    CONTENT = "content"  # line containment: which change blocks the base holds
    BLAME = "blame"  # which base commits brought the present lines in
    GROUP = "group"  # a run of consecutive patches is in the base together
    REVERT = "revert"  # a base commit took an earlier pick out again
    MODIFIED = "modified"  # base commits that changed its lines after picking it
    HINT = "hint"  # same subject or PR number; superseded by a change to the same lines
    TESTS = "tests"  # the patch's own tests (ggstack test)
    RULE = "rule"  # which rule of the verdict table decided, and why


class Says(str, enum.Enum):
    """What one piece of evidence says about the base having the change."""

    PRESENT = "present"
    ABSENT = "absent"
    UNDONE = "undone"  # it was there, and was taken out again
    NOTHING = "nothing"  # a fact or a hint: no opinion


@dataclass
class Evidence:
    """One signal about whether a patch is in the base, in words and in data.

    ``data`` holds the signal's details for the JSON (units, shares, paths);
    what code decides on is ``kind`` and ``says``.
    """

    kind: Signal | str
    detail: str  # a sentence a maintainer can read
    commits: list[str] = field(default_factory=list)
    fraction: float | None = None
    data: dict[str, Any] = field(default_factory=dict)
    says: Says = Says.NOTHING

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Signal) and self.kind in Signal._value2member_map_:
            self.kind = Signal(self.kind)

    def to_json(self) -> dict[str, Any]:
        kind = self.kind.value if isinstance(self.kind, Signal) else self.kind
        out: dict[str, Any] = {"kind": kind, "detail": self.detail, "says": self.says.value}
        if self.commits:
            out["commits"] = self.commits
        if self.fraction is not None:
            out["fraction"] = self.fraction
        out.update(self.data)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Evidence:
        rest = {k: v for k, v in d.items() if k not in ("kind", "detail", "commits", "fraction", "says")}
        says = Says(d["says"]) if d.get("says") in Says._value2member_map_ else Says.NOTHING
        return cls(d["kind"], d["detail"], list(d.get("commits", [])), d.get("fraction"), rest, says)


@dataclass
class Conflict:
    paths: list[str]
    hunks: str  # the conflicted regions, with markers, as merge-tree wrote them
    messages: str = ""  # merge-tree's informational lines


@dataclass
class TestResult:
    """One test run of one patch (DESIGN "Tests")."""

    kind: str  # cpu | gpu
    where: str  # base | patched | old-base
    status: str  # passed | failed | skipped | error | timeout | not-run | no-tests (none collected)
    tree: str = ""
    command: str = ""
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    output_tail: str = ""
    seconds: float = 0.0
    cached: bool = False
    errors: list[str] = field(default_factory=list)  # tests that errored (setup, collection)
    reason: str = ""  # why it was not run or not conclusive, in words ("no GPU on this machine")


@dataclass
class PRState:
    number: int | None = None
    url: str | None = None
    state: str | None = None  # open | closed | planned
    draft: bool | None = None
    approved: bool = False
    head: str | None = None
    base: str | None = None
    action: str | None = None  # what this run did or would do
    # The rest is what ``pr`` planned and did, so that a saved Run renders the
    # plan, the PR body and the closing comment without asking the forge again.
    title: str | None = None
    labels: list[str] = field(default_factory=list)
    approved_by: list[str] = field(default_factory=list)
    position: int | None = None  # n of "n of m" in merge order
    total: int | None = None
    actions: list[str] = field(default_factory=list)  # every step, in order ("push ...", "open ...")
    body: str | None = None  # the body written (or, dry-run, that would be)
    comment: str | None = None  # the closing comment written (or that would be)
    note: str = ""


@dataclass
class Outcome:
    """What happened to one patch on one base: its verdict and the evidence."""

    name: str
    subject: str
    stack_patch_id: str
    source_commit: str | None = None
    provenance: Provenance | None = None
    applied: Applied | None = None
    commit: str | None = None  # the replayed commit
    branch: str | None = None
    conflict: Conflict | None = None
    note: str = ""  # e.g. "applied without 3-way: blobs missing"
    verdict: Verdict | None = None
    represented_by: list[str] = field(default_factory=list)
    represented_fraction: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)
    remaining_diff: str | None = None
    recommendation: Recommendation | None = None
    group: list[str] = field(default_factory=list)  # the run of patches the base has together, when it is one
    tests: list[TestResult] = field(default_factory=list)
    pr: PRState | None = None


@dataclass
class Run:
    """The outcomes of one stack on one base; the one thing every renderer reads."""

    stack: str | None
    base_ref: str
    base: str
    merge_base: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    stages: dict[str, str] = field(default_factory=dict)  # stage -> "ok" | "failed: ..." | "skipped"
    errors: list[str] = field(default_factory=list)
    repo_slug: str | None = None
    gpu: str | None = None  # what GPU the test stage had: "present" | "absent" | "off"
    subjects: dict[str, str] = field(default_factory=dict)  # base commit -> subject, for those the evidence names

    def outcome(self, name: str) -> Outcome:
        for o in self.outcomes:
            if o.name == name:
                return o
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "base_ref": self.base_ref,
            "base": self.base,
            "merge_base": self.merge_base,
            "repo_slug": self.repo_slug,
            "gpu": self.gpu,
            "stages": self.stages,
            "errors": self.errors,
            "patches": [_outcome_to_json(o) for o in self.outcomes],
            "subjects": self.subjects,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Run:
        return cls(
            stack=d.get("stack"),
            base_ref=d["base_ref"],
            base=d["base"],
            merge_base=d.get("merge_base"),
            outcomes=[_outcome_from_json(p) for p in d.get("patches", [])],
            stages=dict(d.get("stages", {})),
            errors=list(d.get("errors", [])),
            repo_slug=d.get("repo_slug"),
            gpu=d.get("gpu"),
            subjects=dict(d.get("subjects", {})),
        )


def _outcome_to_json(o: Outcome) -> dict[str, Any]:
    return {
        "name": o.name,
        "subject": o.subject,
        "stack_patch_id": o.stack_patch_id,
        "source_commit": o.source_commit,
        "provenance": dataclasses.asdict(o.provenance) if o.provenance else None,
        "applied": o.applied.value if o.applied else None,
        "commit": o.commit,
        "branch": o.branch,
        "conflict": dataclasses.asdict(o.conflict) if o.conflict else None,
        "note": o.note,
        "verdict": o.verdict.value if o.verdict else None,
        "represented_by": o.represented_by,
        "represented_fraction": o.represented_fraction,
        "evidence": [e.to_json() for e in o.evidence],
        "remaining_diff": o.remaining_diff,
        "recommendation": o.recommendation.value if o.recommendation else None,
        "group": o.group,
        "tests": [dataclasses.asdict(t) for t in o.tests],
        "pr": dataclasses.asdict(o.pr) if o.pr else None,
    }


def _outcome_from_json(d: dict[str, Any]) -> Outcome:
    prov = d.get("provenance")
    conflict = d.get("conflict")
    return Outcome(
        name=d["name"],
        subject=d.get("subject", ""),
        stack_patch_id=d.get("stack_patch_id", ""),
        source_commit=d.get("source_commit"),
        provenance=Provenance(**{**prov, "dropped": tuple(prov.get("dropped", ()))}) if prov else None,
        applied=Applied(d["applied"]) if d.get("applied") else None,
        commit=d.get("commit"),
        branch=d.get("branch"),
        conflict=Conflict(**conflict) if conflict else None,
        note=d.get("note", ""),
        verdict=Verdict(d["verdict"]) if d.get("verdict") else None,
        represented_by=list(d.get("represented_by", [])),
        represented_fraction=float(d.get("represented_fraction", 0.0)),
        evidence=[Evidence.from_json(e) for e in d.get("evidence", [])],
        remaining_diff=d.get("remaining_diff"),
        recommendation=Recommendation(d["recommendation"]) if d.get("recommendation") else None,
        group=list(d.get("group", [])),
        tests=[TestResult(**t) for t in d.get("tests", [])],
        pr=PRState(**d["pr"]) if d.get("pr") else None,
    )
