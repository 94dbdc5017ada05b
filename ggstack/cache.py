"""One home for ggstack's caches (``<git dir>/ggstack/cache/``), keyed by what decides an entry and a version. A
missing, corrupt or other-version entry is a miss: a cache only ever costs time, never a wrong answer."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ggstack import git, state


def key(version: str, parts: Iterable[str | bytes]) -> str:
    """The sha256 of ``version`` and each part, length-prefixed (no two part lists hash alike)."""
    h = hashlib.sha256(version.encode())
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        h.update(b"%d:" % len(data) + data)
    return h.hexdigest()


def read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def write_json(path: str, value: Any, *, sort_keys: bool = False) -> None:
    """``value`` as JSON in ``path``, atomically, keys in the order given unless ``sort_keys``."""
    state.write_atomic(path, json.dumps(value, sort_keys=sort_keys).encode())


class Entries:
    """One JSON object per key, a file each; ``keep`` the most recently used, ``read=False`` for ``--no-cache``."""

    def __init__(
        self, repo: git.Repository, name: str, *, version: str, keep: int | None = None, read: bool = True
    ) -> None:
        self._repo, self.name, self.version, self.keep, self.read = repo, name, version, keep, read

    def key(self, parts: Iterable[str | bytes]) -> str:
        return key(self.version, parts)

    def path(self, k: str) -> str:
        return os.path.join(self._repo.state_dir("cache", self.name), k + ".json")

    def get(self, k: str) -> dict[str, Any] | None:
        if not self.read:
            return None
        path = self.path(k)
        value = read_json(path)
        if not isinstance(value, dict):
            return None
        if self.keep is not None:  # a hit is as recent as a write: pruned last
            with contextlib.suppress(OSError):
                os.utime(path)
        return value

    def put(self, k: str, value: Mapping[str, Any]) -> None:
        path = self.path(k)
        write_json(path, dict(value))
        if self.keep is not None:
            _prune(os.path.dirname(path), self.keep)


def _prune(directory: str, keep: int) -> None:
    with contextlib.suppress(OSError):
        entries = sorted(os.scandir(directory), key=lambda e: e.stat().st_mtime, reverse=True)
        for old in entries[keep:]:
            os.unlink(old.path)


class Map:
    """A small string map in one JSON file, read whole, written back whole when it changed."""

    def __init__(self, repo: git.Repository, name: str) -> None:
        self._path = os.path.join(repo.state_dir("cache"), name + ".json")
        data = read_json(self._path)
        items = data.items() if isinstance(data, dict) else ()
        self._data: dict[str, str] = {k: v for k, v in items if isinstance(v, str)}
        self._dirty = False

    def get(self, k: str) -> str | None:
        return self._data.get(k)

    def put(self, k: str, value: str) -> None:
        if self._data.get(k) != value:
            self._data[k] = value
            self._dirty = True

    def retain(self, keys: Iterable[str]) -> None:
        """Keep only ``keys``: a cache of what the last run used, not of every run's."""
        kept = {k: self._data[k] for k in keys if k in self._data}
        if kept != self._data:
            self._data, self._dirty = kept, True

    def save(self) -> None:
        if self._dirty:
            write_json(self._path, self._data, sort_keys=True)
            self._dirty = False
