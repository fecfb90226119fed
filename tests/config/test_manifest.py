"""The registry manifest (composer/config/manifest.json) agrees with the registries and TrainerHparams it is generated
from."""

from __future__ import annotations

from composer.config import REGISTRIES
from composer.config.manifest import (
    REGENERATE,
    build_manifest,
    build_trainer_schema,
    load_manifest,
    load_trainer_schema,
    manifest_differences,
    trainer_differences,
)


def test_the_manifest_matches_the_registries():
    differences = manifest_differences(load_manifest(), build_manifest())
    differences += trainer_differences(load_trainer_schema(), build_trainer_schema())
    assert not differences, (
        f"composer/config/manifest.json is out of date; regenerate it with `{REGENERATE}`. These entries differ:\n"
        + "\n".join(differences)
    )


def test_the_manifest_names_every_registered_class_and_its_fields():
    manifest = load_manifest()
    assert list(manifest) == list(REGISTRIES)
    for kind, registry in REGISTRIES.items():
        assert sorted(manifest[kind]) == sorted(registry)
        for name, config in registry.items():
            entry = manifest[kind][name]
            assert entry["config"] == config.__name__ and entry["config_module"] == config.__module__
            assert set(entry["fields"]) <= set(config.__dataclass_fields__)  # type: ignore[attr-defined]


def test_differences_name_each_entry_and_field():
    current = build_manifest()
    written = {kind: dict(entries) for kind, entries in current.items()}
    del written["algorithms"]["mixup"]
    written["callbacks"]["lr_monitor"] = {**written["callbacks"]["lr_monitor"], "summary": "old words"}
    written["models"]["retired"] = {"class": "Retired"}
    summary = current["callbacks"]["lr_monitor"]["summary"]
    assert manifest_differences(written, current) == [
        "algorithms.mixup: in the registry, missing from the manifest",
        "models.retired: in the manifest, no longer in the registry",
        f"callbacks.lr_monitor: summary is 'old words' in the manifest, {summary!r} in the registry",
    ]


def test_trainer_differences_name_each_field():
    current = build_trainer_schema()
    written = {**current, "fields": dict(current["fields"])}
    del written["fields"]["check_finite"]
    written["fields"]["seed"] = {**written["fields"]["seed"], "example": "7"}
    assert trainer_differences(written, current) == [
        "trainer.seed: example is '7' in the manifest, '0' in TrainerHparams",
        "trainer.check_finite: only in TrainerHparams",
    ]
