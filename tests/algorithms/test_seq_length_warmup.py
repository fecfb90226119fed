"""SeqLengthWarmup: the schedule, token identity in both modes, the pre-allocation pass, bad inputs."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.algorithms import SeqLengthWarmup, SeqLengthWarmupHparams
from composer.algorithms.seq_length_warmup import apply_seq_length_warmup, warmup_seq_length
from composer.core import Callback, Engine, Event, Logger, State
from composer.core.state import SequenceCut
from composer.datasets import ByteTextDataset
from composer.models import GPT, GPTConfig


def tiny_gpt(dropout: float = 0.0) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=32, dropout=dropout))


def make_batch(batch_size: int = 3, seq_len: int = 10) -> dict[str, torch.Tensor]:
    ids = torch.arange(batch_size * seq_len).view(batch_size, seq_len) + 1
    return {
        "input_ids": ids,
        "labels": ids + 1000,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": ids % 2,
    }


# ---- the schedule ------------------------------------------------------------------------------------------------


def test_length_rises_by_step_size_over_the_duration_then_stays_at_the_maximum():
    duration, low, high, step = 0.3, 8, 64, 8
    stages = (high - low) // step  # 7 lengths, 8 .. 56, each for duration / 7 of the run; 64 from 0.3 on
    for k in range(101):
        elapsed = k / 100
        expected = high if elapsed >= duration else low + step * math.floor(elapsed / (duration / stages))
        assert warmup_seq_length(elapsed, duration, low, high, step) == expected, elapsed


def test_no_warmup_and_equal_lengths_give_the_maximum():
    assert warmup_seq_length(0.0, 0.0, 8, 64, 8) == 64
    assert warmup_seq_length(0.0, 0.5, 32, 32, 8) == 32


def test_length_follows_the_schedule_in_training():
    class RecordLengths(Callback):
        def __init__(self) -> None:
            self.lengths: list[int] = []

        def before_forward(self, state: State, logger: Logger) -> None:
            self.lengths.append(int(state.batch["input_ids"].shape[1]))

    recorder = RecordLengths()
    data = ByteTextDataset(bytes(range(256)) * 4, seq_len=32)  # 32 windows: 8 batches of 4 per epoch
    warmup = SeqLengthWarmup(duration=0.5, min_seq_length=8, max_seq_length=32, step_size=8, truncate=True)
    model = tiny_gpt()
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration="1ep",
        algorithms=[warmup],
        callbacks=[recorder],
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    # Batch b runs at elapsed b/8: lengths 8, 16, 24 for 4/3 batches each, then 32 from the middle on.
    expected = [warmup_seq_length(b / 8, 0.5, 8, 32, 8) for b in range(8)]
    assert recorder.lengths == expected == [8, 8, 16, 24, 32, 32, 32, 32]


# ---- token identity ----------------------------------------------------------------------------------------------


def test_truncation_keeps_each_sequence_prefix_in_every_key():
    batch = make_batch()
    out = apply_seq_length_warmup(batch, curr_seq_len=4, truncate=True)
    for key, value in batch.items():
        assert torch.equal(out[key], value[:, :4]), key
    assert batch["input_ids"].shape == (3, 10)  # the input batch is not modified


def test_reshaping_keeps_every_token_in_order_and_every_key_aligned():
    batch = make_batch()  # 30 tokens -> rows of 4: 8 rows, the last holding 2 tokens and 2 of padding
    out = apply_seq_length_warmup(batch, curr_seq_len=4, truncate=False)
    assert out["input_ids"].shape == (8, 4)
    real = out["attention_mask"].bool()
    assert int(real.sum()) == 30
    assert torch.equal(out["input_ids"][real], batch["input_ids"].flatten())
    assert torch.equal(out["labels"][real], batch["labels"].flatten())
    assert torch.equal(out["token_type_ids"][real], batch["token_type_ids"].flatten())
    assert out["labels"][~real].tolist() == [-100, -100]  # padding is never scored
    assert out["input_ids"][~real].tolist() == [0, 0]


def test_reshaping_adds_an_attention_mask_only_when_it_pads():
    ids = torch.arange(12).view(2, 6)
    exact = apply_seq_length_warmup({"input_ids": ids, "labels": ids}, curr_seq_len=3, truncate=False)
    assert sorted(exact) == ["input_ids", "labels"] and torch.equal(exact["input_ids"].flatten(), ids.flatten())
    padded = apply_seq_length_warmup({"input_ids": ids, "labels": ids}, curr_seq_len=5, truncate=False)
    assert padded["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]


def test_short_batches_are_returned_unchanged_and_other_shapes_are_kept_when_truncating():
    batch = make_batch(seq_len=4)
    assert apply_seq_length_warmup(batch, curr_seq_len=8, truncate=False) is batch
    with_class_labels = {"input_ids": torch.zeros(2, 6, dtype=torch.long), "label": torch.tensor([0, 1])}
    out = apply_seq_length_warmup(with_class_labels, curr_seq_len=3, truncate=True)
    assert torch.equal(out["label"], with_class_labels["label"])


def test_hugging_face_batch_encodings_stay_batch_encodings():
    transformers = pytest.importorskip("transformers")
    batch = transformers.BatchEncoding(make_batch())
    for truncate in (True, False):
        out = apply_seq_length_warmup(batch, curr_seq_len=5, truncate=truncate)
        assert isinstance(out, transformers.BatchEncoding)
        assert out["input_ids"].shape[1] == 5


# ---- the algorithm -----------------------------------------------------------------------------------------------


def test_preallocation_runs_at_full_length_without_consuming_the_training_rng():
    model = tiny_gpt(dropout=0.5)  # dropout would draw from torch's random state
    shapes: list[tuple[int, ...]] = []
    model.register_forward_pre_hook(lambda module, args: shapes.append(tuple(args[0]["input_ids"].shape)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    warmup = SeqLengthWarmup(duration=0.5, min_seq_length=8, max_seq_length=32, step_size=8)
    state = State(model=model, max_duration="10ba", optimizers=optimizer, grad_accum=2, algorithms=[warmup])
    state.batch = {"input_ids": torch.randint(0, 256, (5, 16)), "labels": torch.randint(0, 256, (5, 16))}
    torch_state, algorithm_rng = torch.random.get_rng_state(), state.rng.get_state()

    Engine(state).run_event(Event.AFTER_DATALOADER)

    assert shapes == [(3, 32)]  # ceil(5 / grad_accum) rows at max_seq_length
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert torch.equal(state.rng.get_state(), algorithm_rng)
    assert all(p.grad is None for p in model.parameters())
    assert state.batch["input_ids"].shape == (5, 8)

    state.batch = {"input_ids": torch.randint(0, 256, (5, 16))}
    Engine(state).run_event(Event.AFTER_DATALOADER)
    assert shapes == [(3, 32)]  # only once


def test_logs_the_current_length_and_batch_size():
    class Capture(Logger):
        def __init__(self, state: State) -> None:
            super().__init__(state)
            self.logged: dict[str, object] = {}

        def metric_batch(self, data):  # type: ignore[override]
            self.logged.update(data)

    state = State(model=tiny_gpt(), max_duration="10ba")
    state.batch = {"input_ids": torch.randint(0, 256, (2, 16)), "labels": torch.randint(0, 256, (2, 16))}
    logger = Capture(state)
    SeqLengthWarmup(duration=0.5, min_seq_length=8, max_seq_length=16, step_size=8, truncate=False).apply(
        Event.AFTER_DATALOADER, state, logger
    )
    assert logger.logged == {"seq_length_warmup/curr_seq_len": 8, "seq_length_warmup/curr_bs": 4}


# ---- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"min_seq_length": 64, "max_seq_length": 32}, "min_seq_length=64 is greater than max_seq_length=32"),
        ({"min_seq_length": 8, "max_seq_length": 30, "step_size": 8}, "step_size=8 does not divide"),
        ({"duration": 1.5}, "duration must be a fraction of the run in \\[0, 1\\], got 1.5"),
        ({"min_seq_length": 0}, "min_seq_length must be a positive int, got 0"),
        ({"step_size": 0}, "step_size must be a positive int, got 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SeqLengthWarmup(**kwargs)
    with pytest.raises(ValueError, match=message):
        SeqLengthWarmupHparams(**kwargs)


def test_batches_must_be_dicts_with_input_ids():
    with pytest.raises(ValueError, match=r"needs batch\['input_ids'\].*keys \['tokens'\]"):
        apply_seq_length_warmup({"tokens": torch.zeros(2, 8)}, 4, truncate=True)
    with pytest.raises(TypeError, match="dict of tensors"):
        apply_seq_length_warmup(torch.zeros(2, 8), 4, truncate=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Cannot reshape batch\['label'\] of shape \(2,\)"):
        apply_seq_length_warmup({"input_ids": torch.zeros(2, 8), "label": torch.zeros(2)}, 4, truncate=False)
    with pytest.raises(ValueError, match="curr_seq_len must be a positive int"):
        apply_seq_length_warmup({"input_ids": torch.zeros(2, 8)}, 0, truncate=True)


def test_hparams_have_the_seed_defaults():
    config = SeqLengthWarmupHparams()
    assert config.to_dict() == {
        "duration": 0.3,
        "min_seq_length": 8,
        "max_seq_length": 1024,
        "step_size": 8,
        "truncate": True,
    }
    assert repr(config.initialize_object()) == repr(SeqLengthWarmup())


# ---- with ALiBi: one cut, whatever the order ---------------------------------------------------------------------


def _cut(ids: torch.Tensor, length: int, truncate: bool) -> torch.Tensor:
    """The reference cut, for lengths that divide the sequence length: prefixes, or all tokens re-read in rows."""
    return ids[:, :length] if truncate else ids.reshape(-1, length)


@pytest.mark.parametrize("alibi_first", [True, False])
@pytest.mark.parametrize(
    "seq_len,scaling,min_len,max_len,duration,truncate,expected_len,expected_truncate",
    [
        # The warmup's 8 is shorter than ALiBi's 32 * 0.5 = 16: the warmup cuts, in its own mode.
        (32, 0.5, 8, 32, 0.5, True, 8, True),
        (32, 0.5, 8, 32, 0.5, False, 8, False),
        # The warmup is over (32): ALiBi's 16 applies, reshaped.
        (32, 0.5, 8, 32, 0.0, True, 16, False),
        # Equal lengths (16): ALiBi's reshaping, every token kept.
        (32, 0.5, 16, 32, 0.5, True, 16, False),
        # ALiBi asks for 32 * 0.125 = 4, below min_seq_length: raised to 8.
        (32, 0.125, 8, 32, 0.0, True, 8, False),
        (32, 0.125, 8, 32, 0.5, True, 8, False),
        # Sequences already no longer than min_seq_length are left alone.
        (8, 0.5, 8, 32, 0.0, True, 8, True),
    ],
)
def test_with_alibi_the_batch_is_cut_once_to_the_shorter_length_in_either_order(
    alibi_first, seq_len, scaling, min_len, max_len, duration, truncate, expected_len, expected_truncate
):
    from composer.algorithms import Alibi

    model = tiny_gpt()
    alibi = Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=scaling)
    warmup = SeqLengthWarmup(duration, min_len, max_len, step_size=8, truncate=truncate)
    state = State(model=model, max_duration="10ba", algorithms=[alibi, warmup] if alibi_first else [warmup, alibi])
    ids = torch.arange(2 * seq_len).view(2, seq_len) + 1
    state.batch = {"input_ids": ids, "labels": ids + 100}  # both below the vocabulary size, 256
    engine = Engine(state)
    engine.run_event(Event.INIT)  # where the two agree, in state.sequence_cut, on who cuts and by how much
    assert state.sequence_cut == SequenceCut(scaling=scaling, scheduled=True)

    engine.run_event(Event.AFTER_DATALOADER)

    expected = _cut(ids, expected_len, expected_truncate)
    assert torch.equal(state.batch["input_ids"], expected)
    assert torch.equal(state.batch["labels"], expected + 100)
    assert state.batch["input_ids"].shape[1] >= min(min_len, seq_len)


def test_with_alibi_a_scaling_that_does_not_divide_the_length_is_still_refused():
    from composer.algorithms import Alibi

    model = tiny_gpt()
    alibi = Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=0.25)
    warmup = SeqLengthWarmup(0.0, 8, 32, step_size=8)
    state = State(model=model, max_duration="10ba", algorithms=[warmup, alibi])
    state.batch = {"input_ids": torch.zeros(2, 10, dtype=torch.long)}
    engine = Engine(state)
    engine.run_event(Event.INIT)
    with pytest.raises(ValueError, match=r"train_sequence_length_scaling=0.25 turns sequences of 10 tokens into 2.5"):
        engine.run_event(Event.AFTER_DATALOADER)


def _train_with_alibi(
    alibi_first: bool, scaling: float
) -> tuple[list[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    """Trains the compact GPT for 4 batches of 4 x 32 bytes with ALiBi and a warmup 8 -> 32 over half the run."""
    from composer.algorithms import Alibi

    class RecordBatches(Callback):
        def __init__(self) -> None:
            self.batches: list[dict[str, torch.Tensor]] = []

        def before_forward(self, state: State, logger: Logger) -> None:
            self.batches.append({key: value.clone() for key, value in state.batch.items()})

    model = tiny_gpt()
    alibi = Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=scaling)
    warmup = SeqLengthWarmup(duration=0.5, min_seq_length=8, max_seq_length=32, step_size=8, truncate=True)
    recorder = RecordBatches()
    data = ByteTextDataset(bytes(range(256)) * 2, seq_len=32)  # 16 windows: 4 batches of 4
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration="4ba",
        algorithms=[alibi, warmup] if alibi_first else [warmup, alibi],
        callbacks=[recorder],
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return recorder.batches, {key: value.clone() for key, value in model.state_dict().items()}


@pytest.mark.parametrize("scaling", [0.5, 0.125])
def test_with_alibi_both_orders_train_on_the_same_batches_to_the_same_weights(scaling):
    batches, weights = _train_with_alibi(True, scaling)
    reversed_batches, reversed_weights = _train_with_alibi(False, scaling)

    # The reference: the loader's batches, cut by hand. The warmup's lengths are 8, 16, 32, 32 (batch b at b/4 of
    # the run); ALiBi asks for 32 * scaling, at least min_seq_length = 8; the shorter applies, ALiBi's on a tie.
    data = ByteTextDataset(bytes(range(256)) * 2, seq_len=32)
    loader_batches = list(DataLoader(data, batch_size=4))
    alibi_len = max(int(32 * scaling), 8)
    expected_lengths = [min(warmup_seq_length(b / 4, 0.5, 8, 32, 8), alibi_len) for b in range(4)]
    assert expected_lengths == ([8, 16, 16, 16] if scaling == 0.5 else [8, 8, 8, 8])
    assert len(batches) == len(reversed_batches) == 4
    for b, (first, second, loaded) in enumerate(zip(batches, reversed_batches, loader_batches)):
        warmup_len = warmup_seq_length(b / 4, 0.5, 8, 32, 8)
        truncate = warmup_len < alibi_len
        expected_ids = _cut(loaded["input_ids"], expected_lengths[b], truncate)
        assert torch.equal(first["input_ids"], expected_ids), b
        assert torch.equal(first["labels"], _cut(loaded["labels"], expected_lengths[b], truncate)), b
        assert first["input_ids"].shape[1] >= 8  # never below min_seq_length
        assert first.keys() == second.keys()
        for key in first:
            assert torch.equal(first[key], second[key]), (b, key)
    assert weights.keys() == reversed_weights.keys()
    for key in weights:
        assert torch.equal(weights[key], reversed_weights[key]), key
