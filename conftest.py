"""Fixtures shared by the tests and the doctests of the package."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _doctest_seed(request: pytest.FixtureRequest) -> None:
    """Every doctest of a docstring starts from ``torch.manual_seed(0)``, so the numbers it prints are reproducible.

    Nothing else is given to them: each example builds the model, data and state it uses, as a reader pastes it
    (a method card, an algorithm's ``README.md``, is not even seeded).
    """
    if not isinstance(request.node, pytest.DoctestItem) or request.node.path.name == "README.md":
        return
    import torch

    torch.manual_seed(0)
