"""The Trainer's arguments checked where they are given, so that a mistake is named at its cause.

A single object where a list is expected becomes a one-element list; a class where an instance is expected, a
registry name, a config object or an object of the wrong kind is refused naming the argument, the value, what is
accepted and what to type instead. An unknown keyword is refused with the nearest parameter. Once the model surgery
of ``INIT`` is done, the optimizers must train the model they are given with (:func:`check_optimizer_params`).

Example:
    >>> from composer.callbacks import LRMonitor
    >>> [type(c).__name__ for c in callback_list(LRMonitor())]
    ['LRMonitor']
    >>> callback_list([LRMonitor])
    Traceback (most recent call last):
    ...
    TypeError: callbacks=[LRMonitor] holds the class LRMonitor, not a callback: pass an instance: LRMonitor(...).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import torch
from torch.optim.lr_scheduler import LRScheduler

from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.data_spec import DataSpec
from composer.core.evaluator import Evaluator
from composer.core.hparams import Hparams
from composer.core.logging.logger import LoggerDestination, LogLevel
from composer.core.time import Time, TimeUnit
from composer.loggers.console import ConsoleLogger

__all__ = [
    "algorithm_list",
    "callback_list",
    "check_grad_accum",
    "check_optimizer_params",
    "check_optimizers",
    "check_scheduler_optimizers",
    "check_schedulers",
    "check_train_data",
    "console_loggers",
    "evaluator_list",
    "explain_unknown_keywords",
    "logger_list",
    "steps_per_epoch",
]

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


def console_loggers(log_to_console: bool, console_log_interval: str | Time[Any] | int | None) -> list[ConsoleLogger]:
    """The console destination of ``log_to_console`` and ``console_log_interval`` (none, or a list of one).

    ``console_log_interval`` is MosaicML Composer v0.32.1's keyword: giving it turns the console on. In batches
    (``'2ba'``) it prints the per-batch values (the training loss) every that many batches, and epoch values at every
    epoch end; in epochs (``'2ep'``, or an int, which counts epochs as in v0.32.1) it prints epoch values every that
    many epochs. Without it, ``log_to_console`` prints epoch values.

    Args:
        log_to_console: Print to the console.
        console_log_interval: How often, or None.

    Returns:
        list[ConsoleLogger]: One console logger, or none.

    Example:
        >>> [console.log_level.name for console in console_loggers(False, "2ba")]
        ['BATCH']
    """
    if console_log_interval is None:
        return [ConsoleLogger()] if log_to_console else []
    try:
        interval = Time.from_input(console_log_interval, default_unit=TimeUnit.EPOCH)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"console_log_interval={console_log_interval!r} is not a time: {error}. Give batches or epochs, e.g. "
            "'10ba' or '1ep' (an int counts epochs)."
        ) from None
    level = LogLevel.BATCH if interval.unit == TimeUnit.BATCH else LogLevel.EPOCH
    return [ConsoleLogger(log_level=level, log_interval=interval)]


# ---- lists of algorithms, callbacks and loggers ---------------------------------------------------------------------


def algorithm_list(value: Any) -> list[Algorithm]:
    """``algorithms`` as a list: None is empty, one algorithm becomes a list of one; anything else raises."""
    from composer.algorithms import ALGORITHM_CLASS_NAMES

    return _object_list(value, "algorithms", Algorithm, "an algorithm", ALGORITHM_CLASS_NAMES, "composer.algorithms")


def callback_list(value: Any) -> list[Callback]:
    """``callbacks`` as a list: None is empty, one callback becomes a list of one; anything else raises."""
    from composer.callbacks import CALLBACKS

    names = {name: cls.__name__ for name, cls in CALLBACKS.items()}
    return _object_list(value, "callbacks", Callback, "a callback", names, "composer.callbacks")


def logger_list(value: Any) -> list[LoggerDestination]:
    """``loggers`` as a list: None is empty, one destination becomes a list of one; anything else raises."""
    from composer.loggers import LOGGERS

    names = {name: cls.__name__ for name, cls in LOGGERS.items()}
    return _object_list(value, "loggers", LoggerDestination, "a logger destination", names, "composer.loggers")


def _object_list(
    value: Any, argument: str, kind: type[Any], noun: str, registry: Mapping[str, str], package: str
) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, kind):
        return [value]
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        items = list(value)  # a generator or other iterable of objects
    else:
        items = [value]
    for item in items:
        if not isinstance(item, kind):
            raise TypeError(_wrong_item(argument, item, items, kind, noun, registry, package))
    return items


def _wrong_item(
    argument: str,
    item: Any,
    items: list[Any],
    kind: type[Any],
    noun: str,
    registry: Mapping[str, str],
    package: str,
) -> str:
    given = f"{argument}=[{', '.join(_short(i) for i in items)}]"
    if isinstance(item, type):
        if issubclass(item, kind):
            return f"{given} holds the class {item.__name__}, not {noun}: pass an instance: {item.__name__}(...)."
        return f"{given} holds the class {item.__name__}, which is not {noun}. {_where_instead(item, argument)}"
    if isinstance(item, str):
        if item in registry:
            return (
                f"{given} holds the name {item!r}; the Trainer takes objects: pass {registry[item]}(...) (from "
                f"{package}). Names are for recipes (composer train)."
            )
        return (
            f"{given} holds the string {item!r}; the Trainer takes {_bare(noun)} objects from {package}, such as "
            f"{', '.join(sorted(registry.values())[:4])}(...)."
        )
    if isinstance(item, Hparams):
        return (
            f"{given} holds the config {type(item).__name__}; pass the object it describes: "
            f"{type(item).__name__}(...).initialize_object()."
        )
    where = _where_instead(type(item), argument)
    return (
        f"{argument} takes {_bare(noun)} objects ({kind.__name__} instances, one or a list), but got {_short(item)!s} "
        f"({type(item).__name__}). {where}".rstrip()
    )


def _where_instead(cls: type[Any], argument: str) -> str:
    """Where an object of ``cls`` goes instead, if it belongs to another of the Trainer's arguments."""
    homes = [
        (LoggerDestination, "loggers"),
        (Callback, "callbacks"),
        (Algorithm, "algorithms"),
        (torch.optim.Optimizer, "optimizers"),
        (LRScheduler, "schedulers"),
    ]
    for base, home in homes:
        if issubclass(cls, base) and home != argument:
            return f"{cls.__name__} belongs in {home}=."
    return ""


