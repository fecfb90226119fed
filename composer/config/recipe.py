"""Recipes: YAML files of :class:`~composer.config.TrainerHparams`, with ``key=value`` overrides from the command line.

Parsing and overrides go through OmegaConf: an override is a dotted key path and a YAML value
(``algorithms.mixup.alpha=0.3``, ``max_duration=2ep``, ``seed=null``), and ``${...}`` interpolations resolve
(``eval_batch_size: ${train_batch_size}``). A mapping merges into the mapping it lands on, any other value replaces;
``false`` removes an entry of ``algorithms``, ``schedulers``, ``callbacks`` or ``loggers``. Every problem is reported
at once, each at its key path; the keys, registry names and top-level types are checked without importing torch
(:mod:`composer.config.recipe_schema`). The guide "Recipes, YAML and the composer command" shows it all at work.

Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "recipe.yaml"
    >>> _ = path.write_text('''
    ... model: {mlp: {in_features: 64, hidden: [32]}}
    ... train_dataset: {synthetic_classification: {shape: [64]}}
    ... train_batch_size: 16
    ... max_duration: 1ep
    ... algorithms:
    ...   mixup: {alpha: 0.2}
    ... ''')
    >>> config = load_recipe(path, ["algorithms.mixup.alpha=0.3", "algorithms.label_smoothing.alpha=0.1"])
    >>> config.algorithms
    {'mixup': MixUpHparams(alpha=0.3), 'label_smoothing': LabelSmoothingHparams(alpha=0.1)}
    >>> load_recipe(path, ["train_batch_size=many", "algorithms.mixupp.alpha=0.2", "seed"])
    Traceback (most recent call last):
    ...
    composer.config.config_error.ConfigError: 3 problems in the recipe:
      seed: an override must be KEY=VALUE ...
      train_batch_size: received 'many' (str); expected int. Set train_batch_size: 32.
      algorithms.mixupp: unknown algorithm 'mixupp'. Did you mean 'mixup'? ...
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composer.config.config_error import ConfigError
from composer.config.recipe_schema import schema_problems

if TYPE_CHECKING:
    from composer.config.trainer_hparams import TrainerHparams

__all__ = ["check_algorithms", "load_config", "load_recipe", "read_config", "to_yaml"]


def _omegaconf() -> Any:
    import omegaconf

    return omegaconf


def _parse_overrides(overrides: Sequence[str]) -> Any:
    omegaconf = _omegaconf()
    for override in overrides:
        key, sep, _ = override.partition("=")
        if not sep or not key.strip() or key != key.strip():
            raise ConfigError(
                override,
                "an override must be KEY=VALUE with a dotted key path and no spaces around '=', for example "
                "algorithms.mixup.alpha=0.3 or max_duration=2ep.",
            )
    try:
        return omegaconf.OmegaConf.from_dotlist(list(overrides))
    except Exception as error:  # OmegaConf and YAML raise several types for a malformed value
        raise ConfigError(" ".join(overrides), f"cannot parse the overrides: {error}") from None


def load_config(path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Reads a recipe, applies the overrides in order, resolves interpolations and returns plain values.

    Args:
        path: The YAML file; None starts from an empty recipe (every field from the overrides).
        overrides: ``key=value`` strings.

    Returns:
        dict: The merged recipe.

    Raises:
        ConfigError: If the file is missing or not YAML, or overrides are malformed (listing each).
    """
    config, problems = read_config(path, overrides)
    if problems:
        raise ConfigError.combine(problems)
    return config


def read_config(
    path: str | os.PathLike[str] | None, overrides: Sequence[str]
) -> tuple[dict[str, Any], list[ConfigError]]:
    """:func:`load_config`, with the overrides that cannot be applied skipped and returned as problems, so that a
    caller can report them together with its own (``composer eval`` adds what evaluation needs).

    Args:
        path: The YAML file; None starts from an empty recipe.
        overrides: ``key=value`` strings, applied in order.

    Returns:
        tuple[dict, list[ConfigError]]: The merged recipe (without the skipped overrides), and their problems.

    Raises:
        ConfigError: If the file is missing or not YAML, or an interpolation does not resolve.
    """
    omegaconf = _omegaconf()
    base: Any = omegaconf.OmegaConf.create({})
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise ConfigError(
                str(path), "the recipe file does not exist (pass a YAML file, e.g. recipes/digits_baseline.yaml)."
            )
        try:
            base = omegaconf.OmegaConf.load(file)
        except Exception as error:  # YAML syntax errors and OmegaConf's own
            raise ConfigError(str(path), f"is not a valid YAML recipe: {error}") from None
        if not isinstance(base, omegaconf.DictConfig):
            raise ConfigError(str(path), "a recipe must be a YAML mapping of TrainerHparams fields, not a list.")
    merged = base
    problems: list[ConfigError] = []
    for override in overrides:
        try:
            parsed = _parse_overrides([override])
            merged = omegaconf.OmegaConf.merge(_mergeable(merged, parsed), parsed)
        except ConfigError as error:
            problems.append(error)
        except Exception as error:
            problems.append(ConfigError(override, f"cannot apply the override: {error}"))
    try:
        container = omegaconf.OmegaConf.to_container(merged, resolve=True)
    except Exception as error:  # an interpolation that does not resolve
        unresolved = ConfigError(str(path or ""), f"cannot resolve the recipe: {error}")
        raise ConfigError.combine([*problems, unresolved]) from None
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}, problems


