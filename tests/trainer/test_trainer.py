import copy

import pytest
import torch
import torch.nn.functional as F

from composer import Trainer
from composer.core import Algorithm, Callback, DataSpec, Evaluator, Event
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader


def make_trainer(model=None, lr=0.1, **kwargs):
    torch.manual_seed(0)
    model = model or SimpleModel()
    kwargs.setdefault("train_dataloader", make_dataloader(num_samples=16, batch_size=4))
    kwargs.setdefault("max_duration", "1ep")
    kwargs.setdefault("optimizers", torch.optim.SGD(model.parameters(), lr=lr))
    return Trainer(model=model, progress_bar=False, seed=0, **kwargs)


def test_matches_a_hand_written_loop():
    torch.manual_seed(0)
    reference = SimpleModel()
    model = copy.deepcopy(reference)
    loader = make_dataloader(num_samples=16, batch_size=4)
    opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(reference.module(x), y).backward()
            opt.step()
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration="2ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        progress_bar=False,
    )
    trainer.fit()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)


@pytest.mark.parametrize("grad_accum", [2, 3])
def test_grad_accum_equals_big_batch_update(grad_accum):
    loader = make_dataloader(num_samples=10, batch_size=10)
    a, b = make_trainer(train_dataloader=loader), make_trainer(train_dataloader=loader, grad_accum=grad_accum)
    a.fit()
    b.fit()
    for p, q in zip(a.state.model.parameters(), b.state.model.parameters()):
        torch.testing.assert_close(p, q)
    torch.testing.assert_close(a.state.loss, b.state.loss)
    assert b.state.batch[0].shape[0] == 10  # the full batch again after the microbatch loop


def test_bf16_activations_and_fp32_loss():
    dtypes = {}

    class Spy(Callback):
        def after_forward(self, state, logger):
            dtypes["outputs"] = state.outputs.dtype

        def after_loss(self, state, logger):
            dtypes["loss"] = state.loss.dtype

        def eval_after_forward(self, state, logger):
            dtypes["eval"] = state.outputs.dtype

    trainer = make_trainer(precision="bf16", callbacks=[Spy()], eval_dataloader=make_dataloader(4, seed=1))
    trainer.fit()
    assert dtypes == {"outputs": torch.bfloat16, "loss": torch.float32, "eval": torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in trainer.state.model.parameters())


def test_eval_intervals_and_two_evaluators():
    counts = {}

    class CountEvals(Callback):
        def eval_start(self, state, logger):
            counts.setdefault(state.dataloader_label, []).append(int(state.timer.batch))

    trainer = make_trainer(
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),  # 4 batches per epoch
        max_duration="2ep",
        eval_dataloader=[
            Evaluator(label="every3ba", dataloader=make_dataloader(4, seed=1), eval_interval="3ba"),
            Evaluator(label="every_ep", dataloader=make_dataloader(4, seed=2), eval_interval="1ep"),
        ],
        callbacks=[CountEvals()],
    )
    trainer.fit()
    assert counts == {"every3ba": [3, 6, 8], "every_ep": [4, 8]}  # and the final weights (eval_at_fit_end)
    assert set(trainer.state.eval_metrics) == {"every3ba", "every_ep"}


def test_eval_metric_values_against_hand_count():
    logger = InMemoryLogger()
    eval_loader = make_dataloader(num_samples=12, batch_size=5, seed=3)
    trainer = make_trainer(eval_dataloader=eval_loader, loggers=[logger])
    trainer.fit()
    model = trainer.state.model.eval()
    with torch.no_grad():
        correct = sum((model.module(x).argmax(1) == y).sum().item() for x, y in eval_loader)
    assert logger.values("metrics/eval/Accuracy")[-1] == pytest.approx(correct / 12)
    assert trainer.eval()["metrics/eval/Accuracy"] == pytest.approx(correct / 12)


