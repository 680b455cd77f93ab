"""In-memory store for tests and throwaway runs."""

import bisect
from collections.abc import Iterator, Mapping


class MemoryStore:
    def __init__(self) -> None:
        self._items: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []

    def get(self, key: bytes) -> bytes | None:
        return self._items.get(key)

    def write(self, changes: Mapping[bytes, bytes | None]) -> None:
        for key, value in changes.items():
            if value is None:
                if self._items.pop(key, None) is not None:
                    self._keys.pop(bisect.bisect_left(self._keys, key))
            else:
                if key not in self._items:
                    bisect.insort(self._keys, key)
                self._items[key] = value

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        low = bisect.bisect_left(self._keys, start)
        high = bisect.bisect_left(self._keys, stop)
        for key in self._keys[low:high]:
            yield key, self._items[key]

    def close(self) -> None:
        self._items.clear()
        self._keys.clear()
