"""The stored stack on disk: ``patches/<stack>/{stack.toml, series, NNNN-*.patch}``.

The files are what ``git format-patch --full-index`` writes and what quilt
reads, so ``git am -3`` and ``quilt push -a`` accept the directory as it is.
Loading keeps every file's bytes, and saving writes back exactly those bytes
for what did not change: an unmodified stack round-trips without a byte
changed, and a reviewer's diff of ``patches/`` shows only real edits.

Everything is validated before anything is written; a malformed file is a
``UserError`` naming the file and line. A change to the directory is one
step that a kill cannot tear (``ggstack.state.commit_dir``), made under the
stack's lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ggstack import git, secrets, state
from ggstack.diff import DiffError, diff_end
from ggstack.diff import paths as diff_paths
from ggstack.errors import UserError
from ggstack.git.dates import stamp
from ggstack.model import LandPolicy, Patch, Provenance, PRPolicy, Stack, StackConfig, TargetConfig, TestConfig

STACK_TOML = "stack.toml"
SERIES = "series"

T_ORIGINAL_PR = "Original-PR"
T_CHERRY_PICKED = "Cherry-picked-from"
T_DROPPED = "Dropped"
T_STACK_PATCH_ID = "Stack-Patch-Id"
# An Original-PR value: owner/repo#N, or "#N" when the PR's repository is not known.
PR_REF = re.compile(r"^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d+$")

_FROM_LINE = re.compile(rb"^From ([0-9a-f]{40}|[0-9a-f]{64}) ")
_CHERRY_LINE = re.compile(r"^\(cherry picked from commit ([0-9a-f]{40}|[0-9a-f]{64})\)$", re.M)
_PATCH_PREFIX = re.compile(r"^\[PATCH[^\]]*\]\s*")
_SLUG_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
_STACK_PATCH_ID = re.compile(r"^I[0-9a-f]{40}$")


# -- stack.toml -----------------------------------------------------------------

_SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "target": {"repo": str, "remote": str, "base": str, "fork": str},
    "branches": {"template": str},
    "pr": {
        "draft": bool,
        "labels": list,
        "approval_gate": bool,
        "stacked": bool,
        "require_tests": bool,
        "native_stacks": str,
    },
    "land": {"method": str, "approvers": list, "checks": list},
    "tests": {
        "paths": list,
        "cpu": str,
        "gpu": str,
        "timeout": int,
        "gpu_runner": str,
        "env": dict,
        "pass_env": list,
        "home": str,
        "gpu_queue": str,
        "cpu_queue": str,
    },
}


def render_config(
    repo_slug: str,
    base: str,
    remote: str = "origin",
    *,
    fork: str | None = None,
    cpu: str = "python -m pytest -q {tests}",
    gpu: str = "",
    timeout: int = 900,
) -> str:
    """The stack.toml that ``ggstack init`` writes; every key documented in docs/stack-toml.md."""
    gpu_line = (
        f"gpu = {_toml_string(gpu)}"
        if gpu
        else 'gpu = ""                       # e.g. "python -m pytest -q -m gpu {tests}"'
    )
    fork_line = (
        _noted(f"fork = {_toml_string(fork)}", "PR heads live in this fork; repo is upstream")
        if fork
        else '# fork = "me/name"             # set when PR heads live in a fork (head = "me:branch")'
    )
    return f"""# ggstack stack configuration (see docs/stack-toml.md in ggstack)

[target]
{_noted(f"repo = {_toml_string(repo_slug)}", "owner/name on the forge: where PRs are opened")}
{_noted(f"remote = {_toml_string(remote)}", "git remote the per-patch branches are pushed to")}
{_noted(f"base = {_toml_string(base)}", "the base branch the stack is replayed onto")}
{fork_line}

[branches]
template = "gg/{{stack}}/{{index:02d}}-{{slug}}"

[pr]
draft = true                   # new PRs open as drafts
labels = ["do-not-merge"]      # labels new PRs get (lifted on approval when approval_gate)
approval_gate = true           # "Do not merge until explicitly approved."
stacked = true                 # each PR's base is the previous needed patch's branch
require_tests = true           # hold a needed patch whose tests could not run (no PR until they can)
native_stacks = "auto"         # one native stack of PRs where the forge has them: auto | on | off

[land]
method = ""                    # merge | squash | rebase ("": what the repository allows)
approvers = []                 # whose approval counts ([]: anyone with write access)
checks = []                    # checks that must pass besides the base branch's required ones