def test_metric_names_subset_and_unknown_name():
    evaluator = Evaluator(label="val", dataloader=make_dataloader(4), metric_names=["Accuracy"])
    trainer = make_trainer(eval_dataloader=evaluator)
    assert set(trainer.eval()) == {"metrics/val/Accuracy"}
    bad = make_trainer(eval_dataloader=Evaluator(label="val", dataloader=make_dataloader(4), metric_names=["F1"]))
    with pytest.raises(ValueError, match="F1"):
        bad.eval()


def test_fit_twice_continues_the_timer_and_training():
    trainer = make_trainer(max_duration="1ep")
    trainer.fit()
    first = [p.detach().clone() for p in trainer.state.model.parameters()]
    assert int(trainer.state.timer.epoch) == 1
    trainer.fit()  # already at max_duration: nothing more to do
    assert int(trainer.state.timer.batch) == 4
    trainer.fit(duration="2ep", train_dataloader=make_dataloader(num_samples=8, batch_size=4, seed=5))
    assert int(trainer.state.timer.epoch) == 3
    assert int(trainer.state.timer.batch) == 8
    assert any(not torch.equal(a, b) for a, b in zip(first, trainer.state.model.parameters()))


def test_predict_returns_outputs_per_batch():
    trainer = make_trainer()
    loader = make_dataloader(num_samples=10, batch_size=4)
    outputs = trainer.predict(loader)
    assert [o.shape for o in outputs] == [torch.Size([4, 3]), torch.Size([4, 3]), torch.Size([2, 3])]
    with torch.no_grad():
        expected = torch.cat([trainer.state.model.module(x) for x, _ in loader])
    torch.testing.assert_close(torch.cat(outputs), expected)
    assert trainer.state.model.training


