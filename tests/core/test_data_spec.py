"""DataSpec and the default batch functions: splitting, sample counting, token counting."""

from __future__ import annotations

from collections import OrderedDict, defaultdict, namedtuple

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from composer.core.data_spec import (
    DataSpec,
    ensure_data_spec,
    num_samples_in_batch,
    num_tokens_in_batch,
    split_batch,
)

Pair = namedtuple("Pair", ["x", "y"])


def _xy(n=10, features=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, features, generator=g), torch.randint(0, 5, (n,), generator=g)


# ----- split_batch --------------------------------------------------------------------------------------------------


def test_split_tensor_sizes_follow_tensor_split():
    x = torch.arange(10)
    parts = split_batch(x, 3)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert [p.tolist() for p in parts] == [t.tolist() for t in torch.tensor_split(x, 3)]
    assert torch.equal(torch.cat(parts), x)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 10])
def test_split_pair_concatenates_back(n):
    x, y = _xy(10)
    parts = split_batch((x, y), n)
    assert len(parts) == n
    assert all(type(p) is tuple and len(p) == 2 for p in parts)
    sizes = [len(px) for px, _ in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 10
    assert torch.equal(torch.cat([px for px, _ in parts]), x)
    assert torch.equal(torch.cat([py for _, py in parts]), y)


def test_split_one_returns_the_batch_itself():
    batch = _xy(4)
    assert split_batch(batch, 1)[0] is batch


def test_split_list_keeps_list():
    x, y = _xy(6)
    parts = split_batch([x, y], 3)
    assert all(type(p) is list for p in parts)
    assert [len(p[0]) for p in parts] == [2, 2, 2]
    assert torch.equal(torch.cat([p[1] for p in parts]), y)


@pytest.mark.parametrize("mapping_type", [dict, OrderedDict])
def test_split_mapping_keeps_type_and_key_order(mapping_type):
    x, y = _xy(5)
    batch = mapping_type([("labels", y), ("inputs", x)])
    parts = split_batch(batch, 2)
    assert all(type(p) is mapping_type for p in parts)
    assert [list(p) for p in parts] == [["labels", "inputs"]] * 2
    assert [len(p["inputs"]) for p in parts] == [3, 2]
    assert torch.equal(torch.cat([p["labels"] for p in parts]), y)


def test_split_defaultdict_keeps_factory():
    x, _ = _xy(4)
    batch = defaultdict(list, {"x": x})
    parts = split_batch(batch, 2)
    assert all(type(p) is defaultdict and p.default_factory is list for p in parts)
    assert batch["x"] is x  # the original is untouched


def test_split_nested_dict_in_tuple():
    x, y = _xy(7)
    mask = torch.ones(7, 4)
    batch = ({"x": x, "extra": {"mask": mask}}, y)
    parts = split_batch(batch, 3)
    assert [len(p[1]) for p in parts] == [3, 2, 2]
    assert all(type(p) is tuple and type(p[0]) is dict and type(p[0]["extra"]) is dict for p in parts)
    assert torch.equal(torch.cat([p[0]["extra"]["mask"] for p in parts]), mask)
    assert torch.equal(torch.cat([p[0]["x"] for p in parts]), x)


def test_split_namedtuple_keeps_type():
    x, y = _xy(4)
    parts = split_batch(Pair(x=x, y=y), 2)
    assert all(type(p) is Pair for p in parts)
    assert torch.equal(parts[1].y, y[2:])


def test_split_batch_encoding_keeps_type():
    transformers = pytest.importorskip("transformers")
    ids = torch.arange(24).reshape(6, 4)
    batch = transformers.BatchEncoding({"input_ids": ids, "attention_mask": torch.ones(6, 4, dtype=torch.long)})
    parts = split_batch(batch, 4)
    assert all(type(p) is transformers.BatchEncoding for p in parts)
    assert [len(p["input_ids"]) for p in parts] == [2, 2, 1, 1]
    assert torch.equal(parts[0].input_ids, ids[:2])  # attribute access still works
    assert torch.equal(batch["input_ids"], ids)  # the original is untouched


def test_split_copies_unbatched_values_into_every_microbatch():
    x, _ = _xy(4)
    scale = torch.tensor(0.5)
    batch = {"x": x, "scale": scale, "step": 3, "name": "train", "nothing": None}
    parts = split_batch(batch, 2)
    for part in parts:
        assert part["scale"] is scale and part["step"] == 3 and part["name"] == "train" and part["nothing"] is None


def test_split_per_sample_lists_like_tensors():
    x, _ = _xy(5)
    names = ("a", "b", "c", "d", "e")
    token_lists = [[1], [2, 2], [3], [4, 4, 4], [5]]
    parts = split_batch({"x": x, "names": names, "tokens": token_lists}, 2)
    assert [p["names"] for p in parts] == [("a", "b", "c"), ("d", "e")]
    assert [p["tokens"] for p in parts] == [[[1], [2, 2], [3]], [[4, 4, 4], [5]]]


def test_split_numpy_arrays_like_tensors():
    x, _ = _xy(5)
    boxes = np.arange(10).reshape(5, 2)
    parts = split_batch((x, boxes), np.int64(2))
    assert [p[1].tolist() for p in parts] == [boxes[:3].tolist(), boxes[3:].tolist()]
    assert num_samples_in_batch({"boxes": boxes, "flag": np.float32(1.0)}) == 5


def test_split_without_tensors():
    parts = split_batch(["a", "b", "c"], 2)
    assert parts == [["a", "b"], ["c"]]


@pytest.mark.parametrize("n", [0, -1])
def test_split_rejects_fewer_than_one_microbatch(n):
    with pytest.raises(ValueError, match=rf"grad_accum.*{n}"):
        split_batch(_xy(4), n)


def test_split_rejects_more_microbatches_than_samples():
    with pytest.raises(ValueError, match=r"batch of 4 samples.*grad_accum\) = 5.*at most 4"):
        split_batch(_xy(4), 5)


def test_split_rejects_non_int():
    with pytest.raises(TypeError, match="grad_accum"):
        split_batch(_xy(4), 2.0)


def test_split_rejects_disagreeing_sizes():
    with pytest.raises(ValueError, match="disagree"):
        split_batch((torch.zeros(4, 2), torch.zeros(3)), 2)


# ----- num_samples_in_batch -----------------------------------------------------------------------------------------


def test_num_samples_of_nested_batches():
    x, y = _xy(6)
    assert num_samples_in_batch(x) == 6
    assert num_samples_in_batch((x, y)) == 6
    assert num_samples_in_batch(Pair(x, y)) == 6
    assert num_samples_in_batch({"a": {"b": [x, y]}, "step": 1, "lr": torch.tensor(0.1)}) == 6
    assert num_samples_in_batch(["p", "q"]) == 2


def test_num_samples_disagreement_names_the_sizes():
    with pytest.raises(ValueError, match=r"batch\['x'\] has 4, batch\['y'\] has 3.*get_num_samples_in_batch"):
        num_samples_in_batch({"x": torch.zeros(4, 2), "y": torch.zeros(3)})


def test_num_samples_without_batched_entries():
    with pytest.raises(ValueError, match="get_num_samples_in_batch"):
        num_samples_in_batch({"step": 3, "scale": torch.tensor(1.0)})


# ----- num_tokens_in_batch ------------------------------------------------------------------------------------------


def test_num_tokens_counts_attention_mask():
    ids = torch.tensor([[5, 6, 7, 0], [8, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    assert num_tokens_in_batch({"input_ids": ids, "attention_mask": mask}) == 4
    assert num_tokens_in_batch({"input_ids": ids, "attention_mask": mask.bool()}) == 4


def test_num_tokens_without_mask_counts_every_id():
    assert num_tokens_in_batch({"input_ids": torch.zeros(3, 5, dtype=torch.long)}) == 15
    assert num_tokens_in_batch({"input_ids": [[1, 2, 3], [4, 5]]}) == 5  # ragged lists from a tokenizer


def test_num_tokens_is_none_without_input_ids():
    assert num_tokens_in_batch(_xy(3)) is None
    assert num_tokens_in_batch({"x": torch.zeros(2)}) is None


def test_num_tokens_of_batch_encoding():
    transformers = pytest.importorskip("transformers")
    batch = transformers.BatchEncoding(
        {"input_ids": torch.ones(2, 3, dtype=torch.long), "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}
    )
    assert num_tokens_in_batch(batch) == 3


# ----- DataSpec ---------------------------------------------------------------------------------------------------


def test_data_spec_defaults():
    x, y = _xy(10)
    spec = DataSpec(DataLoader(TensorDataset(x, y), batch_size=4))
    assert spec.num_samples == 10 and spec.num_tokens is None
    batch = next(iter(spec.dataloader))
    assert spec.device_transforms(batch) is batch
    assert spec.get_num_samples_in_batch(batch) == 4
    assert spec.get_num_tokens_in_batch(batch) is None
    assert [len(px) for px, _ in spec.split_batch(batch, 2)] == [2, 2]


def test_data_spec_custom_functions():
    def count(batch):
        return 100

    def tokens(batch):
        return 7

    def double(batch):
        return [t * 2 for t in batch]

    def halves(batch, n):
        return [batch] * n

    spec = DataSpec(
        [torch.ones(2)],
        num_samples=5,
        num_tokens=9,
        device_transforms=double,
        split_batch=halves,
        get_num_samples_in_batch=count,
        get_num_tokens_in_batch=tokens,
    )
    assert (spec.num_samples, spec.num_tokens) == (5, 9)
    assert spec.get_num_samples_in_batch(None) == 100 and spec.get_num_tokens_in_batch(None) == 7
    assert spec.device_transforms([1]) == [2] and spec.split_batch("b", 3) == ["b"] * 3


def test_data_spec_num_samples_of_unsized_dataset():
    class Stream(IterableDataset):
        def __iter__(self):
            yield torch.zeros(3)

    assert DataSpec(DataLoader(Stream(), batch_size=None)).num_samples is None
    assert DataSpec([torch.zeros(2)]).num_samples is None


def test_data_spec_validates_arguments():
    with pytest.raises(TypeError, match="iterable"):
        DataSpec(3)
    with pytest.raises(ValueError, match="num_samples"):
        DataSpec([], num_samples=-1)
    with pytest.raises(TypeError, match="split_batch"):
        DataSpec([], split_batch="chunk")
    with pytest.raises(TypeError, match="already a DataSpec"):
        DataSpec(DataSpec([]))


def test_ensure_data_spec():
    loader = DataLoader(TensorDataset(*_xy(4)), batch_size=2)
    spec = ensure_data_spec(loader)
    assert isinstance(spec, DataSpec) and spec.dataloader is loader
    assert ensure_data_spec(spec) is spec
    with pytest.raises(TypeError, match="iterable"):
        ensure_data_spec(None)
