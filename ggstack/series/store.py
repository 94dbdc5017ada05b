"""A stack's directory ``patches/<stack>/``, read and written whole, as ``git am -3`` and
``quilt push -a`` take it. A change is one switch a kill cannot tear (``state.commit_dir``)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import replace

from ggstack import git, state
from ggstack.errors import UserError
from ggstack.model import Patch, Stack
from ggstack.series import seriesfile
from ggstack.series.config import STACK_TOML, initial_toml, is_slug, parse_config
from ggstack.series.patchfile import T_STACK_PATCH_ID, checked_provenance, parse_patch, trailer_lines
from ggstack.series.seriesfile import SERIES

_SLUG_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


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


# -- reading -------------------------------------------------------------------------


def load(patches_dir: str, name: str) -> Stack:
    path = stack_dir(patches_dir, name)
    files = _stack_files(patches_dir, name, path)
    toml_path = os.path.join(path, STACK_TOML)
    config = parse_config(_utf8_toml(files[STACK_TOML], toml_path), toml_path)
    series_raw = files.get(SERIES, b"")
    names = seriesfile.entries(series_raw, os.path.join(path, SERIES), files)
    patches = [
        replace(parse_patch(files[e], os.path.join(path, e)), series_options=line.options, series_above=line.above)
        for e, line in names.items()
    ]
    _refuse_unlisted(files, names, path)
    trailers = git.parse_trailers([p.message for p in patches])
    patches = [checked_provenance(p, t, os.path.join(path, p.name)) for p, t in zip(patches, trailers)]
    _refuse_duplicate_ids(patches, path)
    return Stack(name=name, path=path, config=config, patches=tuple(patches), series_raw=series_raw)


def _stack_files(patches_dir: str, name: str, path: str) -> dict[str, bytes]:
    where = state.readable_dir(path)
    if os.path.isdir(os.path.join(where, SERIES)):
        raise UserError(
            f"{SERIES} is a directory; it must be the file listing the patches", path=os.path.join(path, SERIES)
        )
    files = state.read_dir_files(path)[1] if os.path.isdir(where) else {}
    if STACK_TOML not in files:
        known = ", ".join(list_stacks(patches_dir)) or "none"
        raise UserError(f"no stack {name!r} in {patches_dir} (stacks: {known}; create one with `ggstack init`)")
    return files


def _utf8_toml(raw: bytes, toml_path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            "not valid UTF-8 (TOML is UTF-8)", path=toml_path, line=raw[: e.start].count(b"\n") + 1
        ) from None


def _refuse_unlisted(files: Mapping[str, bytes], listed: Mapping[str, object], path: str) -> None:
    for fname in sorted(files):
        if fname.endswith(".patch") and fname not in listed:
            raise UserError(
                f"patch file is not in {SERIES} (add it to the series or delete it)", path=os.path.join(path, fname)
            )


def _refuse_duplicate_ids(patches: list[Patch], path: str) -> None:
    seen: dict[str, str] = {}
    for p in patches:
        spid = p.provenance.stack_patch_id
        if spid in seen:
            raise UserError(
                f"duplicate {T_STACK_PATCH_ID} {spid}, also in {seen[spid]}",
                path=os.path.join(path, p.name),
                line=trailer_lines(p.raw, T_STACK_PATCH_ID)[-1],
            )
        seen[spid] = p.name


# -- writing -------------------------------------------------------------------------


def save(stack: Stack, also: Mapping[str, bytes | None] | None = None) -> bool:
    """Under the caller's lock; ``also``: other files of the directory (None deletes). Whether anything changed."""
    keep = {p.name for p in stack.patches}
    changes: dict[str, bytes | None] = {p.name: p.raw for p in stack.patches}
    changes[SERIES] = seriesfile.series_bytes(stack)
    where = state.readable_dir(stack.path)
    if os.path.isdir(where):
        for fname in os.listdir(where):
            if fname.endswith(".patch") and fname not in keep:
                changes[fname] = None
    changes.update(also or {})
    return state.commit_dir(stack.path, changes)


def init(
    patches_dir: str, name: str, repo_slug: str, base: str, remote: str = "origin", *, fork: str | None = None
) -> str:
    path = stack_dir(patches_dir, name)
    if os.path.exists(os.path.join(state.readable_dir(path), STACK_TOML)):
        raise UserError(f"stack {name!r} already exists", path=path)
    _check_init_options(repo_slug, base, remote, fork)
    text = initial_toml(repo_slug, base, remote, fork=fork)
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


def _check_init_options(repo_slug: str, base: str, remote: str, fork: str | None) -> None:
    for option, slug in (("--repo-slug", repo_slug), ("--fork", fork)):
        if slug is not None and not is_slug(slug):
            raise UserError(f"{option} must be owner/name, not {slug!r}")
    for option, value in (("--repo-slug", repo_slug), ("--base", base), ("--remote", remote), ("--fork", fork or "")):
        if not_utf8(value):
            raise UserError(f"{option} {value!r} is not UTF-8 (stack.toml is UTF-8)")


def not_utf8(text: str) -> bool:
    """A lone surrogate is a byte that was not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
