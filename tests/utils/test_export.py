"""composer.utils.export_for_inference and the ExportForInference callback: the files run like the eager network.

One training run (digits-shaped data, a SimpleCNN with BlurPool, SqueezeExcite and ChannelsLast) exports TorchScript
and ONNX (the dynamo exporter, the slow part: about 5-10 s) through the callback; the other tests use TorchScript or
the TorchScript-based ONNX exporter, which take a fraction of a second.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import BlurPool, ChannelsLast, SqueezeExcite, StochasticDepth
from composer.callbacks import ExportForInference
from composer.models import cifar_resnet, simple_cnn
from composer.utils import ExportError, export_for_inference
from composer.utils.export import is_onnx_available

needs_onnx = pytest.mark.skipif(not is_onnx_available(), reason="onnx/onnxruntime are not installed")


def _digits(num: int = 8, size: int = 16, classes: int = 10, seed: int = 0) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(num, 1, size, size, generator=generator)
    return DataLoader(TensorDataset(images, torch.arange(num) % classes), batch_size=4)


def _load_torchscript(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return torch.jit.load(str(path))


def _onnx_run(path, x: torch.Tensor) -> torch.Tensor:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A SimpleCNN trained 2 batches with three surgery methods, exported by the callback in both formats."""
    folder = tmp_path_factory.mktemp("export")
    torch.manual_seed(0)
    model = simple_cnn(in_channels=1, widths=(8, 16), num_classes=10)
    export = ExportForInference(str(folder / "{run_name}" / "cnn"))
    algorithms = [
        BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True),
        SqueezeExcite(latent_channels=0.5, min_channels=8),
        ChannelsLast(),
    ]
    trainer = Trainer(
        model=model,
        train_dataloader=_digits(),
        max_duration="2ba",
        algorithms=algorithms,
        callbacks=[export],
        progress_bar=False,
        run_name="digits",
        seed=0,
    )
    trainer.fit()
    trainer.close()
    return model, export


@needs_onnx
def test_the_callback_exports_both_formats_at_fit_end(trained):
    model, export = trained
    assert [(r.save_format, r.path.name, r.path.parent.name) for r in export.results] == [
        ("torchscript", "cnn.pt", "digits"),
        ("onnx", "cnn.onnx", "digits"),
    ]
    assert export.results[1].exporter == "torch.onnx.export(dynamo=True)" and export.results[1].fallback_reason is None
    assert all(r.max_abs_error is not None and r.max_abs_error < 1e-4 for r in export.results)
    assert model.training  # the trained model itself stays as it was


