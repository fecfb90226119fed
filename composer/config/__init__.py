"""Run configuration: TrainerHparams, the registries recipes name things by (and :func:`register` for your own
classes), and YAML recipes with overrides.

The names below are imported when first used, so that ``from composer.config import ConfigError`` (which the
``composer`` command needs before it knows what to run) does not import the models and their dependencies.

Example:
    >>> from composer.config import MODELS, load_recipe
    >>> "simple_cnn" in MODELS
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composer._lazy import lazy_attributes
from composer.config.config_error import ConfigError

if TYPE_CHECKING:
    from composer.config.datasets import DatasetHparams
    from composer.config.models import ModelHparams
    from composer.config.recipe import load_config, load_recipe, to_yaml
    from composer.config.registry import ALGORITHM_HPARAMS, DATASETS, MODELS, REGISTRIES, register
    from composer.config.trainer_hparams import TrainerHparams

__all__ = [
    "ALGORITHM_HPARAMS",
    "DATASETS",
    "MODELS",
    "REGISTRIES",
    "ConfigError",
    "DatasetHparams",
    "ModelHparams",
    "TrainerHparams",
    "load_config",
    "load_recipe",
    "register",
    "to_yaml",
]

_LAZY = {
    "ALGORITHM_HPARAMS": "composer.config.registry",
    "DATASETS": "composer.config.registry",
    "MODELS": "composer.config.registry",
    "REGISTRIES": "composer.config.registry",
    "register": "composer.config.registry",
    "DatasetHparams": "composer.config.datasets",
    "ModelHparams": "composer.config.models",
    "TrainerHparams": "composer.config.trainer_hparams",
    "load_config": "composer.config.recipe",
    "load_recipe": "composer.config.recipe",
    "to_yaml": "composer.config.recipe",
}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