def test_surgery_at_init_after_optimizer_was_built_trains_new_parameters():
    class ReplaceFirstLayer(Algorithm):
        def match(self, event, state):
            return event == Event.INIT

        def apply(self, event, state, logger):
            state.model.module[0] = torch.nn.Linear(8, 16)

    torch.manual_seed(0)
    model = SimpleModel()
    old = list(model.module[0].parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = make_trainer(model=model, optimizers=opt, algorithms=[ReplaceFirstLayer()])
    new_layer = model.module[0]
    before = new_layer.weight.detach().clone()
    trainer.fit()
    group = {id(p) for p in opt.param_groups[0]["params"]}
    assert id(new_layer.weight) in group and id(new_layer.bias) in group
    assert not any(id(p) in group for p in old)
    assert not torch.equal(before, new_layer.weight)


def test_composer_scheduler_multiplies_base_lr_per_batch():
    lrs = []

    class RecordLR(Callback):
        def batch_start(self, state, logger):
            lrs.append(state.optimizers[0].param_groups[0]["lr"])

    def halve_every_batch(state, ssr=1.0):
        return 0.5 ** int(state.timer.batch)

    make_trainer(lr=0.8, schedulers=halve_every_batch, callbacks=[RecordLR()]).fit()
    assert lrs == pytest.approx([0.8, 0.4, 0.2, 0.1])


def test_scale_schedule_ratio_scales_duration():
    trainer = make_trainer(max_duration="4ep", scale_schedule_ratio=0.5)
    assert str(trainer.state.max_duration) == "2ep"
    trainer.fit()
    assert int(trainer.state.timer.epoch) == 2
    with pytest.raises(ValueError, match="zero"):
        make_trainer(max_duration="1ep", scale_schedule_ratio=0.5)


def test_torch_scheduler_per_batch_and_per_epoch():
    for every_batch, expected in [(True, 0.1 * 0.5**4), (False, 0.1 * 0.5)]:
        model = SimpleModel()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        make_trainer(model=model, optimizers=opt, schedulers=sched, step_schedulers_every_batch=every_batch).fit()
        assert opt.param_groups[0]["lr"] == pytest.approx(expected)


def test_same_seed_same_result_and_subset_batches():
    a, b = make_trainer(train_subset_num_batches=2), make_trainer(train_subset_num_batches=2)
    a.fit()
    b.fit()
    assert int(a.state.timer.batch) == 2
    for p, q in zip(a.state.model.parameters(), b.state.model.parameters()):
        assert torch.equal(p, q)


def test_samples_and_tokens_counted_from_loader_batch():
    class DropHalf(Algorithm):
        def match(self, event, state):
            return event == Event.AFTER_DATALOADER

        def apply(self, event, state, logger):
            x, y = state.batch
            state.batch = (x[:2], y[:2])

    trainer = make_trainer(algorithms=[DropHalf()])
    trainer.fit()
    assert int(trainer.state.timer.sample) == 16


def test_token_budget_uses_token_counts():
    class TokenModel(SimpleModel):
        def forward(self, batch):
            return self.module(batch["x"])

        def loss(self, outputs, batch):
            return F.cross_entropy(outputs, batch["y"])

    x = torch.randn(8, 8)
    batches = [
        {"x": x[i : i + 2], "y": torch.zeros(2, dtype=torch.long), "input_ids": torch.ones(2, 5)} for i in (0, 2, 4, 6)
    ]
    trainer = make_trainer(model=TokenModel(), train_dataloader=batches, max_duration="30tok")
    trainer.fit()
    assert int(trainer.state.timer.token) == 30
    assert int(trainer.state.timer.batch) == 3


# ---- bad input ---------------------------------------------------------------------------------------------------


def test_model_not_composer_model():
    with pytest.raises(TypeError, match="ComposerClassifier"):
        Trainer(model=torch.nn.Linear(2, 2), train_dataloader=make_dataloader(), max_duration="1ep")


def test_empty_dataloader():
    with pytest.raises(ValueError, match="empty"):
        make_trainer(train_dataloader=[])
    exhausted = iter([])
    with pytest.raises(ValueError, match="no batches"):
        make_trainer(train_dataloader=exhausted).fit()


def test_token_duration_without_token_count():
    with pytest.raises(ValueError, match="no token count"):
        make_trainer(max_duration="100tok").fit()


def test_unknown_precision_lists_choices():
    with pytest.raises(ValueError, match="'fp32', 'amp', 'bf16'"):
        make_trainer(precision="fp64")


def test_grad_accum_larger_than_batch():
    with pytest.raises(ValueError, match="grad_accum"):
        make_trainer(grad_accum=5).fit()
    with pytest.raises(ValueError, match="grad_accum"):
        make_trainer(grad_accum=0)


def test_unknown_device():
    with pytest.raises(ValueError, match="device"):
        make_trainer(device="tpu")


def test_algorithm_that_raises_still_closes_callbacks():
    closed = []

    class Boom(Algorithm):
        def match(self, event, state):
            return event == Event.BATCH_START

        def apply(self, event, state, logger):
            raise RuntimeError("algorithm failed")

    class Closer(Callback):
        def close(self, state, logger):
            closed.append("close")

        def post_close(self):
            closed.append("post_close")

    trainer = make_trainer(algorithms=[Boom()], callbacks=[Closer()])
    with pytest.raises(RuntimeError, match="algorithm failed") as info:
        trainer.fit()
    assert "Boom" in " ".join(info.value.__notes__)
    assert closed == ["close", "post_close"]
    trainer.close()
    assert closed == ["close", "post_close"]


def test_context_manager_closes():
    closed = []

    class Closer(Callback):
        def close(self, state, logger):
            closed.append(True)

    with make_trainer(callbacks=[Closer()]) as trainer:
        trainer.fit()
    assert closed == [True]


def test_data_spec_device_transforms_apply_to_train_and_eval():
    seen = []

    def mark(batch):
        seen.append(batch[0].shape[0])
        return batch

    spec = DataSpec(make_dataloader(num_samples=8, batch_size=4), device_transforms=mark)
    trainer = make_trainer(
        train_dataloader=spec, eval_dataloader=DataSpec(make_dataloader(3, 3), device_transforms=mark)
    )
    trainer.fit()
    assert seen == [4, 4, 3]


def test_deterministic_mode_turns_on_deterministic_kernels():
    try:
        make_trainer(deterministic_mode=True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