def _bare(noun: str) -> str:
    return noun.split(" ", 1)[1]  # 'an algorithm' -> 'algorithm'


def _short(value: Any) -> str:
    if isinstance(value, type):
        return value.__name__
    text = repr(value)
    return text if len(text) <= 60 and "\n" not in text else f"<{type(value).__name__}>"


# ---- optimizers and schedulers ------------------------------------------------------------------------------------


def check_optimizers(optimizers: Any) -> list[torch.optim.Optimizer] | None:
    """``optimizers`` as a list (None stays None: the Trainer builds its default); anything else raises.

    Accepted: an optimizer built on the model's parameters (``torch.optim.SGD(model.parameters(), lr=0.1)``), or a
    list of them. An object with a ``param_groups`` list and a ``step`` method counts as an optimizer.
    """
    if optimizers is None:
        return None
    items = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
    for item in items:
        if not _is_optimizer(item):
            raise TypeError(_wrong_optimizer(optimizers, item))
    return items


def _is_optimizer(item: Any) -> bool:
    if isinstance(item, torch.optim.Optimizer):
        return True
    return (
        not isinstance(item, type) and isinstance(getattr(item, "param_groups", None), list) and hasattr(item, "step")
    )


def _wrong_optimizer(optimizers: Any, item: Any) -> str:
    from composer.optim.optimizer_hparams import OPTIMIZERS

    given = f"optimizers={_short(optimizers)}" if item is optimizers else f"optimizers holds {_short(item)}"
    accepted = (
        "The Trainer takes an optimizer built on the model's parameters, e.g. "
        "optimizers=torch.optim.SGD(model.parameters(), lr=0.1), or a list of them (or None for its default, "
        "DecoupledSGDW with lr=0.1)."
    )
    if isinstance(item, type) and issubclass(item, torch.optim.Optimizer):
        return (
            f"{given} is the class {item.__name__}, not an optimizer: pass an instance built on the model's "
            f"parameters: optimizers={item.__name__}(model.parameters(), lr=...)."
        )
    if isinstance(item, type) and issubclass(item, LRScheduler):
        return f"{given} is the learning-rate scheduler class {item.__name__}, not an optimizer. {accepted}"
    if isinstance(item, LRScheduler):
        return (
            f"{given} is a learning-rate scheduler ({type(item).__name__}), not an optimizer: pass its optimizer as "
            f"optimizers= and the scheduler as schedulers=."
        )
    if isinstance(item, str):
        if item.lower() in OPTIMIZERS:
            config = OPTIMIZERS[item.lower()].__name__
            return (
                f"{given} is a name; the Trainer takes optimizer objects. In Python, build it on the model: "
                f"optimizers=composer.optim.{config}(lr=...).initialize_object(model.parameters()) (or the torch "
                f"optimizer itself). Names are for recipes (composer train): optimizer: {{{item.lower()}: {{lr: ...}}}}."
            )
        return f"{given} is a string. {accepted} Recipes name optimizers among {sorted(OPTIMIZERS)}."
    if isinstance(item, Hparams):
        return (
            f"{given} is the config {type(item).__name__}; pass the optimizer it describes: "
            f"optimizers={type(item).__name__}(...).initialize_object(model.parameters())."
        )
    return f"{given} ({type(item).__name__}) is not an optimizer. {accepted}"


