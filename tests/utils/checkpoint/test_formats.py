"""composer.utils.checkpoint.formats and one_file: what a save writes, and what a load restores."""

import numpy as np
import pytest
import torch

from composer.core import Callback
from composer.utils.checkpoint import (
    CheckpointError,
    is_safetensors_available,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from tests.utils.checkpoint.states import Counter, Remembers, assert_same_weights, flip_bit, trained_state

# ---- format and round trip -------------------------------------------------------------------------------------


def test_a_checkpoint_loads_with_plain_torch_load_weights_only(tmp_path):
    state = trained_state(callbacks=[Counter(3)], algorithms=[Remembers()])
    path = save_checkpoint(state, tmp_path / "ckpt.pt", metadata={"run_name": "r", "lr": 0.01})
    raw = torch.load(path, weights_only=True)  # no safe globals added, nothing but tensors and plain values
    assert raw["format_version"] == 1
    metadata = raw["metadata"]
    assert metadata["library"] == "opencomposer" and metadata["config"] == {"run_name": "r", "lr": 0.01}
    assert metadata["torch_version"] == str(torch.__version__) and metadata["python_version"].count(".") == 2
    assert set(raw["state"]) >= {"model", "optimizers", "schedulers", "timer", "scaler", "rng", "process_rng"}


def test_every_stateful_component_round_trips(tmp_path):
    callback, algorithm = Counter(7), Remembers()
    algorithm.seen = 11
    source = trained_state(seed=1, callbacks=[callback], algorithms=[algorithm])
    source.epoch_start_rng = source.capture_rng()
    path = save_checkpoint(source, tmp_path / "ckpt.pt")
    # What the process's generators produce next, right after the save.
    next_draws = (torch.rand(2), np.random.rand(), next(iter(source.train_dataloader)))

    target = trained_state(seed=2, callbacks=[Counter()], algorithms=[Remembers()])
    load_checkpoint(target, path)
    for p, q in zip(source.model.parameters(), target.model.parameters()):
        assert torch.equal(p, q)
    src_opt, dst_opt = source.optimizers[0].state_dict(), target.optimizers[0].state_dict()
    for key in src_opt["state"]:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(src_opt["state"][key][name], dst_opt["state"][key][name])
    assert target.schedulers[0].state_dict() == source.schedulers[0].state_dict()
    assert target.optimizers[0].param_groups[0]["lr"] == source.optimizers[0].param_groups[0]["lr"]
    assert target.scaler.get_scale() == 123.0
    assert target.timer == source.timer
    assert target.scale_schedule_ratio == 0.5 and str(target.max_duration) == "5ep"
    assert target.rank_zero_seed == 1
    assert target.callbacks[0].count == 7 and target.algorithms[0].seen == 11
    assert torch.equal(target.rng.get_state(), source.rng.get_state())
    # The process's random states and the loader's generator come back when the Trainer asks for them.
    target.restore_rng(target.resume_rng)
    assert torch.equal(torch.rand(2), next_draws[0]) and np.random.rand() == next_draws[1]
    assert torch.equal(next(iter(target.train_dataloader)), next_draws[2])
    assert target.epoch_start_rng is not None


def test_weights_only_saves_and_loads_the_model_alone(tmp_path):
    source = trained_state(seed=1)
    path = save_checkpoint(source, tmp_path / "weights.pt", weights_only=True)
    assert set(read_checkpoint(path)["state"]) == {"model"}
    target = trained_state(seed=2)
    timer_before = target.timer.state_dict()
    load_checkpoint(target, path, weights_only=True)
    assert torch.equal(target.model[0].weight, source.model[0].weight)
    assert target.timer.state_dict() == timer_before
    with pytest.raises(CheckpointError, match="holds only model weights.*load_weights_only=True"):
        load_checkpoint(target, path)


def test_a_plain_torch_state_dict_loads_as_weights(tmp_path):
    source = trained_state(seed=1)
    torch.save(source.model.state_dict(), tmp_path / "plain.pt")
    target = trained_state(seed=2)
    load_checkpoint(target, tmp_path / "plain.pt", weights_only=True)
    assert torch.equal(target.model[2].bias, source.model[2].bias)


def test_a_value_that_would_not_load_safely_is_refused_at_save_time_naming_where(tmp_path):
    class NumpyState(Callback):
        def state_dict(self):
            return {"loss": np.float64(0.5)}

    state = trained_state(callbacks=[NumpyState()])
    with pytest.raises(TypeError, match=r"checkpoint/state/callbacks/0/state/loss is a numpy.float64"):
        save_checkpoint(state, tmp_path / "ckpt.pt")
    assert not list(tmp_path.iterdir())


# ---- safetensors -------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not is_safetensors_available(), reason="safetensors is not installed")
def test_weights_round_trip_through_safetensors(tmp_path):
    source = trained_state(seed=1)
    path = save_checkpoint(source, tmp_path / "weights.safetensors", weights_only=True, metadata={"lr": 0.1})
    checkpoint = read_checkpoint(path)
    assert checkpoint["metadata"]["config"] == {"lr": 0.1}
    target = trained_state(seed=2)
    load_checkpoint(target, path, weights_only=True)
    assert_same_weights(target.model, source.model)
    flip_bit(path, path.stat().st_size // 2)
    with pytest.raises(CheckpointError, match=r"weights\.safetensors failed its checksum"):
        read_checkpoint(path)
    with pytest.raises(ValueError, match="safetensors files hold tensors only"):
        save_checkpoint(source, tmp_path / "full.safetensors")
