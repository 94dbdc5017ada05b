"""``import --from``: a fork's carry patches from before ggstack, as ``git am`` and quilt read
them (an mbox through ``git mailsplit``/``mailinfo``; DEP-3 headers read here)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ggstack import git
from ggstack.errors import UserError
from ggstack.series.mailheaders import mail_author
from ggstack.series.seriesfile import SERIES, series_line

# DEP-3 fields kept as trailers, as they are: they are the patch's provenance.
_KEPT_FIELDS = ("Origin", "Forwarded", "Applied-Upstream", "Bug", "Reviewed-by", "Acked-by", "Last-Update")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]*(.*)$")
_DIFF_START = re.compile(r"^(diff -|--- \S|Index: |={5,}$)")
_MBOX_FROM = re.compile(rb"^From \S+ ")
_SHA = re.compile(r"\b([0-9a-f]{64}|[0-9a-f]{40})\b")
_GITHUB_PR = re.compile(r"https?://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/pull/(\d+)")
_IDENT = re.compile(r"^\s*([^<>]*?)\s*<([^<>\s]+)>")


@dataclass(frozen=True)
class Incoming:
    path: str  # the file it was read from (errors name it)
    line: int  # where in that file it starts (an mbox holds many)
    author: tuple[str, str] | None  # (name, email); None: whoever imports it
    date: str  # as the file says it ("" when it does not)
    message: str
    diff: bytes
    source: str | None = None  # the commit it was taken from, when the file names one
    picked_from: str | None = None  # the upstream commit a DEP-3 Origin names: this patch is a pick of it
    original_pr: str | None = None  # owner/repo#N, from a GitHub pull URL in Origin/Forwarded
    trailers: list[tuple[str, str]] = field(default_factory=list)  # DEP-3 provenance, kept
    base: str | None = None  # the base-commit: it records


def read(repo: git.Repository, path: str) -> list[Incoming]:
    if os.path.isdir(path):
        return _directory(repo, path)
    if not os.path.isfile(path):
        raise UserError("no such file or directory", path=path)
    if os.path.basename(path) == SERIES:
        return _quilt(repo, path)
    return _mbox(repo, path)


def _directory(repo: git.Repository, path: str) -> list[Incoming]:
    """Without a series file, its ``*.patch`` files in name order, as ``git am *.patch``."""
    if os.path.isfile(os.path.join(path, SERIES)):
        return _quilt(repo, os.path.join(path, SERIES))
    names = sorted(n for n in os.listdir(path) if n.endswith((".patch", ".diff")))
    if not names:
        raise UserError("no series file and no *.patch files in this directory", path=path)
    return [p for n in names for p in _mbox(repo, os.path.join(path, n))]


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UserError(f"cannot read it: {e.strerror}", path=path) from None


def _mbox(repo: git.Repository, path: str) -> list[Incoming]:
    raw = _read_bytes(path)
    if not _MBOX_FROM.match(raw):
        raise UserError(
            "not an mbox (line 1 must be 'From <sha> <date>', as git format-patch writes) "
            "nor a quilt series (a file named 'series')",
            path=path,
            line=1,
        )
    starts = [n for n, line in enumerate(raw.split(b"\n"), 1) if _MBOX_FROM.match(line)]
    return [_from_mail(repo, mail, path, line) for mail, line in zip(repo.mails(path), starts)]


def _from_mail(repo: git.Repository, mail: bytes, path: str, line: int) -> Incoming:
    info, body, diff = repo.mailinfo(mail)
    subject = info.get("Subject", "").strip()
    if not subject:
        raise UserError("no Subject: header", path=path, line=line)
    if not re.search(rb"^(diff |--- |\+\+\+ )", diff, re.M):
        raise UserError("no diff in this message", path=path, line=line)
    message = subject + ("\n\n" + body.strip("\n") if body.strip("\n") else "") + "\n"
    base = re.search(rb"^base-commit: ([0-9a-f]{40}|[0-9a-f]{64})$", diff, re.M)
    author = _mail_author(info, mail)
    return Incoming(
        path=path,
        line=line,
        author=author if author[1] else None,
        date=info.get("Date", "").strip(),
        message=message,
        diff=diff,
        source=_mail_source(mail),
        base=base.group(1).decode() if base else None,
    )


def _mail_author(info: dict[str, str], mail: bytes) -> tuple[str, str]:
    author = (info.get("Author", "").strip(), info.get("Email", "").strip())
    if author[0] == author[1]:  # mailinfo's answer for a name it finds too long: the address twice
        return mail_author(mail) or author
    return author


def _mail_source(mail: bytes) -> str | None:
    """Not format-patch's all-zero placeholder."""
    m = _MBOX_FROM.match(mail)
    sha = m.group(0).split()[1].decode() if m else ""
    return sha if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) and sha.strip("0") else None


