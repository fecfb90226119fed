"""The registries as a recipe sees them, readable without importing torch: generated from the sources and cached.

``composer list``, ``composer --help`` and the first check of a recipe need each name a registry holds, its config
class's fields (type, default, doc), a line about it, and the top-level fields of
:class:`~composer.config.TrainerHparams`; but the registries import every algorithm, model and dataset, and with them
torch (seconds). This view is generated from the same sources the registries are (:data:`~composer.config.kinds.KINDS`
says where each registry lives) by reading them with :mod:`ast` (:mod:`composer.config.sources`), which imports
nothing, and adds the ``opencomposer.*`` entry points of installed packages, read the same way.

Generating takes a fraction of a second, so the result is cached in ``$XDG_CACHE_HOME/opencomposer`` (else
``~/.cache/opencomposer``): one file per installed location and set of entry points, holding the digest of every
source file it was generated from (the generator's own modules among them). A changed source, an editable install
edited, or a plugin installed or removed regenerates it at the next use; where the cache cannot be written, the view
is generated in memory each time. Classes registered in the running process
(:func:`composer.config.register`) are added when the view is read.

Example:
    >>> manifest = load_manifest()
    >>> list(manifest)[:3]
    ['algorithms', 'models', 'datasets']
    >>> entry = manifest["algorithms"]["mixup"]
    >>> entry["class"], entry["config"], entry["fields"]["alpha"]["required"]
    ('MixUp', 'MixUpHparams', True)
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from composer.config.kinds import KINDS, ONE_OF, SETS, TRAINER, EntryPoint, Kind, installed_entry_points
from composer.config.source_fields import is_config, read_config, read_constructor
from composer.config.sources import ConfigSource, SourceReader, docstring_args, file_digest, plain

__all__ = ["build_view", "cache_folder", "entry_of", "load_manifest", "load_trainer_schema"]

Manifest = dict[str, dict[str, dict[str, Any]]]

_GENERATOR = (
    "composer.config.manifest",
    "composer.config.sources",
    "composer.config.source_fields",
    "composer.config.kinds",
)
_EXAMPLES = ("composer.config.field_checks", "_EXAMPLES")  # the example value a type error suggests, by field


def cache_folder() -> Path:
    """Where the view is cached: ``$XDG_CACHE_HOME/opencomposer``, or ``~/.cache/opencomposer``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opencomposer"


def load_manifest() -> Manifest:
    """Kind -> registry name -> its entry, without importing torch; classes registered in this process included.

    Each entry holds ``class`` and ``module`` (what the name builds: the algorithm, callback or logger itself where
    there is one, else the config class), ``config`` and ``config_module`` (the config class), ``fields`` (each field
    mapped to ``required``, ``type``, ``default`` and ``doc``; None when the source could not be read),
    ``plain_from_dict`` (False when the config reads a recipe its own way), ``summary`` (the first line of the
    docstring, as plain text) and ``origin`` (``built-in``, the distribution of an entry point, or ``registered``).

    Returns:
        dict: The view, kinds in the order ``composer list`` prints them, names sorted within each.
    """
    view: Manifest = {kind: dict(entries) for kind, entries in _cached()["kinds"].items()}
    for kind in KINDS.values():
        module = sys.modules.get(kind.module)
        live = vars(module).get(kind.registry) if module is not None else None
        for name, config in (live or {}).items():
            known = view[kind.name].get(name)
            if known is None or known["config"] != config.__name__ or known["config_module"] != config.__module__:
                view[kind.name][name] = entry_of(config, "registered")
        view[kind.name] = dict(sorted(view[kind.name].items()))
    return view


def load_trainer_schema() -> dict[str, Any]:
    """The top-level fields of :class:`~composer.config.TrainerHparams`, without importing torch.

    Returns:
        dict: ``fields``: each field mapped to ``required``, ``annotation`` (its type as written; None for the fields
        that name registry entries), ``default``, ``doc`` and ``example`` (the value a type error suggests); ``one_of``
        and ``sets``: each field that names one registry entry, or several, mapped to ``[kind, noun]``.
    """
    schema: dict[str, Any] = _cached()["trainer"]
    return schema


@functools.cache
def _cached() -> dict[str, Any]:
    """The view, read once per process."""
    return build_view(cache_folder())


def build_view(folder: Path | None) -> dict[str, Any]:
    """The view from the cache in ``folder`` if it is fresh, else generated (and written there when possible).

    Args:
        folder: The cache folder; None generates without caching.

    Returns:
        dict: ``kinds`` (as :func:`load_manifest`, without the classes registered in this process), ``trainer`` (as
        :func:`load_trainer_schema`), ``files`` (each source read: its modification time, size and digest) and
        ``entry_points``.
    """
    entry_points = installed_entry_points()
    listed = [dataclasses.astuple(entry_point) for entry_point in entry_points]
    where = str(Path(__file__).resolve().parents[1])
    key = hashlib.sha256(json.dumps([where, sys.version_info[:2], listed]).encode()).hexdigest()[:20]
    path = folder / f"registry-view-{key}.json" if folder is not None else None
    if path is not None:
        try:
            document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        else:
            if document.get("entry_points") == [list(item) for item in listed] and _fresh(document.get("files", {})):
                return document
    document = generate(entry_points)
    if path is not None:
        _write(path, document)
    return document


