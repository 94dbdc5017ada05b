"""Markdown from text ggstack did not write, for pages GitHub renders raw HTML in: a "</details>" would close ggstack's
section, an unclosed "<!--" hide the rest (the approval gate too). In doubt, "&lt;" in code rather than HTML."""

from __future__ import annotations

import re

from ggstack.model import Outcome

# Every "<" becomes "&lt;" (rendered as "<": the text reads the same), except inside a fenced block,
# where nothing is HTML; a fence the text leaves open is closed. Only a fence at the start of a line
# is taken for one: indented, it may belong to a list item that ends before Markdown's fence does.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def md_text(text: str) -> str:
    out, fence = [], ""
    for line in text.split("\n"):
        if fence:
            fence = _still_open(line, fence)
            out.append(line)
        elif opened := _opened(line):
            fence = opened
            out.append(line)
        else:
            out.append(_escape_line(line))
    if fence:
        out.append(fence)
    return "\n".join(out)


def _opened(line: str) -> str:
    """The fence this line opens, or ""; a backtick fence's info string may not hold a backtick."""
    marks = _FENCE.match(line)
    if not marks or line[0] == " " or (marks.group(1)[0] == "`" and "`" in line[marks.end() :]):
        return ""
    return marks.group(1)


def _still_open(line: str, fence: str) -> str:
    marks = _FENCE.match(line)
    if marks and marks.group(1)[0] == fence[0] and len(marks.group(1)) >= len(fence):
        return fence if line[marks.end() :].strip() else ""
    return fence


def _escape_line(line: str) -> str:
    """A code span holding "<" becomes <code> with entities: the same on screen, span or not."""
    if "\\`" in line:  # an escaped backtick changes where spans are: no spans, then
        return line.replace("<", "&lt;")
    parts, pos = [], 0
    for span in _SPAN.finditer(line):
        code = span.group(2)
        parts.append(line[pos : span.start()].replace("<", "&lt;"))
        parts.append(span.group(0) if "<" not in code else "<code>" + "".join(map(_entity, code)) + "</code>")
        pos = span.end()
    parts.append(line[pos:].replace("<", "&lt;"))
    return "".join(parts)


def _entity(c: str) -> str:
    return f"&#{ord(c)};" if c in "<>&\"'`*_[]()!#+-.|{}~\\" else c


def md_line(text: str) -> str:
    return md_text(" ".join(text.split("\n"))).split("\n")[0]


def md_cell(text: str) -> str:
    """Line by line, not as a whole: entities are not read inside a code span (`` `>=2.10.6` `` would
    show ``&gt;=2.10.6``). A ``|`` is escaped even in a span, as GitHub's tables ask."""
    lines = text.replace("\r", "").split("\n")
    return "<br>".join(_escape_line(line) for line in lines).replace("|", "\\|")


def md_code(text: str) -> str:
    """An inline code span, whatever backticks it holds (a ref name may hold them)."""
    text = " ".join(text.split("\n"))
    fence = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(body: str, lang: str = "") -> str:
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    return f"{fence}{lang}\n{body.rstrip(chr(10))}\n{fence}"


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def subject_md(o: Outcome) -> str:
    return unlinked_pr(o, md_line(o.subject))


def unlinked_pr(o: Outcome, text: str) -> str:
    """A subject's closing ``(#N)`` as code where its repository is unknown: GitHub would link another's."""
    pr = o.provenance.original_pr if o.provenance else None
    if pr and pr.startswith("#") and text.endswith(f"({pr})"):
        return f"{text[: -len(pr) - 2]}({md_code(pr)})"
    return text