def check_schedulers(schedulers: Any) -> None:
    """Raises if ``schedulers`` holds something other than torch schedulers and composer scheduler functions.

    Accepted: None, a torch ``LRScheduler`` built on one of the Trainer's optimizers, a scheduler function
    ``(state, *, ssr) -> multiplier`` (``CosineAnnealingLRHparams(t_max='3ep').initialize_object()``, or your own),
    or a list of them.
    """
    if schedulers is None:
        return
    items = list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers]
    for item in items:
        problem = _wrong_scheduler(item)
        if problem is not None:
            given = f"schedulers={_short(schedulers)}" if item is schedulers else f"schedulers holds {_short(item)}"
            raise TypeError(f"{given} {problem}")


def _wrong_scheduler(item: Any) -> str | None:
    from composer.optim.scheduler import SCHEDULERS

    if isinstance(item, LRScheduler):
        return None
    accepted = (
        "The Trainer takes torch schedulers built on its optimizer (CosineAnnealingLR(optimizer, T_max=...)) and "
        "composer scheduler functions (CosineAnnealingLRHparams(t_max='3ep').initialize_object()), one or a list."
    )
    if isinstance(item, type):
        if issubclass(item, LRScheduler):
            return (
                f"is the class {item.__name__}, not a scheduler: pass an instance built on the optimizer: "
                f"{item.__name__}(optimizer, ...)."
            )
        if issubclass(item, Hparams):
            return f"is the config class {item.__name__}: pass {item.__name__}(...).initialize_object()."
        return f"is the class {item.__name__}, not a scheduler: pass an instance: {item.__name__}(...). {accepted}"
    if isinstance(item, torch.optim.Optimizer):
        return f"is an optimizer ({type(item).__name__}), not a scheduler: pass it as optimizers=. {accepted}"
    if isinstance(item, Hparams):
        return f"is the config {type(item).__name__}: pass the function it describes, its .initialize_object()."
    if isinstance(item, str):
        known = f" (recipe names: {sorted(SCHEDULERS)})" if item not in SCHEDULERS else ""
        return f"is a name. {accepted} Names are for recipes{known}."
    if not callable(item):
        return f"({type(item).__name__}) is not a scheduler. {accepted}"
    return None


def check_scheduler_optimizers(schedulers: Sequence[Any], optimizers: Sequence[torch.optim.Optimizer]) -> None:
    """Raises if a torch scheduler steps an optimizer the Trainer does not train with (it would change nothing)."""
    for scheduler in schedulers:
        target = getattr(scheduler, "optimizer", None)
        if isinstance(scheduler, LRScheduler) and not any(target is opt for opt in optimizers):
            raise ValueError(
                f"schedulers holds {type(scheduler).__name__} built on an optimizer the Trainer does not use "
                f"({type(target).__name__} at {id(target):#x}; the Trainer's: "
                f"{[type(opt).__name__ for opt in optimizers]}), so it would never change the learning rate. Build "
                "the scheduler on the optimizer you pass as optimizers= (pass optimizers= yourself if you relied on "
                "the default one)."
            )


def check_grad_accum(grad_accum: Any) -> tuple[int, bool]:
    """The microbatch count to start at and whether it adapts: ``(n, False)`` for a positive int ``n``, ``(1, True)``
    for ``'auto'`` (see :mod:`composer.distributed.microbatching`); anything else raises, naming the fix.

    Example:
        >>> check_grad_accum(4), check_grad_accum("auto")
        ((4, False), (1, True))
        >>> check_grad_accum("automatic")
        Traceback (most recent call last):
        ...
        ValueError: grad_accum='automatic' is not a microbatch count. Expected a positive integer (the microbatches ...
    """
    expected = (
        "Expected a positive integer (the microbatches each batch is split into; 1: none) or 'auto' (start at 1 "
        "and double it whenever a batch runs out of GPU memory)."
    )
    if isinstance(grad_accum, str):
        if grad_accum.strip().lower() == "auto":
            return 1, True
        raise ValueError(f"grad_accum={grad_accum!r} is not a microbatch count. {expected} To fix: grad_accum='auto'.")
    if isinstance(grad_accum, bool):
        raise TypeError(
            f"grad_accum={grad_accum!r} is a bool, not a microbatch count. {expected} To fix: grad_accum=1 (no "
            "accumulation) or grad_accum='auto'."
        )
    if isinstance(grad_accum, float) and grad_accum.is_integer() and grad_accum >= 1:
        raise TypeError(f"grad_accum={grad_accum!r} is a float. {expected} To fix: grad_accum={int(grad_accum)}.")
    if not isinstance(grad_accum, int):
        finite = isinstance(grad_accum, float) and math.isfinite(grad_accum) and grad_accum > 0
        suggestion = max(1, math.ceil(grad_accum)) if finite else 1
        raise TypeError(
            f"grad_accum={grad_accum!r} ({type(grad_accum).__name__}) is not a microbatch count. {expected} To fix: "
            f"grad_accum={suggestion} or grad_accum='auto'."
        )
    if grad_accum < 1:
        raise ValueError(
            f"grad_accum={grad_accum!r} must be at least 1. {expected} To fix: grad_accum=1 (no accumulation) or "
            "grad_accum='auto'."
        )
    return grad_accum, False