[tests]
paths = ["tests/**/test_*.py"] # which files of a patch are its tests
cpu = {_toml_string(cpu)}
{gpu_line}
{_noted(f"timeout = {timeout}", "seconds per test command")}
gpu_runner = "gpu"             # runs-on label for GPU jobs in the CI matrix
gpu_queue = "gpu"              # Buildkite agent queue for GPU steps (test --matrix --ci buildkite)
home = "scratch"               # a test run's HOME: a scratch directory of its own ("user": yours)
# pass_env = ["HF_HOME"]       # more of your variables for the tests (never a credential)
"""


def _noted(line: str, note: str) -> str:
    """``line`` with its comment in the template's comment column."""
    return f"{line:<30} # {note}"


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_config(text: str, path: str) -> StackConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"invalid TOML: {e}", path=path, line=_toml_error_line(e)) from None
    for section, value in data.items():
        if section not in _SCHEMA:
            raise UserError(
                f"unknown section [{section}] (known: {', '.join(_SCHEMA)})",
                path=path,
                line=_line_of(text, rf"\[{re.escape(section)}\]"),
            )
        if not isinstance(value, dict):
            raise UserError(f"{section} must be a table", path=path, line=_line_of(text, rf"^{re.escape(section)}\s*="))
        for key, item in value.items():
            expected = _SCHEMA[section].get(key)
            line = _line_of(text, rf"^\s*{re.escape(key)}\s*=")
            if expected is None:
                raise UserError(
                    f"unknown key {section}.{key} (known: {', '.join(_SCHEMA[section])})", path=path, line=line
                )
            if not isinstance(item, expected) or (expected is int and isinstance(item, bool)):
                raise UserError(
                    f"{section}.{key} must be a {getattr(expected, '__name__', expected)}, not {type(item).__name__}",
                    path=path,
                    line=line,
                )
            if isinstance(item, list) and not all(isinstance(x, str) for x in item):
                raise UserError(f"{section}.{key} must be a list of strings", path=path, line=line)
    target = data.get("target", {})
    if "repo" not in target or not re.match(r"^[^/\s]+/[^/\s]+$", target["repo"]):
        raise UserError('target.repo must be "owner/name"', path=path, line=_line_of(text, r"^\s*repo\s*="))
    _no_options(data, text, path)
    _check_base(target.get("base", ""), text, path)
    tests = data.get("tests", {})
    env = tests.get("env", {})
    if "timeout" in tests and tests["timeout"] <= 0:
        raise UserError(
            "tests.timeout must be a positive number of seconds", path=path, line=_line_of(text, r"^\s*timeout\s*=")
        )
    if not all(isinstance(v, str) for v in env.values()):
        raise UserError("tests.env values must be strings", path=path, line=_line_of(text, r"^\s*env\s*="))
    _check_test_environment(tests, text, path)
    if "template" in data.get("branches", {}):
        _check_template(data["branches"]["template"], path, _line_of(text, r"^\s*template\s*="))
    pr = data.get("pr", {})
    land = data.get("land", {})
    _one_of(pr.get("native_stacks", "auto"), ("auto", "on", "off"), "pr.native_stacks", path, text)
    _one_of(land.get("method", ""), ("", "merge", "squash", "rebase"), "land.method", path, text)
    default_tests = TestConfig()
    return StackConfig(
        target=TargetConfig(
            repo=target["repo"],
            remote=target.get("remote", "origin"),
            base=target.get("base", "main"),
            fork=target.get("fork"),
        ),
        branch_template=data.get("branches", {}).get("template", StackConfig.branch_template),
        pr=PRPolicy(
            draft=pr.get("draft", True),
            labels=tuple(pr.get("labels", PRPolicy.labels)),
            approval_gate=pr.get("approval_gate", True),
            stacked=pr.get("stacked", True),
            require_tests=pr.get("require_tests", True),
            native_stacks=pr.get("native_stacks", "auto"),
        ),
        land=LandPolicy(
            method=land.get("method", ""),
            approvers=tuple(land.get("approvers", ())),
            checks=tuple(land.get("checks", ())),
        ),
        tests=TestConfig(
            paths=tuple(tests.get("paths", default_tests.paths)),
            cpu=tests.get("cpu", default_tests.cpu),
            gpu=tests.get("gpu", default_tests.gpu),
            timeout=tests.get("timeout", default_tests.timeout),
            gpu_runner=tests.get("gpu_runner", default_tests.gpu_runner),
            env=tuple(sorted(env.items())),
            pass_env=tuple(tests.get("pass_env", ())),
            home=tests.get("home", default_tests.home),
            gpu_queue=tests.get("gpu_queue", default_tests.gpu_queue),
            cpu_queue=tests.get("cpu_queue", default_tests.cpu_queue),
        ),
    )


def _one_of(value: str, allowed: tuple[str, ...], key: str, path: str, text: str) -> None:
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        name = key.split(".")[1]
        raise UserError(
            f"{key} must be one of {shown}, not {value!r}", path=path, line=_line_of(text, rf"^\s*{name}\s*=")
        )


_TEMPLATE_FIELDS = {"stack": "gg-clean", "index": 12, "slug": "x" * 64, "name": "0012-" + "x" * 64}
_SAME_FIELDS = {**_TEMPLATE_FIELDS, "index": 13, "slug": "y" * 64, "name": "0013-" + "y" * 64}
# ggstack writes branches only here: a branch of the user's (refs/heads/) or a ref of its own.
BRANCH_NAMESPACES = ("refs/heads/", "refs/ggstack/")
# ggstack's own bookkeeping under refs/ggstack/, which no patch branch may be.
_BOOKKEEPING = re.compile(r"^refs/ggstack/(fast-import$|[^/]+/(last-apply|rebased)$|[^/]+/resolved/)")
# What git refuses in a ref name (git check-ref-format), and a part git reads as something else.
_BAD_REF = re.compile(r"(^|/)\.|\.\.|//|@\{|[\x00-\x20\x7f~^:?*\[\\]|\.lock(/|$)|[/.]$|^-")


