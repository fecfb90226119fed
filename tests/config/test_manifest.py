"""The registry view (composer/config/manifest.py) agrees with the registries it is generated from, and its cache is
regenerated when a source or the installed entry points change."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from composer.cli.listing import format_trainer
from composer.config import REGISTRIES, TrainerHparams
from composer.config.kinds import KINDS
from composer.config.manifest import build_view, cache_folder, load_manifest, load_trainer_schema
from composer.config.source_fields import read_config
from composer.config.sources import SourceReader, docstring_args

BUILT = {"algorithms": "ALGORITHMS", "callbacks": "CALLBACKS", "loggers": "LOGGERS"}


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def test_the_view_matches_the_registries():
    """Every registered class, as imported, against what the view read from its source: a drift in the generator
    (a field it misreads, a base it does not follow) fails here, entry by entry."""
    manifest = load_manifest()
    assert list(manifest) == list(REGISTRIES) == list(KINDS)
    for kind, registry in REGISTRIES.items():
        assert sorted(manifest[kind]) == sorted(registry), kind
        built = getattr(sys.modules[KINDS[kind].module], BUILT[kind], {}) if kind in BUILT else {}
        for name, config in registry.items():
            entry = manifest[kind][name]
            made = built.get(name) or getattr(config, "target", None) or config  # what it builds
            where = f"{kind}.{name}"
            assert (entry["config"], entry["config_module"]) == (config.__name__, config.__module__), where
            assert (entry["class"], entry["module"]) == (made.__name__, made.__module__), where
            fields = {field.name: _required(field) for field in dataclasses.fields(config) if field.init}
            assert {field: info["required"] for field, info in entry["fields"].items()} == fields, where
            assert list(entry["fields"]) == list(fields), where
            summary = (made.__doc__ or "").strip().splitlines()[0]
            assert entry["summary"].split(" ")[0] == summary.split(" ")[0].replace("``", ""), where
            docs = {**docstring_args(made.__doc__ or ""), **docstring_args(config.__doc__ or "")}
            assert {field: info["doc"] for field, info in entry["fields"].items()} == {
                field: docs.get(field, "") for field in fields
            }, where


def test_the_trainer_schema_matches_trainer_hparams():
    schema = load_trainer_schema()
    fields = {field.name: _required(field) for field in dataclasses.fields(TrainerHparams)}
    assert {name: info["required"] for name, info in schema["fields"].items()} == fields
    assert list(schema["fields"]) == list(fields)
    assert set(schema["one_of"]) | set(schema["sets"]) <= set(fields)


def _plugin(site: Path, body: str, entry_points: str) -> None:
    (site / "tiny_plugin").mkdir(parents=True, exist_ok=True)
    (site / "tiny_plugin" / "__init__.py").write_text(textwrap.dedent(body))
    info = site / "tiny_plugin-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


PLUGIN = '''
from composer.core.algorithm import Algorithm


class Shout(Algorithm):
    """Says something at each event.

    Args:
        volume: How loud.
    """

    def __init__(self, volume: int = 3):
        self.volume = volume
'''


def test_the_cache_is_regenerated_when_a_source_or_an_entry_point_changes(tmp_path, monkeypatch):
    site, cache = tmp_path / "site", tmp_path / "cache"
    _plugin(site, PLUGIN, "[opencomposer.algorithms]\nshout = tiny_plugin:Shout\n")
    monkeypatch.syspath_prepend(str(site))
    view = build_view(cache)
    (written,) = cache.glob("registry-view-*.json")
    assert json.loads(written.read_text())["kinds"] == view["kinds"]
    shout = view["kinds"]["algorithms"]["shout"]
    assert shout["fields"] == {"volume": {"required": False, "type": "int", "default": "3", "doc": "How loud."}}
    assert (shout["class"], shout["origin"], shout["summary"]) == (
        "Shout",
        "tiny-plugin",
        "Says something at each event.",
    )
    assert str(site / "tiny_plugin" / "__init__.py") in view["files"]

    written.write_text(json.dumps({**view, "trainer": "read from the cache"}))
    assert build_view(cache)["trainer"] == "read from the cache"  # fresh: read back, not generated

    source = site / "tiny_plugin" / "__init__.py"
    source.write_text(PLUGIN.replace("volume: int = 3", "volume: int = 3, pitch: float = 1.0"))
    os.utime(source, ns=(1, 1))  # a changed source, whatever the clock's resolution
    again = build_view(cache)
    assert again["trainer"] != "read from the cache"
    assert list(again["kinds"]["algorithms"]["shout"]["fields"]) == ["volume", "pitch"]

    _plugin(site, PLUGIN, "[opencomposer.algorithms]\nshout = tiny_plugin:Shout\nwhisper = tiny_plugin:Shout\n")
    assert "whisper" in build_view(cache)["kinds"]["algorithms"]  # another set of entry points: another file
    assert len(list(cache.glob("registry-view-*.json"))) == 2


def test_an_unwritable_cache_leaves_the_view_in_memory(tmp_path):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    view = build_view(blocked / "opencomposer")
    assert "mixup" in view["kinds"]["algorithms"] and blocked.is_file()


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_folder() == tmp_path / "opencomposer"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_folder() == Path.home() / ".cache" / "opencomposer"


def test_the_generator_reads_a_trainer_subclass_with_one_more_keyword(tmp_path, monkeypatch):
    """A config derived from a constructor (``derive_fields``) takes its fields from the signature and its docs from
    the docstring: a keyword added to a Trainer subclass is a recipe key, typed and documented, with no other edit."""
    (tmp_path / "my_trainer.py").write_text(
        textwrap.dedent(
            '''
            from composer.core.hparams import Hparams, derive_fields
            from composer.trainer import Trainer


            class MyTrainer(Trainer):
                """A Trainer with one more knob.

                Args:
                    knob: How far to turn it.
                """

                def __init__(self, *args, knob: float = 0.5, **kwargs):
                    super().__init__(*args, **kwargs)


            @derive_fields(MyTrainer, strict=True)
            class MyTrainerHparams(Hparams):
                """The config of MyTrainer.

                Args:
                    model: The model's name.
                """

                model: str
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = read_config(SourceReader(), "my_trainer", "MyTrainerHparams")
    assert config is not None and config.built == ("my_trainer", "MyTrainer")
    assert [(f.name, f.annotation, f.default, f.doc, f.recipe) for f in config.fields] == [
        ("model", "str", None, "The model's name.", ""),
        ("knob", "float", "0.5", "How far to turn it.", "StrictFloat | StrictInt"),
    ]


def test_a_trainer_keyword_is_listed_with_its_type_default_and_doc():
    """``composer list trainer`` shows the Trainer's keywords from the view (its signature and docstring)."""
    listed = {line.split()[0]: line for line in format_trainer().splitlines()[3:]}
    assert list(listed) == list(load_trainer_schema()["fields"])
    assert listed["progress_bar"].split()[1:3] == ["bool", "True"]
    assert listed["algorithms"].split()[1:4] == ["algorithms", "by", "name"]


