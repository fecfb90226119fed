"""DataSpec: a dataloader plus how to split its batches, count their samples and tokens, and transform them on device.

The trainer never looks inside a batch itself. It asks the :class:`DataSpec` how many samples and tokens a batch holds
(to advance the :class:`~composer.core.time.Timer`), how to cut it into microbatches (gradient accumulation), and
what to do to it once it is on the device. The defaults below handle any nesting of tensors, tuples, lists,
namedtuples and mappings (``dict``, ``OrderedDict``, Hugging Face's ``BatchEncoding``); pass your own functions for
anything else.

How the defaults read a batch:

* a tensor (or NumPy array) with at least one dimension is *batched*: dim 0 is the sample dimension;
* a 0-d tensor, a number, a string, ``None`` or any other object is *not batched*: every microbatch gets it as is;
* a mapping, a namedtuple, or a list or tuple that holds a tensor somewhere inside is a *container*: its items are
  read by these same rules and the container is rebuilt as the same type;
* a list or tuple with no tensor anywhere inside (file names, raw texts, token lists) is a *per-sample list*: it is
  batched, and its length is the number of samples.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence, Sized
from typing import Any, TypeGuard

import numpy as np
import torch

__all__ = ["Batch", "DataSpec", "ensure_data_spec", "num_samples_in_batch", "num_tokens_in_batch", "split_batch"]

Batch = Any
"""Whatever the dataloader yields: a tensor, or any nesting of tuples, lists, namedtuples and mappings of them."""

# Array types whose dim 0 is the sample dimension.
_ARRAY_TYPES = (torch.Tensor, np.ndarray)

# How many offending entries an error message lists before it stops.
_MAX_LISTED = 8


def _is_namedtuple(obj: object) -> TypeGuard[tuple[Any, ...]]:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _contains_tensor(obj: object) -> bool:
    if isinstance(obj, _ARRAY_TYPES):
        return True
    if isinstance(obj, Mapping):
        return any(_contains_tensor(value) for value in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_contains_tensor(item) for item in obj)
    return False


def _batched_leaves(obj: object, path: str) -> Iterator[tuple[str, int]]:
    """Yields ``(path, num_samples)`` for every batched leaf of ``obj`` (see the module docstring for the rules)."""
    if isinstance(obj, _ARRAY_TYPES):
        if obj.ndim > 0:
            yield path, int(obj.shape[0])
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _batched_leaves(value, f"{path}[{key!r}]")
    elif _is_namedtuple(obj):
        fields: tuple[str, ...] = obj._fields  # type: ignore[attr-defined]
        for name, value in zip(fields, obj):
            yield from _batched_leaves(value, f"{path}.{name}")
    elif isinstance(obj, (list, tuple)):
        if _contains_tensor(obj):
            for index, item in enumerate(obj):
                yield from _batched_leaves(item, f"{path}[{index}]")
        else:
            yield path, len(obj)


def num_samples_in_batch(batch: Batch) -> int:
    """Returns the number of samples in ``batch``: the dim-0 size that all its batched tensors share.

    Per-sample lists (lists or tuples with no tensor inside, such as file names) count too. This is the default
    ``get_num_samples_in_batch`` of :class:`DataSpec`.

    Args:
        batch: A tensor, or any nesting of tuples, lists, namedtuples and mappings.

    Raises:
        ValueError: If the batch holds nothing batched, or its batched entries disagree on the number of samples.

    Example:
        >>> x, y = torch.zeros(8, 3), torch.zeros(8, dtype=torch.long)
        >>> num_samples_in_batch((x, y))
        8
        >>> num_samples_in_batch({"input_ids": torch.zeros(4, 16), "names": ["a", "b", "c", "d"], "step": 3})
        4
    """
    if type(batch) in (tuple, list) and batch:  # the common (inputs, targets) batch: paths only if sizes disagree
        size = -1
        for item in batch:  # a loop, not a comprehension: this runs every batch
            if type(item) is not torch.Tensor or item.ndim == 0 or (size >= 0 and item.shape[0] != size):
                size = -1
                break
            size = item.shape[0]
        if size >= 0:
            return int(size)
    leaves = list(_batched_leaves(batch, "batch"))
    if not leaves:
        raise ValueError(
            f"Cannot count the samples in a batch of type {type(batch).__name__}: it holds no tensor with a batch "
            f"dimension and no per-sample list. To fix, pass get_num_samples_in_batch=<function(batch) -> int> "
            f"to DataSpec."
        )
    sizes = {size for _, size in leaves}
    if len(sizes) > 1:
        listed = ", ".join(f"{path} has {size}" for path, size in leaves[:_MAX_LISTED])
        more = f" (and {len(leaves) - _MAX_LISTED} more)" if len(leaves) > _MAX_LISTED else ""
        raise ValueError(
            f"The batch's entries disagree on the number of samples (their size along dim 0): {listed}{more}. "
            f"To fix, make every batched entry hold one row per sample, or tell the trainer how to read this "
            f"batch: pass get_num_samples_in_batch=<function(batch) -> int> (and split_batch=<function(batch, "
            f"num_microbatches) -> list> for gradient accumulation) to DataSpec."
        )
    return leaves[0][1]


def _part_bounds(num_samples: int, num_parts: int) -> list[tuple[int, int]]:
    # torch.tensor_split's rule: the first ``num_samples % num_parts`` parts get one sample more than the rest.
    base, extra = divmod(num_samples, num_parts)
    bounds = []
    start = 0
    for index in range(num_parts):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _rebuild_sequence(template: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    if _is_namedtuple(template):
        return type(template)(*items)
    return type(template)(items)  # list, tuple, or a subclass that builds from an iterable


def _rebuild_mapping(template: Mapping[Any, Any], items: dict[Any, Any]) -> Any:
    if isinstance(template, MutableMapping):
        # A shallow copy keeps the exact type and its extra attributes (BatchEncoding, defaultdict, OrderedDict);
        # only the items are then replaced by their microbatch parts.
        rebuilt = copy.copy(template)
        for key, value in items.items():
            rebuilt[key] = value
        return rebuilt
    try:
        return type(template)(items)  # type: ignore[call-arg]
    except TypeError as error:
        raise TypeError(
            f"split_batch cannot rebuild a mapping of type {type(template).__name__}: it is immutable and its "
            f"constructor does not take a dict. To fix, pass split_batch=<function(batch, num_microbatches) -> "
            f"list> to DataSpec."
        ) from error


def _split(obj: object, bounds: list[tuple[int, int]]) -> list[Any]:
    """``obj`` cut into ``len(bounds)`` parts; batched leaves are sliced, everything else is repeated."""
    num_parts = len(bounds)
    if isinstance(obj, _ARRAY_TYPES):
        if obj.ndim == 0:
            return [obj] * num_parts
        return [obj[start:stop] for start, stop in bounds]
    if isinstance(obj, Mapping):
        parts = {key: _split(value, bounds) for key, value in obj.items()}
        return [_rebuild_mapping(obj, {key: part[i] for key, part in parts.items()}) for i in range(num_parts)]
    if isinstance(obj, (list, tuple)):
        if _is_namedtuple(obj) or _contains_tensor(obj):
            columns = [_split(item, bounds) for item in obj]
            return [_rebuild_sequence(obj, [column[i] for column in columns]) for i in range(num_parts)]
        return [_rebuild_sequence(obj, list(obj[start:stop])) for start, stop in bounds]
    return [obj] * num_parts


def split_batch(batch: Batch, num_microbatches: int) -> list[Batch]:
    """Splits ``batch`` into exactly ``num_microbatches`` microbatches along the sample dimension.

    The sizes follow :func:`torch.tensor_split`: they differ by at most one, larger parts first (10 samples in 3
    give 4, 3, 3). Every container is rebuilt as its own type (tuple, list, namedtuple, ``dict``, ``OrderedDict``,
    ``BatchEncoding``, ...); tensors become views of the batch; per-sample lists are sliced alike; unbatched
    values (numbers, strings, 0-d tensors) are repeated in every microbatch. A mapping is shallow-copied and its
    items replaced, so attributes outside its items (a ``BatchEncoding``'s ``encodings``) are shared, not split.
    This is the default ``split_batch`` of :class:`DataSpec`; the trainer calls it with
    ``num_microbatches=grad_accum``.

    Args:
        batch: A tensor, or any nesting of tuples, lists, namedtuples and mappings.
        num_microbatches: How many microbatches to make; between 1 and the number of samples.

    Returns:
        The microbatches, in order; concatenating them gives back the batch.

    Raises:
        ValueError: If ``num_microbatches`` is below 1 or above the number of samples, or the batch's entries
            disagree on the number of samples.

    Example:
        >>> x, y = torch.arange(10.0).reshape(10, 1), torch.arange(10)
        >>> parts = split_batch((x, y), 3)
        >>> [len(part_y) for _, part_y in parts]
        [4, 3, 3]
        >>> parts = split_batch({"x": x, "lr_scale": 0.5, "ids": list(range(10))}, 2)
        >>> parts[1]["ids"], parts[1]["lr_scale"]
        ([5, 6, 7, 8, 9], 0.5)
    """
    if isinstance(num_microbatches, bool) or not isinstance(num_microbatches, (int, np.integer)):
        raise TypeError(
            f"num_microbatches (grad_accum) must be an int, not {type(num_microbatches).__name__} "
            f"(got {num_microbatches!r})."
        )
    num_microbatches = int(num_microbatches)
    if num_microbatches < 1:
        raise ValueError(
            f"num_microbatches (grad_accum) must be at least 1, got {num_microbatches}. To fix, set grad_accum to a "
            f"positive integer (1 means no gradient accumulation)."
        )
    if num_microbatches == 1:
        return [batch]
    batch_size = num_samples_in_batch(batch)
    if num_microbatches > batch_size:
        raise ValueError(
            f"Cannot split a batch of {batch_size} samples into num_microbatches (grad_accum) = {num_microbatches} "
            f"microbatches: each microbatch needs at least one sample. To fix, set grad_accum to at most "
            f"{batch_size}, or use a larger batch size (if only the last, incomplete batch of an epoch is this small, "
            f"pass drop_last=True to the DataLoader)."
        )
    return _split(batch, _part_bounds(batch_size, num_microbatches))


def _count_nonzero(obj: object) -> int:
    if isinstance(obj, torch.Tensor):
        return int(torch.count_nonzero(obj).item())
    if isinstance(obj, (list, tuple)):
        return sum(_count_nonzero(item) for item in obj)
    return int(bool(obj))


def _count_elements(obj: object) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel()
    if isinstance(obj, (list, tuple)):
        return sum(_count_elements(item) for item in obj)
    return 1


def num_tokens_in_batch(batch: Batch) -> int | None:
    """Returns the number of tokens in ``batch``, or None when the batch has no notion of tokens.

    A batch has tokens when it is a mapping with an ``'input_ids'`` entry (the Hugging Face convention). If it also
    has an ``'attention_mask'``, the tokens are its non-zero entries, so padding does not count; otherwise every
    entry of ``input_ids`` counts. This is the default ``get_num_tokens_in_batch`` of :class:`DataSpec`.

    Args:
        batch: A batch as yielded by the dataloader.

    Example:
        >>> ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
        >>> num_tokens_in_batch({"input_ids": ids})
        6
        >>> num_tokens_in_batch({"input_ids": ids, "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]])})
        5
        >>> num_tokens_in_batch((torch.zeros(2, 3), torch.zeros(2))) is None
        True
    """
    if type(batch) in (tuple, list) or not isinstance(batch, Mapping) or "input_ids" not in batch:
        return None  # (the first test spares the usual pair the slower Mapping check)
    attention_mask = batch.get("attention_mask")
    if attention_mask is not None:
        return _count_nonzero(attention_mask)
    return _count_elements(batch["input_ids"])


def _identity(batch: Batch) -> Batch:
    return batch


# The defaults, under names that DataSpec.__init__'s parameters do not shadow.
_default_split_batch = split_batch
_default_num_samples = num_samples_in_batch
_default_num_tokens = num_tokens_in_batch


def _check_callable(name: str, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"DataSpec {name} must be a function or None (for the default), not {value!r}.")


class DataSpec:
    """A dataloader together with the functions the trainer uses to read its batches.

    Wrap a dataloader in a DataSpec when its batches need something the defaults do not do: a transform that runs
    on the device (normalising uint8 images on the GPU, say), a custom way to split a batch for gradient
    accumulation, or a custom way to count samples or tokens. A plain dataloader passed to the trainer is wrapped
    with all defaults (see :func:`ensure_data_spec`).

    Args:
        dataloader: The data: a :class:`torch.utils.data.DataLoader` or any iterable of batches.
        num_samples: Samples in the dataset. Default: ``len(dataloader.dataset)`` when the dataloader has a sized
            dataset, else None.
        num_tokens: Tokens in the dataset, when known. Default: None.
        device_transforms: ``f(batch) -> batch``, run after the batch is moved to the device (training and
            evaluation). Default: the identity.
        split_batch: ``f(batch, num_microbatches) -> list of microbatches``. Default: :func:`split_batch`.
        get_num_samples_in_batch: ``f(batch) -> int``. Default: :func:`num_samples_in_batch`.
        get_num_tokens_in_batch: ``f(batch) -> int | None``. Default: :func:`num_tokens_in_batch`.

    Example:
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> dataset = TensorDataset(torch.randn(10, 3), torch.randint(0, 2, (10,)))
        >>> spec = DataSpec(DataLoader(dataset, batch_size=4), device_transforms=lambda b: (b[0] * 2, b[1]))
        >>> spec.num_samples
        10
        >>> batch = spec.device_transforms(next(iter(spec.dataloader)))
        >>> spec.get_num_samples_in_batch(batch), [len(x) for x, _ in spec.split_batch(batch, 3)]
        (4, [2, 1, 1])
    """

    def __init__(
        self,
        dataloader: Iterable[Batch],
        num_samples: int | None = None,
        num_tokens: int | None = None,
        device_transforms: Callable[[Batch], Batch] | None = None,
        split_batch: Callable[[Batch, int], Sequence[Batch]] | None = None,
        get_num_samples_in_batch: Callable[[Batch], int] | None = None,
        get_num_tokens_in_batch: Callable[[Batch], int | None] | None = None,
    ) -> None:
        if isinstance(dataloader, DataSpec):
            raise TypeError(
                "DataSpec's dataloader is already a DataSpec. To fix, pass it on as is, or pass its .dataloader."
            )
        if not isinstance(dataloader, Iterable):
            raise TypeError(
                f"DataSpec's dataloader must be an iterable of batches such as a torch DataLoader, not "
                f"{type(dataloader).__name__} (got {dataloader!r})."
            )
        for name, count in (("num_samples", num_samples), ("num_tokens", num_tokens)):
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                raise ValueError(f"DataSpec {name} must be a non-negative int or None, got {count!r}.")
        _check_callable("device_transforms", device_transforms)
        _check_callable("split_batch", split_batch)
        _check_callable("get_num_samples_in_batch", get_num_samples_in_batch)
        _check_callable("get_num_tokens_in_batch", get_num_tokens_in_batch)

        self.dataloader: Iterable[Batch] = dataloader
        self.num_samples: int | None = num_samples if num_samples is not None else _dataset_length(dataloader)
        self.num_tokens: int | None = num_tokens
        self.device_transforms: Callable[[Batch], Batch] = device_transforms or _identity
        self.split_batch: Callable[[Batch, int], Sequence[Batch]] = split_batch or _default_split_batch
        self.get_num_samples_in_batch: Callable[[Batch], int] = get_num_samples_in_batch or _default_num_samples
        self.get_num_tokens_in_batch: Callable[[Batch], int | None] = get_num_tokens_in_batch or _default_num_tokens

    def __repr__(self) -> str:
        return (
            f"DataSpec(dataloader={type(self.dataloader).__name__}, num_samples={self.num_samples}, "
            f"num_tokens={self.num_tokens})"
        )


def _dataset_length(dataloader: object) -> int | None:
    dataset = getattr(dataloader, "dataset", None)
    if not isinstance(dataset, Sized):
        return None
    try:
        return len(dataset)
    except TypeError:  # an IterableDataset whose __len__ refuses
        return None


def ensure_data_spec(dataloader: DataSpec | Iterable[Batch]) -> DataSpec:
    """Returns ``dataloader`` as a :class:`DataSpec`: a DataSpec as is, any other iterable wrapped with defaults.

    Args:
        dataloader: A :class:`DataSpec`, a :class:`torch.utils.data.DataLoader`, or any iterable of batches.

    Raises:
        TypeError: If ``dataloader`` is not iterable.

    Example:
        >>> spec = ensure_data_spec([(torch.zeros(2, 3), torch.zeros(2))])
        >>> ensure_data_spec(spec) is spec
        True
        >>> spec.num_samples is None  # a list has no .dataset
        True
    """
    if isinstance(dataloader, DataSpec):
        return dataloader
    return DataSpec(dataloader)
