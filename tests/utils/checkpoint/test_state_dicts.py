"""composer.utils.checkpoint.state_dicts: model weights across DDP and torch.compile prefixes, their keys."""

import pytest
import torch

from composer.core import State
from composer.models import ComposerClassifier
from composer.utils.checkpoint import (
    load_checkpoint,
    load_model_state,
    read_checkpoint,
    save_checkpoint,
)
from tests.utils.checkpoint.states import assert_same_weights

# ---- model keys: wrappers, strictness, ignored keys --------------------------------------------------------------


def classifier(num_classes=3, seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, num_classes))
    return ComposerClassifier(net, num_classes=num_classes)  # its own keys start with 'module.'


@pytest.fixture
def process_group(tmp_path):
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    torch.distributed.destroy_process_group()


def test_ddp_keys_load_into_a_bare_model_and_back(tmp_path, process_group):
    source, target = classifier(seed=0), classifier(seed=1)
    wrapped = torch.nn.parallel.DistributedDataParallel(source)
    assert next(iter(wrapped.state_dict())).startswith("module.module.")
    load_model_state(target, wrapped.state_dict())  # a raw DDP state dict
    assert_same_weights(target, source)
    # A checkpoint of the State whose model is DDP-wrapped holds bare keys, which load into a wrapped model too.
    path = save_checkpoint(State(model=wrapped, max_duration="1ep"), tmp_path / "ddp.pt", weights_only=True)
    assert list(read_checkpoint(path)["state"]["model"]) == list(source.state_dict())
    other = torch.nn.parallel.DistributedDataParallel(classifier(seed=2))
    load_checkpoint(State(model=other, max_duration="1ep"), path, weights_only=True)
    assert_same_weights(other.module, source)


def test_compiled_model_keys_load_into_a_bare_model_and_back(tmp_path):
    source = classifier(seed=0)
    compiled = torch.compile(source)  # wrapping compiles nothing until the model is called
    assert next(iter(compiled.state_dict())).startswith("_orig_mod.")
    bare = classifier(seed=1)
    load_model_state(bare, compiled.state_dict())
    assert_same_weights(bare, source)
    path = save_checkpoint(State(model=compiled, max_duration="1ep"), tmp_path / "c.pt", weights_only=True)
    assert list(read_checkpoint(path)["state"]["model"]) == list(source.state_dict())
    # Into a model compiled as a whole, and one with only its inner network compiled.
    whole = torch.compile(classifier(seed=2))
    inner = classifier(seed=3)
    inner.module = torch.compile(inner.module)
    for target in (whole, inner):
        load_checkpoint(State(model=target, max_duration="1ep"), path, weights_only=True)
        assert_same_weights(target, source)


def test_strict_loading_lists_missing_and_unexpected_keys():
    source = classifier()
    bigger = classifier()
    bigger.extra = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"missing keys \['extra.bias', 'extra.weight'\].*load_strict_model_weights"):
        load_model_state(bigger, source.state_dict())
    missing, unexpected = load_model_state(bigger, source.state_dict(), strict=False)
    assert missing == ["extra.bias", "extra.weight"] and unexpected == []
    assert torch.equal(bigger.module[0].weight, source.module[0].weight)
    missing, unexpected = load_model_state(source, bigger.state_dict(), strict=False)
    assert missing == [] and unexpected == ["extra.bias", "extra.weight"]


def test_ignored_keys_let_a_new_classification_head_load():
    pretrained, finetune = classifier(num_classes=3, seed=0), classifier(num_classes=5, seed=1)
    head_before = finetune.module[2].weight.clone()
    with pytest.raises(ValueError, match=r"shape mismatch for \['module.2.weight: saved \(3, 8\), model \(5, 8\)'"):
        load_model_state(finetune, pretrained.state_dict())
    load_model_state(finetune, pretrained.state_dict(), ignore_keys=["module.2.*"])
    assert torch.equal(finetune.module[0].weight, pretrained.module[0].weight)
    assert torch.equal(finetune.module[2].weight, head_before)
    with pytest.warns(UserWarning, match=r"\['nothing.*'\] match no model key"):
        load_model_state(finetune, pretrained.state_dict(), ignore_keys=["module.2.*", "nothing.*"])
