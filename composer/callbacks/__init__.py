"""Callbacks that observe training; ``CALLBACKS`` maps each registry name to its class."""

from __future__ import annotations

from composer.core.callback import Callback

__all__ = ["CALLBACKS", "Callback"]

CALLBACKS: dict[str, type[Callback]] = {}
