"""The Trainer's arguments: single objects, classes, wrong kinds, optimizers, schedulers, unknown keywords
(issue 17, "Mistakes get raw errors"), and optimizers that do not train the model ("Wrong results with no warning")."""

import inspect
import re
import warnings

import pytest
import torch

from composer import Trainer
from composer.algorithms import LabelSmoothing, LayerFreezing
from composer.callbacks import LRMonitor
from composer.loggers import InMemoryLogger
from composer.trainer.arguments import ArgumentError, argument_problems
from composer.trainer.keywords import explain_unknown_keywords
from tests.common import SimpleModel, make_dataloader


def make_trainer(model=None, **kwargs):
    torch.manual_seed(0)
    model = model or SimpleModel()
    kwargs.setdefault("train_dataloader", make_dataloader(num_samples=16, batch_size=4))
    kwargs.setdefault("max_duration", "1ep")
    if "optimizers" not in kwargs:
        kwargs["optimizers"] = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model=model, progress_bar=False, seed=0, **kwargs)


# ---- single objects where a list is expected ----------------------------------------------------------------------


def test_single_objects_act_as_one_element_lists():
    memory = InMemoryLogger()
    single = make_trainer(algorithms=LabelSmoothing(0.1), callbacks=LRMonitor(), loggers=memory)
    single.fit()
    # The callback ran and the destination received its values: the learning rate, 0.1 at every batch.
    assert memory.values("lr-SGD/group0") == [0.1] * 4
    # The same training as with one-element lists.
    listed = make_trainer(algorithms=[LabelSmoothing(0.1)], callbacks=[LRMonitor()], loggers=[InMemoryLogger()])
    listed.fit()
    for p, q in zip(single.state.model.parameters(), listed.state.model.parameters()):
        torch.testing.assert_close(p, q)
    # And not the same as without label smoothing: the algorithm was applied.
    plain = make_trainer()
    plain.fit()
    assert not torch.equal(next(plain.state.model.parameters()), next(single.state.model.parameters()))


# ---- a class where an instance is expected, and objects of the wrong kind -----------------------------------------


@pytest.mark.parametrize(
    ("argument", "value", "name"),
    [
        ("algorithms", [LabelSmoothing], "LabelSmoothing"),
        ("algorithms", LabelSmoothing, "LabelSmoothing"),
        ("callbacks", [LRMonitor], "LRMonitor"),
        ("loggers", [InMemoryLogger], "InMemoryLogger"),
    ],
)
def test_a_class_asks_for_an_instance(argument, value, name):
    with pytest.raises(TypeError, match=rf"^{argument}=\[{name}\] holds the class {name}.*pass an instance: {name}\("):
        make_trainer(**{argument: value})


@pytest.mark.parametrize(
    ("argument", "value", "expected"),
    [
        (
            "callbacks",
            [LabelSmoothing(0.1)],
            r"callbacks takes callback objects .* LabelSmoothing belongs in algorithms=",
        ),
        ("loggers", [LRMonitor()], r"loggers takes logger destination objects .* LRMonitor belongs in callbacks="),
        ("algorithms", [LRMonitor()], r"LRMonitor belongs in callbacks="),
        ("algorithms", ["label_smoothing"], r"holds the name 'label_smoothing'.*pass LabelSmoothing\(\.\.\.\)"),
        ("callbacks", ["lr_monitor"], r"pass LRMonitor\(\.\.\.\)"),
        ("algorithms", [3], r"algorithms takes algorithm objects .* but got 3 \(int\)"),
    ],
)
def test_a_wrong_kind_names_the_argument_the_value_and_what_is_accepted(argument, value, expected):
    with pytest.raises(TypeError, match=expected):
        make_trainer(**{argument: value})


# ---- optimizers and schedulers -------------------------------------------------------------------------------------


def test_an_optimizer_class_asks_for_an_instance_on_the_models_parameters():
    with pytest.raises(TypeError, match=r"optimizers=SGD is the class SGD.*SGD\(model.parameters\(\), lr=\.\.\.\)"):
        make_trainer(optimizers=torch.optim.SGD)


def test_an_optimizer_name_points_to_the_python_and_the_recipe_forms():
    with pytest.raises(TypeError) as error:
        make_trainer(optimizers="adam")
    message = str(error.value)
    assert message.startswith("optimizers='adam' is a name")
    assert "AdamHparams(lr=...).initialize_object(model.parameters())" in message
    assert "optimizer: {adam: {lr: ...}}" in message
    assert "surgery" not in message


def test_a_scheduler_passed_as_optimizer_says_where_each_goes():
    model = SimpleModel()
    scheduler = torch.optim.lr_scheduler.StepLR(torch.optim.SGD(model.parameters(), lr=0.1), step_size=1)
    with pytest.raises(TypeError, match=r"learning-rate scheduler \(StepLR\).*optimizers= .*schedulers="):
        make_trainer(model, optimizers=scheduler)


