"""An hf_dataset run killed with SIGKILL mid-epoch and started again with the same command ends bitwise equal.

This file is also the command the test runs once, in a fresh process::

    python tests/datasets/test_hf_kill_resume.py FOLDER

FOLDER holds ``rows.parquet`` and a tokenizer folder ``tok``. The command trains 2 epochs of hf_dataset text (two
DataLoader workers, dropout in the model) three times, each in a forked child of the process, which has only imported
modules: into ``FOLDER/killed``, SIGKILLed at the end of batch 10 (the second epoch's third batch; the newest
checkpoint is from batch 9), then the same training again, which resumes; and uninterrupted into
``FOLDER/uninterrupted``. So the data order, the workers' seeds and the random state all have to come back from the
checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from tests.common.forking import in_forked_child

REPO = Path(__file__).resolve().parents[2]
KILL_AT_BATCH = 10


def train(folder: Path, kill_at: int | None) -> None:
    """Trains with autoresume into ``folder`` (a checkpoint every 3 batches); SIGKILLs itself after ``kill_at``."""
    from composer import Callback, Trainer
    from composer.datasets import HFDataset
    from composer.models import GPT, GPTConfig

    class KillAt(Callback):
        def batch_end(self, state, logger):
            if state.timestamp.batch.value == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    source = HFDataset(
        str(folder.parent / "rows.parquet"),
        text_column="text",
        tokenizer=str(folder.parent / "tok"),
        seq_len=8,
        num_workers=2,
        cache_dir=str(folder.parent / "cache"),
    )
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=300, max_sequence_length=8, n_layer=1, n_head=2, n_embd=16, dropout=0.1))
    trainer = Trainer(
        model=model,
        train_dataloader=source.dataloader(batch_size=32, train=True, seed=3),
        max_duration="2ep",
        callbacks=[KillAt()],
        seed=11,
        progress_bar=False,
        save_folder=str(folder),
        save_interval="3ba",
        run_name="hf",
        autoresume=True,
    )
    resumed = trainer.checkpointing.loaded_path
    trainer.fit()
    trainer.close()
    torch.save(
        {"weights": [p.detach() for p in model.parameters()], "resumed": resumed and resumed.name}, folder / "final.pt"
    )


def main(folder: Path) -> None:
    torch.set_num_threads(1)
    import datasets  # noqa: F401 (imported once, before the children fork)

    import composer.trainer  # noqa: F401

    codes = []
    for run, kill_at in (("killed", KILL_AT_BATCH), ("killed", None), ("uninterrupted", None)):
        (folder / run).mkdir(exist_ok=True)
        codes.append(in_forked_child(train, folder / run, kill_at, log=folder / run / "log.txt"))
    (folder / "codes.json").write_text(json.dumps(codes))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork and SIGKILL")
def test_sigkill_mid_epoch_then_the_same_command_ends_bitwise_equal(tmp_path):
    from tests.datasets.text_corpus import documents, trained_tokenizer

    pq.write_table(pa.table({"text": documents(60, seed=5)}), tmp_path / "rows.parquet")
    trained_tokenizer(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with open(tmp_path / "command.txt", "w") as output:  # a file, not a pipe: a killed run's workers may outlive it
        done = subprocess.run(
            [sys.executable, __file__, str(tmp_path)],
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    assert done.returncode == 0, (tmp_path / "command.txt").read_text()
    logs = {run: (tmp_path / run / "log.txt").read_text() for run in ("killed", "uninterrupted")}
    assert json.loads((tmp_path / "codes.json").read_text()) == [-signal.SIGKILL, 0, 0], logs
    expected = torch.load(tmp_path / "uninterrupted" / "final.pt", weights_only=True)
    resumed = torch.load(tmp_path / "killed" / "final.pt", weights_only=True)
    assert (expected["resumed"], resumed["resumed"]) == (None, "ep1-ba9-rank0.pt")  # mid-epoch: 7 batches an epoch
    assert all(torch.equal(a, b) for a, b in zip(resumed["weights"], expected["weights"], strict=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
