"""The Trainer's arguments checked where they are given, so that a mistake is named at its cause.

The one validator of the Trainer's arguments. :func:`argument_problems` checks the values (ranges, times, names,
pairs that must agree) and returns every problem at once, each an :class:`ArgumentProblem` (argument, value,
message, fix); the Trainer raises them (:func:`check_arguments`), and a recipe reports them at its keys, which are
the same names. A single object where a list is expected becomes a one-element list; a class where an instance is
expected, a registry name, a config object or an object of the wrong kind is refused naming the argument, the value,
what is accepted and what to type instead (unknown keywords: :mod:`composer.trainer.keywords`). Once the model
surgery of ``INIT`` is done, the optimizers must train the model they are given with (:func:`check_optimizer_params`).

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

import dataclasses
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler

from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.data_spec import DataSpec
from composer.core.evaluator import Evaluator
from composer.core.hparams import Hparams
from composer.core.logging.logger import LoggerDestination, LogLevel
from composer.core.precision import Precision
from composer.core.time import Time, TimeUnit
from composer.loggers.console import ConsoleLogger

__all__ = [
    "SEED_LIMIT",
    "ArgumentError",
    "ArgumentProblem",
    "algorithm_list",
    "argument_problems",
    "callback_list",
    "check_arguments",
    "check_grad_accum",
    "check_optimizer_params",
    "check_optimizers",
    "check_scheduler_optimizers",
    "check_schedulers",
    "check_train_data",
    "console_loggers",
    "evaluator_list",
    "logger_list",
    "steps_per_epoch",
]


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
    """The microbatch count to start at and whether it adapts: ``(n, False)`` for ``n``, ``(1, True)`` for ``'auto'``
    (see :mod:`composer.distributed.microbatching`). :func:`argument_problems` checks the values; another type raises.

    Example:
        >>> check_grad_accum(4), check_grad_accum("auto")
        ((4, False), (1, True))
    """
    if isinstance(grad_accum, str):
        return 1, True
    if isinstance(grad_accum, int) and not isinstance(grad_accum, bool):
        return grad_accum, False
    finite = isinstance(grad_accum, float) and math.isfinite(grad_accum) and grad_accum > 0
    raise TypeError(
        f"grad_accum={grad_accum!r} ({type(grad_accum).__name__}) is not a microbatch count. Expected a positive "
        "integer (the microbatches each batch is split into; 1: none) or 'auto' (start at 1 and double it whenever a "
        f"batch runs out of GPU memory). To fix: grad_accum={max(1, math.ceil(grad_accum)) if finite else 1}."
    )


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


# ---- the values of the arguments: every problem at once ------------------------------------------------------------

SEED_LIMIT = 2**32
"""Seeds lie in [0, SEED_LIMIT): NumPy's global generator, which every run seeds, takes no others."""

_NO_VALUE = object()


@dataclasses.dataclass(frozen=True)
class ArgumentProblem:
    """What is wrong with one of the Trainer's arguments (or a pair that must agree), and what to write instead.

    The Trainer raises these (:class:`ArgumentError`); a recipe reports them at its keys, which are the arguments'
    names, with the value as YAML writes it.

    Args:
        argument: The keyword (``'seed'``), or the keywords of a pair (``'max_duration and scale_schedule_ratio'``).
        value: The value given (none for a pair: the message names both values).
        message: What was expected; ``{none}`` stands for None (``null`` in a recipe).
        fix: Values that work, the first the usual one; none when the message says what to do.
        separator: Between the value and the message: ``;``, or ``:`` before a sentence of another check.

    Example:
        >>> problem = ArgumentProblem("seed", -1, "expected an integer >= 0, or {none} for a random seed", (0,))
        >>> str(problem)
        'seed=-1; expected an integer >= 0, or None for a random seed. To fix: seed=0.'
        >>> problem.for_recipe()
        'received -1; expected an integer >= 0, or null for a random seed. Set seed: 0.'
    """

    argument: str
    value: Any
    message: str
    fix: tuple[Any, ...] = ()
    separator: str = ";"

    def __str__(self) -> str:
        message = self.message.replace("{none}", "None").rstrip(".")
        fix = " or ".join(f"{self.argument}={value!r}" for value in self.fix)
        given = "" if self.value is _NO_VALUE else f"{self.argument}={self.value!r}{self.separator} "
        return f"{given}{message}." + (f" To fix: {fix}." if fix else "")

    def for_recipe(self) -> str:
        """The problem as a recipe's key reports it: ``received VALUE; MESSAGE. Set KEY: VALUE.``"""
        message = self.message.replace("{none}", "null").rstrip(".")
        fix = ", or ".join(f"{self.argument}: {_yaml(value)}" for value in self.fix)
        given = "" if self.value is _NO_VALUE else f"received {self.value!r}{self.separator} "
        return f"{given}{message}." + (f" Set {fix}." if fix else "")


