"""``composer list [KIND [NAME]]``: what recipes can name, and the fields of one entry.

``composer list`` prints every registered algorithm, model, dataset, optimizer, scheduler, callback and logger, one
line each: the name a recipe uses and the first line of the class's docstring; ``composer list KIND ...`` only those
kinds; ``composer list KIND NAME`` (``composer list datasets image_folder``) each field of that entry: its type, its
default (or ``required``) and its doc; ``composer list trainer`` the same for a recipe's top-level keys (the Trainer's
keyword arguments among them). Everything comes from the view of the registries generated from their sources
(:mod:`composer.config.manifest`), which imports no torch, so the listing appears at once; classes from installed
plugins are listed with the built-in ones, and those of ``composer --import MODULE list`` too.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from composer.config.config_error import ConfigError, suggest
from composer.config.kinds import KINDS
from composer.config.manifest import load_manifest, load_trainer_schema

__all__ = ["add_parser", "describe", "format_entry", "format_listing", "format_trainer"]


def describe(kind: str, name: str) -> str:
    """The first line of the docstring of what ``name`` builds (the algorithm, callback or logger class itself where
    there is one, else its config class).

    Example:
        >>> describe("models", "simple_cnn")
        'Small CNN for images of any size; the model of the built-in digits task (simple_cnn).'
    """
    summary: str = load_manifest()[kind][name]["summary"]
    return summary


def format_listing(kinds: list[str] | None = None) -> str:
    """The listing of ``kinds`` (default: all), a heading per kind and a line per name.

    Example:
        >>> print(format_listing(["optimizers"]).splitlines()[0])
        optimizers:
    """
    manifest = load_manifest()
    lines: list[str] = []
    for kind in kinds or list(manifest):
        entries = manifest[kind]
        width = max(len(name) for name in entries)
        lines.append(f"{kind}:")
        lines += [f"  {name:<{width}}  {entries[name]['summary']}" for name in sorted(entries)]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def format_entry(kind: str, name: str) -> str:
    """Each field of one entry: its name, type, default (``required`` when a recipe must give it) and doc.

    Example:
        >>> print(format_entry("datasets", "cifar10"))
        datasets.cifar10: CIFAR10Hparams (composer.config.datasets)
          CIFAR-10 from the standard archive at your path (cifar_dataloader).
        <BLANKLINE>
          field        type  default   doc
          path         str   required  cifar-10-python.tar.gz, the cifar-10-batches-py folder, or a folder holding either.
          num_workers  int   0         DataLoader worker processes. Default = 0.
    """
    entries = load_manifest()[kind]
    if name not in entries:
        raise ConfigError(
            f"list {kind} {name}",
            f"unknown {KINDS[kind].noun} {name!r}.{suggest(name, entries)} The valid names are {sorted(entries)}.",
        )
    entry = entries[name]
    built = f"{entry['class']} (config {entry['config']}, {entry['config_module']})"
    if entry["class"] == entry["config"]:
        built = f"{entry['config']} ({entry['config_module']})"
    lines = [f"{kind}.{name}: {built}", f"  {entry['summary']}", ""]
    if entry["fields"] is None:
        return "\n".join([*lines, "  (its fields could not be read from its source)"])
    if not entry["fields"]:
        return "\n".join([*lines, "  (no fields)"])
    types = {field: info["type"] or "-" for field, info in entry["fields"].items()}
    return "\n".join([*lines, *_table(entry["fields"], types)])


def format_trainer() -> str:
    """A recipe's top-level keys, as :func:`format_entry` prints an entry's fields (``composer list trainer``)."""
    schema = load_trainer_schema()
    picks = {**schema["one_of"], **{name: [kind, f"{noun}s"] for name, (kind, noun) in schema["sets"].items()}}
    types = {
        field: f"{picks[field][1]} by name (composer list {picks[field][0]})"
        if field in picks
        else re.sub(r"\bStrict(\w+)", lambda match: match.group(1).lower(), info["annotation"])
        for field, info in schema["fields"].items()
    }
    header = "trainer: a recipe's top-level keys (TrainerHparams; the Trainer's keyword arguments among them)"
    return "\n".join([header, "", *_table(schema["fields"], types)])


def _table(fields: dict[str, dict[str, Any]], types: dict[str, str]) -> list[str]:
    rows = [("field", "type", "default", "doc")]
    for field, info in fields.items():
        rows.append((field, types[field], "required" if info["required"] else str(info["default"]), info["doc"]))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    return [f"  {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}".rstrip() for row in rows]


def _run(args: argparse.Namespace) -> int:
    kinds = list(KINDS)
    names = args.kinds
    if names == ["trainer"]:
        print(format_trainer())
        return 0
    if len(names) == 2 and names[0] in kinds and names[1] not in kinds:
        print(format_entry(names[0], names[1]))
        return 0
    unknown = [kind for kind in names if kind not in kinds]
    if unknown:
        raise ConfigError("list", f"unknown kind(s) {unknown}; choose from {kinds} (or KIND NAME for one entry).")
    print(format_listing(names or None))
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer list`` to the command line's subcommands."""
    parser = subparsers.add_parser("list", help="list what recipes can name", description=__doc__)
    parser.add_argument(
        "kinds",
        nargs="*",
        metavar="KIND [NAME]",
        help=f"any of {list(KINDS)} (default: all); KIND NAME prints the fields of one entry; trainer the top-level keys",
    )
    parser.set_defaults(run=_run)