def branch_ref_problem(ref: str) -> str | None:
    """Why ggstack must not write ``ref`` as a patch's branch, or None: it names a tag,
    a note, a remote-tracking branch, the stash, HEAD or ggstack's own bookkeeping (these
    are never a patch's branch), or is no ref name git accepts."""
    if not ref.startswith(BRANCH_NAMESPACES):
        return f"makes {ref!r}, outside refs/heads/ and refs/ggstack/ (ggstack writes no tags, notes, remotes or stash)"
    if ref.removeprefix("refs/heads/").split("/")[0] == "HEAD" or ref.count("/") < 2:
        return f"makes {ref!r}, which git reads as HEAD"
    if _BOOKKEEPING.match(ref):
        return f"makes {ref!r}, a ref ggstack keeps its own records in"
    if _BAD_REF.search(ref.removeprefix("refs/")):
        return f"makes {ref!r}, which is not a valid ref name"
    return None


def _check_template(template: str, path: str, line: int | None) -> None:
    """``branches.template`` must make a branch name for every patch: only its
    fields, as str.format reads them, a length git can store (each branch
    is a file: at most 255 bytes a path component), one ref a patch, and
    only refs ggstack may write (``branch_ref_problem``)."""
    try:
        sample = template.format(**_TEMPLATE_FIELDS)
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
        shown = template if len(template) <= 80 else template[:80] + "…"
        raise UserError(
            f"branches.template {shown!r}: {type(e).__name__}: {e} (fields: {', '.join(_TEMPLATE_FIELDS)})",
            path=path,
            line=line,
        ) from None
    longest = max(len(part.encode()) for part in sample.split("/"))
    if longest > 200 or len(sample) > 1000:
        raise UserError(
            f"branches.template makes branch names of {len(sample)} characters (a part of {longest}); "
            "git stores each branch as a file, and a name part longer than ~200 bytes cannot be one",
            path=path,
            line=line,
        )
    problem = branch_ref_problem(sample if sample.startswith("refs/") else "refs/heads/" + sample)
    if problem is None and template.format(**_SAME_FIELDS) == sample:
        problem = "names one ref for every patch (use {index}, {slug} or {name})"
    if problem:
        shown = template if len(template) <= 80 else template[:80] + "…"
        raise UserError(f"branches.template {shown!r} {problem}", path=path, line=line)


def _line_of(text: str, pattern: str) -> int | None:
    for n, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            return n
    return None


def _toml_error_line(e: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(e))
    return int(m.group(1)) if m else None


# -- one patch file -------------------------------------------------------------


def parse_patch(raw: bytes, path: str) -> Patch:
    """A format-patch file, parsed and checked; errors name ``path`` and the line.

    Provenance is left empty: trailers are read for all patches at once
    (one ``git interpret-trailers`` call), see ``with_provenance``."""
    name = os.path.basename(path)
    m = _FROM_LINE.match(raw[:200])
    if not m:
        raise UserError("not a git format-patch file: line 1 must be 'From <sha> <date>' (mbox)", path=path, line=1)
    _refuse_bytes(raw, path)
    # The diff is read where it is: a 50 MB patch is one copy of its diff besides the file's
    # bytes, not one a step (the text, what follows the headers, the diff, its lines).
    text, diff_from = _patch_text(raw, path)
    head_end = text.find("\n\n")
    if head_end < 0:
        raise UserError("no blank line after the mail headers", path=path, line=text.count("\n") + 1)
    head, body_at = text[:head_end], head_end + 2
    headers = _headers(head.partition("\n")[2] + "\n")
    for required in ("From", "Subject"):
        if headers.get(required) is None:
            raise UserError(f"missing {required}: header", path=path, line=2)
    _refuse_identity(headers["From"], _raw_header(head, "Date"), head, path)
    subject = _PATCH_PREFIX.sub("", " ".join(headers["Subject"].split()))
    head_lines = head.count("\n") + 2  # line number of the first body line
    if diff_from >= len(raw):
        raise UserError("no diff in patch (expected a 'diff --git' line)", path=path, line=head_lines)
    # The message ends at the last "---" line before the diff (the diffstat follows it).
    pre_diff = "\n" + text[body_at:]
    marker = pre_diff.rfind("\n---\n")
    body = pre_diff[:marker] if marker >= 0 else pre_diff
    diff_line = head_lines + pre_diff.count("\n") - 1
    diff, tail = _read_diff(raw, diff_from, path, diff_line)
    _refuse_tail(tail, path, diff_line + diff.count("\n"))
    base = re.search(r"^base-commit: ([0-9a-f]{40}|[0-9a-f]{64})$", tail, re.M)
    message = subject + ("\n\n" + body.strip("\n") if body.strip("\n") else "") + "\n"
    patch = Patch(
        name=name,
        subject=subject,
        message=message,
        author=headers["From"],
        date=_raw_header(head, "Date"),
        diff=diff,
        provenance=Provenance(stack_patch_id=""),
        source_commit=m.group(1).decode(),
        base_commit=base.group(1) if base else None,
        paths=tuple(diff_paths(diff)),
        raw=raw,
    )
    return patch