def test_the_generator_follows_the_rules_of_hparams_for(tmp_path, monkeypatch):
    """What a recipe cannot give is left out, ``defaults``, ``exclude`` and ``first`` apply, an enum default is its
    value and a tuple a list, type aliases expand, names imported for type checking only are Python's."""
    (tmp_path / "my_methods.py").write_text(
        textwrap.dedent(
            """
            import enum
            from collections.abc import Callable
            from typing import TYPE_CHECKING, Any

            from composer.core.hparams import REQUIRED, hparams_for

            if TYPE_CHECKING:
                from torch import Tensor

            Size = int | tuple[int, int] | Callable[..., int]
            FIRST = ("mode",)


            class Mode(enum.Enum):
                FAST = "fast"
                SLOW = 2


            class Method:
                def __init__(self, size: Size, hook: Callable[[], None] | None = None, mode: Mode = Mode.SLOW,
                             shape: tuple[int, ...] = (1, 2), widths: list[int] = (3,), mask: "Tensor | None" = None,
                             anything: Any = None, skipped: int = 1, ghost: int = 4):
                    pass


            MethodHparams = hparams_for(Method, exclude=("skipped",), defaults={"ghost": REQUIRED}, first=[*FIRST])
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = read_config(SourceReader(), "my_methods", "MethodHparams")
    assert (config.name, config.module, config.built) == ("MethodHparams", "my_methods", ("my_methods", "Method"))
    assert [(f.name, f.default) for f in config.fields] == [
        ("mode", "'slow'"),
        ("size", None),
        ("shape", "(1, 2)"),
        ("widths", "[3]"),
        ("ghost", None),
    ]


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_registry_is_a_literal_next_to_its_classes(kind):
    """The view reads each registry from its source: it must stay a literal dict of names there."""
    spec = KINDS[kind]
    names = SourceReader().literal_names(spec.module, spec.literal)
    assert sorted(names) == sorted(REGISTRIES[kind])
