import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from composer.loggers import WandBLogger, WandBLoggerHparams, is_wandb_available
from tests.loggers.conftest import assert_same_series, numeric_series

pytestmark = pytest.mark.skipif(not is_wandb_available(), reason="wandb is not installed")


def read_offline_run(wandb_dir):
    """The records of the offline run under ``wandb_dir``, through W&B's own reader (``wandb leet inspect``)."""
    [run_file] = Path(wandb_dir).glob("wandb/offline-run-*/run-*.wandb")
    cli = shutil.which("wandb", path=str(Path(sys.executable).parent)) or "wandb"
    out = subprocess.run([cli, "leet", "inspect", "--json", str(run_file)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow  # W&B starts its service process
def test_offline_run_files_read_back_equal_the_in_memory_logger(run_training, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    memory = run_training(WandBLogger(project="tests", name="tiny", dir=tmp_path))
    records = read_offline_run(tmp_path)
    history = [r["history"] for r in records if r["type"] == "history"]
    written: dict[str, list] = {}
    for row in history:
        for key, value in row["item"].items():
            if not key.startswith("_"):
                written.setdefault(key, []).append((row["step"].get("num", 0), value))
    expected = numeric_series(memory)
    assert set(written) == set(expected)
    for key, series in expected.items():
        assert_same_series(written[key], series, key, rel=1e-12)
    config = {}
    for record in records:
        if record["type"] == "config":
            config.update(record["config"].get("update", {}))
    assert config["trainer/algorithms"] == []
    run = next(r["run"] for r in records if r["type"] == "run")
    assert run["project"] == "tests" and run["display_name"] == "tiny"


def test_bad_mode_and_folder_fail_when_built(tmp_path):
    with pytest.raises(ValueError, match=r"mode='offlne' is not a W&B mode; expected one of \['offline'"):
        WandBLogger(mode="offlne")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"dir='.*file' cannot be written"):
        WandBLogger(dir=tmp_path / "file")


def test_hparams_build_the_logger(tmp_path):
    logger = WandBLoggerHparams(project="p", dir=str(tmp_path)).initialize_object()
    assert logger.init_params["mode"] == "offline" and logger.init_params["project"] == "p"
