"""TrainerHparams: a whole training run as one config (model, data, optimizer, schedule, methods, logging, checkpoints).

In YAML, a field that picks one of several classes (``model``, ``train_dataset``, ``eval_dataset``, ``optimizer``) is
a one-key mapping from the registry name to that class's fields; a field that holds several (``algorithms``,
``schedulers``, ``callbacks``, ``loggers``) is a mapping from registry names to fields, applied in the order written::

    model: {simple_cnn: {in_channels: 1}}
    algorithms:
      label_smoothing: {alpha: 0.1}
      progressive_resizing: {initial_scale: 0.5}

Empty fields (``channels_last: {}``) take the defaults, and a plain name (``model: mlp``) is the same; a list of
one-key mappings is accepted wherever a mapping of several is. The other fields are the Trainer's keyword arguments,
and every problem of a recipe is reported at once, each at its key.

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
    >>> TrainerHparams.from_dict({**config.to_dict(), "seed": -1, "train_batch_size": True, "max_duraton": 2})
    Traceback (most recent call last):
    ...
    composer.config.config_error.ConfigError: 3 problems in the recipe:
      train_batch_size: received True (bool); expected int (a bool is not a number here). Set train_batch_size: 32.
      seed: received -1; expected an integer in [0, 4294967295] (2**32 - 1), or null for a random seed. Set seed: 0.
      max_duraton: unknown key. Did you mean 'max_duration'? ...
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from pydantic import StrictInt

from composer.config.config_error import ConfigError
from composer.config.datasets import DatasetHparams
from composer.config.field_checks import bool_number_problems, type_problems, value_problems
from composer.config.from_model import fill_from_model
from composer.config.kinds import KINDS, ONE_OF, SETS
from composer.config.models import ModelHparams
from composer.config.recipe_schema import check_registered, in_recipe_order, key_problems, one_entry, set_entries
from composer.config.registry import MODELS, REGISTRIES
from composer.core.hparams import Hparams, derive_fields
from composer.optim.optimizer_hparams import OptimizerHparams
from composer.optim.scheduler import SchedulerHparams
from composer.trainer import Trainer
from composer.trainer.arguments import ArgumentError

__all__ = ["TrainerHparams"]

_T = TypeVar("_T")

# Field -> (its registry, the noun an error message uses), for the fields that pick one entry and those that hold several.
_ONE_OF = {field: (REGISTRIES[kind], KINDS[kind].noun) for field, kind in ONE_OF.items()}
_SETS = {field: (REGISTRIES[kind], KINDS[kind].noun) for field, kind in SETS.items()}
_BUILT = ("train_dataloader", "eval_dataloader", "optimizers")  # the Trainer's arguments built from other keys


def _build_entry(path: str, name: str, fields: Any, registry: Mapping[str, type[Hparams]], noun: str) -> Hparams:
    """Builds ``registry[name]`` from ``fields`` (a mapping or None), with errors located at ``path``."""
    check_registered(path, name, registry, noun)
    config_class = registry[name]
    if fields is None:
        fields = {}
    valid = [f.name for f in dataclasses.fields(config_class)]  # type: ignore[arg-type]
    if not isinstance(fields, Mapping):
        raise ConfigError(
            path,
            f"expected a mapping of {config_class.__name__} fields {valid} (or nothing, for the defaults), got "
            f"{fields!r} ({type(fields).__name__}).",
        )
    problems = bool_number_problems(config_class, fields)
    if problems:  # the checks of the values would see the bools as 0 and 1: report them, and unknown keys
        unknown = [key for key in fields if key not in valid]
        if unknown:
            problems.append(f"unknown key(s) {unknown}; the valid keys are {valid}")
        raise ConfigError(path, f"Invalid {config_class.__name__}: {'; '.join(problems)}.")
    try:
        return config_class.from_dict(fields)
    except ValueError as error:
        raise ConfigError(path, str(error)) from None


def _parse_one(field: str, value: Any, registry: Mapping[str, type[Hparams]], noun: str) -> Hparams | None:
    """``{name: fields}`` or ``name`` -> the config; None stays None."""
    if value is None or isinstance(value, Hparams):
        return value
    name, fields = one_entry(field, value, registry, noun)
    return _build_entry(f"{field}.{name}", name, fields, registry, noun)


def _parse_set(
    field: str, value: Any, registry: Mapping[str, type[Hparams]], noun: str, problems: list[ConfigError]
) -> dict[str, Hparams]:
    """A mapping ``{name: fields}`` or a list of names and one-key mappings -> ``{name: config}``, in order.

    An entry with a problem is left out and its problem appended to ``problems``, so that every entry is checked.
    """
    result: dict[str, Hparams] = {}
    for name, fields in set_entries(field, value, noun, problems):
        try:
            result[name] = (
                fields if isinstance(fields, Hparams) else _build_entry(f"{field}.{name}", name, fields, registry, noun)
            )
        except ConfigError as error:
            problems.append(error)
    return result


def _registry_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """Each named entry must hold its registry's config class (an entry passed as an object, not read from YAML)."""
    problems: list[ConfigError] = []
    for field, (registry, noun) in _SETS.items():
        for name, config in (values.get(field) or {}).items():
            if registry.get(name) is not type(config):
                expected = getattr(registry.get(name), "__name__", "registered config")
                problems.append(
                    ConfigError(
                        f"{field}.{name}",
                        f"holds a {type(config).__name__}; the {noun} {name!r} takes a {expected}.",
                    )
                )
    return problems