class ArgumentError(ValueError):
    """The Trainer's arguments have problems (:attr:`problems`); the message lists them all, one per line."""

    def __init__(self, problems: Sequence[ArgumentProblem]) -> None:
        self.problems = list(problems)
        lines = [str(problem) for problem in self.problems]
        text = (
            lines[0]
            if len(lines) == 1
            else f"{len(lines)} problems in the Trainer's arguments:\n  " + "\n  ".join(lines)
        )
        super().__init__(text)


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Raises an :class:`ArgumentError` listing every problem :func:`argument_problems` finds (none: returns)."""
    problems = argument_problems(arguments)
    if problems:
        raise ArgumentError(problems)


def argument_problems(arguments: Mapping[str, Any]) -> list[ArgumentProblem]:
    """Checks the values of the Trainer's arguments, each on its own, and the pairs that must agree.

    The one place these values are checked: the Trainer calls it first thing, and a recipe calls it on its keys
    before it builds anything. An argument that is absent, None, or of a type checked elsewhere (an object the
    Trainer builds with) is not checked here.

    Args:
        arguments: Keyword -> value, as given to the Trainer.

    Returns:
        list[ArgumentProblem]: One per problem, grouped by kind (times first), else in the signature's order.

    Example:
        >>> [str(p) for p in argument_problems({"grad_clip_norm": -1.0, "train_subset_num_batches": 0})]
        ['grad_clip_norm=-1.0; expected a finite number > 0 (the largest gradient norm; None clips nothing). To fix: grad_clip_norm=1.0.', 'train_subset_num_batches=0; expected an integer >= 1 (the batches per epoch), or None for all of them. To fix: train_subset_num_batches=100.']
    """
    values = {name: value for name, value in arguments.items() if value is not None}
    problems = [
        *_time_problems(values),
        *_grad_accum_problems(values.get("grad_accum")),
        *_positive_number(values, "grad_clip_norm", "the largest gradient norm; {none} clips nothing", 1.0),
        *_choice_problems(values),
        *_positive_number(values, "scale_schedule_ratio", "the factor on the run's times (1.0: as given)", 1.0),
        *_scaled_duration_problems(values),
        *_positive_int(values, "eval_subset_num_batches", "the batches per evaluation", "all of them", 20),
        *_positive_int(values, "train_subset_num_batches", "the batches per epoch", "all of them", 100),
        *_seed_problems(values.get("seed")),
        *_keep_problems(values.get("save_num_checkpoints_to_keep")),
        *_grace_period_problems(values.get("preemption_grace_period")),
        *_positive_number(values, "dist_timeout", "seconds to wait for the other processes", 300.0),
        *_config_problems(values),
        *_checkpoint_problems(values),
    ]
    return problems


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive_int(values: Mapping[str, Any], name: str, what: str, none: str, fix: int) -> list[ArgumentProblem]:
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value >= 1:
        return []
    return [ArgumentProblem(name, value, f"expected an integer >= 1 ({what}), or {{none}} for {none}", (fix,))]


def _positive_number(values: Mapping[str, Any], name: str, what: str, fix: float) -> list[ArgumentProblem]:
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (math.isfinite(value) and value > 0):
        return []
    return [ArgumentProblem(name, value, f"expected a finite number > 0 ({what})", (fix,))]


def _grad_accum_problems(value: Any) -> list[ArgumentProblem]:
    what = "the microbatches per batch"
    if isinstance(value, str) and value.strip().lower() != "auto":
        auto = "auto (find the largest microbatch that fits in GPU memory)"
        return [ArgumentProblem("grad_accum", value, f"expected an integer >= 1 ({what}) or {auto}", ("auto", 2))]
    if isinstance(value, int) and not isinstance(value, bool) and value < 1:
        return [ArgumentProblem("grad_accum", value, f"expected an integer >= 1 ({what}, or auto)", (1,))]
    return []


def _seed_problems(seed: Any) -> list[ArgumentProblem]:
    if isinstance(seed, bool) or not isinstance(seed, int) or 0 <= seed < SEED_LIMIT:
        return []
    expected = f"expected an integer in [0, {SEED_LIMIT - 1}] (2**32 - 1), or {{none}} for a random seed"
    return [ArgumentProblem("seed", seed, expected, (0,))]


def _keep_problems(keep: Any) -> list[ArgumentProblem]:
    if isinstance(keep, bool) or not isinstance(keep, int) or keep == -1 or keep >= 1:
        return []
    expected = "expected the number of newest checkpoints to keep (an integer >= 1), or -1 to keep them all"
    return [ArgumentProblem("save_num_checkpoints_to_keep", keep, expected, (-1, 3))]


def _time_problems(values: Mapping[str, Any]) -> list[ArgumentProblem]:
    problems: list[ArgumentProblem] = []
    for name, fix in (("max_duration", "10ep"), ("eval_interval", "1ep"), ("save_interval", "1ep")):
        value = values.get(name)
        if not isinstance(value, (str, int, Time)) or isinstance(value, bool):
            continue  # None, or a function (save_interval): checked where it is called
        try:
            time = Time.from_input(value, default_unit=TimeUnit.EPOCH)
        except (ValueError, TypeError, OverflowError) as error:
            units = "'10ep', '500ba', '20000sp', '1e6tok' or '0.5dur' (a plain integer means epochs)"
            message = f"which is not a time: {str(error).rstrip('.')}. Use a number with a unit such as {units}"
            problems.append(ArgumentProblem(name, value, message, (fix,), separator=","))
            continue
        if time.value <= 0:
            problems.append(ArgumentProblem(name, value, "expected a positive time", (fix,)))
        elif name == "max_duration" and time.unit == TimeUnit.DURATION:
            message = "a fraction of the run, which needs a run length to refer to; expected epochs, batches, samples or tokens"
            problems.append(ArgumentProblem(name, value, message, (fix,), separator=","))
    return problems


def _scaled_duration_problems(values: Mapping[str, Any]) -> list[ArgumentProblem]:
    """``max_duration`` times ``scale_schedule_ratio`` must not round down to nothing (as the State computes it)."""
    duration, ratio = values.get("max_duration"), values.get("scale_schedule_ratio", 1.0)
    if duration is None or not _is_number(ratio) or not (math.isfinite(ratio) and ratio > 0) or ratio == 1:
        return []
    try:
        time = Time.from_input(duration, default_unit=TimeUnit.EPOCH)
        scaled = time * ratio
    except (ValueError, TypeError, OverflowError):
        return []  # reported by the time checks
    if time.value <= 0 or scaled.value != 0:
        return []
    message = (
        f"max_duration {duration!r} times scale_schedule_ratio {ratio!r} rounds down to zero, so nothing would "
        "train. Raise scale_schedule_ratio, or give max_duration in a finer unit (batches or samples)"
    )
    return [ArgumentProblem("max_duration and scale_schedule_ratio", _NO_VALUE, message)]


def _choice_problems(values: Mapping[str, Any]) -> list[ArgumentProblem]:
    """The device (as the Trainer resolves it), the precision and the distributed strategy: names of a fixed set."""
    from composer.distributed.ddp import DDPSyncStrategy
    from composer.utils.devices import resolve_device

    problems: list[ArgumentProblem] = []
    device = values.get("device")
    if isinstance(device, str):
        try:
            resolve_device(device)
        except ValueError as error:
            message = str(error).removeprefix(f"device={device!r} but ")
            problems.append(ArgumentProblem("device", device, message, separator=":"))
    for name, choices in (
        ("precision", [p.value for p in Precision]),
        ("ddp_sync_strategy", [s.value for s in DDPSyncStrategy]),
    ):
        value = values.get(name)
        if isinstance(value, str) and value not in choices:
            problems.append(ArgumentProblem(name, value, f"expected one of {choices}", (choices[0],)))
    return [*problems, *_fsdp_problems(values)]


def _config_problems(values: Mapping[str, Any]) -> list[ArgumentProblem]:
    """``fsdp_config`` and ``profiler`` given as mappings: their keys and values, as their classes check them."""
    from composer.distributed.fsdp import FSDPConfig
    from composer.profiler.profiler import Profiler

    problems: list[ArgumentProblem] = []
    for name, config_class in (("fsdp_config", FSDPConfig), ("profiler", Profiler)):
        config = values.get(name)
        if isinstance(config, Mapping):
            try:
                config_class.from_dict(config)
            except (ValueError, TypeError) as error:
                problems.append(ArgumentProblem(name, dict(config), str(error), separator=":"))
    return problems


def _grace_period_problems(value: Any) -> list[ArgumentProblem]:
    if value is None or (_is_number(value) and 0 < value < 1e9):
        return []
    message = (
        "expected the seconds, from a SIGTERM, to save and upload a checkpoint: a positive number below what the "
        "launcher allows (torchrun kills 30 s after it passes SIGTERM on; Kubernetes' default grace is 30 s)"
    )
    return [ArgumentProblem("preemption_grace_period", value, message, (20.0,))]


def _checkpoint_problems(values: Mapping[str, Any]) -> list[ArgumentProblem]:
    # autoresume with the save arguments it needs (reported at autoresume, the message naming the others' values),
    # load_ignore_keys given as one string, and on_upload_failure.
    from composer.utils.checkpoint import UPLOAD_FAILURE_POLICIES

    messages, folder, autoresume = [], values.get("save_folder"), values.get("autoresume") is True
    unnamed = values.get("run_name") is None and "{run_name}" in f"{folder}{values.get('save_filename', '')}"
    if autoresume and folder is None:
        messages.append(
            "autoresume=True needs save_folder: it resumes from the newest checkpoint saved there. Pass save_folder "
            "(and the same run_name on every launch)"
        )
    elif autoresume and values.get("save_weights_only") is True:
        messages.append(
            "autoresume=True cannot resume from weights-only checkpoints; set save_weights_only=False (the default) "
            "so that checkpoints hold the whole training state"
        )
    elif autoresume and unnamed:
        messages.append(
            f"autoresume=True with save_folder={folder!r} needs a run_name: the folder depends on it, and a "
            "generated name differs on every launch. Pass the same run_name each time"
        )
    problems = [ArgumentProblem("autoresume", _NO_VALUE, message) for message in messages]
    if isinstance(ignore := values.get("load_ignore_keys"), str):
        problems.append(ArgumentProblem("load_ignore_keys", ignore, "expected a list of glob patterns", ([ignore],)))
    if (policy := values.get("on_upload_failure", "raise")) not in UPLOAD_FAILURE_POLICIES:
        message = (
            f"expected one of {list(UPLOAD_FAILURE_POLICIES)}: 'raise' ends the run when an upload fails for good, "
            "'keep_local' trains on and keeps the checkpoints locally until the store answers again"
        )
        problems.append(ArgumentProblem("on_upload_failure", policy, message, UPLOAD_FAILURE_POLICIES))
    return problems


def _fsdp_problems(values: Mapping[str, Any]) -> list[ArgumentProblem]:  # a wrong type, or with precision='amp'
    from composer.distributed.fsdp import FSDPConfig

    config = values.get("fsdp_config")
    if config is None:
        return []
    if not isinstance(config, (FSDPConfig, Mapping)):
        message = f"expected an FSDPConfig, a mapping of its fields, or {{none}} (no FSDP); got {type(config).__name__}"
        return [ArgumentProblem("fsdp_config", config, message)]
    if values.get("precision") not in (Precision.AMP, Precision.AMP.value):
        return []
    message = (
        "precision='amp' cannot be combined with fsdp_config: its gradient scaler decides on each rank's shard of the "
        "gradients alone whether to skip a step, so the ranks could disagree. Use precision='bf16' (no scaler), or "
        "FSDPConfig(param_dtype='bf16') for bfloat16 compute with float32 shards"
    )
    return [ArgumentProblem("precision", _NO_VALUE, message)]