def _refuse_bytes(raw: bytes, path: str) -> None:
    """What no file ``git format-patch`` wrote has: a NUL byte (binary diffs are
    base85), CRLF line ends (an editor's or ``core.autocrlf``'s conversion:
    git would then apply another diff), a second mail message."""
    if b"\0" in raw:
        line = raw[: raw.index(b"\0")].count(b"\n") + 1
        raise UserError("contains a NUL byte (a patch file is text; binary changes are base85)", path=path, line=line)
    first_end = raw.find(b"\n")
    if raw[: first_end if first_end >= 0 else len(raw)].endswith(b"\r"):
        raise UserError(
            "has CRLF line ends (converted by an editor or core.autocrlf?); git format-patch writes LF — "
            "convert it back (e.g. dos2unix), or add '*.patch -text' to .gitattributes",
            path=path,
            line=1,
        )
    second = re.search(rb"\nFrom ([0-9a-f]{40}|[0-9a-f]{64}) ", raw)
    if second:
        raise UserError(
            "a second mail message starts here: a patch file holds one patch (split it with `git mailsplit`)",
            path=path,
            line=raw[: second.start() + 1].count(b"\n") + 1,
        )


def _patch_text(raw: bytes, path: str) -> tuple[str, int]:
    """The file up to its diff as text, and where the diff starts (``len(raw)``: there is
    none). format-patch writes headers and message in UTF-8 but a diff's lines as the
    file's own bytes (a latin-1 source stays latin-1): those are read by ``_read_diff``."""
    at = raw.find(b"\ndiff --git ")
    diff_from = len(raw) if at < 0 else at + 1
    try:
        return str(memoryview(raw)[:diff_from], "utf-8"), diff_from
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise UserError(
            "not valid UTF-8 (format-patch writes headers and message in UTF-8)", path=path, line=line
        ) from None


def _read_diff(raw: bytes, start: int, path: str, first_line: int) -> tuple[str, str]:
    """The diff from ``start`` in ``raw`` (checked, ``diff.diff_end``) and what follows it: a
    byte that is not UTF-8 is kept, surrogate-escaped. Decoded from the bytes in place, and
    the text to the end of the file let go before the diff alone is decoded again: never
    more than one copy of a big diff besides the file's bytes."""
    whole = str(memoryview(raw)[start:], "utf-8", "surrogateescape")
    try:
        end = diff_end(whole)
    except DiffError as e:
        raise UserError(str(e), path=path, line=first_line + e.line) from None
    if end < 0:
        return whole + "\n", ""
    if end == 0:
        return "\n", whole
    tail = whole[end:]
    del whole
    stop = len(raw) - len(tail.encode("utf-8", "surrogateescape"))
    return str(memoryview(raw)[start:stop], "utf-8", "surrogateescape"), tail


_AUTHOR = re.compile(r"^(.*\S.*) <([^<>]*)>$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?( ?([+-]\d{2}:?\d{2}|Z))?$")


_RAW_DATE = re.compile(r"^\d+ [+-]\d{4}$")


def _readable_date(date: str) -> bool:
    """A raw ``<epoch> <tz>`` or an RFC 2822 date with its zone: what git reads in a patch."""
    if _RAW_DATE.match(date) or stamp(date) is not None:
        return True  # (format-patch's own date: no email package to import for it)
    import email.utils

    parsed = email.utils.parsedate_tz(date)
    return parsed is not None and parsed[9] is not None


def _refuse_identity(author: str, date: str, head: str, path: str) -> None:
    """From: and Date: as git can make an author of them (a hand edit may not)."""
    if not _AUTHOR.match(author) or not author.partition(" <")[0].strip():
        shown = _raw_header(head, "From")
        raise UserError(f"From: {shown!r} is not 'Name <email>'", path=path, line=_line_of(head, r"^From:") or 2)
    if date and not _readable_date(date) and not _ISO_DATE.match(date):
        raise UserError(
            f"Date: {date!r} is not a date git reads (RFC 2822, as git format-patch writes it: "
            "'Thu, 3 Dec 2026 05:36:41 +0000')",
            path=path,
            line=_line_of(head, r"^Date:") or 2,
        )


def _refuse_tail(tail: str, path: str, first_line: int) -> None:
    """After the diff only ``base-commit:``/``prerequisite-patch-id:`` lines and
    a signature may follow; another diff there would be dropped without a word."""
    for n, line in enumerate(tail.split("\n")):
        if line.startswith(("diff --git ", "@@ ", "--- a/", "+++ b/")):
            raise UserError(
                "a diff after the end of the patch (after base-commit: or the signature) — "
                "git am would apply it, ggstack would drop it; move it into the patch's diff or remove it",
                path=path,
                line=first_line + n,
            )


