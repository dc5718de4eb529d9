"""One bounded, thread-safe, most-recently-used map for the process-wide caches (indexes, tree listings, per-file
analyses, relevance scores): each kept what it computed in an ``OrderedDict`` with its own lock and eviction loop.

A value is a pure function of its key in every user, so a hit is exact and eviction only costs time.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, Iterator, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``max_items`` entries, and with ``weight`` at most ``max_weight`` in all; the least recently used go
    first, but the newest entry always stays (one over-large value is kept, alone).

    >>> c = LRU(2); c.put("a", 1); c.put("b", 2); c.get("a"); c.put("c", 3)
    1
    >>> list(c), c.get("b")  # "b" was the least recently used
    (['a', 'c'], None)
    >>> w = LRU(10, weight=len, max_weight=5); w.put("x", "abc"); w.put("y", "abcd"); list(w)
    ['y']
    >>> w.put("z", "abcdefgh"); list(w)  # over the weight alone: kept
    ['z']
    """

    def __init__(self, max_items: int, weight: Callable[[V], int] | None = None, max_weight: int | None = None):
        self.max_items = int(max_items)
        """Entries kept at most (0 or less: none beyond the newest)."""
        self.max_weight = max_weight
        """``weight`` summed over the entries kept at most (None: no bound but ``max_items``)."""
        self._weight = weight
        self._data: OrderedDict[K, V] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` as the most recently used, then drop the oldest entries past the bounds."""
        with self._lock:
            if key in self._data:
                self._total -= self._weigh(self._data.pop(key))
            self._data[key] = value
            self._total += self._weigh(value)
            while len(self._data) > 1 and (len(self._data) > self.max_items or (
                    self.max_weight is not None and self._total > self.max_weight)):
                self._total -= self._weigh(self._data.popitem(last=False)[1])

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._total = 0

    def values(self) -> list[V]:
        """The values, least recently used first (a copy)."""
        with self._lock:
            return list(self._data.values())

    def _weigh(self, value: V) -> int:
        return int(self._weight(value)) if self._weight is not None else 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._data))
