"""The kinds of things a recipe names, where each kind's registry lives, and the plugins installed for them.

Each kind (algorithms, models, datasets, optimizers, schedulers, callbacks, loggers) has one registry, a literal dict
next to its classes; :data:`KINDS` says where, and which entry-point group installed packages add to it. This module
imports nothing heavy: the ``composer`` command reads it before it knows whether it needs torch.

Example:
    >>> list(KINDS)
    ['algorithms', 'models', 'datasets', 'optimizers', 'schedulers', 'callbacks', 'loggers']
    >>> KINDS["callbacks"].group, KINDS["callbacks"].noun
    ('opencomposer.callbacks', 'callback')
    >>> parse_entry_points("[opencomposer.algorithms]\\nmine = my_pkg.algos:Mine\\n", "my-pkg")
    [EntryPoint(group='opencomposer.algorithms', name='mine', value='my_pkg.algos:Mine', distribution='my-pkg')]
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KINDS", "ONE_OF", "SETS", "TRAINER", "EntryPoint", "Kind", "installed_entry_points", "parse_entry_points"]


@dataclass(frozen=True)
class Kind:
    """Where one kind's registry lives and what its entries must be.

    Attributes:
        name: The kind as ``composer list`` names it (``"algorithms"``).
        noun: One entry, in messages (``"algorithm"``).
        module: The module holding the registry, next to the classes.
        registry: The attribute of ``module``: registry name -> config class.
        built: A literal dict of ``module``: name -> the class the config builds (its docstring is the summary).
        names: The literal dict of ``module`` the registry is read from without importing (default: ``registry``):
            name -> config class, or name -> built class's name when ``suffix`` is set (the config class is that name
            plus ``suffix``).
        suffix: See ``names``.
    """

    name: str
    noun: str
    module: str
    registry: str
    built: str | None = None
    names: str = ""
    suffix: str = ""

    @property
    def group(self) -> str:
        """The entry-point group through which installed packages add to this kind (``opencomposer.<kind>``)."""
        return f"opencomposer.{self.name}"

    @property
    def literal(self) -> str:
        """The literal dict the registry is read from without importing (see ``names``)."""
        return self.names or self.registry


_NAMES = "ALGORITHM_CLASS_NAMES"

KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("algorithms", "algorithm", "composer.algorithms", "ALGORITHM_HPARAMS", _NAMES, _NAMES, "Hparams"),
        Kind("models", "model", "composer.config.models", "MODELS"),
        Kind("datasets", "dataset", "composer.config.datasets", "DATASETS"),
        Kind("optimizers", "optimizer", "composer.optim.optimizer_hparams", "OPTIMIZERS"),
        Kind("schedulers", "scheduler", "composer.optim.scheduler", "SCHEDULERS"),
        Kind("callbacks", "callback", "composer.callbacks", "CALLBACK_HPARAMS", "CALLBACKS"),
        Kind("loggers", "logger", "composer.loggers", "LOGGER_HPARAMS", "LOGGERS"),
    )
}
"""Each kind, in the order ``composer list`` prints them."""

TRAINER = ("composer.config.trainer_hparams", "TrainerHparams")
"""``(module, class)`` of the config of a whole run, whose fields are a recipe's top-level keys."""

ONE_OF: dict[str, str] = {
    "model": "models",
    "train_dataset": "datasets",
    "eval_dataset": "datasets",
    "optimizer": "optimizers",
}
"""The recipe keys that pick one entry of a kind, mapped to the kind."""

SETS: dict[str, str] = {name: name for name in ("algorithms", "schedulers", "callbacks", "loggers")}
"""The recipe keys that hold several entries of a kind (a mapping from name to fields), mapped to the kind."""


@dataclass(frozen=True)
class EntryPoint:
    """One entry point of an installed package: ``name = value`` in ``group``, from ``distribution``."""

    group: str
    name: str
    value: str
    distribution: str


def parse_entry_points(text: str, distribution: str, prefix: str = "opencomposer.") -> list[EntryPoint]:
    """The entry points of the groups starting with ``prefix`` in an ``entry_points.txt``."""
    found: list[EntryPoint] = []
    group = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        section = re.fullmatch(r"\[(.+)\]", line)
        if section:
            group = section.group(1).strip()
        elif group.startswith(prefix) and "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            found.append(EntryPoint(group, name, value, distribution))
    return found


def installed_entry_points(prefix: str = "opencomposer.") -> list[EntryPoint]:
    """The ``opencomposer.*`` entry points of the packages on ``sys.path``, first found first.

    Reads each ``*.dist-info/entry_points.txt`` (and ``*.egg-info``) directly: :mod:`importlib.metadata` costs a tenth
    of a second to import, more than the rest of ``composer --help``. A distribution found twice on the path counts
    where it is found first, as imports do.
    """
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            distribution = re.split(r"-\d", name.rsplit(".", 1)[0], maxsplit=1)[0].replace("_", "-").lower()
            if distribution in seen:
                continue
            seen.add(distribution)
            path = Path(folder or ".") / name / "entry_points.txt"
            try:
                text = path.read_text(encoding="utf-8")
            except OSError:
                continue
            found += parse_entry_points(text, distribution, prefix)
    return found
