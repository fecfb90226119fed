"""The state-dict protocol that State, Timer, algorithms and callbacks share."""

from __future__ import annotations

from typing import Any

__all__ = ["Serializable"]


class Serializable:
    """An object whose state can be saved to a checkpoint and restored from it.

    Subclasses override :meth:`state_dict` and :meth:`load_state_dict`. A state dict holds only tensors and plain
    Python values (``int``, ``float``, ``str``, ``bool``, ``None``, and lists, tuples and dicts of these), so a
    checkpoint loads with ``torch.load(path, weights_only=True)``.

    Example:
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> class Counter(Serializable):
        ...     def __init__(self) -> None:
        ...         self.count = 0
        ...     def state_dict(self) -> dict[str, Any]:
        ...         return {"count": self.count}
        ...     def load_state_dict(self, state: dict[str, Any]) -> None:
        ...         self.count = state["count"]
        >>> a, b = Counter(), Counter()
        >>> a.count = 3
        >>> b.load_state_dict(a.state_dict())
        >>> b.count
        3
    """

    def state_dict(self) -> dict[str, Any]:
        """Returns the object's state: tensors and plain Python values only (empty by default)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores the object's state from the output of :meth:`state_dict` (does nothing by default)."""
        del state