@pytest.mark.parametrize(
    ("schedulers", "expected"),
    [
        (torch.optim.lr_scheduler.CosineAnnealingLR, r"is the class CosineAnnealingLR.*CosineAnnealingLR\(optimizer"),
        ("cosine", r"schedulers='cosine' is a name.*recipe"),
        (3, r"schedulers=3 \(int\) is not a scheduler"),
    ],
)
def test_wrong_scheduler_values(schedulers, expected):
    with pytest.raises(TypeError, match=expected):
        make_trainer(schedulers=schedulers)


def test_an_optimizer_passed_as_scheduler():
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"is an optimizer \(SGD\), not a scheduler: pass it as optimizers="):
        make_trainer(model, optimizers=optimizer, schedulers=[optimizer])


def test_a_scheduler_on_another_optimizer_is_refused():
    model = SimpleModel()
    other = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(other, step_size=1)
    with pytest.raises(ValueError, match=r"StepLR built on an optimizer the Trainer does not use"):
        make_trainer(model, optimizers=torch.optim.SGD(model.parameters(), lr=0.1), schedulers=scheduler)


# ---- unknown keywords ------------------------------------------------------------------------------------------------


def test_an_unknown_keyword_suggests_the_parameter():
    with pytest.raises(
        TypeError, match=re.escape("unexpected keyword argument 'max_epochs'. Did you mean max_duration='2ep'?")
    ):
        make_trainer(max_epochs=2)
    with pytest.raises(TypeError, match=r"'optimiser'. Did you mean optimizers\?"):
        make_trainer(optimiser=None)
    with pytest.raises(TypeError, match=r"'lr'. The learning rate belongs to the optimizer"):
        make_trainer(lr=0.1)
    with pytest.raises(TypeError, match=r"'zzz'. The parameters are: model, train_dataloader, max_duration"):
        make_trainer(zzz=1)


