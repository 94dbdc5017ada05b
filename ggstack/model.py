"""The vocabulary of docs/glossary.md as types. Every report, PR body and exit code is rendered
from a Run (which round-trips through JSON), never recomputed."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

Progress = Callable[[int, int, str], None]  # (done, total, what): how a stage says how far it is


class Verdict(str, enum.Enum):
    UNIQUE = "unique"  # needed, applies
    CONFLICT = "conflict"  # needed, does not apply
    REPRESENTED = "represented"  # the base already has it
    PARTIAL = "partial"  # some hunks present: remaining_diff is what is left
    BROKEN = "broken"  # applies, but its tests fail with it
    INCONCLUSIVE = "inconclusive"  # e.g. GPU tests skipped: never a pass


class Applied(str, enum.Enum):
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
    stack_patch_id: str
    original_pr: str | None = None  # "owner/repo#130", or "#130": a PR number, its repository not known
    cherry_picked_from: str | None = None  # full sha
    dropped: tuple[str, ...] = ()  # "CUTLASS pin (cmake/cutlass.cmake)"


@dataclass(frozen=True)
class Patch:
    """One ``git format-patch`` file; ``raw`` keeps its bytes so saving an unchanged stack rewrites none."""

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
    # What follows the file name on its ``series`` line (quilt's ``-p1``, a comment): kept when the series is rewritten.
    series_options: str = field(compare=False, default="")
    series_above: tuple[str, ...] = field(compare=False, default=())  # comment lines above its line, kept with it

    @property
    def index(self) -> int:
        return int(self.name.split("-", 1)[0])

    @property
    def slug(self) -> str:
        stem = self.name.removesuffix(".patch")
        return stem.split("-", 1)[1] if "-" in stem else stem

    @property
    def body(self) -> str:
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
    require_tests: bool = True  # a needed patch whose tests could not decide is held, not opened
    native_stacks: str = "auto"  # auto (the forge says) | on | off: the PRs as one stack the forge keeps


@dataclass(frozen=True)
class LandPolicy:
    method: str = ""  # merge | squash | rebase; "": what the repository allows (a merge commit first)
    approvers: tuple[str, ...] = ()  # logins whose approval counts; (): anyone with write access
    checks: tuple[str, ...] = ()  # checks that must pass besides those the base branch requires


@dataclass(frozen=True)
class TestConfig:
    paths: tuple[str, ...] = ("tests/**/test_*.py",)
    cpu: str = "python -m pytest -q {tests}"
    gpu: str = ""
    timeout: int = 900
    gpu_runner: str = "gpu"  # GitHub Actions runs-on label for GPU jobs
    env: tuple[tuple[str, str], ...] = ()
    pass_env: tuple[str, ...] = ()  # ggstack's own variables a test run also gets (never a credential)
    home: str = "scratch"  # a test run's HOME: a scratch directory of its own, or "user"
    gpu_queue: str = "gpu"  # Buildkite agent queue for GPU steps
    cpu_queue: str = ""  # Buildkite agent queue for CPU steps ("": the pipeline's default)


@dataclass(frozen=True)
class StackConfig:
    target: TargetConfig
    branch_template: str = "gg/{stack}/{index:02d}-{slug}"
    pr: PRPolicy = PRPolicy()
    tests: TestConfig = TestConfig()
    land: LandPolicy = LandPolicy()


@dataclass(frozen=True)
class Stack:
    name: str
    path: str  # the stack directory
    config: StackConfig
    patches: tuple[Patch, ...]
    series_raw: bytes = field(repr=False, compare=False, default=b"")

    def find(self, key: str) -> Patch:
        """By 1-based index, file name, or file name without .patch."""
        from ggstack.errors import UserError

        for i, patch in enumerate(self.patches, 1):
            if key in (str(i), f"{i:04d}", patch.name, patch.name.removesuffix(".patch")):
                return patch
        raise UserError(f"no patch {key!r} in stack {self.name!r} (see `ggstack list {self.name}`)")


class Signal(str, enum.Enum):
    IDENTITY = "identity"  # the source is in the base, or a base commit names it
    PATCH_ID = "patch-id"  # `git patch-id --stable` equal to a base commit's
    EMPTY = "empty"  # replaying it changes nothing (or: applies and changes the base)
    CONFLICT = "conflict"  # replaying it conflicts
    REVERSE_APPLY = "reverse-apply"  # its post-image is in the base (`git apply -R`)
    POST_IMAGE = "post-image"  # every file it touches is in the base as it leaves it, blob for blob
    CONTENT = "content"  # line containment: which change blocks the base holds
    BLAME = "blame"  # which base commits brought the present lines in
    GROUP = "group"  # a run of consecutive patches is in the base together
    REVERT = "revert"  # a base commit took an earlier pick out again
    MODIFIED = "modified"  # base commits that changed its lines after picking it
    HINT = "hint"  # same subject or PR number; superseded by a change to the same lines
    TESTS = "tests"  # the patch's own tests (ggstack test)
    RULE = "rule"  # which rule of the verdict table decided, and why


class Says(str, enum.Enum):
    PRESENT = "present"
    ABSENT = "absent"
    UNDONE = "undone"  # it was there, and was taken out again
    NOTHING = "nothing"  # a fact or a hint: no opinion


@dataclass
class Evidence:
    """Code decides on ``kind`` and ``says``; ``data`` is detail for the JSON."""

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
    # A run that could not run (status error or timeout) is a harness error, never evidence:
    # command-not-found | missing-module | module-not-on-path | module-not-built | collection-error | usage-error |
    # internal-error | interrupted | crash | exit-code | timeout; with the first lines of output that explain it.
    harness_error: str = ""
    explanation: str = ""
    left_processes: list[str] = field(default_factory=list)  # "pid command" of what it left running, killed


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
    # The body itself is not kept: every body lists the whole merge order (n
    # bodies of n lines), and it is a rendering of the Run and the stack
    # (``pr.text.bodies``); what it is made of that neither holds is kept instead.
    title: str | None = None
    labels: list[str] = field(default_factory=list)
    approved_by: list[str] = field(default_factory=list)
    position: int | None = None  # n of "n of m" in merge order
    total: int | None = None
    actions: list[str] = field(default_factory=list)  # every step, in order ("push ...", "open ...")
    diffstat: list[tuple[str, int | None, int | None]] = field(default_factory=list)  # its commit's (path, +, -)
    comment: str | None = None  # the closing comment written (or that would be)
    note: str = ""
    # Merge readiness (an open PR's, as the forge said when ``pr`` read it): what ``land`` would decide.
    approval: str = ""  # "approved by @a", "waiting for approval", "changes requested by @b"
    checks: list[tuple[str, str]] = field(
        default_factory=list
    )  # required check -> success | failure | pending | expected
    mergeable: str = ""  # GitHub's mergeable_state: clean, dirty, blocked, …
    next_action: str = ""  # "ready to land", "waiting for approval", "check `x` failing", …


@dataclass
class TextVerdict:
    """The tests fold onto it (again from the same start), and ``drop`` reads the fork's own lines from it."""

    verdict: Verdict
    recommendation: Recommendation
    rule: str
    represented_by: list[str] = field(default_factory=list)
    # Changed lines the base lacks at places no base commit touched since the merge base (or in a
    # file the base never had): "file hunk: +first line". A patch with one is never represented.
    own_lines: list[str] = field(default_factory=list)


@dataclass
class Outcome:
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
    text: TextVerdict | None = None  # check's own decision, before the tests
    tests: list[TestResult] = field(default_factory=list)
    pr: PRState | None = None


@dataclass
class Run:
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

    def copy(self) -> Run:
        """Stages fill in a copy, never the Run they are given; outcomes copied one level deep."""
        return dataclasses.replace(
            self,
            outcomes=[dataclasses.replace(o) for o in self.outcomes],
            stages=dict(self.stages),
            errors=list(self.errors),
            subjects=dict(self.subjects),
        )

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
            "patches": [outcome_json(o) for o in self.outcomes],
            "subjects": self.subjects,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Run:
        """A ValueError naming the key (``patches[2].remaining_diff``) if a value is wrong."""
        run: Run = _decode_dataclass(cls, d, "")
        return run


def outcome_from_json(d: dict[str, Any]) -> Outcome:
    outcome: Outcome = _decode_dataclass(Outcome, d, "")
    return outcome


def outcome_json(o: Outcome) -> dict[str, Any]:
    return {
        "name": o.name,
        "subject": o.subject,
        "stack_patch_id": o.stack_patch_id,
        "source_commit": o.source_commit,
        "provenance": _flat_or_none(o.provenance),
        "applied": _value_or_none(o.applied),
        "commit": o.commit,
        "branch": o.branch,
        "conflict": _flat_or_none(o.conflict),
        "note": o.note,
        "verdict": _value_or_none(o.verdict),
        "represented_by": o.represented_by,
        "represented_fraction": o.represented_fraction,
        "evidence": [e.to_json() for e in o.evidence],
        "remaining_diff": o.remaining_diff,
        "recommendation": _value_or_none(o.recommendation),
        "group": o.group,
        "text": _flat_or_none(o.text),
        "tests": [_flat(t) for t in o.tests],
        "pr": _flat_or_none(o.pr),
    }


