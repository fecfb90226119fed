"""Trainer(compile_config=...): the argument's checks, where compilation happens, checkpoints across compiled and eager
runs, and a bound on the recompilations of each method that changes shapes or modules (counted by dynamo's
CompileCounter backend: one per graph compiled, recompilations included).

Every test but one compiles with the 'eager' or 'aot_eager' backend (no C compiler) and resets dynamo before and
after. The one compiles with inductor, the default, on a tiny model: its bound (one static graph per image size) and
a relaunch with inductor's cache warm; benchmarks/compile_resizing.py runs the rest (fresh processes, a ResNet).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter, CompileCounterWithBackend
from torch._dynamo.utils import counters
from torch.utils.data import DataLoader, TensorDataset

import composer.distributed.parallelism as parallelism
from composer import Trainer
from composer.algorithms import LayerFreezing, ProgressiveResizing, SelectiveBackprop, SeqLengthWarmup
from composer.core import Algorithm, Callback, Event, Logger, State
from composer.datasets import ByteTextDataset
from composer.distributed.fsdp import FSDPConfig, full_model_state_dict
from composer.models import GPT, ComposerClassifier, GPTConfig
from composer.trainer.checkpointing import Checkpointing
from composer.trainer.compilation import Compilation, compile_options
from tests.common.models import SimpleModel, make_dataloader


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _trainer(model: torch.nn.Module, loader: Any, **kwargs: Any) -> Trainer:
    kwargs.setdefault("max_duration", "2ep")
    kwargs.setdefault("optimizers", torch.optim.SGD(model.parameters(), lr=0.1))
    return Trainer(model=model, train_dataloader=loader, device="cpu", seed=0, progress_bar=False, **kwargs)


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=key)


# ---- the argument -----------------------------------------------------------------------------------------------------


def test_off_by_default_and_true_uses_torch_defaults():
    model = SimpleModel()
    trainer = _trainer(model, make_dataloader())
    assert trainer.compilation is None and getattr(model, "_compiled_call_impl", None) is None
    assert compile_options(None) is None and compile_options(False) is None
    assert compile_options(True) == compile_options({}) == {"isolate_recompiles": True}  # {}: MosaicML's "on"
    assert compile_options({"backend": "eager", "isolate_recompiles": False}) == {
        "backend": "eager",
        "isolate_recompiles": False,
    }


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        ("yes", TypeError, r"compile_config='yes' \(str\) is not a compile configuration.*compile_config=True"),
        ({"backnd": "eager"}, ValueError, r"'backnd', which is not a torch.compile option. Did you mean 'backend'"),
        (
            {"backend": "eagr"},
            ValueError,
            r"backend='eagr' is not a torch.compile backend.*To fix: \{'backend': 'eager'",
        ),
        ({"fullgraph": "yes"}, TypeError, r"'fullgraph' must be True or False, got 'yes'"),
        ({"dynamic": 1}, TypeError, r"'dynamic' must be True, False or None"),
        ({"mode": "fastest"}, ValueError, r"mode='fastest' is not a torch.compile mode; expected None or one of"),
        ({"mode": "default", "options": {}}, ValueError, r"sets both 'mode' and 'options'.*keep one"),
        ({"recompile_limit": 0}, ValueError, r"'recompile_limit' must be a positive int"),
    ],
)
def test_a_bad_config_is_refused_naming_the_argument_the_value_and_the_fix(config, error, message):
    with pytest.raises(error, match=message) as caught:
        _trainer(SimpleModel(), make_dataloader(), compile_config=config)
    assert "compile_config=" in str(caught.value)


# ---- where it happens -------------------------------------------------------------------------------------------------


def _record_order(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    order: list[str] = []

    def spy(name: str, function: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            order.append(name)
            return function(*args, **kwargs)

        return recorded

    monkeypatch.setattr(Compilation, "compile", spy("compile", Compilation.compile))
    monkeypatch.setattr(Checkpointing, "load", spy("load", Checkpointing.load))
    monkeypatch.setattr(parallelism, "wrap_ddp", spy("ddp", parallelism.wrap_ddp))
    monkeypatch.setattr(parallelism, "prepare_fsdp_module", spy("fsdp", parallelism.prepare_fsdp_module))
    return order


def test_compiled_after_init_and_the_checkpoint_load_before_the_ddp_wrapper(monkeypatch):
    seen: list[type] = []

    class Surgery(Algorithm):  # at INIT: the compiled model is the one after surgery
        def match(self, event: Event, state: State) -> bool:
            return event == Event.INIT

        def apply(self, event: Event, state: State, logger: Logger) -> None:
            seen.append(type(getattr(state.model, "_compiled_call_impl", None)))
            state.model.module[1] = torch.nn.Tanh()

    order = _record_order(monkeypatch)
    model = SimpleModel()
    counter = CompileCounter()
    trainer = _trainer(model, make_dataloader(), compile_config={"backend": counter}, algorithms=[Surgery()])
    assert order == ["load", "compile", "ddp"] and seen == [type(None)]
    trainer.fit()
    assert counter.frame_count == 1  # 2 epochs of 4 batches: one graph
    x = make_dataloader().dataset.tensors[0]
    with torch.no_grad():
        torch.testing.assert_close(model((x, None)), model.module[2](torch.tanh(model.module[0](x))))


def _gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=32))


def _text(num_batches: int = 8) -> DataLoader:
    return DataLoader(ByteTextDataset(bytes(range(256)) * (num_batches // 2), seq_len=32), batch_size=4)


def test_with_fsdp_compiled_before_sharding_and_trains_as_eager_fsdp(monkeypatch, group_of_one):
    order = _record_order(monkeypatch)
    units = FSDPConfig(module_classes=["GPTBlock"], min_params=None)  # the root gathers the rest
    model, reference = _gpt(), _gpt()
    counter = CompileCounter()
    _trainer(model, _text(), max_duration="2ba", fsdp_config=units, compile_config={"backend": counter}).fit()
    # FSDP's hooks are never traced: the graphs are the parts of the forward between them.
    assert order == ["compile", "fsdp", "load"] and counter.frame_count >= 1
    _trainer(reference, _text(), max_duration="2ba", fsdp_config=units).fit()
    _assert_close(full_model_state_dict(model), full_model_state_dict(reference))


# ---- what it computes, and checkpoints ----------------------------------------------------------------------------------


def test_compiled_training_gives_the_eager_weights():
    eager, compiled = SimpleModel(), SimpleModel()
    compiled.load_state_dict(eager.state_dict())
    counter = CompileCounterWithBackend("aot_eager")  # forward and backward graphs traced by AOTAutograd
    _trainer(eager, make_dataloader()).fit()
    trainer = _trainer(compiled, make_dataloader(), compile_config={"backend": counter})
    trainer.fit()
    assert counter.frame_count == 1 and trainer.compilation is not None and trainer.compilation.compilations == 1
    _assert_close(_weights(compiled), _weights(eager))


@pytest.mark.parametrize("first", ["compiled", "eager"])
def test_compiled_and_eager_runs_resume_each_others_checkpoints(tmp_path: Path, first: str):
    compile_config = {"backend": CompileCounterWithBackend("aot_eager")}
    saving = {"compile_config": compile_config} if first == "compiled" else {}
    loading = {} if first == "compiled" else {"compile_config": compile_config}
    uninterrupted = SimpleModel()
    start = _weights(uninterrupted)
    _trainer(uninterrupted, make_dataloader(), **saving, save_folder=str(tmp_path), save_interval="1ep").fit()

    saved = torch.load(tmp_path / "ep1-ba4-rank0.pt", weights_only=True)["state"]["model"]
    assert list(saved) == list(start)  # plain names: no '_orig_mod.'
    resumed = SimpleModel()
    _trainer(resumed, make_dataloader(), **loading, load_path=str(tmp_path / "ep1-ba4-rank0.pt")).fit()
    _assert_close(_weights(resumed), _weights(uninterrupted))


# ---- recompilations bounded ---------------------------------------------------------------------------------------------


def _cnn(num_layers: int = 1) -> ComposerClassifier:
    torch.manual_seed(0)
    convs = [
        torch.nn.Sequential(torch.nn.Conv2d(4 if i else 3, 4, 3, padding=1), torch.nn.ReLU()) for i in range(num_layers)
    ]
    head = [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3)]
    return ComposerClassifier(torch.nn.Sequential(*convs, *head), num_classes=3)


def _images(num_samples: int = 32, batch_size: int = 4, size: int = 16) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(num_samples, 3, size, size, generator=generator)
    y = torch.randint(0, 3, (num_samples,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


class _Shapes(Callback):
    def __init__(self) -> None:
        self.shapes: set[tuple[int, ...]] = set()

    def before_forward(self, state: State, logger: Logger) -> None:
        inputs = state.batch["input_ids"] if isinstance(state.batch, dict) else state.batch[0]
        self.shapes.add(tuple(inputs.shape))


def test_progressive_resizing_compiles_one_graph_for_every_size():
    shapes, counter = _Shapes(), CompileCounter()
    resizing = ProgressiveResizing(initial_scale=0.25, finetune_fraction=0.2, scale_buckets=0)  # every size
    # grad_accum=2: the microbatches, new tensors, are marked too.
    trainer = _trainer(
        _cnn(),
        _images(num_samples=16),
        compile_config={"backend": counter},
        algorithms=[resizing],
        callbacks=[shapes],
        grad_accum=2,
    )
    trainer.fit()
    assert len({shape[-1] for shape in shapes.shapes}) >= 6  # 4 .. 16 pixels over 8 batches
    assert counter.frame_count == 1  # without marking: a static graph, then a dynamic one
    assert trainer.compilation is not None and trainer.compilation.dynamic_dims == {(0,): {2, 3}}


def test_inductor_compiles_one_graph_per_image_size_and_relaunches_from_its_warm_cache(tmp_path, monkeypatch):
    # Height and width marked dynamic, inductor still compiled a graph per size (the count said 1), and on the CPU
    # the graphs it cached crashed a relaunch in the first backward ('expected size 4==4, stride 48==147').
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    for run in ("cold", "warm"):  # warm: a new start (dynamo reset) that finds the first run's graphs on disk
        torch._dynamo.reset()
        shapes, compiled = _Shapes(), counters["aot_autograd"]["total"]  # graphs AOTAutograd compiled or loaded
        trainer = _trainer(
            _cnn(),
            _images(num_samples=8, size=8),
            max_duration="1ep",
            compile_config=True,
            algorithms=[ProgressiveResizing(initial_scale=0.5, finetune_fraction=0.0)],  # compiled: 4 scales
            callbacks=[shapes],
        )
        trainer.fit()
        assert trainer.compilation is not None
        assert counters["aot_autograd"]["total"] - compiled == 2 == trainer.compilation.compilations, run
        assert {shape[-1] for shape in shapes.shapes} == {4, 5}, run  # scales 1/2 and 2/3 of 8 pixels
        assert not trainer.compilation.fell_back_to_eager
        assert trainer.compilation.static_dims == {(0,): {2, 3}} and not trainer.compilation.dynamic_dims


def test_a_fall_back_to_eager_at_the_recompile_limit_warns_and_the_count_is_the_graphs_compiled():
    counter = CompileCounter()
    resizing = ProgressiveResizing(initial_scale=0.5, finetune_fraction=0.0, scale_buckets=0)  # 8, 10, 12, 14 px
    trainer = _trainer(
        _cnn(),
        _images(num_samples=16),
        max_duration="1ep",
        compile_config={"backend": counter, "dynamic": False, "recompile_limit": 2},
        algorithms=[resizing],
    )
    with pytest.warns(UserWarning, match=r"recompile_limit \(2\) after 2 graph\(s\), and from now on runs eagerly"):
        trainer.fit()
    assert trainer.compilation is not None and trainer.compilation.fell_back_to_eager
    assert trainer.compilation.compilations == counter.frame_count == 2


def test_dynamic_false_with_a_method_that_resizes_warns_and_says_the_fix():
    resizing = ProgressiveResizing(initial_scale=0.5, finetune_fraction=0.0)
    trainer = _trainer(
        _cnn(),
        _images(num_samples=8),
        max_duration="1ep",
        compile_config={"backend": CompileCounter(), "dynamic": False},
        algorithms=[resizing],
    )
    with pytest.warns(UserWarning, match=r"dynamic=False, but the algorithms change dimensions \[2, 3\].*To fix"):
        trainer.fit()


def test_selective_backprop_compiles_the_selection_pass_and_one_training_graph():
    shapes, counter = _Shapes(), CompileCounter()
    selection = SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=2)
    loader = _images(num_samples=14)  # batches of 4, 2 kept on every other one, and a last batch of 2
    trainer = _trainer(_cnn(), loader, compile_config={"backend": counter}, algorithms=[selection], callbacks=[shapes])
    trainer.fit()
    assert {shape[0] for shape in shapes.shapes} == {2, 4}
    assert counter.frame_count <= 2  # the selection pass (no_grad, half-size images), the training forward


def test_seq_length_warmup_compiles_at_most_two_graphs():
    shapes, counter = _Shapes(), CompileCounter()
    model, data = _gpt(), _text(num_batches=4)
    warmup = SeqLengthWarmup(duration=0.75, min_seq_length=8, max_seq_length=32, step_size=8, truncate=True)
    trainer = _trainer(
        model, data, max_duration="1ep", compile_config={"backend": counter}, algorithms=[warmup], callbacks=[shapes]
    )
    trainer.fit()
    assert {shape[1] for shape in shapes.shapes} == {8, 16, 24, 32}
    assert counter.frame_count <= 2  # the full-length pre-allocation pass, then one graph dynamic in the length


def test_layer_freezing_compiles_once_per_change_and_never_falls_back_to_eager():
    counter = CompileCounter()
    model = _cnn(num_layers=2)  # 3 layers with parameters: up to 2 frozen
    # recompile_limit=1: were the graphs of earlier freezes kept, the second freeze would run eagerly, uncounted.
    config = {"backend": counter, "recompile_limit": 1}
    freezing = LayerFreezing(freeze_start=0.0, freeze_level=1.0)
    trainer = _trainer(model, _images(num_samples=4), max_duration="3ep", compile_config=config, algorithms=[freezing])
    trainer.fit()
    assert trainer.compilation is not None
    changes = trainer.compilation.regions - 1
    assert changes == 2 and sum(not p.requires_grad for p in model.parameters()) == 4
    assert counter.frame_count == changes  # one graph per freeze state that trained (the last one never did)


def test_surgery_after_compilation_recompiles_once_instead_of_running_a_stale_graph():
    class SwapActivation(Algorithm):
        def match(self, event: Event, state: State) -> bool:
            return event == Event.EPOCH_END and int(state.timer.epoch) == 1

        def apply(self, event: Event, state: State, logger: Logger) -> None:
            state.model.module[1] = torch.nn.Tanh()

    class Outputs(Callback):
        def __init__(self) -> None:
            self.correct: list[bool] = []

        def after_forward(self, state: State, logger: Logger) -> None:
            module = state.model.module
            with torch.no_grad():
                expected = module[2](module[1](module[0](state.batch[0])))
            self.correct.append(torch.allclose(state.outputs, expected))

    # Options that drop the guards on modules: dynamo alone would keep running the ReLU graph after the swap.
    options = {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
    counter, outputs = CompileCounter(), Outputs()
    trainer = _trainer(
        SimpleModel(),
        make_dataloader(),
        compile_config={"backend": counter, "options": options},
        algorithms=[SwapActivation()],
        callbacks=[outputs],
    )
    trainer.fit()
    assert outputs.correct == [True] * 8
    assert trainer.compilation is not None and trainer.compilation.regions == 2
    assert trainer.compilation.compilations == counter.frame_count == 2