# What format-patch writes for most authors and subjects: nothing quoted or encoded.
_PLAIN_FROM = re.compile(r"^[A-Za-z0-9_'+-]+(?: [A-Za-z0-9_'+-]+)* <[^<>\s\"]+>$")


# A mail header: "Name: value", folded onto the lines after it that start with a blank.
_HEADER = re.compile(r"([!-9;-~]+):[ \t]*([^\n]*(?:\n[ \t][^\n]*)*)\n")


def _fields(head: str) -> dict[str, str]:
    """name (lower case) -> the first value of each header, as the email package's header parser
    (compat32) has them: read directly where every line is a header or its folding (what
    format-patch writes), by that parser where not (it reads the rest of an odd head as body)."""
    fields: dict[str, str] = {}
    at = 0
    for m in _HEADER.finditer(head):
        if m.start() != at:
            break
        fields.setdefault(m.group(1).lower(), m.group(2))
        at = m.end()
    if at == len(head):
        return fields
    import email.parser  # slow to import: only for a head format-patch would not write

    raw = email.parser.HeaderParser().parsestr(head, headersonly=True)  # compat32, its default policy
    return {name.lower(): str(raw[name]) for name in raw}  # (the first of each, as get has it)


def _headers(head: str) -> dict[str, str]:
    """Subject and From, as text: From as git has it ("Name <email>", the mail
    header's quoting and RFC 2047 encoding undone). Plain headers are read
    directly; the email package (slow: a parser a header) reads the others."""
    raw = _fields(head)
    out = {}
    for name in ("From", "Subject"):
        value = raw.get(name.lower())
        if value is None:
            continue
        value = " ".join(value.split())
        if name == "From" and not _PLAIN_FROM.match(value):
            value = _author(value) or _decoded(name, head)
        elif "=?" in value:
            plain = _unstructured(value) if name == "Subject" and _well_encoded(value) else None
            value = plain if plain is not None else _decoded(name, head)
        out[name] = value
    return out


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def mail_author(mail: bytes) -> tuple[str, str] | None:
    """(name, email) of a mail's From: header, the way a stored patch's is read: for the names
    ``git mailinfo`` gives up on (longer than 60 bytes, it keeps only the address)."""
    head = mail.partition(b"\n\n")[0].decode("utf-8", "surrogateescape")
    value = _headers(head.partition("\n")[2] + "\n" if head.startswith("From ") else head + "\n").get("From")
    author = _author(value) if value else None
    if author is None:
        return None
    name, _, email = author[:-1].rpartition(" <")
    return name, email


def _author(value: str) -> str | None:
    """A From: header as ``git mailinfo`` reads it: the address as it stands between the last
    ``<`` and ``>`` (the email package's address parser cuts ``a+b[bot]@x`` at the ``[``), the
    name's quotes and RFC 2047 encoding undone (adjacent encoded words joined, not spaced);
    None where it is no ``name <address>``."""
    name, sep, address = value.rpartition(" <")
    if not sep or not name or not address.endswith(">") or "<" in address:
        return None
    if "=?" in name:
        import email.header

        name = str(email.header.make_header(email.header.decode_header(name)))
    elif quoted := _QUOTED.fullmatch(name):
        name = re.sub(r"\\(.)", r"\1", quoted.group(1))
    return f"{name} <{address[:-1]}>"


# An RFC 2047 word, and what a well-formed one holds: a charset email.header knows, Q's escapes
# whole, B's base64 whole. (Anything else, the default policy reads, with its defects.)
_ENCODED_WORD = re.compile(r"=\?([^?]*)\?([^?]*)\?([^?]*)\?=")
_Q_TEXT = re.compile(r"(?:[^=]|=[0-9A-Fa-f]{2})*")
_B_TEXT = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _well_encoded(value: str) -> bool:
    """Are there encoded words in it, and all of them well formed?"""
    words = _ENCODED_WORD.findall(value)
    return bool(words) and all(_well_formed(*word) for word in words)


def _well_formed(charset: str, kind: str, text: str) -> bool:
    form = {"q": _Q_TEXT, "b": _B_TEXT}.get(kind.lower())
    return charset.lower() in ("utf-8", "us-ascii", "iso-8859-1") and form is not None and bool(form.fullmatch(text))


def _unstructured(value: str) -> str | None:
    """A text header's RFC 2047 words decoded (a Subject), as the email package's default policy
    decodes them (the same on all 315 encoded subjects of four projects' histories), without
    its header registry to import; None where its bytes are not of its charset (the policy
    reads those, with its defects)."""
    import email.header

    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (UnicodeError, LookupError, ValueError):
        return None


def _decoded(name: str, head: str) -> str:
    import email.parser
    import email.policy  # its header registry is slow to import: only for an encoded header

    header = email.parser.Parser(policy=email.policy.default).parsestr(head, headersonly=True)[name]
    addresses: tuple[Any, ...] = getattr(header, "addresses", ())
    if name != "From" or len(addresses) != 1:
        return str(header)
    return f"{addresses[0].display_name} <{addresses[0].addr_spec}>"