def generate(entry_points: list[EntryPoint]) -> dict[str, Any]:
    """The view generated from the sources (imports nothing): see :func:`build_view`."""
    reader = SourceReader()
    kinds = {kind.name: _kind_entries(reader, kind) for kind in KINDS.values()}
    for entry_point in entry_points:
        kind = KINDS.get(entry_point.group.removeprefix("opencomposer."))
        if kind is not None and entry_point.name not in kinds[kind.name]:
            kinds[kind.name][entry_point.name] = _plugin_entry(reader, entry_point)
    kinds = {kind: dict(sorted(entries.items())) for kind, entries in kinds.items()}
    trainer = _trainer_schema(reader)
    for module in _GENERATOR:
        reader.tree(module)
    files = {path: [*_stat(Path(path)), digest] for path, digest in sorted(reader.files.items())}
    listed = [list(dataclasses.astuple(entry_point)) for entry_point in entry_points]
    return {"kinds": kinds, "trainer": trainer, "files": files, "entry_points": listed}


def _kind_entries(reader: SourceReader, kind: Kind) -> dict[str, dict[str, Any]]:
    names = reader.literal_names(kind.module, kind.literal)
    built = reader.literal_names(kind.module, kind.built) if kind.built else {}
    entries: dict[str, dict[str, Any]] = {}
    for name, class_name in names.items():
        made = (kind.module, built[name]) if name in built else None
        config = read_config(reader, kind.module, class_name + kind.suffix, made)
        entries[name] = _source_entry(reader, config, class_name + kind.suffix, "built-in")
    return entries


def _plugin_entry(reader: SourceReader, entry_point: EntryPoint) -> dict[str, Any]:
    module, _, attribute = entry_point.value.split("[", 1)[0].strip().partition(":")
    config = read_config(reader, module, attribute) if is_config(reader, module, attribute) else None
    config = config or read_constructor(reader, module, attribute)
    return _source_entry(reader, config, attribute, entry_point.distribution)


def _source_entry(reader: SourceReader, config: ConfigSource | None, name: str, origin: str) -> dict[str, Any]:
    """An entry of the view from a config read from source (None: unreadable, so its fields are unknown)."""
    if config is None:
        unknown = {"class": name, "module": "", "config": name, "config_module": "", "fields": None}
        return {**unknown, "plain_from_dict": False, "summary": "", "origin": origin}
    built_module, built_name = config.built or (config.module, config.name)
    if config.built is not None:
        found = reader.resolve(*config.built)
        built_module = found[0] if found is not None else built_module
    doc = reader.class_doc(*config.built) if config.built else config.doc
    fields = {
        field.name: {"required": field.default is None, "type": field.annotation, "default": field.default}
        | {"doc": field.doc}
        for field in config.fields
    }
    return {
        "class": built_name,
        "module": built_module,
        "config": config.name,
        "config_module": config.module,
        "fields": fields,
        "plain_from_dict": config.plain_from_dict,
        "summary": _summary(doc or config.doc),
        "origin": origin,
    }


def entry_of(config: type, origin: str) -> dict[str, Any]:
    """An entry of the view from a config class in this process (imported: a class registered at run time).

    Args:
        config: A config dataclass.
        origin: Where it comes from (``registered``).

    Returns:
        dict: The entry, as :func:`load_manifest` describes it.
    """
    built = getattr(config, "target", None)
    docs = {**docstring_args((built.__doc__ or "") if built else ""), **docstring_args(config.__doc__ or "")}
    fields: dict[str, dict[str, Any]] = {}
    for field in dataclasses.fields(config):
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        factory: Any = field.default_factory
        default = None if required else repr(factory() if field.default is dataclasses.MISSING else field.default)
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        fields[field.name] = {"required": required, "type": kind, "default": default, "doc": docs.get(field.name, "")}
    shown = built or config
    return {
        "class": shown.__name__,
        "module": shown.__module__,
        "config": config.__name__,
        "config_module": config.__module__,
        "fields": fields,
        "plain_from_dict": "from_dict" not in vars(config),
        "summary": _summary(shown.__doc__ or ""),
        "origin": origin,
    }


def _trainer_schema(reader: SourceReader) -> dict[str, Any]:
    config = read_config(reader, *TRAINER)
    examples = reader.literal_names(*_EXAMPLES)
    fields: dict[str, dict[str, Any]] = {}
    for field in config.fields if config is not None else []:
        polymorphic = field.name in ONE_OF or field.name in SETS
        fields[field.name] = {
            "required": field.default is None,
            "annotation": None if polymorphic else field.recipe or field.annotation,
            "default": field.default,
            "doc": field.doc,
            "example": examples.get(field.name) or _example(field.default),
        }
    return {
        "fields": fields,
        "one_of": {name: [kind, KINDS[kind].noun] for name, kind in ONE_OF.items()},
        "sets": {name: [kind, KINDS[kind].noun] for name, kind in SETS.items()},
    }


def _example(default: str | None) -> str:
    """A default written as source (``'fp32'``, ``True``, ``None``) as a recipe writes it (``fp32``, ``true``)."""
    try:
        value = ast.literal_eval(default or "None")
    except (ValueError, SyntaxError):
        return default or ""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _summary(doc: str) -> str:
    lines = doc.strip().splitlines()
    return plain(lines[0].strip()) if lines else ""


def _stat(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _fresh(files: dict[str, list[Any]]) -> bool:
    """Whether every source file the view was generated from is unchanged (by its digest, when it was touched)."""
    if not files:
        return False
    for name, (mtime, size, digest) in files.items():
        path = Path(name)
        try:
            if _stat(path) != (mtime, size) and file_digest(path) != digest:
                return False
        except OSError:
            return False
    return True


def _write(path: Path, document: dict[str, Any]) -> None:
    """Writes the cache atomically; a folder that cannot be written leaves the view in memory only."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass
