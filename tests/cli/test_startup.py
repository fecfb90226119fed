"""Start-up: the commands that need no torch do not import it (``composer --help``, ``list``, ``<cmd> --help``, and
``composer train`` with a recipe whose keys, names or top-level types are wrong).

Each case runs the command's ``main`` in a fresh interpreter and inspects ``sys.modules`` afterwards; a subprocess
costs a few hundred milliseconds because nothing heavy is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.recipes import write_recipe

HEAVY = ("torch", "torchmetrics", "torchvision", "transformers", "numpy", "matplotlib")

_PROBE = """
import contextlib, io, json, sys
from composer.cli.__main__ import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit:  # argparse's --help
        code = exit.code
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "modules": sorted(sys.modules)}))
"""


def _run(*argv: str, cache: Path | None = None) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)} if cache is not None else None
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["list"],
        ["list", "algorithms"],
        ["list", "datasets", "image_folder"],
        ["list", "trainer"],
        ["train", "--help"],
        ["eval", "--help"],
        ["compare", "--help"],
        ["launch", "--help"],
        ["checkpoint", "--help"],
        ["tokenizer", "train", "--help"],
        ["data", "convert", "--help"],
    ],
)
def test_help_and_list_import_no_torch(argv):
    result = _run(*argv)
    assert result["code"] == 0 and result["out"]
    imported = [name for name in HEAVY if name in result["modules"]]
    assert imported == [], f"composer {' '.join(argv)} imported {imported}"


def test_a_cold_cache_generates_the_view_without_torch(tmp_path):
    """Right after an install (nothing cached), the view of the registries is generated from their sources."""
    result = _run("list", "datasets", "image_folder", cache=tmp_path)
    assert result["code"] == 0 and "crop_size" in result["out"]
    assert [name for name in HEAVY if name in result["modules"]] == []
    assert list((tmp_path / "opencomposer").glob("registry-view-*.json"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train_batch_size=big", "train_batch_size: received 'big' (str); expected int."),
        ("algorithms.mixupp.alpha=1", "algorithms.mixupp: unknown algorithm 'mixupp'. Did you mean 'mixup'?"),
        ("max_duraton=2ep", "max_duraton: unknown key. Did you mean 'max_duration'?"),
        ("model.mlp.hiden=[4]", "model.mlp: MLPHparams got unknown key(s) ['hiden']"),
    ],
)
def test_a_recipe_schema_error_imports_no_torch(tmp_path, override, message):
    result = _run("train", "-f", str(write_recipe(tmp_path)), override)
    assert result["code"] == 2 and result["err"].startswith(f"composer train: error: {message}")
    imported = [name for name in HEAVY if name in result["modules"]]
    assert imported == [], f"composer train ... {override} imported {imported}"


_TRAINER_PROBE = """
import json, sys
from composer import Trainer
trainer_imports = sorted(sys.modules)
from composer.datasets import digits_dataloaders
train_dl, _ = digits_dataloaders(batch_size=64)
digits_imports = sorted(sys.modules)
import composer.config.registry
registry_imports = sorted(sys.modules)
from composer.algorithms.stochastic_depth import STOCHASTIC_LAYER_MAPPING
names = sorted(STOCHASTIC_LAYER_MAPPING)
listed = "torchvision" in sys.modules
block = STOCHASTIC_LAYER_MAPPING["TorchvisionBottleneck"][0]
print(json.dumps({"trainer": trainer_imports, "digits": digits_imports, "registry": registry_imports,
                  "names": names, "listed": listed, "read": [block.__module__, "torchvision" in sys.modules]}))
"""


def test_the_trainer_and_the_digits_import_only_torch():
    """``from composer import Trainer`` needs torch alone: metrics import torchmetrics when a model builds them; the
    digits are read without importing scikit-learn (and pandas); the registries (every method's config, which the
    full recipe check imports) add none of them either."""
    done = subprocess.run([sys.executable, "-c", _TRAINER_PROBE], capture_output=True, text=True, check=True)
    modules = json.loads(done.stdout)
    heavy = ("torchmetrics", "torchvision", "transformers", "matplotlib", "sklearn", "pandas", "scipy")
    assert [name for name in heavy if name in modules["trainer"]] == []
    assert [name for name in heavy if name in modules["digits"]] == []
    assert [name for name in heavy if name in modules["registry"]] == []
    # StochasticDepth's table lists torchvision's blocks without importing torchvision, and imports it when one of
    # them is read.
    assert modules["names"] == [
        "ResNetBasicBlock",
        "ResNetBottleneck",
        "TorchvisionBasicBlock",
        "TorchvisionBottleneck",
    ]
    assert modules["listed"] is False
    assert modules["read"] == ["torchvision.models.resnet", True]
