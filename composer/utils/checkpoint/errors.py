"""What a checkpoint can be refused for: :class:`CheckpointError` (unusable), :class:`NonFiniteWeightsError`."""

from __future__ import annotations

__all__ = ["CheckpointError", "NonFiniteWeightsError"]


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: unreadable, truncated, failing its checksum, or unsafe to load.

    The message names the file and says what to do; :attr:`reason` says in a few words what is wrong with it (for
    lists of refused files, as autoresume gives).

    Args:
        message (str): The whole message.
        reason (str, optional): What is wrong, in a few words; default: the message.

    Example:
        >>> error = CheckpointError("ep1-ba8.pt failed its checksum: ...", reason="failed its checksum")
        >>> error.reason
        'failed its checksum'
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class NonFiniteWeightsError(ValueError):
    """Model weights that hold a NaN or an infinity, refused by :func:`save_checkpoint` (the message names them)."""
