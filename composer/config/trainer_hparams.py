"""TrainerHparams: a whole training run as one config (model, data, optimizer, schedule, methods, logging, checkpoints).

In YAML, a field that picks one of several classes (``model``, ``train_dataset``, ``eval_dataset``, ``optimizer``) is
a one-key mapping from the registry name to that class's fields; a field that holds several (``algorithms``,
``schedulers``, ``callbacks``, ``loggers``) is a mapping from registry names to fields, applied in the order written::

    model: {simple_cnn: {in_channels: 1}}
    algorithms:
      label_smoothing: {alpha: 0.1}
      progressive_resizing: {initial_scale: 0.5}

Empty fields (``channels_last: {}`` or ``channels_last:``) take the defaults; a plain name (``model: mlp``) is the
same as a mapping to no fields; ``false`` removes an entry (``algorithms.mixup=false`` on the command line). A list of
one-key mappings is accepted wherever a mapping of several is. The other fields are the Trainer's keyword arguments.

Example:
    >>> config = TrainerHparams.from_dict({
    ...     "model": {"mlp": {"in_features": 64, "hidden": [32]}},
    ...     "train_dataset": {"synthetic_classification": {"shape": [64], "num_samples": 32}},
    ...     "train_batch_size": 8,
    ...     "max_duration": "2ba",
    ...     "algorithms": {"label_smoothing": {"alpha": 0.1}},
    ...     "progress_bar": False,
    ... })
    >>> config.algorithms
    {'label_smoothing': LabelSmoothingHparams(alpha=0.1)}
    >>> config.to_dict()["model"]
    {'mlp': {'in_features': 64, 'hidden': [32], 'num_classes': 10}}
    >>> trainer = config.initialize_object()
    >>> trainer.fit()
    >>> int(trainer.state.timer.batch)
    2
    >>> TrainerHparams.from_dict({**config.to_dict(), "algorithms": {"mixupp": {}}})
    Traceback (most recent call last):
    ...
    composer.config.config_error.ConfigError: algorithms.mixupp: unknown algorithm 'mixupp'. Did you mean 'mixup'? ...
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar

from composer.algorithms.composition import composition_problems
from composer.callbacks import CALLBACK_HPARAMS
from composer.config.config_error import ConfigError, suggest
from composer.config.datasets import DatasetHparams
from composer.config.models import ModelHparams
from composer.config.registry import ALGORITHM_HPARAMS, DATASETS, MODELS
from composer.core.hparams import Hparams, hparams
from composer.core.precision import Precision
from composer.core.time import Time, TimeUnit
from composer.loggers import LOGGER_HPARAMS
from composer.optim.optimizer_hparams import OPTIMIZERS, OptimizerHparams
from composer.optim.scheduler import SCHEDULERS, SchedulerHparams

__all__ = ["TrainerHparams"]

_T = TypeVar("_T")

# Field -> (registry, the noun an error message uses) for fields that pick one class ...
_ONE_OF: dict[str, tuple[Mapping[str, type[Hparams]], str]] = {
    "model": (MODELS, "model"),
    "train_dataset": (DATASETS, "dataset"),
    "eval_dataset": (DATASETS, "dataset"),
    "optimizer": (OPTIMIZERS, "optimizer"),
}


# ... and for fields that hold several.
_SETS: dict[str, tuple[Mapping[str, type[Hparams]], str]] = {
    "algorithms": (ALGORITHM_HPARAMS, "algorithm"),
    "schedulers": (SCHEDULERS, "scheduler"),
    "callbacks": (CALLBACK_HPARAMS, "callback"),
    "loggers": (LOGGER_HPARAMS, "logger"),
}


def _build_entry(path: str, name: str, fields: Any, registry: Mapping[str, type[Hparams]], noun: str) -> Hparams:
    """Builds ``registry[name]`` from ``fields`` (a mapping or None), with errors located at ``path``."""
    if not isinstance(name, str) or name not in registry:
        raise ConfigError(
            path,
            f"unknown {noun} {name!r}.{suggest(str(name), registry)} The valid names are {sorted(registry)} "
            "(run `composer list` for a line on each).",
        )
    config_class = registry[name]
    if fields is None:
        fields = {}
    if not isinstance(fields, Mapping):
        valid = [f.name for f in dataclasses.fields(config_class)]  # type: ignore[arg-type]
        raise ConfigError(
            path,
            f"expected a mapping of {config_class.__name__} fields {valid} (or nothing, for the defaults), got "
            f"{fields!r} ({type(fields).__name__}).",
        )
    try:
        return config_class.from_dict(fields)
    except ValueError as error:
        raise ConfigError(path, str(error)) from None


def _parse_one(field: str, value: Any, registry: Mapping[str, type[Hparams]], noun: str) -> Hparams | None:
    """``{name: fields}`` or ``name`` -> the config; None stays None."""
    if value is None or isinstance(value, Hparams):
        return value
    if isinstance(value, str):
        return _build_entry(f"{field}.{value}", value, None, registry, noun)
    entries = {k: v for k, v in value.items() if v is not False} if isinstance(value, Mapping) else None
    if entries is None or len(entries) != 1:
        got = sorted(entries) if entries is not None else repr(value)
        raise ConfigError(
            field,
            f"expected one {noun} as a one-key mapping {{name: {{fields}}}} or a name, got {got}. The valid names are "
            f"{sorted(registry)}. To switch on the command line, remove the old one too: {field}.OLD=false.",
        )
    ((name, fields),) = entries.items()
    return _build_entry(f"{field}.{name}", name, fields, registry, noun)


def _parse_set(field: str, value: Any, registry: Mapping[str, type[Hparams]], noun: str) -> dict[str, Hparams]:
    """A mapping ``{name: fields}`` or a list of names and one-key mappings -> ``{name: config}``, in order."""
    if value is None:
        return {}
    items: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                items.append((item, None))
            elif isinstance(item, Mapping) and len(item) == 1:
                items.extend(item.items())
            else:
                raise ConfigError(
                    f"{field}.{index}",
                    f"expected a {noun} name or a one-key mapping {{name: {{fields}}}}, got {item!r}.",
                )
    else:
        raise ConfigError(field, f"expected a mapping {{name: {{fields}}}} of {noun}s, got {value!r}.")
    result: dict[str, Hparams] = {}
    for name, fields in items:
        if fields is False:
            continue  # removed, e.g. by an override `algorithms.mixup=false`
        if name in result:
            raise ConfigError(f"{field}.{name}", f"the {noun} {name!r} is given twice; give each {noun} once.")
        result[name] = (
            fields if isinstance(fields, Hparams) else _build_entry(f"{field}.{name}", name, fields, registry, noun)
        )
    return result


def _check_time(name: str, value: str | int, default_unit: TimeUnit | None = TimeUnit.EPOCH) -> None:
    try:
        Time.from_input(value, default_unit=default_unit)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{name}={value!r} is not a time: {error}. Use a number with a unit such as '10ep', '500ba', "
            "'20000sp', '1e6tok' or '0.5dur' (a plain integer means epochs)."
        ) from None


def _build(path: str, make: Callable[[], _T]) -> _T:
    """Runs ``make``; a mistake in what the user asked for becomes a ConfigError located at ``path``."""
    try:
        return make()
    except ConfigError:
        raise
    except ImportError as error:
        if "opencomposer[" not in str(error):
            raise  # a broken install or a bug, not a missing optional extra
        raise ConfigError(path, str(error)) from None
    except (ValueError, TypeError, FileNotFoundError, NotImplementedError) as error:
        raise ConfigError(path, str(error)) from None


@hparams
class TrainerHparams(Hparams):
    """The config of a whole training run; :meth:`initialize_object` builds the :class:`~composer.trainer.Trainer`.

    Load one from YAML with :func:`~composer.config.load_recipe` (which applies command-line overrides), or from a
    dict with :meth:`from_dict`. See the module docstring for the YAML form of the polymorphic fields.

    Args:
        model: The model (``{simple_cnn: {...}}``; see ``composer list``).
        train_dataset: The training data (``{digits: {image_size: 32}}``).
        train_batch_size: Samples per training batch.
        max_duration: How long to train (``'10ep'``, ``'500ba'``, ...; an integer means epochs).
        eval_dataset: The evaluation data, or None.
        eval_batch_size: Samples per evaluation batch. Default: ``train_batch_size``.
        optimizer: The optimizer (``{decoupled_sgdw: {lr: 0.1}}``). Default: the Trainer's (DecoupledSGDW, lr 0.1).
        schedulers: Learning-rate schedulers by name; their multipliers multiply.
        algorithms: Speed-up methods by name, in the order applied.
        callbacks: Callbacks by name.
        loggers: Logger destinations by name.
        seed: Seeds the model's initialization, the data order and every method's random draws. Default: random.

    The remaining fields are the Trainer's keyword arguments of the same names, with the same defaults: ``device``,
    ``precision``, ``grad_accum``, ``grad_clip_norm``, ``scale_schedule_ratio``, ``step_schedulers_every_batch``,
    ``eval_interval``, ``eval_subset_num_batches``, ``train_subset_num_batches``, ``deterministic_mode``,
    ``progress_bar``, ``log_to_console``, and the checkpointing arguments ``run_name``, ``save_folder``,
    ``save_filename``, ``save_latest_filename``, ``save_interval``, ``save_num_checkpoints_to_keep``,
    ``save_overwrite``, ``save_weights_only``, ``load_path``, ``load_weights_only``, ``load_strict_model_weights``,
    ``load_ignore_keys`` and ``autoresume``, and for runs launched on several processes ``dist_timeout``,
    ``ddp_sync_strategy``, ``find_unused_parameters`` and ``fsdp_config`` (a mapping of
    :class:`~composer.trainer.fsdp.FSDPConfig` fields).
    """

    model: ModelHparams
    train_dataset: DatasetHparams
    train_batch_size: int
    max_duration: str | int
    eval_dataset: DatasetHparams | None = None
    eval_batch_size: int | None = None
    optimizer: OptimizerHparams | None = None
    schedulers: dict[str, SchedulerHparams] = dataclasses.field(default_factory=dict)
    algorithms: dict[str, Hparams] = dataclasses.field(default_factory=dict)
    callbacks: dict[str, Hparams] = dataclasses.field(default_factory=dict)
    loggers: dict[str, Hparams] = dataclasses.field(default_factory=dict)
    seed: int | None = None
    device: str | None = None
    precision: str = "fp32"
    grad_accum: int = 1
    grad_clip_norm: float | None = None
    scale_schedule_ratio: float = 1.0
    step_schedulers_every_batch: bool = True
    eval_interval: str | int = 1
    eval_subset_num_batches: int | None = None
    train_subset_num_batches: int | None = None
    deterministic_mode: bool = False
    progress_bar: bool = True
    log_to_console: bool = False
    run_name: str | None = None
    save_folder: str | None = None
    save_filename: str = "ep{epoch}-ba{batch}-rank{rank}.pt"
    save_latest_filename: str | None = "latest-rank{rank}.pt"
    save_interval: str | int = "1ep"
    save_num_checkpoints_to_keep: int = -1
    save_overwrite: bool = False
    save_weights_only: bool = False
    load_path: str | None = None
    load_weights_only: bool = False
    load_strict_model_weights: bool = True
    load_ignore_keys: list[str] | None = None
    autoresume: bool = False
    dist_timeout: float = 300.0
    ddp_sync_strategy: str = "single_auto_sync"
    find_unused_parameters: bool | None = None
    fsdp_config: dict[str, Any] | None = None

    def validate(self) -> None:
        """Checks sizes, times, the precision name, and that each named entry has its registry's class."""
        for name in ("train_batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)!r} must be a positive integer.")
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            raise ValueError(f"eval_batch_size={self.eval_batch_size!r} must be a positive integer (or unset).")
        if self.scale_schedule_ratio <= 0:
            raise ValueError(f"scale_schedule_ratio={self.scale_schedule_ratio!r} must be positive (1.0 = as given).")
        _check_time("max_duration", self.max_duration)
        _check_time("eval_interval", self.eval_interval)
        _check_time("save_interval", self.save_interval)
        try:
            Precision(self.precision)
        except ValueError:
            raise ValueError(
                f"precision={self.precision!r} is unknown; use one of {[p.value for p in Precision]}."
            ) from None
        problems = composition_problems(self.algorithms)
        if problems:
            raise ValueError("algorithms: " + " ".join(problems))
        for field, (registry, noun) in _SETS.items():
            for name, config in getattr(self, field).items():
                if registry.get(name) is not type(config):
                    raise ValueError(
                        f"{field}[{name!r}] holds a {type(config).__name__}; the {noun} {name!r} takes a "
                        f"{getattr(registry.get(name), '__name__', 'registered config')}."
                    )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Builds the config from a parsed recipe, resolving registry names (errors are :class:`ConfigError` s).

        Args:
            data: The recipe as plain values (``model: {name: {fields}}`` and so on).

        Raises:
            ConfigError: Naming the key path, the value and what is allowed.
        """
        if not isinstance(data, Mapping):
            raise ConfigError("", f"a recipe must be a mapping of TrainerHparams fields, got {data!r}.")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key in data:
            if key not in fields:
                raise ConfigError(
                    str(key),
                    f"unknown key.{suggest(str(key), fields)} The valid top-level keys are {list(fields)}.",
                )
        values = dict(data)
        for name, field in fields.items():
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            if required and values.get(name) is None:
                choices = f" Choose one of {sorted(_ONE_OF[name][0])}." if name in _ONE_OF else ""
                raise ConfigError(name, f"required field is missing.{choices}")
        for name, (registry, noun) in _ONE_OF.items():
            if name in values:
                values[name] = _parse_one(name, values[name], registry, noun)
        for name, (registry, noun) in _SETS.items():
            if name in values:
                values[name] = _parse_set(name, values[name], registry, noun)
        try:
            return cls(**values)
        except ValueError as error:
            raise ConfigError("", str(error)) from None

    def to_dict(self) -> dict[str, Any]:
        """Returns the recipe as plain values in the YAML form (registry names as keys), so ``from_dict`` reads it.

        Example:
            >>> config = TrainerHparams.from_dict({"model": "gpt", "train_dataset": "python_docs",
            ...                                    "train_batch_size": 8, "max_duration": "10ba"})
            >>> config.to_dict()["train_dataset"]
            {'python_docs': {'seq_len': 128, 'num_workers': 0}}
            >>> TrainerHparams.from_dict(config.to_dict()) == config
            True
        """
        result: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _ONE_OF:
                if value is not None:
                    value = {self._path(field.name).split(".", 1)[1]: value.to_dict()}
            elif field.name in _SETS:
                value = {name: config.to_dict() for name, config in value.items()}
            elif isinstance(value, list):
                value = list(value)
            result[field.name] = value
        return result

    def initialize_object(self) -> Any:
        """Seeds, builds the model, data, optimizer, schedulers, methods, callbacks and loggers, and the Trainer.

        Returns:
            Trainer: Ready to ``fit()``.

        Raises:
            ConfigError: If something the recipe names cannot be built (a missing file, a wrong data format, a
                missing optional package), located at its key path.
        """
        from composer.trainer import Trainer
        from composer.utils.seeding import new_seed, seed_all

        seed = new_seed() if self.seed is None else self.seed
        seed_all(seed)  # before the model is built, so its initialization follows the seed
        model = _build(self._path("model"), self.model.initialize_object)
        train_dataset, eval_dataset, optimizer_config = self.train_dataset, self.eval_dataset, self.optimizer
        train_data = _build(
            self._path("train_dataset"), lambda: train_dataset.initialize_object(self.train_batch_size, True, seed)
        )
        eval_data = None
        if eval_dataset is not None:
            eval_batch_size = self.eval_batch_size or self.train_batch_size
            eval_data = _build(
                self._path("eval_dataset"), lambda: eval_dataset.initialize_object(eval_batch_size, False, seed)
            )
        optimizer = None
        if optimizer_config is not None:
            optimizer = _build(self._path("optimizer"), lambda: optimizer_config.initialize_object(model.parameters()))
        built: dict[str, Any] = {
            field: [_build(f"{field}.{name}", entry.initialize_object) for name, entry in getattr(self, field).items()]
            for field in _SETS
        }
        kwargs = self._trainer_kwargs(inspect.signature(Trainer).parameters)
        return _build(
            "",
            lambda: Trainer(
                model=model,
                train_dataloader=train_data,
                eval_dataloader=eval_data,
                optimizers=optimizer,
                seed=seed,
                **built,
                **kwargs,
            ),
        )

    def _path(self, field: str) -> str:
        """``field.name``: the key path of a field that picks one class (its registry name follows the field)."""
        config_class = type(getattr(self, field))
        return f"{field}.{next(name for name, cls in _ONE_OF[field][0].items() if cls is config_class)}"

    def _trainer_kwargs(self, parameters: Mapping[str, inspect.Parameter]) -> dict[str, Any]:
        """The fields passed to the Trainer as they are; one set away from its default must exist on the Trainer."""
        handled = {"model", "train_dataset", "train_batch_size", "eval_dataset", "eval_batch_size", "optimizer", "seed"}
        handled |= set(_SETS)
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            if field.name in handled:
                continue
            value = getattr(self, field.name)
            if field.name in parameters:
                kwargs[field.name] = value
            elif value != field.default:
                raise ConfigError(
                    field.name, f"this version of the Trainer has no argument {field.name!r}; remove the key."
                )
        return kwargs
