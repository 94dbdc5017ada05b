"""Which refs a patch's branch may be: only under ``refs/heads/`` or ``refs/ggstack/``."""

from __future__ import annotations

import re

from ggstack.errors import UserError

# ggstack writes branches only here: a branch of the user's (refs/heads/) or a ref of its own.
BRANCH_NAMESPACES = ("refs/heads/", "refs/ggstack/")
# ggstack's own bookkeeping under refs/ggstack/, which no patch branch may be.
_BOOKKEEPING = re.compile(r"^refs/ggstack/(fast-import$|[^/]+/(last-apply|rebased)$|[^/]+/resolved/)")
# What git refuses in a ref name (git check-ref-format), and a part git reads as something else.
_BAD_REF = re.compile(r"(^|/)\.|\.\.|//|@\{|[\x00-\x20\x7f~^:?*\[\\]|\.lock(/|$)|[/.]$|^-")

_TEMPLATE_FIELDS = {"stack": "gg-clean", "index": 12, "slug": "x" * 64, "name": "0012-" + "x" * 64}
_SAME_FIELDS = {**_TEMPLATE_FIELDS, "index": 13, "slug": "y" * 64, "name": "0013-" + "y" * 64}


def branch_ref_problem(ref: str) -> str | None:
    if not ref.startswith(BRANCH_NAMESPACES):
        return f"makes {ref!r}, outside refs/heads/ and refs/ggstack/ (ggstack writes no tags, notes, remotes or stash)"
    if ref.removeprefix("refs/heads/").split("/")[0] == "HEAD" or ref.count("/") < 2:
        return f"makes {ref!r}, which git reads as HEAD"
    if _BOOKKEEPING.match(ref):
        return f"makes {ref!r}, a ref ggstack keeps its own records in"
    if _BAD_REF.search(ref.removeprefix("refs/")):
        return f"makes {ref!r}, which is not a valid ref name"
    return None


def check_template(template: str, path: str, line: int | None) -> None:
    """A ref of its own for every patch, that git can store (each branch is a file: 255 bytes a component)."""
    try:
        sample = template.format(**_TEMPLATE_FIELDS)
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
        raise UserError(
            f"branches.template {_shown(template)!r}: {type(e).__name__}: {e} (fields: {', '.join(_TEMPLATE_FIELDS)})",
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
        raise UserError(f"branches.template {_shown(template)!r} {problem}", path=path, line=line)


def _shown(template: str) -> str:
    return template if len(template) <= 80 else template[:80] + "…"