def test_the_signature_stays_explicit():
    parameters = inspect.signature(Trainer).parameters
    wrapped = inspect.signature(Trainer.__init__.__wrapped__).parameters  # type: ignore[attr-defined]
    assert list(parameters) == [name for name in wrapped if name != "self"]
    assert all(p.kind == inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert parameters["max_duration"].default is inspect.Parameter.empty
    assert parameters["step_schedulers_every_batch"].default is True
    assert "max_epochs" not in parameters


def test_explain_unknown_keywords_passes_known_ones_through():
    class Run:
        @explain_unknown_keywords
        def __init__(self, *, a: int, b: int = 2) -> None:
            self.total = a + b

    assert Run(a=1).total == 3
    with pytest.raises(TypeError, match=r"^Run\(\) got an unexpected keyword argument 'c'"):
        Run(a=1, c=3)  # type: ignore[call-arg]


# ---- optimizers that do not train the model -------------------------------------------------------------------------


def test_an_optimizer_over_another_models_parameters_is_refused():
    model, other = SimpleModel(), SimpleModel()
    counts = (len(list(other.parameters())), len(list(model.parameters())))
    with pytest.raises(
        ValueError,
        match=rf"holds {counts[0]} parameters and none of them is the model's \(SimpleModel has {counts[1]}\)",
    ):
        make_trainer(model, optimizers=torch.optim.SGD(other.parameters(), lr=0.1))


def test_trainable_parameters_in_no_optimizer_warn_with_the_counts():
    model = SimpleModel()
    first, second = model.module[0], model.module[2]
    missing_values = sum(p.numel() for p in second.parameters())  # 16 * 3 weights + 3 biases
    with pytest.warns(
        UserWarning,
        match=rf"2 of the model's 4 trainable parameters \({missing_values} values: module.2.weight, module.2.bias\) are in no optimizer",
    ):
        make_trainer(model, optimizers=torch.optim.SGD(first.parameters(), lr=0.1))


def test_frozen_parameters_need_no_optimizer():
    model = SimpleModel()
    for p in model.module[2].parameters():
        p.requires_grad_(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_trainer(model, optimizers=torch.optim.SGD(model.module[0].parameters(), lr=0.1))


def test_layer_freezing_raises_no_optimizer_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = make_trainer(algorithms=[LayerFreezing(freeze_start=0.0, freeze_level=1.0)], max_duration="2ep")
        trainer.fit()
    assert not any("in no optimizer" in str(w.message) for w in caught)
    assert not all(p.requires_grad for p in trainer.state.model.parameters())  # it did freeze layers


def test_every_value_problem_of_the_arguments_is_raised_at_once():
    """trainer/arguments.py is the one validator of the values: the Trainer raises all its problems, named by argument."""
    model, loader = SimpleModel(), make_dataloader(num_samples=16, batch_size=4)
    with pytest.raises(ArgumentError) as info:
        Trainer(
            model=model,
            train_dataloader=loader,
            max_duration="1ep",
            grad_clip_norm=0.0,
            train_subset_num_batches=0,
            seed=-1,
            precision="fp64",
        )
    problems = info.value.problems
    assert [p.argument for p in problems] == ["grad_clip_norm", "precision", "train_subset_num_batches", "seed"]
    message = str(info.value)
    assert message.startswith("4 problems in the Trainer's arguments:\n  grad_clip_norm=0.0; expected a finite number")
    assert (
        "seed=-1; expected an integer in [0, 4294967295] (2**32 - 1), or None for a random seed. To fix: seed=0."
        in message
    )
    assert "precision='fp64'; expected one of ['fp32', " in message
    # The same problems, as a recipe reports them at its keys (composer.config.field_checks).
    assert problems[-1].for_recipe().endswith("or null for a random seed. Set seed: 0.")


def test_argument_problems_leave_alone_what_they_do_not_check():
    assert argument_problems({"max_duration": "2ep", "seed": None, "save_interval": lambda state: True}) == []
    (problem,) = argument_problems({"max_duration": "1ep", "scale_schedule_ratio": 0.5})
    assert problem.argument == "max_duration and scale_schedule_ratio" and "rounds down to zero" in str(problem)
    (problem,) = argument_problems({"grad_accum": "automatic"})
    assert str(problem).endswith("To fix: grad_accum='auto' or grad_accum=2.")
    assert problem.for_recipe().endswith("Set grad_accum: auto, or grad_accum: 2.")


# ---- the checks Checkpointing, Parallelism and Preemption ran themselves, now with the others ---------------------


@pytest.mark.parametrize(
    ("arguments", "argument", "expected"),
    [
        ({"autoresume": True}, "autoresume", "autoresume=True needs save_folder: it resumes from the newest"),
        (
            {"autoresume": True, "save_folder": "ckpt", "save_weights_only": True},
            "autoresume",
            "autoresume=True cannot resume from weights-only checkpoints; set save_weights_only=False",
        ),
        (
            {"autoresume": True, "save_folder": "ckpt/{run_name}"},
            "autoresume",
            "autoresume=True with save_folder='ckpt/{run_name}' needs a run_name",
        ),
        (
            {"load_ignore_keys": "module.2.*"},
            "load_ignore_keys",
            "load_ignore_keys='module.2.*'; expected a list of glob patterns. To fix: load_ignore_keys=['module.2.*'].",
        ),
        ({"on_upload_failure": "keep"}, "on_upload_failure", "on_upload_failure='keep'; expected one of ['raise', "),
        ({"preemption_grace_period": 0}, "preemption_grace_period", "preemption_grace_period=0; expected the seconds"),
        ({"preemption_grace_period": "20"}, "preemption_grace_period", "preemption_grace_period='20'; expected"),
        ({"preemption_grace_period": 1e10}, "preemption_grace_period", "below what the launcher allows"),
        ({"fsdp_config": 3}, "fsdp_config", "fsdp_config=3; expected an FSDPConfig, a mapping of its fields, or None"),
        (
            {"fsdp_config": {}, "precision": "amp"},
            "precision",
            "precision='amp' cannot be combined with fsdp_config: its gradient scaler decides on each rank's shard",
        ),
    ],
)
def test_checkpoint_preemption_and_parallelism_arguments_are_checked_with_the_others(arguments, argument, expected):
    (problem,) = argument_problems(arguments)
    assert problem.argument == argument and expected in str(problem)


def test_a_recipe_reports_them_at_their_keys():
    (fsdp, policy) = argument_problems({"on_upload_failure": "keep", "fsdp_config": 3})
    assert policy.for_recipe() == (
        "received 'keep'; expected one of ['raise', 'keep_local']: 'raise' ends the run when an upload fails for good, "
        "'keep_local' trains on and keeps the checkpoints locally until the store answers again. Set "
        "on_upload_failure: raise, or on_upload_failure: keep_local."
    )
    assert (
        fsdp.for_recipe() == "received 3; expected an FSDPConfig, a mapping of its fields, or null (no FSDP); got int."
    )
    (autoresume,) = argument_problems({"autoresume": True, "save_folder": "ckpt", "save_weights_only": True})
    assert autoresume.argument == "autoresume" and autoresume.for_recipe() == str(autoresume)


def test_what_those_checks_accept_passes():
    accepted = {
        "autoresume": True,
        "save_folder": "ckpt/{run_name}",
        "run_name": "fixed",
        "load_ignore_keys": ["module.2.*"],
        "on_upload_failure": "keep_local",
        "preemption_grace_period": 0.5,
        "fsdp_config": {},
        "precision": "bf16",  # which FSDP takes
        "grad_accum": "AUTO",
    }
    assert argument_problems(accepted) == []
    assert argument_problems({"autoresume": True, "save_folder": "ckpt", "save_filename": "{run_name}.pt"})


def test_the_trainer_raises_them_before_it_builds_anything():
    with pytest.raises(ArgumentError) as info:
        make_trainer(autoresume=True, save_weights_only=True, preemption_grace_period=-1.0, on_upload_failure="no")
    assert [p.argument for p in info.value.problems] == ["preemption_grace_period", "autoresume", "on_upload_failure"]