def _raw_header(head: str, name: str) -> str:
    m = re.search(rf"^{name}: (.*)$", head, re.M)
    return m.group(1).strip() if m else ""


def picked_from_line(message: str) -> str | None:
    """The commit git's own ``(cherry picked from commit X)`` line names (the first: the origin)."""
    m = _CHERRY_LINE.search(message)
    return m.group(1) if m else None


def with_provenance(patch: Patch, trailers: list[tuple[str, str]]) -> Patch:
    original_pr = cherry = spid = None
    dropped: list[str] = []
    for key, value in trailers:
        k = key.lower()
        if k == T_ORIGINAL_PR.lower():
            original_pr = value
        elif k == T_CHERRY_PICKED.lower():
            cherry = value
        elif k == T_DROPPED.lower():
            dropped.append(value)
        elif k == T_STACK_PATCH_ID.lower():
            spid = value
    cherry = cherry or picked_from_line(patch.message)
    prov = Provenance(
        stack_patch_id=spid or "", original_pr=original_pr, cherry_picked_from=cherry, dropped=tuple(dropped)
    )
    return replace(patch, provenance=prov)


def checked_provenance(patch: Patch, trailers: list[tuple[str, str]], path: str | None) -> Patch:
    """``with_provenance``, after checking the one trailer ggstack relies on:
    exactly one ``Stack-Patch-Id`` of the shape ggstack writes — it is matched
    against PR markers and written into PR bodies, so nothing else may pass."""
    ids = [value for key, value in trailers if key.lower() == T_STACK_PATCH_ID.lower()]
    lines = _trailer_lines(patch.raw, T_STACK_PATCH_ID)
    if not ids:
        raise UserError(f"no {T_STACK_PATCH_ID}: trailer (patches get one from `ggstack import`)", path=path)
    if len(ids) > 1:
        raise UserError(
            f"{len(ids)} {T_STACK_PATCH_ID}: trailers; a patch has exactly one (keep the first, assigned at import)",
            path=path,
            line=lines[1] if len(lines) > 1 else None,
        )
    if not _STACK_PATCH_ID.match(ids[0]):
        shown = ids[0] if len(ids[0]) <= 60 else ids[0][:60] + "…"
        raise UserError(
            f"{T_STACK_PATCH_ID} {shown!r} is not 'I' and 40 lowercase hex digits (the shape `ggstack import` assigns)",
            path=path,
            line=lines[0] if lines else None,
        )
    return with_provenance(patch, trailers)


def _trailer_lines(raw: bytes, key: str) -> list[int]:
    """The line numbers in a patch file where a trailer ``key`` starts (before the diff)."""
    ends = [i for i in (raw.find(b"\n---\n"), raw.find(b"\ndiff --git ")) if i >= 0]
    head = str(memoryview(raw)[: min(ends, default=len(raw))], "utf-8", "replace")  # not the diff: it may be big
    prefix = key.lower() + ":"
    return [n for n, line in enumerate(head.split("\n"), 1) if line.lower().startswith(prefix)]


# -- a stack directory ----------------------------------------------------------


def stack_dir(patches_dir: str, name: str) -> str:
    if not _SLUG_SAFE.match(name) or name.startswith("."):
        raise UserError(f"invalid stack name {name!r}: use letters, digits, '.', '_' and '-'")
    if ".." in name or name.endswith((".", ".lock")):
        # The name is a part of ref names (refs/ggstack/<stack>/…, gg/<stack>/…): git refuses these.
        raise UserError(f"invalid stack name {name!r}: git refuses a ref name with '..' or ending in '.' or '.lock'")
    return os.path.join(patches_dir, name)


def list_stacks(patches_dir: str) -> list[str]:
    if not os.path.isdir(patches_dir):
        return []
    return sorted(
        d
        for d in os.listdir(patches_dir)
        if not d.startswith(".")
        and os.path.isfile(os.path.join(state.readable_dir(os.path.join(patches_dir, d)), STACK_TOML))
    )


