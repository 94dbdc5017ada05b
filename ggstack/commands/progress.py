"""How far a stage is, on stderr, while a maintainer waits: a rich bar at a terminal (for more than a
handful of patches); piped, plain lines at its start, every ``EVERY`` seconds, and its end when long."""

from __future__ import annotations

import sys
import time


class StageProgress:
    EVERY = 10.0

    def __init__(self, total: int, what: str, *, min_total: int = 6) -> None:
        self._bar = None
        self._what, self._total, self._done = what, total, 0
        self._lines = not sys.stderr.isatty() and total >= min_total
        self._start = self._said = time.monotonic()
        if sys.stderr.isatty() and total >= min_total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn(what),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                transient=True,
                console=Console(stderr=True),
            )
            self._task = self._bar.add_task("", total=total)

    def __enter__(self) -> StageProgress:
        if self._bar:
            self._bar.start()
        elif self._lines:
            self._say(f"{self._what}: {_count(self._total, 'patch')} …")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar:
            self._bar.stop()
        elif self._lines and time.monotonic() - self._start >= self.EVERY:
            self._say(f"{self._what}: {self._done}/{self._total} in {time.monotonic() - self._start:.0f} s")

    def __call__(self, done: int, total: int, name: str) -> None:
        self._done, self._total = done, total
        if self._bar:
            self._bar.update(self._task, completed=done, total=total, description=name)
        elif self._lines and time.monotonic() - self._said >= self.EVERY:
            self._said = time.monotonic()
            self._say(f"{self._what}: {done}/{total} {name}")

    @staticmethod
    def _say(line: str) -> None:
        sys.stderr.write(f"ggstack: {line}\n")
        sys.stderr.flush()


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'es' if word.endswith('ch') and n != 1 else 's' if n != 1 else ''}"
