"""One carry patch's file as ``git format-patch --full-index`` writes it. A hand edit git reads otherwise is refused,
naming file and line; ``Patch.raw`` keeps the bytes, so an unchanged stack is saved byte for byte."""

from __future__ import annotations

import os
import re
from dataclasses import replace

from ggstack.diff import DiffError, diff_end
from ggstack.diff import paths as diff_paths
from ggstack.errors import UserError
from ggstack.git.dates import stamp
from ggstack.model import Patch, Provenance
from ggstack.series.mailheaders import headers, raw_header

T_ORIGINAL_PR = "Original-PR"
T_CHERRY_PICKED = "Cherry-picked-from"
T_DROPPED = "Dropped"
T_STACK_PATCH_ID = "Stack-Patch-Id"
# An Original-PR value: owner/repo#N, or "#N" when the PR's repository is not known.
PR_REF = re.compile(r"^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d+$")

_FROM_LINE = re.compile(rb"^From ([0-9a-f]{40}|[0-9a-f]{64}) ")
_CHERRY_LINE = re.compile(r"^\(cherry picked from commit ([0-9a-f]{40}|[0-9a-f]{64})\)$", re.M)
_PATCH_PREFIX = re.compile(r"^\[PATCH[^\]]*\]\s*")
_STACK_PATCH_ID = re.compile(r"^I[0-9a-f]{40}$")
_AUTHOR = re.compile(r"^(.*\S.*) <([^<>]*)>$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?( ?([+-]\d{2}:?\d{2}|Z))?$")
_RAW_DATE = re.compile(r"^\d+ [+-]\d{4}$")


def parse_patch(raw: bytes, path: str) -> Patch:
    """Provenance is left empty: ``with_provenance`` reads all patches' trailers in one git call."""
    m = _FROM_LINE.match(raw[:200])
    if not m:
        raise UserError("not a git format-patch file: line 1 must be 'From <sha> <date>' (mbox)", path=path, line=1)
    _refuse_bytes(raw, path)
    # The diff is read where it is: a 50 MB patch is one copy of its diff besides the file's
    # bytes, not one a step (the text, what follows the headers, the diff, its lines).
    text, diff_from = _patch_text(raw, path)
    head, found = _head(text, path)
    head_lines = head.count("\n") + 2  # line number of the first body line
    if diff_from >= len(raw):
        raise UserError("no diff in patch (expected a 'diff --git' line)", path=path, line=head_lines)
    # The message ends at the last "---" line before the diff (the diffstat follows it).
    pre_diff = "\n" + text[len(head) + 2 :]
    marker = pre_diff.rfind("\n---\n")
    body = (pre_diff[:marker] if marker >= 0 else pre_diff).strip("\n")
    diff_line = head_lines + pre_diff.count("\n") - 1
    diff, tail = _read_diff(raw, diff_from, path, diff_line)
    _refuse_tail(tail, path, diff_line + diff.count("\n"))
    base = re.search(r"^base-commit: ([0-9a-f]{40}|[0-9a-f]{64})$", tail, re.M)
    subject = _PATCH_PREFIX.sub("", " ".join(found["Subject"].split()))
    return Patch(
        name=os.path.basename(path),
        subject=subject,
        message=subject + ("\n\n" + body if body else "") + "\n",
        author=found["From"],
        date=raw_header(head, "Date"),
        diff=diff,
        provenance=Provenance(stack_patch_id=""),
        source_commit=m.group(1).decode(),
        base_commit=base.group(1) if base else None,
        paths=tuple(diff_paths(diff)),
        raw=raw,
    )


def _head(text: str, path: str) -> tuple[str, dict[str, str]]:
    head_end = text.find("\n\n")
    if head_end < 0:
        raise UserError("no blank line after the mail headers", path=path, line=text.count("\n") + 1)
    head = text[:head_end]
    found = headers(head.partition("\n")[2] + "\n")
    for required in ("From", "Subject"):
        if found.get(required) is None:
            raise UserError(f"missing {required}: header", path=path, line=2)
    _refuse_identity(found["From"], raw_header(head, "Date"), head, path)
    return head, found