def load(patches_dir: str, name: str) -> Stack:
    path = stack_dir(patches_dir, name)
    where = state.readable_dir(path)
    if os.path.isdir(os.path.join(where, SERIES)):
        raise UserError(
            f"{SERIES} is a directory; it must be the file listing the patches", path=os.path.join(path, SERIES)
        )
    files = state.read_dir_files(path)[1] if os.path.isdir(where) else {}
    if STACK_TOML not in files:
        known = ", ".join(list_stacks(patches_dir)) or "none"
        raise UserError(f"no stack {name!r} in {patches_dir} (stacks: {known}; create one with `ggstack init`)")
    toml_path = os.path.join(path, STACK_TOML)
    raw_toml = files[STACK_TOML]
    try:
        toml_text = raw_toml.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            "not valid UTF-8 (TOML is UTF-8)", path=toml_path, line=raw_toml[: e.start].count(b"\n") + 1
        ) from None
    config = parse_config(toml_text, toml_path)
    series_path = os.path.join(path, SERIES)
    series_raw = files.get(SERIES, b"")
    names = _series_entries(series_raw, series_path, files)
    patches = [
        replace(parse_patch(files[e], os.path.join(path, e)), series_options=line.options, series_above=line.above)
        for e, line in names.items()
    ]
    listed = set(names)
    for fname in sorted(files):
        if fname.endswith(".patch") and fname not in listed:
            raise UserError(
                f"patch file is not in {SERIES} (add it to the series or delete it)", path=os.path.join(path, fname)
            )
    trailers = git.parse_trailers([p.message for p in patches])
    patches = [checked_provenance(p, t, os.path.join(path, p.name)) for p, t in zip(patches, trailers)]
    seen: dict[str, str] = {}
    for p in patches:
        spid = p.provenance.stack_patch_id
        if spid in seen:
            raise UserError(
                f"duplicate {T_STACK_PATCH_ID} {spid}, also in {seen[spid]}",
                path=os.path.join(path, p.name),
                line=_trailer_lines(p.raw, T_STACK_PATCH_ID)[-1],
            )
        seen[spid] = p.name
    return Stack(name=name, path=path, config=config, patches=tuple(patches), series_raw=series_raw)


class _Line(NamedTuple):
    """A series entry's own text: what follows its name on its line, and the lines above it."""

    options: str  # "-p1", "-p1 # why"
    above: tuple[str, ...]  # comment and blank lines since the entry before (none for the first)


def series_line(text: str, series_path: str, n: int) -> str | None:
    """The file line ``n`` of a quilt series names (None for a blank or comment line); an
    error naming the line for any option but ``-p1``, the one strip level ggstack stores."""
    fields = text.split("#", 1)[0].split()
    if not fields:
        return None
    if fields[1:] not in ([], ["-p1"]):
        raise UserError(
            f"unsupported patch options {' '.join(fields[1:])!r} (ggstack stores -p1 patches)",
            path=series_path,
            line=n,
        )
    return fields[0]


def _series_entries(raw: bytes, series_path: str, files: Collection[str]) -> dict[str, _Line]:
    """File name → its line's options and the lines above it, in series order."""
    entries: dict[str, _Line] = {}
    pending: list[str] = []
    for n, text in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        entry = series_line(text, series_path, n)
        if entry is None:
            pending.append(text.rstrip())
            continue
        if "/" in entry or entry.startswith("."):
            raise UserError(f"series entry {entry!r} must be a file in the stack directory", path=series_path, line=n)
        if entry not in files:
            raise UserError(f"series names {entry!r}, but there is no such file", path=series_path, line=n)
        if entry in entries:
            raise UserError(f"{entry!r} is listed twice", path=series_path, line=n)
        entries[entry] = _Line(text.strip()[len(entry) :].strip(), tuple(pending) if entries else ())
        pending = []
    return entries


def render_series(stack: Stack) -> bytes:
    """The series file: the lines before the first entry and after the last kept,
    one file name a line, each with the options (and comment) its line had and
    the comment lines that were above it."""
    old = stack.series_raw.decode("utf-8", "replace").splitlines()
    entry_at = [i for i, line in enumerate(old) if line.split("#", 1)[0].strip()]
    head = old[: entry_at[0]] if entry_at else [line for line in old if line.startswith("#")]
    tail = old[entry_at[-1] + 1 :] if entry_at else []
    lines = head or [f"# ggstack series for {stack.name}: one patch a line, in merge order"]
    for p in stack.patches:
        lines += [*p.series_above, f"{p.name} {p.series_options}" if p.series_options else p.name]
    return ("\n".join(lines + tail) + "\n").encode()


def save(stack: Stack, also: Mapping[str, bytes | None] | None = None) -> bool:
    """Write the stack as one change (see ``ggstack.state``): the patch files, ``series``,
    and ``also`` (other files of the stack directory; None deletes), removing the
    patch files the series no longer names. Returns whether anything changed.

    The caller holds the stack's lock (``state.locked``)."""
    keep = {p.name for p in stack.patches}
    entries = _series_entries_or_none(stack.series_raw, keep)
    now = [(p.name, _Line(p.series_options, p.series_above)) for p in stack.patches]
    unchanged = entries is not None and list(entries.items()) == now
    series_bytes = stack.series_raw if unchanged else render_series(stack)
    changes: dict[str, bytes | None] = {p.name: p.raw for p in stack.patches}
    changes[SERIES] = series_bytes
    where = state.readable_dir(stack.path)
    if os.path.isdir(where):
        for fname in os.listdir(where):
            if fname.endswith(".patch") and fname not in keep:
                changes[fname] = None
    changes.update(also or {})
    return state.commit_dir(stack.path, changes)


def _series_entries_or_none(raw: bytes, files: Collection[str]) -> dict[str, _Line] | None:
    try:
        return _series_entries(raw, SERIES, files)
    except UserError:
        return None


