"""A patch file's From and Subject as ``git am`` reads them: not ``git mailinfo`` (a process a file, and a load reads
every patch's); the email package (slow to import) only for an encoded header."""

from __future__ import annotations

import re
from typing import Any

# What format-patch writes for most authors and subjects: nothing quoted or encoded.
_PLAIN_FROM = re.compile(r"^[A-Za-z0-9_'+-]+(?: [A-Za-z0-9_'+-]+)* <[^<>\s\"]+>$")
# A mail header: "Name: value", folded onto the lines after it that start with a blank.
_HEADER = re.compile(r"([!-9;-~]+):[ \t]*([^\n]*(?:\n[ \t][^\n]*)*)\n")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
# An RFC 2047 word, and what a well-formed one holds: a charset email.header knows, Q's escapes
# whole, B's base64 whole. (Anything else, the default policy reads, with its defects.)
_ENCODED_WORD = re.compile(r"=\?([^?]*)\?([^?]*)\?([^?]*)\?=")
_Q_TEXT = re.compile(r"(?:[^=]|=[0-9A-Fa-f]{2})*")
_B_TEXT = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def fields(head: str) -> dict[str, str]:
    """The first value of each header, as the email package's compat32 parser has them."""
    found: dict[str, str] = {}
    at = 0
    for m in _HEADER.finditer(head):
        if m.start() != at:
            break
        found.setdefault(m.group(1).lower(), m.group(2))
        at = m.end()
    if at == len(head):
        return found
    import email.parser  # slow to import: only for a head format-patch would not write

    raw = email.parser.HeaderParser().parsestr(head, headersonly=True)  # compat32, its default policy
    return {name.lower(): str(raw[name]) for name in raw}  # (the first of each, as get has it)


def headers(head: str) -> dict[str, str]:
    raw = fields(head)
    return {name: _as_text(name, raw[name.lower()], head) for name in ("From", "Subject") if name.lower() in raw}


def _as_text(name: str, value: str, head: str) -> str:
    value = " ".join(value.split())
    if name == "From" and not _PLAIN_FROM.match(value):
        return _author(value) or _decoded(name, head)
    if "=?" in value:
        plain = _unstructured(value) if name == "Subject" and _well_encoded(value) else None
        return plain if plain is not None else _decoded(name, head)
    return value


def mail_author(mail: bytes) -> tuple[str, str] | None:
    """For the names ``git mailinfo`` gives up on (over 60 bytes)."""
    head = mail.partition(b"\n\n")[0].decode("utf-8", "surrogateescape")
    value = headers(head.partition("\n")[2] + "\n" if head.startswith("From ") else head + "\n").get("From")
    author = _author(value) if value else None
    if author is None:
        return None
    name, _, email = author[:-1].rpartition(" <")
    return name, email


def _author(value: str) -> str | None:
    """As ``git mailinfo`` reads it: the address between the last ``<`` and ``>`` (the email package
    cuts ``a+b[bot]@x`` at the ``[``); None where it is no ``name <address>``."""
    name, sep, address = value.rpartition(" <")
    if not sep or not name or not address.endswith(">") or "<" in address:
        return None
    if "=?" in name:
        import email.header

        name = str(email.header.make_header(email.header.decode_header(name)))
    elif quoted := _QUOTED.fullmatch(name):
        name = re.sub(r"\\(.)", r"\1", quoted.group(1))
    return f"{name} <{address[:-1]}>"


def _well_encoded(value: str) -> bool:
    words = _ENCODED_WORD.findall(value)
    return bool(words) and all(_well_formed(*word) for word in words)


def _well_formed(charset: str, kind: str, text: str) -> bool:
    form = {"q": _Q_TEXT, "b": _B_TEXT}.get(kind.lower())
    return charset.lower() in ("utf-8", "us-ascii", "iso-8859-1") and form is not None and bool(form.fullmatch(text))


def _unstructured(value: str) -> str | None:
    """As the email package's default policy decodes (the same on 315 encoded subjects of four
    projects), without importing its header registry; None where the bytes are not of the charset."""
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


def raw_header(head: str, name: str) -> str:
    m = re.search(rf"^{name}: (.*)$", head, re.M)
    return m.group(1).strip() if m else ""
