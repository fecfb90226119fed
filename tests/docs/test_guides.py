"""Every ```python block of every guide (and of the home page) runs, in order, one namespace per page, in a fresh working directory.

A block that cannot run here (several processes, an object store, the whole main job) is preceded by a line
``<!-- not-run: the reason, and the test that covers it -->``; the reason is required.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [DOCS / "index.md", *sorted((DOCS / "guides").glob("*.md"))]
_BLOCK = re.compile(r"(?:<!-- not-run: (?P<reason>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks(page: Path) -> list[tuple[str, str]]:
    """The page's python blocks: (code, reason not run or '')."""
    return [(m.group("code"), (m.group("reason") or "").strip()) for m in _BLOCK.finditer(page.read_text())]


def test_not_run_markers_give_a_reason():
    for page in PAGES:
        for marker in re.findall(r"<!-- not-run:(.*?)-->", page.read_text()):
            assert marker.strip(), f"{page.name}: a not-run block needs its reason"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.stem)
def test_guide_code_runs(page, tmp_path, monkeypatch, registries_restored):
    monkeypatch.chdir(tmp_path)  # what an example writes lands here
    # The page runs as a module of its own, as a script would, so that dataclasses and pickling can find it.
    module = types.ModuleType(f"guide_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for index, (code, reason) in enumerate(blocks(page)):
        if reason:
            continue
        exec(compile(code, f"{page.name}[python block {index}]", "exec"), namespace)


def test_your_own_data_trains_on_a_folder_of_images_it_writes():
    # Image folders: image_folder_dataloader and the image_folder recipe dataset, in blocks test_guide_code_runs
    # runs, on a folder the example writes itself (nothing downloaded).
    code = "\n".join(code for code, reason in blocks(DOCS / "guides" / "your-own-data.md") if not reason)
    assert "image_folder_dataloader(" in code and "train_dataset: {image_folder: {path:" in code
    assert "load_recipe(" in code and ".save(folder" in code


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[;\s]", requirement, maxsplit=1)[0].lower()


def test_installation_lists_every_extra_with_its_packages():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    text = (DOCS / "guides" / "installation.md").read_text()
    rows = {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", text, re.M)}
    listed = {extra: packages.split(", ") for extra, packages in rows.items()}
    assert listed == {extra: [_requirement_name(r) for r in requirements] for extra, requirements in extras.items()}


def test_installation_tested_row_is_what_the_suite_runs_on():
    # The compatibility table's one tested row names the Python and PyTorch this suite runs on, and the sentence
    # under it the versions of the other packages: when CI installs others, the page must say so.
    text = (DOCS / "guides" / "installation.md").read_text()
    (row,) = [
        line
        for line in text.splitlines()
        if line.endswith("| tested: the whole suite, every guide's code, the main job |")
    ]
    python, torch_version = (cell.strip() for cell in row.strip("|").split("|")[:2])
    assert python == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert torch_version.startswith(".".join(importlib.metadata.version("torch").split(".")[:2]) + " ")
    (others,) = re.findall(r"The tested row's other packages, as CI installed them: (.*?)\. ", text.replace("\n", " "))
    versions = dict(entry.split(" ") for entry in others.split(", "))
    assert {"torchvision", "transformers", "numpy"} <= versions.keys()  # the ones a user pins next to torch
    for name, version in versions.items():
        assert importlib.metadata.version(name).startswith(version + "."), (name, version)


def _keywords(code: str) -> dict[str, object]:
    """The literal keyword arguments of every call in ``code``, by name."""
    calls = (node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call))
    return {
        keyword.arg: ast.literal_eval(keyword.value)
        for call in calls
        for keyword in call.keywords
        if keyword.arg is not None and isinstance(keyword.value, (ast.Constant, ast.Tuple))
    }


def test_getting_started_first_run_has_the_main_jobs_settings():
    # The first run reaches the main job's accuracy (its block asserts it) because it is the baseline recipe of
    # `bash scripts/train` at 6 epochs; keep the two in step.
    recipe = yaml.safe_load((ROOT / "recipes" / "digits_baseline.yaml").read_text())
    first = blocks(DOCS / "guides" / "getting-started.md")[0][0]
    optimizer = recipe["optimizer"]["decoupled_sgdw"]
    expected = {
        "widths": tuple(recipe["model"]["simple_cnn"]["widths"]),
        "batch_size": recipe["train_batch_size"],
        "eval_batch_size": recipe["eval_batch_size"],
        "image_size": recipe["train_dataset"]["digits"]["image_size"],
        "lr": optimizer["lr"],
        "momentum": optimizer["momentum"],
        "weight_decay": optimizer["weight_decay"],
        "nesterov": optimizer["nesterov"],
        "t_warmup": recipe["schedulers"]["linear_decay_with_warmup"]["warmup_time"],
        "max_duration": "6ep",
    }
    keywords = _keywords(first)
    assert {name: keywords.get(name) for name in expected} == expected
    assert "DecoupledSGDW(" in first and "LinearWithWarmupScheduler(" in first
    assert "assert accuracy > 0.985" in first


def test_your_own_data_at_scale_runs_against_a_local_s3_server(s3_env, tmp_path, monkeypatch):
    # The "At scale" section (its python blocks are marked not-run for test_guide_code_runs), in order: the python
    # blocks in one namespace, the bash blocks in bash with this checkout's `composer` first on PATH. The endpoint and
    # the bucket the page shows are replaced by the loopback server's.
    page = (DOCS / "guides" / "your-own-data.md").read_text()
    section = page[page.index("\n## At scale\n") :]
    assert "\n## " not in section[1:], "At scale is the page's last section"
    blocks = re.findall(r"(?:<!-- not-run: ([^>]*?) -->\n)?```(python|bash)\n(.*?)```", section, re.S)
    assert all("tests/docs/test_guides.py" in reason for reason, language, _ in blocks if language == "python")
    bucket = s3_env.create_bucket()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # each process one thread: a tiny model, and busy shared cores
    module = types.ModuleType("guide_your_own_data_at_scale")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    outputs = []
    for index, (_, language, code) in enumerate(blocks):
        code = code.replace("http://127.0.0.1:9000", s3_env.endpoint_url).replace("my-bucket", bucket)
        if language == "python":
            exec(compile(code, f"your-own-data.md[At scale, block {index}]", "exec"), module.__dict__)
        else:
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True, text=True)
            assert run.returncode == 0, run.stderr[-3000:]
            outputs.append(run.stdout + run.stderr)
    converted, killed_and_resumed, _ = outputs
    assert "wrote tokenizer (vocab_size 300)" in converted and "samples to shards" in converted
    assert "exit status 137" in killed_and_resumed
    assert "resumed from checkpoints/at-scale/ep1-ba8-rank0.pt (epoch 1, batch 8)" in killed_and_resumed