def _check_base(base: str, text: str, path: str) -> None:
    """``target.base`` names a commit by a ref (or a revision of one): never a path in a tree
    (``main:../x``, which git reads outside the repository) nor a value with a space or control character."""
    if re.search(r"[:\s\x00-\x1f\x7f]", base):
        raise UserError(
            f"target.base {base!r} is not a branch, tag or commit (a ref name has no ':', space or control character)",
            path=path,
            line=_line_of(text, r"^\s*base\s*="),
        )


def _check_test_environment(tests: dict, text: str, path: str) -> None:
    """``tests.home`` is one of its two words; ``tests.pass_env`` names no credential: a
    patch's tests never get one (docs/commands/test.md: the environment)."""
    if tests.get("home", "scratch") not in ("scratch", "user"):
        raise UserError(
            f'tests.home must be "scratch" or "user", not {tests["home"]!r}',
            path=path,
            line=_line_of(text, r"^\s*home\s*="),
        )
    for name in tests.get("pass_env", ()):
        bare = name.removesuffix("*")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", bare) or ("*" in bare):
            raise UserError(
                f"tests.pass_env: {name!r} is not a variable name (or a prefix ending in *)",
                path=path,
                line=_line_of(text, r"^\s*pass_env\s*="),
            )
        if secrets.credential_name(bare) or bare.upper() in ("HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
            what = "carries a credential" if secrets.credential_name(bare) else "is ggstack's to set for a test run"
            raise UserError(
                f"tests.pass_env: {name} {what}; a patch's tests never get it (a test that needs a value: tests.env"
                + (', or tests.home = "user"' if bare.upper() == "HOME" else "")
                + ")",
                path=path,
                line=_line_of(text, r"^\s*pass_env\s*="),
            )


def _no_options(data: dict, text: str, path: str) -> None:
    """The values that reach git as arguments may not look like options
    (``remote = "--upload-pack=…"`` would run a command)."""
    for section, key in (("target", "remote"), ("target", "base"), ("branches", "template")):
        value = data.get(section, {}).get(key, "")
        if value.startswith("-"):
            raise UserError(
                f"{section}.{key} must not start with '-' (git would take {value!r} as an option)",
                path=path,
                line=_line_of(text, rf"^\s*{key}\s*="),
            )


def init(
    patches_dir: str, name: str, repo_slug: str, base: str, remote: str = "origin", *, fork: str | None = None
) -> str:
    path = stack_dir(patches_dir, name)
    if os.path.exists(os.path.join(state.readable_dir(path), STACK_TOML)):
        raise UserError(f"stack {name!r} already exists", path=path)
    for option, slug in (("--repo-slug", repo_slug), ("--fork", fork)):
        if slug is not None and not re.match(r"^[^/\s]+/[^/\s]+$", slug):
            raise UserError(f"{option} must be owner/name, not {slug!r}")
    for option, value in (("--repo-slug", repo_slug), ("--base", base), ("--remote", remote), ("--fork", fork or "")):
        if not_utf8(value):
            raise UserError(f"{option} {value!r} is not UTF-8 (stack.toml is UTF-8)")
    text = render_config(repo_slug, base, remote, fork=fork)
    parse_config(text, os.path.join(path, STACK_TOML))  # what init writes must load
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError("cannot create the stack directory: a file is in the way", path=path)
    made_parent = not os.path.exists(patches_dir)
    try:
        os.makedirs(patches_dir, exist_ok=True)
    except OSError as e:  # the patches directory (or a folder above it) is a file
        raise state.machine_error(e, patches_dir) or UserError(
            f"cannot create the stack directory: {e.strerror}", path=path
        ) from None
    files = {
        SERIES: f"# ggstack series for {name}: one patch a line, in merge order\n".encode(),
        STACK_TOML: text.encode(),
    }
    try:
        state.commit_dir(path, files, create=True)
    except FileExistsError:
        raise UserError(f"stack {name!r} already exists", path=path) from None
    except BaseException:
        if made_parent:
            with contextlib.suppress(OSError):
                os.rmdir(patches_dir)  # init leaves nothing behind it did not finish
        raise
    return path


# -- editing the series -----------------------------------------------------------


def renumbered(stack: Stack, patches: Sequence[Patch]) -> Stack:
    """``patches`` in this order, with file names and ``[PATCH n/m]`` renumbered."""
    total = len(patches)
    out = []
    for i, p in enumerate(patches, 1):
        name = f"{i:04d}-{p.slug}.patch"
        raw = git.set_patch_number(p.raw, i, total)
        out.append(replace(p, name=name, raw=raw))
    return replace(stack, patches=tuple(out))


def remove(stack: Stack, key: str) -> tuple[Stack, Patch]:
    victim = stack.find(key)
    return renumbered(stack, [p for p in stack.patches if p is not victim]), victim


def move(stack: Stack, key: str, to: int) -> Stack:
    patch = stack.find(key)
    if not 1 <= to <= len(stack.patches):
        raise UserError(f"--to must be between 1 and {len(stack.patches)}")
    rest = [p for p in stack.patches if p is not patch]
    rest.insert(to - 1, patch)
    return renumbered(stack, rest)


def not_utf8(path: str) -> bool:
    """git's bytes read as UTF-8 with surrogateescape: a lone surrogate is a byte that was not UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