def _attempt(problems: list[ConfigError], path: str, make: Callable[[], _T]) -> _T | None:
    """:func:`_build`, with a problem appended to ``problems`` (and None returned) instead of raised."""
    try:
        return _build(path, make)
    except ConfigError as error:
        problems.append(error)
        return None


def _build(path: str, make: Callable[[], _T]) -> _T:
    """Runs ``make``; a mistake in what the user asked for becomes a ConfigError located at ``path``."""
    try:
        return make()
    except (ConfigError, ArgumentError):
        raise
    except ImportError as error:
        if "opencomposer[" not in str(error):
            raise  # a broken install or a bug, not a missing optional extra
        raise ConfigError(path, str(error)) from None
    except (ValueError, TypeError, FileNotFoundError, NotImplementedError) as error:
        raise ConfigError(path, str(error)) from None
    except (RuntimeError, MemoryError) as error:  # torch's, e.g. a model or data too large to allocate
        if not path:
            raise  # from the Trainer itself: a failure of the machine, or a bug
        raise ConfigError(path, f"building it fails with {type(error).__name__}: {error}") from None


@derive_fields(
    Trainer,
    exclude=_BUILT,
    first=(  # literal, for the torch-free view: the written fields, with max_duration and seed where they were
        "model",
        "train_dataset",
        "train_batch_size",
        "max_duration",
        "eval_dataset",
        "eval_batch_size",
        "optimizer",
        "schedulers",
        "algorithms",
        "callbacks",
        "loggers",
        "seed",
    ),
    strict=True,
)
class TrainerHparams(Hparams):
    """The config of a whole training run; :meth:`initialize_object` builds the :class:`~composer.trainer.Trainer`.

    Load one from YAML with :func:`~composer.config.load_recipe` (which applies command-line overrides), or from a
    dict with :meth:`from_dict`. See the module docstring for the YAML form of the polymorphic fields.

    The fields written here are what a recipe adds to the Trainer: the model, the datasets and their batch sizes, and
    the optimizer and the methods by registry name. Every other field is a keyword argument of
    :class:`~composer.trainer.Trainer` with the same name, default and doc, derived from its signature
    (:func:`~composer.core.hparams.derive_fields`); a new keyword of the Trainer is a recipe key with no other edit.
    Values are checked strictly: a bool is not a number and ``'3'`` not an int.

    Args:
        model: The model (``{simple_cnn: {...}}``; see ``composer list``).
        train_dataset: The training data (``{digits: {image_size: 32}}``).
        train_batch_size: Samples per training batch.
        eval_dataset: The evaluation data, or None.
        eval_batch_size: Samples per evaluation batch. Default: ``train_batch_size``.
        optimizer: The optimizer (``{decoupled_sgdw: {lr: 0.1}}``). Default: the Trainer's (DecoupledSGDW, lr 0.1).
        schedulers: Learning-rate schedulers by name; their multipliers multiply.
        algorithms: Speed-up methods by name, in the order applied. ALiBi's paths are filled in from ``model`` when
            the entry gives none (:mod:`composer.config.from_model`).
        callbacks: Callbacks by name.
        loggers: Logger destinations by name.
    """

    model: ModelHparams
    train_dataset: DatasetHparams
    train_batch_size: StrictInt
    eval_dataset: DatasetHparams | None = None
    eval_batch_size: StrictInt | None = None
    optimizer: OptimizerHparams | None = None
    schedulers: dict[str, SchedulerHparams] = dataclasses.field(default_factory=dict)
    algorithms: dict[str, Hparams] = dataclasses.field(default_factory=dict)
    callbacks: dict[str, Hparams] = dataclasses.field(default_factory=dict)
    loggers: dict[str, Hparams] = dataclasses.field(default_factory=dict)

    if TYPE_CHECKING:
        target: ClassVar[type[Trainer]]

        def __getattr__(self, name: str) -> Any:  # the fields derived from Trainer.__init__
            ...

    def validate(self) -> None:
        """Checks sizes, ranges, times, names, the methods' composition, and each named entry's class.

        See :mod:`composer.config.field_checks`; every problem is reported, one after another.
        """
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        problems = [*value_problems(values), *_registry_problems(values)]
        if problems:
            raise ValueError("; ".join(str(problem).rstrip(".") for problem in problems) + ".")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Builds the config from a parsed recipe, resolving registry names (errors are :class:`ConfigError` s).

        Args:
            data: The recipe as plain values (``model: {name: {fields}}`` and so on).

        Raises:
            ConfigError: Listing every problem of the recipe, each with its key path, the value and what is allowed.
        """
        if not isinstance(data, Mapping):
            raise ConfigError("", f"a recipe must be a mapping of TrainerHparams fields, got {data!r}.")
        required = {
            field.name: field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            for field in dataclasses.fields(cls)
        }
        choices = {name: list(registry) for name, (registry, _) in _ONE_OF.items()}
        values, problems = key_problems(data, required, choices)
        for name, (registry, noun) in _ONE_OF.items():
            if name in values:
                try:
                    values[name] = _parse_one(name, values[name], registry, noun)
                except ConfigError as error:
                    problems.append(error)
                    del values[name]
        if "algorithms" in values:  # ALiBi's paths, from the model (composer.config.from_model)
            model = values.get("model")
            path = next((f"model.{name}" for name, cls in MODELS.items() if cls is type(model)), "model")
            values["algorithms"] = fill_from_model(values["algorithms"], model, path, problems)
        for name, (registry, noun) in _SETS.items():
            if name in values:
                values[name] = _parse_set(name, values[name], registry, noun, problems)
        polymorphic = {name: value for name, value in values.items() if name in _ONE_OF or name in _SETS}
        typed, wrong_types = type_problems(cls, {k: v for k, v in values.items() if k not in polymorphic})
        problems += wrong_types
        problems += value_problems({**typed, **polymorphic})
        problems += _registry_problems(polymorphic)
        if problems:
            raise ConfigError.combine(in_recipe_order(problems, [*data, *required]))
        try:
            return cls(**values)
        except ValueError as error:  # a check that only the whole config can make
            raise ConfigError("", str(error)) from None

    @classmethod
    def for_trainer(cls, trainer_class: type[Trainer]) -> type[TrainerHparams]:
        """The config of a subclass of the Trainer: its keyword arguments that this class lacks become fields.

        Args:
            trainer_class: A subclass of :class:`~composer.trainer.Trainer`; each keyword argument it adds (signature
                and docstring) becomes a recipe key with its type, default and doc.

        Returns:
            A subclass of this config whose :meth:`initialize_object` builds ``trainer_class``.
        """
        namespace = {"__module__": trainer_class.__module__, "__qualname__": f"{trainer_class.__name__}Hparams"}
        config_class = type(f"{trainer_class.__name__}Hparams", (cls,), namespace)
        return derive_fields(trainer_class, exclude=_BUILT, strict=True)(config_class)

    def to_dict(self) -> dict[str, Any]:
        """Returns the recipe as plain values in the YAML form (registry names as keys), so ``from_dict`` reads it.

        Example:
            >>> config = TrainerHparams.from_dict({"model": "gpt", "train_dataset": "python_docs",
            ...                                    "train_batch_size": 8, "max_duration": "10ba"})
            >>> config.to_dict()["train_dataset"]
            {'python_docs': {'seq_len': 128, 'num_workers': 0, 'mlm_probability': None, 'mask_token_id': 256, 'tokenizer': None, 'tuning': False}}
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

        Before the Trainer is built, one sample of each dataset goes through the model (:mod:`composer.config.dry_run`),
        so that a model and data that do not fit are refused with both keys named instead of failing mid-run.

        Returns:
            Trainer: Ready to ``fit()``.

        Raises:
            ConfigError: Listing everything the recipe names that cannot be built (a missing file, a wrong data
                format, a missing optional package, a model that does not fit its data), each at its key path.
        """
        from composer.config.dry_run import method_surgery
        from composer.utils.seeding import new_seed, seed_all

        seed = new_seed() if self.seed is None else self.seed
        seed_all(seed)  # before the model is built, so its initialization follows the seed
        problems: list[ConfigError] = []
        model = _attempt(problems, self._path("model"), self.model.initialize_object)
        if model is not None:  # changed as INIT will, before the optimizer and the dry run below see it
            for key, change in method_surgery(self.algorithms):
                _attempt(problems, key, functools.partial(change, model))
        data: dict[str, Any] = {}
        for field, batch_size, train in (
            ("train_dataset", self.train_batch_size, True),
            ("eval_dataset", self.eval_batch_size or self.train_batch_size, False),
        ):
            config = getattr(self, field)
            if config is not None:
                build = functools.partial(config.initialize_object, batch_size, train, seed)
                data[field] = _attempt(problems, self._path(field), build)
        train_data, eval_data = data.get("train_dataset"), data.get("eval_dataset")
        optimizer = None
        if self.optimizer is not None and model is not None:
            build_optimizer = functools.partial(self.optimizer.initialize_object, model.parameters())
            optimizer = _attempt(problems, self._path("optimizer"), build_optimizer)
        built: dict[str, Any] = {
            field: [
                _attempt(problems, f"{field}.{name}", entry.initialize_object)
                for name, entry in getattr(self, field).items()
            ]
            for field in _SETS
        }
        if model is not None:
            problems += self._fit_problems(model, train_data, eval_data)
        if problems:
            raise ConfigError.combine(problems)
        assert model is not None and train_data is not None  # else a problem was raised above
        objects = {
            "model": model,
            "train_dataloader": train_data,
            "eval_dataloader": eval_data,
            "optimizers": optimizer,
        }
        return self._build_trainer(**objects, seed=seed, **built, **self._trainer_kwargs())

    def _fit_problems(self, model: Any, train_data: Any, eval_data: Any) -> list[ConfigError]:
        """The dry run: one sample of each dataset through the model (:mod:`composer.config.dry_run`).

        Run after everything else is built; the Trainer seeds again, so this draws nothing from the run's generators.
        """
        from composer.config.dry_run import fit_problems, method_extremes, method_limits

        problems: list[ConfigError] = []
        extremes, limits = method_extremes(self.algorithms), method_limits(self.algorithms)
        for field, data, train in (("train_dataset", train_data, True), ("eval_dataset", eval_data, False)):
            if data is not None:
                config, path, model_path = getattr(self, field), self._path(field), self._path("model")
                extreme = extremes if train else None
                problems += fit_problems(self.model, model_path, model, config, path, data, train, extreme, limits)
        return problems

    def _build_trainer(self, **kwargs: Any) -> Any:
        """The Trainer (or the subclass this config derives from); its problems located at their recipe keys."""
        try:
            return _build("", lambda: type(self).target(**kwargs))
        except ArgumentError as error:  # its arguments' values (trainer/arguments.py): each at its key, the same name
            raise ConfigError.combine([ConfigError(p.argument, p.for_recipe()) for p in error.problems]) from None
        except ConfigError as error:  # the Trainer's other checks: at the key their message names first
            raise ConfigError(self._locate(error.message), error.message) from None
        except RuntimeError as error:  # e.g. fsdp_config in a run that is not launched; else the machine's failure
            where = self._locate(str(error))
            if not where:
                raise
            raise ConfigError(where, str(error)) from None

    def _locate(self, message: str) -> str:
        """The recipe key a Trainer error is about, other than its arguments' values (those come as problems).

        Messages name their argument first (``autoresume=True needs ...``, ``fsdp_config was given ...``): a top-level
        field, or a field of an entry, which locates the entry (``warmup_time=...``: ``schedulers.cosine_decay``). A
        message about a file names it by its path (``load_path``, ``save_folder``).
        """
        first = "".join(itertools.takewhile(lambda c: c.isalnum() or c == "_", message))
        if first in {field.name for field in dataclasses.fields(self)}:
            return first
        for field in (*_ONE_OF, *_SETS):
            value = getattr(self, field)
            entries = value.items() if field in _SETS else [] if value is None else [(None, value)]
            for name, entry in entries:
                if first in {f.name for f in dataclasses.fields(entry)}:
                    return f"{field}.{name}" if name is not None else self._path(field)
        for name in ("load_path", "save_folder"):
            value = getattr(self, name)
            if value and str(value) in message:
                return name
        return ""

    def _path(self, field: str) -> str:
        """``field.name``: the key path of a field that picks one class (its registry name follows the field)."""
        config_class = type(getattr(self, field))
        return f"{field}.{next(name for name, cls in _ONE_OF[field][0].items() if cls is config_class)}"

    def _trainer_kwargs(self) -> dict[str, Any]:
        """The fields the Trainer takes as they are (the model, data, optimizer, seed and sets are built first)."""
        handled = {"model", "train_dataset", "train_batch_size", "eval_dataset", "eval_batch_size", "optimizer", "seed"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in handled | set(_SETS)}
