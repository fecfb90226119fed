"""The registry manifest: what recipes can name, readable without importing torch.

``composer list`` and the first checks of a recipe need only the names in the registries, the classes they build,
their fields and a line about each, and the top-level fields of :class:`~composer.config.TrainerHparams`, but the
registries themselves import every algorithm, model and dataset, and with them torch (seconds). ``manifest.json``
next to this module holds that information; it is generated from the registries (:data:`composer.config.REGISTRIES`)
and ``TrainerHparams``, and checked against them by ``tests/config/test_manifest.py``. After adding or changing a
registry entry (its fields, or its docstring's first line) or a ``TrainerHparams`` field, regenerate it with::

    python -m composer.config.manifest --write

and ``python -m composer.config.manifest --check`` says whether it is up to date (exit status 1 and the entries
that differ if not).

Example:
    >>> manifest = load_manifest()
    >>> list(manifest)[:3]
    ['algorithms', 'models', 'datasets']
    >>> entry = manifest["algorithms"]["mixup"]
    >>> entry["class"], entry["module"], entry["config"], "alpha" in entry["fields"]
    ('MixUp', 'composer.algorithms.mixup.mixup', 'MixUpHparams', True)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MANIFEST_PATH",
    "REGENERATE",
    "build_manifest",
    "build_trainer_schema",
    "load_manifest",
    "load_trainer_schema",
    "manifest_differences",
    "trainer_differences",
]

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
"""Where the manifest is kept: ``composer/config/manifest.json``, shipped with the package."""

REGENERATE = "python -m composer.config.manifest --write"
"""The command that regenerates the manifest from the registries."""

Manifest = dict[str, dict[str, dict[str, Any]]]


def load_manifest() -> Manifest:
    """Reads the manifest: kind -> registry name -> its entry (imports neither torch nor the registries).

    Each entry holds ``class`` and ``module`` (what the name builds: the algorithm, callback or logger itself where
    there is one, else its config class), ``config`` (the config class), ``fields`` (each config field mapped to
    whether a recipe must give it) and ``summary`` (the first line of the class's docstring, as plain text).

    Returns:
        dict: The manifest, kinds in the order ``composer list`` prints them.
    """
    manifest: Manifest = _document()["kinds"]
    return manifest


def load_trainer_schema() -> dict[str, Any]:
    """Reads the top-level fields of :class:`~composer.config.TrainerHparams` from the manifest (no torch).

    Returns:
        dict: ``fields``: each field mapped to ``required``, ``annotation`` (the type as written in the class; None for
        the fields that name registry entries), and for the typed ones the ``expected`` words, ``numeric`` and the
        ``example`` of a type error's message; ``one_of`` and ``sets``: each field that names one registry entry, or
        several, mapped to ``[kind, noun]``.
    """
    schema: dict[str, Any] = _document()["trainer"]
    return schema


def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    return document


def _plain(line: str) -> str:
    """A docstring line as plain text for a terminal: ``:func:`~a.b.c``` -> ``c``, ````x```` -> ``x``."""
    return re.sub(r":\w+:`~?([\w.]*?)([\w]+)`", r"\2", line).replace("``", "")


def _entry(built: type, config: type) -> dict[str, Any]:
    import dataclasses  # here, not at the top: reading the manifest needs none of it

    doc = (built.__doc__ or "").strip()
    fields = {
        field.name: field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        for field in dataclasses.fields(config)
        if field.init
    }
    from composer.core.hparams import Hparams

    return {
        "class": built.__name__,
        "module": built.__module__,
        "config": config.__name__,
        "config_module": config.__module__,
        "fields": fields,
        # Whether its from_dict is Hparams.from_dict, whose unknown-key message a recipe's first check repeats.
        "plain_from_dict": getattr(getattr(config, "from_dict", None), "__func__", None)
        is getattr(Hparams.from_dict, "__func__", None),
        "summary": _plain(doc.splitlines()[0].strip()) if doc else "",
    }


def build_manifest() -> Manifest:
    """The manifest as the registries are now (imports them, and with them torch).

    Returns:
        dict: The same layout as :func:`load_manifest`, names sorted within each kind.
    """
    from composer.algorithms import ALGORITHMS
    from composer.callbacks import CALLBACKS
    from composer.config.registry import REGISTRIES
    from composer.loggers import LOGGERS

    built: dict[str, Mapping[str, type]] = {"algorithms": ALGORITHMS, "callbacks": CALLBACKS, "loggers": LOGGERS}
    return {
        kind: {name: _entry(built.get(kind, {}).get(name, config), config) for name, config in sorted(registry.items())}
        for kind, registry in REGISTRIES.items()
    }


def build_trainer_schema() -> dict[str, Any]:
    """The part of the manifest that :func:`load_trainer_schema` reads, as ``TrainerHparams`` is now (imports torch).

    Returns:
        dict: The same layout as :func:`load_trainer_schema`.
    """
    import dataclasses

    from composer.config import field_checks, trainer_hparams
    from composer.config.registry import REGISTRIES

    cls = trainer_hparams.TrainerHparams
    polymorphic = {**trainer_hparams._ONE_OF, **trainer_hparams._SETS}
    fields: dict[str, dict[str, Any]] = {}
    for field in dataclasses.fields(cls):
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        fields[field.name] = {"required": required, "annotation": None}
        if field.name not in polymorphic:
            _, expected, numeric = field_checks._adapter(cls, field.name)
            example = field_checks._example(cls, field.name)
            fields[field.name].update(annotation=str(field.type), expected=expected, numeric=numeric, example=example)

    def kind_of(registry: Mapping[str, type]) -> str:
        return next(kind for kind, names in REGISTRIES.items() if dict(names) == dict(registry))

    return {
        "fields": fields,
        "one_of": {name: [kind_of(registry), noun] for name, (registry, noun) in trainer_hparams._ONE_OF.items()},
        "sets": {name: [kind_of(registry), noun] for name, (registry, noun) in trainer_hparams._SETS.items()},
    }


def manifest_differences(written: Manifest, current: Manifest) -> list[str]:
    """One line per entry that differs between the manifest on disk and the registries, naming what differs.

    Args:
        written: The manifest as read (:func:`load_manifest`).
        current: The manifest as built from the registries (:func:`build_manifest`).

    Returns:
        list[str]: Empty when they agree.

    Example:
        >>> written = {"algorithms": {"mixup": {"class": "MixUp"}, "old": {"class": "Old"}}}
        >>> current = {"algorithms": {"mixup": {"class": "MixUp2"}, "new": {"class": "New"}}}
        >>> for line in manifest_differences(written, current):
        ...     print(line)
        algorithms.mixup: class is 'MixUp' in the manifest, 'MixUp2' in the registry
        algorithms.new: in the registry, missing from the manifest
        algorithms.old: in the manifest, no longer in the registry
    """
    lines: list[str] = []
    if list(written) != list(current):
        lines.append(f"kinds: {list(written)} in the manifest, {list(current)} in the registries")
    for kind in current:
        have, want = written.get(kind, {}), current[kind]
        for name in sorted({*have, *want}):
            if name not in have:
                lines.append(f"{kind}.{name}: in the registry, missing from the manifest")
            elif name not in want:
                lines.append(f"{kind}.{name}: in the manifest, no longer in the registry")
            else:
                for key in sorted({*have[name], *want[name]}):
                    if have[name].get(key) != want[name].get(key):
                        lines.append(
                            f"{kind}.{name}: {key} is {have[name].get(key)!r} in the manifest, "
                            f"{want[name].get(key)!r} in the registry"
                        )
    return lines


def trainer_differences(written: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per ``TrainerHparams`` field (or registry-naming field) that differs between manifest and class.

    Args:
        written: What :func:`load_trainer_schema` read.
        current: What :func:`build_trainer_schema` built.

    Returns:
        list[str]: Empty when they agree.

    Example:
        >>> trainer_differences({"fields": {"seed": {"required": False}}}, {"fields": {"seed": {"required": True}}})
        ['trainer.seed: required is False in the manifest, True in TrainerHparams']
    """
    lines: list[str] = []
    for part in sorted({*written, *current}):
        have, want = written.get(part, {}), current.get(part, {})
        for name in [*want, *(name for name in have if name not in want)]:
            if name not in have or name not in want:
                where = "TrainerHparams" if name in want else "the manifest"
                lines.append(f"trainer.{name}: only in {where}")
                continue
            first, second = have[name], want[name]
            if isinstance(first, dict) and isinstance(second, dict):
                for key in sorted({*first, *second}):
                    if first.get(key) != second.get(key):
                        lines.append(
                            f"trainer.{name}: {key} is {first.get(key)!r} in the manifest, "
                            f"{second.get(key)!r} in TrainerHparams"
                        )
            elif first != second:
                lines.append(f"trainer.{name}: {first!r} in the manifest, {second!r} in TrainerHparams")
    return lines


def _write(manifest: Manifest, trainer: dict[str, Any]) -> None:
    document = {"regenerate": REGENERATE, "kinds": manifest, "trainer": trainer}
    MANIFEST_PATH.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m composer.config.manifest --write`` (regenerate) or ``--check`` (exit status 1 if out of date)."""
    parser = argparse.ArgumentParser(prog="python -m composer.config.manifest", description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help=f"regenerate {MANIFEST_PATH.name} from the registries")
    action.add_argument("--check", action="store_true", help="compare it with the registries")
    args = parser.parse_args(argv)
    current, trainer = build_manifest(), build_trainer_schema()
    if args.write:
        _write(current, trainer)
        print(f"wrote {MANIFEST_PATH} ({sum(len(names) for names in current.values())} entries)")
        return 0
    differences = manifest_differences(load_manifest(), current)
    differences += trainer_differences(load_trainer_schema(), trainer)
    for line in differences:
        print(line)
    if differences:
        print(f"the manifest is out of date; regenerate it with: {REGENERATE}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
