"""A list that tells its watchers when its contents change."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex, TypeVar

__all__ = ["WatchedList"]

T = TypeVar("T")


class WatchedList(list[T]):
    """A ``list`` that calls each of its ``watchers`` after every change to its contents.

    :class:`~composer.core.state.State` keeps its algorithms and callbacks in two of these, so that the
    :class:`~composer.core.engine.Engine` learns at once when either changes and can keep, between changes, the
    answer to "does anyone handle this event?" ready for the training loop. Reading (indexing, iterating, ``len``)
    costs what it costs on a plain list; only the methods that change the contents are wrapped.

    Args:
        items: The initial contents.

    Example:
        >>> changes = []
        >>> names = WatchedList(["a"])
        >>> names.watchers.append(lambda: changes.append(len(names)))
        >>> names.append("b")
        >>> names[:] = ["c"]
        >>> changes
        [2, 1]
    """

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        self.watchers: list[Callable[[], None]] = []

    def _changed(self) -> None:
        for watcher in self.watchers:
            watcher()

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        self._changed()

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        super().__delitem__(index)
        self._changed()

    def __iadd__(self, items: Iterable[T]) -> WatchedList[T]:  # type: ignore[override,misc]
        super().__iadd__(items)
        self._changed()
        return self

    def __imul__(self, count: SupportsIndex) -> WatchedList[T]:
        super().__imul__(count)
        self._changed()
        return self

    def append(self, item: T) -> None:
        super().append(item)
        self._changed()

    def extend(self, items: Iterable[T]) -> None:
        super().extend(items)
        self._changed()

    def insert(self, index: SupportsIndex, item: T) -> None:
        super().insert(index, item)
        self._changed()

    def remove(self, item: T) -> None:
        super().remove(item)
        self._changed()

    def pop(self, index: SupportsIndex = -1) -> T:
        item = super().pop(index)
        self._changed()
        return item

    def clear(self) -> None:
        super().clear()
        self._changed()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._changed()

    def reverse(self) -> None:
        super().reverse()
        self._changed()

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        # Copies and pickles are plain lists of the items: the watchers belong to the live object.
        return (WatchedList, (list(self),))