def _value_or_none(member: enum.Enum | None) -> Any:
    return member.value if member else None


def _flat_or_none(value: Any) -> dict[str, Any] | None:
    return _flat(value) if value else None


def _flat(value: Any) -> dict[str, Any]:
    """``dataclasses.asdict`` without its deep copy (0.1 s of each save of a 1,000-patch Run)."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


# -- reading a Run back: every value checked against the type it must have --------------------
#
# A Run file is read back by `report` and `pr --run`, and may be hand-made or
# from another version: a wrong type must be a message naming where it is
# (patches[2].remaining_diff), not a TypeError deep in a renderer. The types are
# the dataclasses' own annotations, so a field added to them is checked too.
# Keys the dataclasses do not have are ignored (a newer ggstack may write more).
# Hand-written: no library among ggstack's dependencies decodes JSON into typed dataclasses.


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _words(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_words(a) for a in args)
    if origin in (list, tuple):
        return f"a list of {_PLURAL.get(args[0], 'objects')}" if args else "a list"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    return "an object" if origin is dict else _SINGULAR.get(tp, "an object")


_PLURAL = {str: "strings", int: "integers", float: "numbers", bool: "true/false values"}
_SINGULAR = {str: "a string", bool: "true/false", int: "an integer", float: "a number", type(None): "null"}


def _wrong(tp: Any, value: Any, where: str) -> ValueError:
    shown = json.dumps(value)[:40] if not isinstance(value, (dict, list)) else _kind(value)
    return ValueError(f"{where}: expected {_words(tp)}, got {shown}")


def _decode(tp: Any, value: Any, where: str) -> Any:
    return value if tp is Any else _decoder(tp)(tp, value, where)


def _decoder(tp: Any) -> Callable[[Any, Any, str], Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _decode_union
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _decode_enum
    if origin in (list, tuple) or tp in (list, tuple):
        return _decode_sequence
    if origin is dict or tp is dict:
        return _decode_map
    return _decode_scalar


def _decode_enum(tp: Any, value: Any, where: str) -> Any:
    try:
        return tp(value)
    except ValueError:
        raise _wrong(tp, value, where) from None


def _decode_union(tp: Any, value: Any, where: str) -> Any:
    args = typing.get_args(tp)
    if value is None and type(None) in args:
        return None
    others = [a for a in args if a is not type(None)]
    if len(others) == 1 and (isinstance(value, (dict, list)) or not _plain(others[0])):
        return _decode(others[0], value, where)  # its own message says what inside is wrong
    for arg in others:
        try:
            return _decode(arg, value, where)
        except ValueError:
            continue
    raise _wrong(tp, value, where)


def _decode_map(tp: Any, value: Any, where: str) -> dict[str, Any]:
    args = typing.get_args(tp)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _wrong(tp, value, where)
    return {k: _decode(args[1], v, f"{where}.{k}") for k, v in value.items()} if args else dict(value)


def _decode_scalar(tp: Any, value: Any, where: str) -> Any:
    if isinstance(value, bool):  # a bool is an int to Python, never to a Run
        if tp is bool:
            return value
    elif tp is str and isinstance(value, str):
        return value
    elif tp is float and isinstance(value, int | float):
        return float(value)
    elif tp is int and isinstance(value, int):
        return value
    raise _wrong(tp, value, where)


def _plain(tp: Any) -> bool:
    return tp in (str, bool, int, float) or (isinstance(tp, type) and issubclass(tp, enum.Enum))


def _decode_sequence(tp: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp) or tp, typing.get_args(tp)
    if not isinstance(value, (list, tuple)):
        raise _wrong(tp, value, where)
    if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed shape: tuple[str, str]
        return _decode_shape(tp, value, where)
    items = [_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)] if args else list(value)
    return tuple(items) if origin is tuple else items


def _decode_shape(tp: Any, value: Any, where: str) -> tuple[Any, ...]:
    args = typing.get_args(tp)
    if len(value) != len(args):
        raise _wrong(tp, value, where)
    return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))


def _decode_dataclass(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {_kind(value)}")
    hints = typing.get_type_hints(cls)
    keys, optional = _JSON_KEYS.get(cls, {}), _OPTIONAL.get(cls, {})
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = keys.get(f.name, f.name)
        here = f"{where}.{key}" if where else key
        if key in value:
            kwargs[f.name] = _decode(hints[f.name], value[key], here)
        elif f.name in optional:
            kwargs[f.name] = optional[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise KeyError(here)  # `report` says: no key 'patches[0].name'
    if cls is Evidence:  # its JSON holds its data beside the fields: read by its own from_json
        return Evidence.from_json(value)
    return cls(**kwargs)


# How the JSON differs from the fields: another name, or a key older Runs may lack.
_JSON_KEYS: dict[type, dict[str, str]] = {Run: {"outcomes": "patches"}}
_OPTIONAL: dict[type, dict[str, Any]] = {Run: {"stack": None}, Outcome: {"subject": "", "stack_patch_id": ""}}


_LONE_SURROGATE = re.compile("[\udc80-\udcff]")


def json_text(value: object) -> str:
    """A byte that was not UTF-8 is written as its ``\\udcXX`` escape, which ``json.loads`` reads back."""
    out: list[str] = []
    try:
        _indented(value, "", out)
        text = "".join(out)
    except _NotPlain:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _NotPlain(Exception):
    """A key that is no string, or a type ``_indented`` does not know."""


def _indented(value: object, indent: str, out: list[str]) -> None:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` exactly, in half the time: the library's
    indented encoder is pure Python (a 6 MB Run: 0.38 s against 0.73 s)."""
    if isinstance(value, dict) and value:
        _indented_object(value, indent, out)
    elif isinstance(value, list | tuple) and value:
        _indented_list(value, indent, out)
    else:
        out.append(_plain_json(value))


def _plain_json(value: object) -> str:
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, dict | list | tuple):  # empty: the others were written by their own
        return "{}" if isinstance(value, dict) else "[]"
    raise _NotPlain


def _indented_object(value: dict, indent: str, out: list[str]) -> None:
    inner, sep = indent + "  ", "{\n" + indent + "  "
    for key, item in value.items():
        if not isinstance(key, str):
            raise _NotPlain
        if isinstance(item, str):  # most values: no call of their own
            out.append(sep + encode_basestring(key) + ": " + encode_basestring(item))
        else:
            out.append(sep + encode_basestring(key) + ": ")
            _indented(item, inner, out)
        sep = ",\n" + inner
    out.append("\n" + indent + "}")


def _indented_list(value: list | tuple, indent: str, out: list[str]) -> None:
    inner, sep = indent + "  ", "[\n" + indent + "  "
    for item in value:
        if isinstance(item, str):
            out.append(sep + encode_basestring(item))
        else:
            out.append(sep)
            _indented(item, inner, out)
        sep = ",\n" + inner
    out.append("\n" + indent + "]")
