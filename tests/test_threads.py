"""ggstack.threads: a call on a thread of its own, and a map over a few threads."""

from __future__ import annotations

import threading

import pytest

from ggstack.threads import Pending, map_on_threads


def test_pending_returns_the_value_and_raises_the_error() -> None:
    assert Pending(lambda a, b: a + b, 2, 3).result() == 5
    with pytest.raises(KeyError):
        Pending({}.__getitem__, "missing").result()


def test_side_by_side_keeps_the_order_and_runs_on_threads() -> None:
    names: set[str] = set()
    barrier = threading.Barrier(3, timeout=10)  # three at once, or it breaks

    def one(x: int) -> int:
        names.add(threading.current_thread().name)
        if x < 3:
            barrier.wait()
        return x * x

    assert map_on_threads(one, list(range(8)), 3) == [x * x for x in range(8)]
    assert len(names) == 3
    assert map_on_threads(one, [], 4) == []


def test_side_by_side_raises_the_first_error_in_item_order() -> None:
    def one(x: int) -> int:
        if x in (2, 5):
            raise ValueError(x)
        return x

    with pytest.raises(ValueError, match=r"^2$"):
        map_on_threads(one, list(range(7)), 3)
