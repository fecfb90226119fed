"""Fixtures shared by the tests and the doctests of the package."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _doctest_objects(request: pytest.FixtureRequest) -> None:
    """Fresh objects for the doctests of docstrings: model, train_dataloader, eval_dataloader, optimizer, state.

    A method card (an algorithm's ``README.md``) gets none of them: its examples must run as a reader pastes them,
    building their own model and data from the library's public ones.
    """
    if not isinstance(request.node, pytest.DoctestItem) or request.node.path.name == "README.md":
        return
    import torch

    from composer.core.state import State
    from tests.common import SimpleModel, make_dataloader

    torch.manual_seed(0)
    model = SimpleModel()
    request.getfixturevalue("doctest_namespace").update(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, seed=0),
        eval_dataloader=make_dataloader(num_samples=8, seed=1),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        state=State(model=model, max_duration="1ep", steps_per_epoch=4),
    )
