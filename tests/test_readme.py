"""The README's Python examples run as written, in a fresh working directory, and run again as they say they do."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).parents[1] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def checkpoint_block():
    """The example under 'Checkpoints and resumption'."""
    [block] = [block for block in python_blocks() if "autoresume=True" in block]
    return block


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what an example writes lands here, not in the repository
    exec(compile(python_blocks()[index], f"README.md[python block {index}]", "exec"), {})


def _run_until_fit(block, namespace):
    """Runs the example up to its first ``trainer.fit()`` (the Trainer is built, and has resumed if it does)."""
    head, fit, tail = block.partition("trainer.fit()\n")
    assert fit, "the checkpoint example no longer calls trainer.fit()"
    exec(compile(head, "README.md[checkpoint example, up to fit]", "exec"), namespace)
    return fit + tail


@pytest.mark.slow
def test_the_checkpoint_example_resumes_when_run_again(tmp_path, monkeypatch):
    # The same script twice in the same working directory, as a user re-running the command would: the second run
    # finds the first run's checkpoints, resumes from the newest, and starts at its batch instead of batch 0.
    import torch

    from composer.utils.checkpoint import read_checkpoint

    monkeypatch.chdir(tmp_path)
    block = checkpoint_block()

    first: dict = {}
    rest = _run_until_fit(block, first)
    assert first["trainer"].checkpointing.loaded_path is None  # nothing to resume from yet
    assert first["trainer"].state.timer.batch.value == 0
    exec(compile(rest, "README.md[checkpoint example, fit]", "exec"), first)
    trained = first["trainer"].state.timer.batch.value
    weights = {k: v.clone() for k, v in first["trainer"].state.model.state_dict().items()}
    folder = tmp_path / "runs" / "digits-baseline" / "checkpoints"
    assert folder.is_dir() and trained > 0

    second: dict = {}
    rest = _run_until_fit(block, second)
    loaded = second["trainer"].checkpointing.loaded_path
    assert loaded is not None and pathlib.Path(loaded).resolve().parent == folder.resolve()
    saved_batch = read_checkpoint(loaded)["state"]["timer"]["batch"]
    assert second["trainer"].state.timer.batch.value == saved_batch == trained  # resumed where the first stopped
    for key, value in second["trainer"].state.model.state_dict().items():
        assert torch.equal(value, weights[key]), key
    exec(compile(rest, "README.md[checkpoint example, fit]", "exec"), second)
    assert second["trainer"].state.timer.batch.value == trained  # the run was complete: nothing more to train