def _mergeable(base: Any, override: Any) -> Any:
    """``base``, changed where OmegaConf cannot merge ``override`` into it ("incompatible container types").

    A list meeting a mapping at the same key is the recipe's list form against a dotted override (or the reverse):
    a list of names and one-key mappings becomes the mapping it stands for, so the override adds to it; the other way
    (a mapping in the recipe, a list on the command line) the recipe's value is dropped, so the list replaces it, as
    any list does. Interpolations (``${...}``) are kept unresolved.
    """
    omegaconf = _omegaconf()
    plain = omegaconf.OmegaConf.to_container(base, resolve=False)
    fixed = _reconcile(plain, omegaconf.OmegaConf.to_container(override, resolve=False))
    return base if fixed is plain else omegaconf.OmegaConf.create(fixed)


def _reconcile(base: Any, override: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(override, dict):
        return base
    changed = dict(base)
    for key, value in override.items():
        if key not in base:
            continue
        current = base[key]
        if isinstance(value, dict) and isinstance(current, list):
            current = _as_mapping(current)
        elif isinstance(value, list) and isinstance(current, dict):
            current = None
        changed[key] = _reconcile(current, value)
    same = changed.keys() == base.keys() and all(changed[k] is base[k] for k in base)
    return base if same else changed


def _as_mapping(items: list[Any]) -> dict[Any, Any] | None:
    """``[name, {name: fields}, ...]`` -> ``{name: fields or None}``, in order; None if it is not such a list."""
    mapping: dict[Any, Any] = {}
    for item in items:
        if isinstance(item, str) and item not in mapping:
            mapping[item] = None
        elif isinstance(item, dict) and len(item) == 1 and next(iter(item)) not in mapping:
            mapping.update(item)
        else:
            return None
    return mapping


def load_recipe(path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()) -> TrainerHparams:
    """Reads a recipe and its overrides into a validated :class:`TrainerHparams`.

    Args:
        path: The YAML file (None: everything from the overrides).
        overrides: ``key=value`` strings, applied in order.

    Returns:
        TrainerHparams: The config; call ``initialize_object()`` for the Trainer.

    Raises:
        ConfigError: Listing every problem, each with the file or the key path, the bad value, and what is allowed.
            Two checks come first, before torch is imported (within a second), each with the malformed overrides:
            a list of methods that do not compose, then the recipe's keys, registry names and top-level types
            (:mod:`composer.config.recipe_schema`). When either finds a problem, the rest of the recipe (the values
            inside each entry, ranges, times, the model against its data) is checked once that is fixed.
    """
    config, problems = read_config(path, overrides)
    try:
        check_algorithms(config)  # cheap, and before the registries import the models and torch
    except ConfigError as error:
        raise ConfigError.combine([*problems, error]) from None
    schema = schema_problems(config)  # keys, names and top-level types, also before torch
    if schema:
        raise ConfigError.combine([*problems, *schema])
    from composer.config.registry import load_entry_points
    from composer.config.trainer_hparams import TrainerHparams

    try:
        load_entry_points()  # the installed plugins' classes, which the recipe may name
        recipe = TrainerHparams.from_dict(config)
    except ConfigError as error:
        raise ConfigError.combine([*problems, error]) from None
    if problems:
        raise ConfigError.combine(problems)
    return recipe


def check_algorithms(config: Any) -> None:
    """Refuses a recipe whose ``algorithms`` hold a pair of methods that do not compose, in one message.

    It reads only the registry names (see :mod:`composer.algorithms.composition`) and imports no model code or torch,
    so ``composer train`` refuses such a recipe at once. Anything else about the recipe is checked later.

    Args:
        config: The recipe as plain values (what :func:`load_config` returns).

    Raises:
        ConfigError: At key ``algorithms``, naming every pair and why it does not compose.

    Example:
        >>> check_algorithms({"algorithms": {"mixup": {"alpha": 0.2}, "label_smoothing": {"alpha": 0.1}}})
        >>> check_algorithms({"algorithms": {"ema": {}, "swa": {}}})
        Traceback (most recent call last):
        ...
        composer.config.config_error.ConfigError: algorithms: EMA and SWA do not compose: ...
    """
    from composer.algorithms.composition import composition_problems

    algorithms = config.get("algorithms") if isinstance(config, dict) else None
    if isinstance(algorithms, dict):
        # Entries set to false are removed by overrides; None means "with its defaults".
        names = [str(name) for name, value in algorithms.items() if value is not False]
        problems = composition_problems(names)
        if problems:
            raise ConfigError("algorithms", " ".join(problems))


def to_yaml(config: TrainerHparams) -> str:
    """Returns the config as YAML that :func:`load_recipe` reads back to an equal config.

    Args:
        config: The validated config, as :func:`load_recipe` returns it.

    Returns:
        str: The YAML text.

    Example:
        >>> from composer.config import TrainerHparams
        >>> config = TrainerHparams.from_dict({"model": "gpt", "train_dataset": "python_docs",
        ...                                    "train_batch_size": 8, "max_duration": "10ba"})
        >>> print(to_yaml(config).splitlines()[0])
        model:
    """
    omegaconf = _omegaconf()
    text: str = omegaconf.OmegaConf.to_yaml(omegaconf.OmegaConf.create(config.to_dict()))
    return text
