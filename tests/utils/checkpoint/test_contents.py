"""composer.utils.checkpoint.contents: the checks on what a checkpoint holds (finite weights)."""

import pytest
import torch

from composer.core import State
from composer.utils.checkpoint import (
    NonFiniteWeightsError,
    read_checkpoint,
    save_checkpoint,
)
from tests.utils.checkpoint.states import trained_state


def test_non_finite_weights_are_refused_naming_them_unless_told(tmp_path):
    state = trained_state()
    with torch.no_grad():
        state.model[2].weight[0, :2] = float("inf")
        state.model[0].bias[3] = float("nan")
    with pytest.raises(
        NonFiniteWeightsError,
        match=r"weight '0\.bias' is not finite \(1 NaN and 0 infinite of 8 values\), and so are \['2\.weight'\]",
    ):
        save_checkpoint(state, tmp_path / "ckpt.pt")
    with pytest.raises(NonFiniteWeightsError, match="check_finite=False"):
        save_checkpoint(state, tmp_path / "weights.pt", weights_only=True)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temporary file
    path = save_checkpoint(state, tmp_path / "ckpt.pt", check_finite=False)
    assert torch.isnan(read_checkpoint(path)["state"]["model"]["0.bias"][3])


def test_a_non_finite_buffer_is_refused_too(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model[1].running_var.fill_(float("inf"))
    state = State(model=model, max_duration="1ep")
    with pytest.raises(NonFiniteWeightsError, match=r"'1\.running_var' is not finite \(0 NaN and 2 infinite"):
        save_checkpoint(state, tmp_path / "ckpt.pt")
