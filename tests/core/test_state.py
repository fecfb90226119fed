import io
import random
import warnings

import numpy as np
import pytest
import torch

from composer.core import Algorithm, Callback, State, Time, TimeUnit
from composer.core.precision import Precision


def make_state(max_duration="10ep", steps_per_epoch=4, **kwargs):
    return State(model=torch.nn.Linear(3, 2), max_duration=max_duration, steps_per_epoch=steps_per_epoch, **kwargs)


def test_max_duration_parsing_and_errors():
    assert make_state(max_duration=3).max_duration == Time(3, TimeUnit.EPOCH)
    assert make_state(max_duration="7ba").max_duration == Time(7, TimeUnit.BATCH)
    with pytest.raises(ValueError, match="fraction of the run"):
        make_state(max_duration="0.5dur")
    with pytest.raises(ValueError, match="positive"):
        make_state(max_duration="0ep")


def test_max_epochs_get_and_set():
    state = make_state(max_duration="10ep", steps_per_epoch=4)
    assert state.max_epochs == 10
    state.max_epochs /= 2
    assert state.max_duration == Time(5, TimeUnit.EPOCH)
    state.max_epochs = 2.5
    assert state.max_duration == Time(10, TimeUnit.BATCH)  # 2.5 epochs x 4 batches
    assert state.max_epochs == 2.5
    with pytest.raises(ValueError, match="max_epochs=0"):
        state.max_epochs = 0
    no_length = State(model=torch.nn.Linear(1, 1), max_duration="4ep", train_dataloader=iter([]))
    with pytest.raises(ValueError, match="fractional"):
        no_length.max_epochs = 1.5


def test_steps_per_epoch_from_loader_length():
    state = State(model=torch.nn.Linear(1, 1), max_duration="1ep", train_dataloader=[1, 2, 3])
    assert state.steps_per_epoch == 3
    state.steps_per_epoch = 2
    assert state.steps_per_epoch == 2
    with pytest.raises(ValueError):
        state.steps_per_epoch = 0


def test_elapsed_duration_advances_per_batch_under_epoch_budget():
    state = make_state(max_duration="2ep", steps_per_epoch=4)
    for _ in range(3):
        state.timer.on_batch_complete(samples=8)
    assert state.get_elapsed_duration() == Time(3 / 8, TimeUnit.DURATION)
    sample_budget = make_state(max_duration="64sp")
    sample_budget.timer.on_batch_complete(samples=16)
    assert sample_budget.get_elapsed_duration().value == pytest.approx(0.25)


def test_stop_training_records_reason():
    state = make_state()
    assert not state.stop_requested
    state.stop_training("loss is NaN")
    assert state.stop_requested and state.stop_reason == "loss is NaN"


def test_lists_keep_identity_on_assignment():
    state = make_state()
    algorithms = state.algorithms
    state.algorithms = [object()]
    assert state.algorithms is algorithms and len(algorithms) == 1


def test_lists_version_moves_on_every_change_to_either_list():
    state = make_state()
    versions = [state.lists_version]
    for change in (
        lambda: state.algorithms.append(object()),
        lambda: state.callbacks.append(object()),
        lambda: setattr(state, "algorithms", []),
        lambda: setattr(state, "callbacks", [object()]),
        lambda: state.callbacks.pop(),
    ):
        change()
        versions.append(state.lists_version)
    assert versions == sorted(set(versions))  # strictly growing
    _ = list(state.algorithms), len(state.callbacks)
    assert state.lists_version == versions[-1]  # reading changes nothing


def test_batch_views():
    state = make_state()
    state.batch = (torch.zeros(2), torch.ones(2))
    _, y = state.batch_pair
    assert torch.equal(y, torch.ones(2))
    with pytest.raises(TypeError, match="not a mapping"):
        _ = state.batch_dict
    state.batch = {"input_ids": torch.zeros(2)}
    assert "input_ids" in state.batch_dict
    with pytest.raises(TypeError, match="inputs, targets"):
        _ = state.batch_pair


def test_precision_coerced_and_bad_value_lists_choices():
    state = make_state(precision="amp_bf16")
    assert state.precision is Precision.BF16
    with pytest.raises(ValueError, match="'fp32', 'amp', 'bf16'"):
        state.precision = "fp8"


def test_rng_is_seeded_from_seed():
    a, b = make_state(rank_zero_seed=5), make_state(rank_zero_seed=5)
    assert torch.equal(torch.rand(3, generator=a.rng), torch.rand(3, generator=b.rng))
    assert make_state(rank_zero_seed=5).seed == 5


class Counting(Callback):
    def __init__(self):
        self.count = 0

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]


class Noop(Algorithm):
    def match(self, event, state):
        return False

    def apply(self, event, state, logger):
        return None