def _refuse_bytes(raw: bytes, path: str) -> None:
    """NUL (binary diffs are base85), CRLF (git would apply another diff), a second message."""
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
    """A diff's lines stay the file's own bytes (a latin-1 source stays latin-1)."""
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
    """Never more than one copy of a big diff besides the file's bytes."""
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


def _readable_date(date: str) -> bool:
    """A raw ``<epoch> <tz>`` or an RFC 2822 date with its zone."""
    if _RAW_DATE.match(date) or stamp(date) is not None:
        return True  # (format-patch's own date: no email package to import for it)
    import email.utils

    parsed = email.utils.parsedate_tz(date)
    return parsed is not None and parsed[9] is not None


def _refuse_identity(author: str, date: str, head: str, path: str) -> None:
    if not _AUTHOR.match(author) or not author.partition(" <")[0].strip():
        shown = raw_header(head, "From")
        raise UserError(f"From: {shown!r} is not 'Name <email>'", path=path, line=_header_line(head, "From"))
    if date and not _readable_date(date) and not _ISO_DATE.match(date):
        raise UserError(
            f"Date: {date!r} is not a date git reads (RFC 2822, as git format-patch writes it: "
            "'Thu, 3 Dec 2026 05:36:41 +0000')",
            path=path,
            line=_header_line(head, "Date"),
        )


def _header_line(head: str, name: str) -> int:
    return next((n for n, line in enumerate(head.splitlines(), 1) if line.startswith(f"{name}:")), 2)


def _refuse_tail(tail: str, path: str, first_line: int) -> None:
    """Another diff after the signature would be dropped without a word."""
    for n, line in enumerate(tail.split("\n")):
        if line.startswith(("diff --git ", "@@ ", "--- a/", "+++ b/")):
            raise UserError(
                "a diff after the end of the patch (after base-commit: or the signature) — "
                "git am would apply it, ggstack would drop it; move it into the patch's diff or remove it",
                path=path,
                line=first_line + n,
            )


# -- provenance: the trailers ----------------------------------------------------------


def picked_from_line(message: str) -> str | None:
    """The first ``(cherry picked from commit X)`` names the origin."""
    m = _CHERRY_LINE.search(message)
    return m.group(1) if m else None


def with_provenance(patch: Patch, trailers: list[tuple[str, str]]) -> Patch:
    last = {key.lower(): value for key, value in trailers}
    prov = Provenance(
        stack_patch_id=last.get(T_STACK_PATCH_ID.lower()) or "",
        original_pr=last.get(T_ORIGINAL_PR.lower()),
        cherry_picked_from=last.get(T_CHERRY_PICKED.lower()) or picked_from_line(patch.message),
        dropped=tuple(value for key, value in trailers if key.lower() == T_DROPPED.lower()),
    )
    return replace(patch, provenance=prov)


def checked_provenance(patch: Patch, trailers: list[tuple[str, str]], path: str | None) -> Patch:
    """Exactly one ``Stack-Patch-Id`` of our shape: it is matched against PR markers and written into PR bodies."""
    ids = [value for key, value in trailers if key.lower() == T_STACK_PATCH_ID.lower()]
    lines = trailer_lines(patch.raw, T_STACK_PATCH_ID)
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


def trailer_lines(raw: bytes, key: str) -> list[int]:
    ends = [i for i in (raw.find(b"\n---\n"), raw.find(b"\ndiff --git ")) if i >= 0]
    head = str(memoryview(raw)[: min(ends, default=len(raw))], "utf-8", "replace")  # not the diff: it may be big
    prefix = key.lower() + ":"
    return [n for n, line in enumerate(head.split("\n"), 1) if line.lower().startswith(prefix)]
