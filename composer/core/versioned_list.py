"""A list that counts the changes to its contents."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsIndex, TypeVar

__all__ = ["VersionedList"]

T = TypeVar("T")


class VersionedList(list[T]):
    """A ``list`` whose :attr:`version` goes up by one after every change to its contents.

    :class:`~composer.core.state.State` keeps its algorithms and callbacks in two of these, and adds their versions
    into :attr:`~composer.core.state.State.lists_version`: the :class:`~composer.core.engine.Engine` keeps its
    per-event dispatch plans while that number stays the same. Reading (indexing, iterating, ``len``) costs what it
    costs on a plain list; only the methods that change the contents are wrapped.

    Args:
        items: The initial contents.

    Attributes:
        version (int): How many changes the list has seen since it was made.

    Example:
        >>> names = VersionedList(["a"])
        >>> names.append("b")
        >>> names[:] = ["c"]
        >>> names.version, names
        (2, ['c'])
    """

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        self.version = 0

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        self.version += 1

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        super().__delitem__(index)
        self.version += 1

    def __iadd__(self, items: Iterable[T]) -> VersionedList[T]:  # type: ignore[override,misc]
        super().__iadd__(items)
        self.version += 1
        return self

    def __imul__(self, count: SupportsIndex) -> VersionedList[T]:
        super().__imul__(count)
        self.version += 1
        return self

    def append(self, item: T) -> None:
        super().append(item)
        self.version += 1

    def extend(self, items: Iterable[T]) -> None:
        super().extend(items)
        self.version += 1

    def insert(self, index: SupportsIndex, item: T) -> None:
        super().insert(index, item)
        self.version += 1

    def remove(self, item: T) -> None:
        super().remove(item)
        self.version += 1

    def pop(self, index: SupportsIndex = -1) -> T:
        item = super().pop(index)
        self.version += 1
        return item

    def clear(self) -> None:
        super().clear()
        self.version += 1

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self.version += 1

    def reverse(self) -> None:
        super().reverse()
        self.version += 1

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        # Copies and pickles hold the items; a copy is a new list, so its count starts again at 0.
        return (VersionedList, (list(self),))
