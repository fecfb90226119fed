"""Unknown keywords of the Trainer explained: the nearest parameter, or the one another library's name maps to.

MosaicML Composer and other libraries name some arguments differently (``max_epochs``, ``lr_scheduler``,
``device_train_microbatch_size``); :func:`explain_unknown_keywords` turns the bare ``TypeError`` into the keyword to
use, with the value written over where the unit changes.

Example:
    >>> class Run:
    ...     @explain_unknown_keywords
    ...     def __init__(self, *, schedulers: list[str]) -> None:
    ...         self.schedulers = schedulers
    >>> Run(lr_scheduler=[])
    Traceback (most recent call last):
    ...
    TypeError: Run() got an unexpected keyword argument 'lr_scheduler'. Did you mean schedulers?
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

__all__ = ["explain_unknown_keywords"]

P = ParamSpec("P")
R = TypeVar("R")

# Keywords that other libraries or earlier Composer versions use -> the Trainer's parameter. Literal, so that a name
# difflib finds nothing close to (max_epochs and max_duration share only 'max_') still gets its answer.
_RENAMED: dict[str, str] = {
    "max_epochs": "max_duration",
    "num_epochs": "max_duration",
    "num_train_epochs": "max_duration",
    "epochs": "max_duration",
    "max_steps": "max_duration",
    "max_batches": "max_duration",
    "max_iters": "max_duration",
    "duration": "max_duration",
    "optimizer": "optimizers",
    "scheduler": "schedulers",
    "lr_scheduler": "schedulers",
    "lr_schedulers": "schedulers",
    "logger": "loggers",
    "callback": "callbacks",
    "algorithm": "algorithms",
    "train_loader": "train_dataloader",
    "eval_loader": "eval_dataloader",
    "val_dataloader": "eval_dataloader",
    "load_path_format": "load_path",
    "save_name_format": "save_filename",
    "load_strict": "load_strict_model_weights",
    "validate_every_n_epochs": "eval_interval",
    "validate_every_n_batches": "eval_interval",
    "device_train_microbatch_size": "grad_accum",
    "gradient_accumulation_steps": "grad_accum",
    "accumulate_grad_batches": "grad_accum",
    "gradient_clip_val": "grad_clip_norm",
    "max_grad_norm": "grad_clip_norm",
    "checkpoint_folder": "save_folder",
    "parallelism_config": "fsdp_config",
    "load_object_store": "storage_options",
}
# Duration keywords that count in one unit -> that unit, to write the value over as a max_duration.
_DURATION_UNITS: dict[str, str] = {
    "max_epochs": "ep",
    "num_epochs": "ep",
    "num_train_epochs": "ep",
    "epochs": "ep",
    "max_steps": "ba",
    "max_batches": "ba",
    "max_iters": "ba",
}
_LEARNING_RATE_KEYWORDS = ("lr", "learning_rate")


def explain_unknown_keywords(function: Callable[P, R]) -> Callable[P, R]:
    """Wraps a keyword-only ``__init__`` so that an unknown keyword raises naming the nearest parameter.

    The wrapper keeps the signature (``inspect.signature`` follows ``__wrapped__``) and the types (``ParamSpec``);
    a known keyword costs one set lookup.

    Example:
        >>> class Run:
        ...     @explain_unknown_keywords
        ...     def __init__(self, *, max_duration: str) -> None:
        ...         self.max_duration = max_duration
        >>> Run(max_epochs=2)
        Traceback (most recent call last):
        ...
        TypeError: Run() got an unexpected keyword argument 'max_epochs'. Did you mean max_duration='2ep'? ...
    """
    names = [name for name in inspect.signature(function).parameters if name != "self"]
    known = frozenset(names)
    parts = function.__qualname__.split(".")
    owner = parts[-2] if len(parts) > 1 else parts[-1]  # the class of an __init__

    @functools.wraps(function)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        unknown = [name for name in kwargs if name not in known]
        if unknown:
            raise TypeError(" ".join(_unknown_keyword(owner, name, kwargs, names) for name in unknown))
        return function(*args, **kwargs)

    return checked


def _unknown_keyword(owner: str, name: str, kwargs: Mapping[str, Any], names: Sequence[str]) -> str:
    message = f"{owner}() got an unexpected keyword argument {name!r}."
    value = kwargs[name]
    if name == "device_train_microbatch_size" and "grad_accum" in names:
        return f"{message} {_microbatch_size_to_grad_accum(value, kwargs.get('train_dataloader'))}"
    if name in _LEARNING_RATE_KEYWORDS:
        return (
            f"{message} The learning rate belongs to the optimizer: optimizers=torch.optim.SGD(model.parameters(), "
            f"lr={value!r})."
        )
    target = _RENAMED.get(name)
    if target is None or target not in names:
        close = difflib.get_close_matches(name, names, n=1)
        target = close[0] if close else None
    if target is None:
        return f"{message} The parameters are: {', '.join(names)}."
    unit = _DURATION_UNITS.get(name)
    if target == "max_duration" and unit is not None and isinstance(value, int) and not isinstance(value, bool):
        return (
            f"{message} Did you mean max_duration='{value}{unit}'? max_duration takes a time such as '10ep' or "
            "'500ba' (an int counts epochs)."
        )
    return f"{message} Did you mean {target}?"


def _microbatch_size_to_grad_accum(size: Any, train_dataloader: Any) -> str:
    """How to write MosaicML Composer v0.32.1's ``device_train_microbatch_size`` as ``grad_accum``."""
    what = (
        "Use grad_accum: it counts the microbatches each batch is split into, not the samples per microbatch "
        "(v0.32.1's device_train_microbatch_size)."
    )
    if size == "auto":
        return f"{what} device_train_microbatch_size='auto' is grad_accum='auto'."
    batch_size = getattr(getattr(train_dataloader, "dataloader", train_dataloader), "batch_size", None)
    if isinstance(size, int) and size >= 1 and isinstance(batch_size, int) and batch_size >= 1:
        count = -(-batch_size // size)
        return (
            f"{what} Convert with grad_accum = ceil(batch_size / device_train_microbatch_size): your train_dataloader's "
            f"batch_size is {batch_size}, so device_train_microbatch_size={size} is grad_accum={count}."
        )
    return (
        f"{what} Convert with grad_accum = ceil(batch_size / device_train_microbatch_size): a batch of 256 with "
        "device_train_microbatch_size=64 is grad_accum=4; 'auto' is grad_accum='auto'."
    )
