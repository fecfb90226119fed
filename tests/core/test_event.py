import warnings

import pytest

from composer.core.callback import Callback
from composer.core.event import Event, EventDeprecationWarning

SEED_EVENTS = [
    "INIT",
    "FIT_START",
    "EPOCH_START",
    "EPOCH_END",
    "AFTER_DATALOADER",
    "BATCH_START",
    "BATCH_END",
    "BEFORE_TRAIN_BATCH",
    "AFTER_TRAIN_BATCH",
    "BEFORE_FORWARD",
    "AFTER_FORWARD",
    "BEFORE_LOSS",
    "AFTER_LOSS",
    "BEFORE_BACKWARD",
    "AFTER_BACKWARD",
    "BATCH_CHECKPOINT",
    "EPOCH_CHECKPOINT",
    "EVAL_START",
    "EVAL_END",
    "EVAL_BATCH_START",
    "EVAL_BATCH_END",
    "EVAL_BEFORE_FORWARD",
    "EVAL_AFTER_FORWARD",
    "FIT_END",
]


def test_every_seed_event_exists_and_value_is_lowercase_name():
    assert sorted(e.name for e in Event) == sorted(SEED_EVENTS)
    for event in Event:
        assert event.value == event.name.lower()


@pytest.mark.parametrize("alias,target", [("TRAINING_START", Event.FIT_START), ("TRAINING_END", Event.FIT_END)])
def test_aliases_warn_and_resolve(alias, target):
    with pytest.warns(EventDeprecationWarning, match=target.name):
        assert getattr(Event, alias) is target
    with pytest.warns(EventDeprecationWarning):
        assert Event(alias.lower()) is target


def test_lookup_is_case_insensitive_and_unknown_raises():
    assert Event("Batch_End") is Event.BATCH_END
    assert Event("batch_end") is Event.BATCH_END
    with pytest.raises(ValueError):
        Event("not_an_event")
    with pytest.raises(AttributeError):
        Event.NOT_AN_EVENT  # noqa: B018


def test_no_warning_for_current_names():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Event.FIT_START.value == "fit_start"


def test_before_after_pairs_share_canonical_names():
    befores = [e for e in Event if e.is_before_event]
    afters = [e for e in Event if e.is_after_event]
    assert not set(befores) & set(afters)
    assert sorted(e.canonical_name for e in befores) == sorted(e.canonical_name for e in afters)
    for neither in (Event.INIT, Event.AFTER_DATALOADER, Event.BATCH_CHECKPOINT, Event.EPOCH_CHECKPOINT):
        assert not neither.is_before_event and not neither.is_after_event


def test_docstring_loop_lists_every_event_in_firing_order():
    lines = [line.strip() for line in Event.__doc__.splitlines()]
    # Position of the line that fires each event (a line that starts with its name).
    positions = {e: next(i for i, line in enumerate(lines) if line.split(" ")[0] == e.name) for e in Event}
    train_order = [
        Event.INIT,
        Event.FIT_START,
        Event.EPOCH_START,
        Event.AFTER_DATALOADER,
        Event.BATCH_START,
        Event.BEFORE_TRAIN_BATCH,
        Event.BEFORE_FORWARD,
        Event.AFTER_FORWARD,
        Event.BEFORE_LOSS,
        Event.AFTER_LOSS,
        Event.BEFORE_BACKWARD,
        Event.AFTER_BACKWARD,
        Event.AFTER_TRAIN_BATCH,
        Event.BATCH_END,
        Event.BATCH_CHECKPOINT,
        Event.EPOCH_END,
        Event.EPOCH_CHECKPOINT,
        Event.FIT_END,
        Event.EVAL_START,
        Event.EVAL_BATCH_START,
        Event.EVAL_BEFORE_FORWARD,
        Event.EVAL_AFTER_FORWARD,
        Event.EVAL_BATCH_END,
        Event.EVAL_END,
    ]
    assert [positions[e] for e in train_order] == sorted(positions[e] for e in train_order)


def test_callback_methods_equal_events():
    public = {
        name
        for name in dir(Callback)
        if not name.startswith("_")
        and callable(getattr(Callback, name))
        and name not in {"state_dict", "load_state_dict"}
    }
    assert public == {e.value for e in Event} | {"run_event", "close", "post_close"}
