"""Run configuration: TrainerHparams, the registries recipes name things by, and YAML recipes with overrides.

Example:
    >>> from composer.config import MODELS, load_recipe
    >>> "simple_cnn" in MODELS
    True
"""

from composer.config.config_error import ConfigError
from composer.config.datasets import DatasetHparams
from composer.config.models import ModelHparams
from composer.config.recipe import load_config, load_recipe, to_yaml
from composer.config.registry import ALGORITHM_HPARAMS, DATASETS, MODELS, REGISTRIES
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
    "to_yaml",
]