# ---- the optimizers against the model -----------------------------------------------------------------------------


def check_optimizer_params(model: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer]) -> None:
    """Raises if an optimizer trains none of the model's parameters; warns if trainable ones are in no optimizer.

    Run once the optimizers are final (after ``INIT`` surgery and the optimizer remap). Parameters with
    ``requires_grad=False`` at that point (frozen on purpose, by the user or an algorithm) need no optimizer.

    Example:
        >>> model, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        >>> check_optimizer_params(model, [torch.optim.SGD(other.parameters(), lr=0.1)])
        Traceback (most recent call last):
        ...
        ValueError: optimizers[0] (SGD) holds 2 parameters and none of them is the model's ...
    """
    named = list(model.named_parameters())
    model_ids = {id(p) for _, p in named}
    covered: set[int] = set()
    for index, optimizer in enumerate(optimizers):
        params = [p for group in getattr(optimizer, "param_groups", []) for p in group.get("params", [])]
        ids = {id(p) for p in params}
        if params and not ids & model_ids:
            raise ValueError(
                f"optimizers[{index}] ({type(optimizer).__name__}) holds {len(ids)} parameters and none of them is "
                f"the model's ({type(model).__name__} has {len(model_ids)}): training would leave the model as it is. "
                f"Build the optimizer on the model you pass: {type(optimizer).__name__}(model.parameters(), ...)."
            )
        covered |= ids
    if not optimizers:
        return
    missing = [(name, p) for name, p in named if p.requires_grad and id(p) not in covered]
    if missing:
        trainable = sum(1 for _, p in named if p.requires_grad)
        values = sum(p.numel() for _, p in missing)
        shown = ", ".join(name for name, _ in missing[:5]) + (", ..." if len(missing) > 5 else "")
        warnings.warn(
            f"{len(missing)} of the model's {trainable} trainable parameters ({values} values: {shown}) are in no "
            "optimizer and will not train. Build the optimizer on model.parameters(), or set requires_grad=False on "
            "the ones you mean to freeze.",
            UserWarning,
            stacklevel=4,  # the user's Trainer(...): through Trainer.__init__ and explain_unknown_keywords
        )


def check_train_data(spec: DataSpec) -> DataSpec:
    """``spec`` itself, once its loader is known not to be empty (a loader without a length passes)."""
    try:
        length = len(spec.dataloader)  # type: ignore[arg-type]
    except TypeError:
        return spec
    if length == 0:
        raise ValueError(
            "train_dataloader is empty (len 0): check the dataset size, batch_size and drop_last, so that at "
            "least one batch is produced."
        )
    return spec


def steps_per_epoch(spec: DataSpec, subset: int | None) -> int | None:
    """The batches per epoch that ``train_subset_num_batches=subset`` leaves (None: the whole loader)."""
    if subset is None:
        return None
    if subset <= 0:
        raise ValueError(f"train_subset_num_batches={subset!r} must be a positive number of batches, or None.")
    try:
        return min(subset, len(spec.dataloader))  # type: ignore[arg-type]
    except TypeError:
        return subset


def evaluator_list(eval_dataloader: Any, interval: Any, subset: int | None) -> list[Evaluator]:
    """``eval_dataloader`` as evaluators: a plain loader becomes ``Evaluator(label='eval')`` with ``interval`` and
    ``subset``; labels must be unique.

    Example:
        >>> [e.label for e in evaluator_list([[1], Evaluator(label="val", dataloader=[2])], "1ep", None)]
        ['eval', 'val']
    """
    if eval_dataloader is None:
        return []
    items = eval_dataloader if isinstance(eval_dataloader, (list, tuple)) else [eval_dataloader]
    evaluators = [
        item
        if isinstance(item, Evaluator)
        else Evaluator(label="eval", dataloader=item, eval_interval=interval, subset_num_batches=subset)
        for item in items
    ]
    labels = [e.label for e in evaluators]
    if len(set(labels)) != len(labels):
        raise ValueError(f"Evaluator labels must be unique, got {labels}; give each Evaluator its own label.")
    return evaluators