def _quilt(repo: git.Repository, series_path: str) -> list[Incoming]:
    top = os.path.dirname(series_path)
    out = []
    for n, line in enumerate(_read_bytes(series_path).decode("utf-8", "replace").splitlines(), 1):
        entry = series_line(line, series_path, n)
        if entry is None:
            continue
        path = os.path.join(top, entry)
        if not os.path.isfile(path):
            raise UserError(f"series names {entry!r}, but there is no such file", path=series_path, line=n)
        raw = _read_bytes(path)
        out += _mbox(repo, path) if _MBOX_FROM.match(raw) else [_dep3(raw, path)]
    if not out:
        raise UserError("the series names no patches", path=series_path)
    return out


def _dep3(raw: bytes, path: str) -> Incoming:
    """No headers: its file name is its subject."""
    lines = _utf8(raw, path).split("\n")
    diff_at = next((i for i, line in enumerate(lines) if _DIFF_START.match(line)), None)
    if diff_at is None:
        raise UserError("no diff in this patch (expected 'diff -', '--- ' or 'Index: ')", path=path)
    fields, free = _dep3_fields(lines[:diff_at], path)
    subject, body = _dep3_message(fields, free, path)
    sha = _origin_sha(fields)
    return Incoming(
        path=path,
        line=1,
        author=_dep3_author(fields, path),
        date=fields["date"][1] if "date" in fields else "",
        message=subject.strip() + ("\n\n" + body if body else "") + "\n",
        diff="\n".join(lines[diff_at:]).encode(),
        source=sha,
        picked_from=sha,
        original_pr=_dep3_pr(fields),
        trailers=[(f[2], f[1].replace("\n", " ")) for key, f in fields.items() if _kept(key)],
    )


def _origin_sha(fields: dict[str, tuple[int, str, str]]) -> str | None:
    sha = _SHA.search(fields["origin"][1]) if "origin" in fields else None
    return sha.group(1) if sha else None


def _utf8(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError("not valid UTF-8", path=path, line=raw[: e.start].count(b"\n") + 1) from None


def _dep3_pr(fields: dict[str, tuple[int, str, str]]) -> str | None:
    """From Origin, Forwarded, Applied-Upstream or a Bug field, in that order."""
    bugs = [k for k in fields if k == "bug" or k.startswith("bug-")]
    named = " ".join(fields[k][1] for k in ("origin", "forwarded", "applied-upstream", *bugs) if k in fields)
    pr = _GITHUB_PR.search(named)
    return f"{pr.group(1)}#{pr.group(2)}" if pr else None


def _dep3_message(fields: dict[str, tuple[int, str, str]], free: list[str], path: str) -> tuple[str, str]:
    description = fields.get("description") or fields.get("subject")
    text = "\n".join(free).strip("\n")
    if not description:
        return os.path.splitext(os.path.basename(path))[0], text
    subject, _, rest = description[1].partition("\n")
    return subject, "\n".join(x for x in (rest.strip("\n"), text) if x)


def _dep3_author(fields: dict[str, tuple[int, str, str]], path: str) -> tuple[str, str] | None:
    author = fields.get("author") or fields.get("from")
    if not author:
        return None
    m = _IDENT.match(author[1].split("\n")[0])  # the first of several authors
    if not m or not m.group(1):
        raise UserError(f"{author[2]}: {author[1]!r} is not 'Name <email>'", path=path, line=author[0])
    return m.group(1), m.group(2)


def _kept(key: str) -> bool:
    return any(key == k.lower() for k in _KEPT_FIELDS) or key.startswith("bug-")


def _dep3_fields(lines: list[str], path: str) -> tuple[dict[str, tuple[int, str, str]], list[str]]:
    """Continuation lines joined (a lone " ." is an empty line); the header ends at "---"."""
    fields: dict[str, tuple[int, str, str]] = {}
    free: list[str] = []
    last: str | None = None
    for n, line in enumerate(lines, 1):
        if line.rstrip() == "---":
            break
        m = _FIELD.match(line)
        if m and not line.startswith((" ", "\t")):
            last = m.group(1).lower()
            if last in fields:
                raise UserError(f"{m.group(1)}: given twice", path=path, line=n)
            fields[last] = (n, m.group(2).strip(), m.group(1))
        elif line.startswith((" ", "\t")) and last is not None:
            at, value, name = fields[last]
            more = "" if line.strip() == "." else line.strip()
            fields[last] = (at, value + "\n" + more, name)
        else:
            last = None
            free.append(line)
    return fields, free
