"""Work on threads for check and git's wrappers: a call on a thread of its own, a map on a few. Not
``concurrent.futures``: its ``logging`` import is 6 ms of start-up (``-X importtime``); a commit's check: dozens."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class Pending(Generic[T]):
    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args))  # waited for at exit, as a pool is
        self._thread.start()

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        try:
            self._value = fn(*args)
        except BaseException as e:  # handed to whoever waits for the value
            self._error = e

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def cores() -> int:
    """Its affinity, where a job runner limits it."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def map_on_threads(fn: Callable[[U], T], items: Sequence[U], workers: int) -> list[T]:
    """The first item's exception (in the order of ``items``) is raised once all have run."""
    if len(items) <= 1 or workers <= 1:
        return [fn(x) for x in items]
    out: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)
    lock, todo = threading.Lock(), iter(range(len(items)))

    def work() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                out[i] = fn(items[i])
            except BaseException as e:  # raised below, in the items order
                errors[i] = e

    threads = [threading.Thread(target=work) for _ in range(min(workers, len(items)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return out