@needs_onnx
def test_exports_match_eval_mode_eager_at_another_batch_size(trained):
    model, export = trained
    x = torch.rand(5, 1, 16, 16, generator=torch.Generator().manual_seed(3))  # trained on batches of 4
    model.eval()
    try:
        with torch.no_grad():
            expected = model.module(x)
    finally:
        model.train()
    torchscript = _load_torchscript(export.results[0].path)
    torch.testing.assert_close(torchscript(x), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(_onnx_run(export.results[1].path, x), expected, atol=1e-4, rtol=1e-4)


@needs_onnx
def test_surgery_is_in_the_export(trained):
    import onnx

    model, export = trained
    graph = onnx.load(str(export.results[1].path)).graph
    # SimpleCNN has 2 convolutions; BlurPool adds a blur (a depthwise conv) after each max-pool, and each
    # SqueezeExcite gate ends in a Sigmoid.
    kinds = [type(m).__name__ for m in model.modules()]
    assert kinds.count("BlurMaxPool2d") == 2 and kinds.count("SqueezeExcite2d") >= 1, kinds
    ops = [node.op_type for node in graph.node]
    assert ops.count("Conv") == 2 + 2, ops
    assert ops.count("Sigmoid") == kinds.count("SqueezeExcite2d"), ops
    dims = [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert isinstance(dims[0], str) and dims[1:] == [1, 16, 16]  # the batch dimension is free


def test_stochastic_depth_exports_a_deterministic_graph_equal_to_eval_mode(tmp_path):
    torch.manual_seed(0)
    model = cifar_resnet(depth=8, num_classes=3)
    images = DataLoader(TensorDataset(torch.rand(8, 3, 8, 8), torch.arange(8) % 3), batch_size=4)
    depth = StochasticDepth("block", "ResNetBasicBlock", drop_rate=0.5, drop_distribution="uniform")
    trainer = Trainer(model=model, train_dataloader=images, max_duration="2ba", algorithms=[depth],
                      progress_bar=False, seed=0)  # fmt: skip
    trainer.fit()
    trainer.close()
    blocks = [m for m in model.modules() if type(m).__name__ == "StochasticBasicBlock"]
    assert len(blocks) == 3 and model.training
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    # Eval mode: each block scales its residual branch by 1 - drop_rate and draws nothing.
    model.eval()
    with torch.no_grad():
        expected = model.module(x)
    model.train()
    result = export_for_inference(model, "torchscript", tmp_path / "sd.pt", x)
    loaded = _load_torchscript(result.path)
    assert "aten::rand" not in str(loaded.inlined_graph)
    first, second = loaded(x), loaded(x)
    assert torch.equal(first, second)
    torch.testing.assert_close(first, expected, atol=1e-5, rtol=1e-5)
    if is_onnx_available():
        onnx_result = export_for_inference(model, "onnx", tmp_path / "sd.onnx", x, dynamo=False)
        torch.testing.assert_close(_onnx_run(onnx_result.path, x), expected, atol=1e-4, rtol=1e-4)


class Doubler(nn.Module):
    def forward(self, x):
        return 2 * x


def test_wrappers_and_hooks_stay_out_of_the_export(tmp_path):
    torch.manual_seed(0)
    model = simple_cnn(in_channels=1, widths=(4,), num_classes=3)
    calls = []
    model.module.register_forward_pre_hook(lambda module, args: calls.append(1))  # a monitor's hook, say
    model.module.fc.register_forward_hook(lambda module, args, out: out + 100.0)
    compiled = torch.compile(model)  # not run: torch.compile compiles lazily, and the export unwraps it
    x = torch.rand(2, 1, 8, 8)
    result = export_for_inference(compiled, "torchscript", tmp_path / "m.pt", x)
    loaded = _load_torchscript(result.path)
    assert not any("_orig_mod" in name for name, _ in loaded.named_parameters())
    assert {name for name, _ in loaded.named_parameters()} == {n for n, _ in model.module.named_parameters()}
    model.eval()
    with torch.no_grad():
        features = torch.flatten(model.module.pool(model.module.features(x)), 1)
        plain = nn.functional.linear(features, model.module.fc.weight, model.module.fc.bias)
    model.train()
    torch.testing.assert_close(loaded(x), plain)  # without the +100 hook
    assert calls == [] and len(model.module._forward_pre_hooks) == 1  # the original keeps its hooks
    model.compile()  # compiled in place, as Trainer(compile_config=...) does: the copy runs uncompiled
    again = export_for_inference(model, "torchscript", tmp_path / "again.pt", x)
    torch.testing.assert_close(_load_torchscript(again.path)(x), plain)


def test_surgery_algs_and_transforms_apply_to_the_copy_only(tmp_path):
    from composer.functional import apply_blurpool

    torch.manual_seed(0)
    model = simple_cnn(in_channels=1, widths=(4,), num_classes=3)
    x = torch.rand(2, 1, 8, 8)
    result = export_for_inference(model, "torchscript", tmp_path / "m.pt", x, surgery_algs=[apply_blurpool],
                                  transforms=[lambda net: nn.Sequential(net, Doubler())])  # fmt: skip
    assert not any(type(m).__name__.startswith("Blur") for m in model.modules())
    blurred = simple_cnn(in_channels=1, widths=(4,), num_classes=3)
    blurred.load_state_dict(model.state_dict())
    apply_blurpool(blurred)
    blurred.eval()
    with torch.no_grad():
        expected = 2 * blurred.module(x)
    torch.testing.assert_close(_load_torchscript(result.path)(x), expected)


@needs_onnx
def test_onnx_falls_back_to_the_torchscript_exporter_with_the_reason(tmp_path, monkeypatch):
    original = torch.onnx.export

    def refuse_dynamo(*args, **kwargs):
        if kwargs.get("dynamo"):
            raise RuntimeError("unsupported operator aten::foo\nmore details")
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", refuse_dynamo)
    model = simple_cnn(in_channels=1, widths=(4,), num_classes=3)
    with pytest.warns(UserWarning, match="TorchScript-based exporter: the dynamo-based exporter failed: RuntimeError"):
        result = export_for_inference(model, "onnx", tmp_path / "m.onnx", torch.rand(1, 1, 8, 8))
    assert result.exporter == "torch.onnx.export(dynamo=False)"
    assert result.fallback_reason == "the dynamo-based exporter failed: RuntimeError: unsupported operator aten::foo"
    x = torch.rand(3, 1, 8, 8)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(_onnx_run(result.path, x), model.module(x), atol=1e-4, rtol=1e-4)


class BatchSizeBaked(nn.Module):
    def forward(self, x):
        return x * int(x.shape[0])  # a Python number while tracing: the export keeps the sample's value


class SamplesInEval(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


def test_verification_catches_a_wrong_export(tmp_path):
    with pytest.raises(ExportError, match="differs from the eager network"):
        export_for_inference(BatchSizeBaked(), "torchscript", tmp_path / "a.pt", torch.ones(2, 3))
    with pytest.raises(ExportError, match=r"draws random numbers \(\['aten::rand"):
        export_for_inference(SamplesInEval(), "torchscript", tmp_path / "b.pt", torch.ones(2, 3))
    # A fixed batch size is what the first one can export.
    result = export_for_inference(BatchSizeBaked(), "torchscript", tmp_path / "c.pt", torch.ones(2, 3),
                                  dynamic_batch=False)  # fmt: skip
    assert result.max_abs_error == 0.0


def test_bad_arguments_are_named(tmp_path):
    model = simple_cnn(in_channels=1, widths=(4,), num_classes=3)
    x = torch.rand(2, 1, 8, 8)
    with pytest.raises(
        ValueError, match=r"save_format='tflite' is not supported; choose one of \['torchscript', 'onnx'\]"
    ):
        export_for_inference(model, "tflite", tmp_path / "m", x)
    with pytest.raises(ValueError, match="sample_input=None: an export traces"):
        export_for_inference(model, "onnx", tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="For a ComposerClassifier pass the inputs, not the"):
        export_for_inference(model, "torchscript", tmp_path / "m.pt", [x, "labels"])
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"save_path='.*a_file/m.pt' cannot be written"):
        export_for_inference(model, "torchscript", blocker / "m.pt", x)
    with pytest.raises(ValueError, match="is a folder; give a file name"):
        export_for_inference(model, "torchscript", tmp_path, x)
    with pytest.raises(ValueError, match=r"save_format=\['onnx', 'tf'\] is not supported"):
        ExportForInference(save_format=["onnx", "tf"])
    assert not (tmp_path / "m.pt").exists()


def test_the_callback_takes_its_sample_from_the_batch_and_refuses_an_empty_run(tmp_path):
    from composer.callbacks import sample_input_from_batch

    with pytest.raises(ValueError, match="pass sample_input="):
        sample_input_from_batch({"text": ["a"]})
    model = simple_cnn(in_channels=1, widths=(4,), num_classes=10)
    export = ExportForInference(tmp_path / "m.pt", save_format="torchscript", verify=False)
    trainer = Trainer(model=model, train_dataloader=_digits(size=8), max_duration="1ba", callbacks=[export],
                      progress_bar=False)  # fmt: skip
    trainer.fit()
    assert export.results[0].path == tmp_path / "m.pt" and export.results[0].max_abs_error is None
    assert _load_torchscript(tmp_path / "m.pt")(torch.rand(7, 1, 8, 8)).shape == (7, 10)
    trainer.close()


def test_the_digits_recipe_exports_with_the_callback_added(tmp_path):
    from pathlib import Path

    from composer.config import load_recipe
    from tests.recipes.test_recipes import _PORTABLE, _two_batches

    recipe = Path(__file__).parents[2] / "recipes" / "digits_baseline.yaml"
    fields = [f"save_path={tmp_path}/digits", "save_format=torchscript"]
    config = _two_batches(load_recipe(recipe, [*_PORTABLE, *(f"callbacks.export_for_inference.{f}" for f in fields)]))
    trainer = config.initialize_object()
    trainer.fit()
    trainer.close()
    [export] = [c for c in trainer.state.callbacks if isinstance(c, ExportForInference)]
    assert export.results[0].path == tmp_path / "digits.pt" and export.results[0].max_abs_error < 1e-4


def test_importing_composer_utils_leaves_onnx_unloaded():
    import subprocess
    import sys

    code = "import sys, composer.utils; print(sorted(m for m in ('onnx', 'onnxruntime', 'onnxscript') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_huggingface_model_is_refused_with_the_fix(tmp_path):
    transformers = pytest.importorskip("transformers")
    from composer.models import HuggingFaceModel

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16, bos_token_id=0,
                                     eos_token_id=0)  # fmt: skip
    model = HuggingFaceModel(transformers.GPT2LMHeadModel(config))
    ids = torch.randint(0, 64, (2, 8))
    with pytest.raises(ValueError, match=r"model is a HuggingFaceModel, whose forward takes a dict batch"):
        export_for_inference(model, "torchscript", tmp_path / "hf.pt", ids)

    class Logits(nn.Module):  # what the message suggests
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids, use_cache=False).logits

    result = export_for_inference(Logits(model.model), "torchscript", tmp_path / "hf.pt", ids)
    assert result.max_abs_error is not None and result.max_abs_error < 1e-4
