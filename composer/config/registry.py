"""The registries a recipe names things by, gathered by kind, and how your own classes join them.

Each kind's registry is a literal dict next to its classes (:data:`~composer.config.kinds.KINDS` says where);
:data:`REGISTRIES` holds those same dicts, by kind. Your own algorithm, callback, logger, model, dataset, optimizer or
scheduler joins them in one of three ways, and a recipe then names it like a built-in:

* in Python, :func:`register` (``register("algorithms", "my_method", MyMethod)``);
* from an installed package, an entry point in the group ``opencomposer.<kind>`` (``my_method =
  my_package.methods:MyMethod``), registered when a recipe is loaded (:func:`load_entry_points`);
* on the command line, ``composer --import my_module train ...`` imports a module that calls :func:`register`.

A recipe itself never imports anything: a name it gives is looked up in the registries and nowhere else.

Example:
    >>> sorted(REGISTRIES)
    ['algorithms', 'callbacks', 'datasets', 'loggers', 'models', 'optimizers', 'schedulers']
    >>> REGISTRIES["models"]["simple_cnn"].__name__
    'SimpleCNNHparams'
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from composer.algorithms import ALGORITHM_HPARAMS
from composer.callbacks import CALLBACK_HPARAMS
from composer.config.config_error import ConfigError, suggest
from composer.config.datasets import DATASETS, DatasetHparams
from composer.config.kinds import KINDS, EntryPoint, installed_entry_points
from composer.config.models import MODELS, ModelHparams
from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.hparams import Hparams, hparams_for
from composer.core.logging.logger import LoggerDestination
from composer.loggers import LOGGER_HPARAMS
from composer.optim.optimizer_hparams import OPTIMIZERS, OptimizerHparams
from composer.optim.scheduler import SCHEDULERS, SchedulerHparams

__all__ = ["ALGORITHM_HPARAMS", "BASES", "DATASETS", "MODELS", "REGISTRIES", "load_entry_points", "register"]

BASES: dict[str, tuple[type[Hparams], type | None]] = {
    "algorithms": (Hparams, Algorithm),
    "models": (ModelHparams, None),
    "datasets": (DatasetHparams, None),
    "optimizers": (OptimizerHparams, None),
    "schedulers": (SchedulerHparams, None),
    "callbacks": (Hparams, Callback),
    "loggers": (Hparams, LoggerDestination),
}
"""Kind -> (the base of its config classes, the base a plain class registered for it must subclass, whose config is
derived from its constructor; None where only config classes are registered)."""

REGISTRIES: dict[str, dict[str, Any]] = {
    "algorithms": ALGORITHM_HPARAMS,
    "models": MODELS,
    "datasets": DATASETS,
    "optimizers": OPTIMIZERS,
    "schedulers": SCHEDULERS,
    "callbacks": CALLBACK_HPARAMS,
    "loggers": LOGGER_HPARAMS,
}
"""Kind -> its registry (the dict next to its classes, not a copy): registry name -> config class."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(kind: str, name: str, cls: type) -> type[Hparams]:
    """Adds ``cls`` to the registry of ``kind`` under ``name``, so that a recipe can name it.

    Args:
        kind: One of :data:`REGISTRIES` (``"algorithms"``, ``"callbacks"``, ...).
        name: The name a recipe will use: letters, digits and underscores, not a built-in name.
        cls: A config class of the kind (an :class:`~composer.core.hparams.Hparams` subclass, for models a
            :class:`~composer.config.ModelHparams`, ...), or for algorithms, callbacks and loggers the class itself (an
            :class:`~composer.core.algorithm.Algorithm`, :class:`~composer.core.callback.Callback` or
            :class:`~composer.core.logging.logger.LoggerDestination`): its config is derived from its constructor.

    Returns:
        The config class registered.

    Raises:
        ValueError: For an unknown kind, a malformed name, or a name that a built-in (or another class) holds.
        TypeError: When ``cls`` is not a class of the kind, saying what it must subclass.
    """
    spec = KINDS.get(kind)
    if spec is None:
        raise ValueError(f"register: unknown kind {kind!r}.{suggest(str(kind), KINDS)} The kinds are {list(KINDS)}.")
    registry = REGISTRIES[kind]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"register({kind!r}, {name!r}, ...): a name is letters, digits and underscores, starting with a letter "
            "(it is a key of a YAML recipe), e.g. 'my_method'."
        )
    holder: type[Hparams] | None = registry.get(name)
    if holder is not None and (holder is cls or getattr(holder, "target", None) is cls):
        return holder  # registered already (an entry point loaded again)
    config = _config_of(spec.name, name, cls)
    if holder is not None:
        origin = "a built-in" if holder.__module__.startswith("composer.") else f"{holder.__module__}.{holder.__name__}"
        raise ValueError(
            f"register({kind!r}, {name!r}, {cls.__name__}): {name!r} already names {origin} {spec.noun} "
            f"({holder.__name__}); choose another name."
        )
    registry[name] = config
    return config


def _config_of(kind: str, name: str, cls: Any) -> type[Hparams]:
    """The config class of ``cls``: itself when it is one of the kind's, else derived from its constructor."""
    spec = KINDS[kind]
    config_base, built_base = BASES[kind]
    if isinstance(cls, type) and issubclass(cls, config_base):
        return cls
    if built_base is not None and isinstance(cls, type) and issubclass(cls, built_base):
        return hparams_for(cls, module=cls.__module__)
    given = cls.__name__ if isinstance(cls, type) else repr(cls)
    wanted = f"a subclass of {config_base.__module__}.{config_base.__name__}"
    if built_base is not None:
        wanted = f"a subclass of {built_base.__module__}.{built_base.__name__} or {wanted} (its config)"
    raise TypeError(
        f"register({kind!r}, {name!r}, {given}): a registered {spec.noun} must be {wanted}; {given} is not. "
        f"Subclass {built_base.__name__ if built_base else config_base.__name__} and register that class."
    )


def load_entry_points(entry_points: list[EntryPoint] | None = None) -> None:
    """Registers the ``opencomposer.<kind>`` entry points of the installed packages (imports their modules).

    Raises:
        ConfigError: At the entry point, for a group that is no kind, a module or class that cannot be loaded, or a
            class that :func:`register` refuses.
    """
    for entry_point in installed_entry_points() if entry_points is None else entry_points:
        where = f"entry point {entry_point.name} = {entry_point.value} ({entry_point.distribution})"
        kind = entry_point.group.removeprefix("opencomposer.")
        if kind not in KINDS:
            raise ConfigError(
                where,
                f"{entry_point.group} is not a group of this library.{suggest(kind, KINDS)} The groups are "
                f"{[spec.group for spec in KINDS.values()]}; fix the package's entry points.",
            )
        module, _, attribute = entry_point.value.split("[", 1)[0].strip().partition(":")
        try:
            loaded: Any = importlib.import_module(module)
            for part in attribute.split(".") if attribute else []:
                loaded = getattr(loaded, part)
        except (ImportError, AttributeError) as error:
            raise ConfigError(
                where, f"cannot be loaded: {error}. Reinstall the package or fix its entry point."
            ) from None
        try:
            register(kind, entry_point.name, loaded)
        except (TypeError, ValueError) as error:
            raise ConfigError(where, str(error)) from None