def test_state_dict_round_trip_through_weights_only_load():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    cb = Counting()
    cb.count = 4
    src = State(model=model, max_duration="3ep", optimizers=opt, callbacks=[cb], algorithms=[Noop()], rank_zero_seed=9)
    src.timer.on_batch_complete(samples=4)
    torch.rand(2, generator=src.rng)
    buffer = io.BytesIO()
    torch.save(src.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)

    model2 = torch.nn.Linear(3, 2)
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.1, momentum=0.9)
    dst = State(model=model2, max_duration="1ep", optimizers=opt2, callbacks=[Counting()], algorithms=[Noop()])
    dst.load_state_dict(saved)
    assert torch.equal(model2.weight, model.weight)
    assert dst.callbacks[0].count == 4
    assert dst.timer.state_dict() == src.timer.state_dict()
    assert dst.max_duration == Time(3, TimeUnit.EPOCH)
    assert dst.rank_zero_seed == 9
    assert torch.equal(torch.rand(2, generator=dst.rng), torch.rand(2, generator=src.rng))
    buf = opt2.state_dict()["state"][0]["momentum_buffer"]
    assert torch.equal(buf, opt.state_dict()["state"][0]["momentum_buffer"])


class Stateless(Callback):
    pass


def counting(count):
    callback = Counting()
    callback.count = count
    return callback


def test_callbacks_are_matched_by_class_and_occurrence_not_position():
    src = make_state(callbacks=[counting(1), Stateless(), counting(2)])
    dst = make_state(callbacks=[Stateless(), Counting(), Counting()])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stateless callback moving around is not worth a warning
        dst.load_state_dict(src.state_dict())
    assert [c.count for c in dst.callbacks[1:]] == [1, 2]


def test_a_callback_removed_or_added_between_runs_warns_instead_of_failing():
    src = make_state(callbacks=[counting(4)])
    with pytest.warns(UserWarning, match=r"state for callbacks this run does not have: \['Counting \(number 1\)'\]"):
        make_state(callbacks=[]).load_state_dict(src.state_dict())
    added = make_state(callbacks=[counting(7), counting(9)])
    with pytest.warns(UserWarning, match=r"no saved state for the callback Counting \(number 2"):
        added.load_state_dict(src.state_dict())
    assert [c.count for c in added.callbacks] == [4, 9]  # the new one keeps its own state


def test_mismatched_optimizer_count_still_raises():
    model = torch.nn.Linear(3, 2)
    src = State(model=model, max_duration="1ep", optimizers=torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="1 optimizers but this run has 0"):
        make_state().load_state_dict(src.state_dict())


def test_capture_and_restore_rng_covers_python_numpy_torch_and_the_loader_generator():
    loader = torch.utils.data.DataLoader(list(range(10)), shuffle=True, generator=torch.Generator().manual_seed(3))
    state = State(model=torch.nn.Linear(1, 1), max_duration="1ep", train_dataloader=loader)

    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item(), list(loader)

    snapshot = state.capture_rng()
    first = draw()
    state.restore_rng(snapshot)
    assert draw() == first
    # Through torch.save/torch.load(weights_only=True) and back, as in a checkpoint.
    buffer = io.BytesIO()
    torch.save(snapshot, buffer)
    buffer.seek(0)
    state.restore_rng(torch.load(buffer, weights_only=True))
    assert draw() == first


def test_state_dict_carries_the_process_rng_for_the_trainer_to_restore_later():
    src = make_state()
    src.epoch_start_rng = src.capture_rng()
    torch.rand(5)
    saved = src.state_dict()
    expected_next = torch.rand(3)
    dst = make_state()
    dst.load_state_dict(saved)
    assert dst.resume_rng is not None and dst.epoch_start_rng is not None
    torch.rand(7)  # loading did not touch the global generators...
    dst.restore_rng(dst.resume_rng)  # ...the Trainer restores them at the right point
    assert torch.equal(torch.rand(3), expected_next)


def _trainer(tmp_path, **kwargs):
    from composer import Trainer
    from tests.common import SimpleModel, make_dataloader

    torch.manual_seed(0)
    return Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(num_samples=8, batch_size=4),
        max_duration="1ep",
        progress_bar=False,
        seed=0,
        **kwargs,
    )


@pytest.mark.parametrize("saved_by", ["saver", "save_checkpoint"])
@pytest.mark.parametrize("load_into", ["no_saver", "own_saver"])
def test_the_trainers_own_checkpoint_saver_never_warns_about_itself_on_load(tmp_path, saved_by, load_into):
    # A full checkpoint written by a Trainer (by its save_folder saver, or by save_checkpoint without one), loaded by
    # a fresh Trainer that the user gave no callbacks at all, with or without a save_folder of its own: nothing the
    # user passed is involved, so nothing may warn.
    checkpoint = tmp_path / "first" / "ep1-ba2-rank0.pt"
    if saved_by == "saver":
        with _trainer(tmp_path, save_folder=str(tmp_path / "first"), run_name="a") as first:
            first.fit()
    else:
        with _trainer(tmp_path) as first:
            first.fit()
            first.save_checkpoint(str(checkpoint))
    assert checkpoint.is_file()
    extra = {"save_folder": str(tmp_path / "second"), "run_name": "b"} if load_into == "own_saver" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the load
        with _trainer(tmp_path, load_path=str(checkpoint), **extra) as second:
            assert second.state.timer.batch.value == 2  # the checkpoint's state was loaded


def test_a_users_own_callback_state_left_unclaimed_still_warns():
    class Counter(Callback):
        def __init__(self):
            self.n = 3

        def state_dict(self):
            return {"n": self.n}

        def load_state_dict(self, state):
            self.n = state["n"]

    saved = make_state(callbacks=[Counter()]).state_dict()
    with pytest.warns(UserWarning, match=r"Counter \(number 1\)"):
        make_state(callbacks=[]).load_state_dict(saved)
