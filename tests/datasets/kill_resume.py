"""Kill-and-resume runs of ``composer train`` over each recipe data source, on 1 or more ranks, with real processes.

One case is a source (``text_files``, ``hf_dataset`` or ``streaming``: a tiny GPT on the same documents, packed by a
BPE tokenizer trained for the case), a number of DataLoader workers and a number of ranks. Its recipe runs three
times with ``autoresume`` and a checkpoint after every batch: uninterrupted; SIGKILLed (every rank) at the end of a
batch in the middle of the second epoch; and the same command again, which resumes from the newest checkpoint (the
batch before). Several ranks run through ``composer launch -n N -m composer.cli ...`` (torchrun), on CPU with gloo.
The case passes when the resumed run ends with weights bitwise equal to the uninterrupted run's; resumed on another
number of ranks (``streaming`` only), when the second epoch trains the uninterrupted run's samples, none twice.

Used by tests/datasets/test_text_kill_resume.py (CI: one case) and benchmarks/data_resume_matrix.py (every case).
The callback that kills and saves is tests/datasets/kill_resume_hooks.py, imported with ``composer --import``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tests.datasets.text_corpus import documents, trained_tokenizer
from tests.distributed.launch import free_port

__all__ = ["SOURCES", "Outcome", "kill_and_resume", "write_data"]

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("text_files", "hf_dataset", "streaming")
SEQ_LEN = 8
RUN_TIMEOUT = 300  # seconds: a run that takes longer has hung


def write_data(folder: Path, sources: Sequence[str] = SOURCES, num_documents: int = 12) -> Path:
    """Writes ``folder/data``: the documents as a text file, a BPE tokenizer (``tok``), and for ``hf_dataset`` a
    parquet file (tokenized once here, into ``hf-cache``, so that the ranks only read the cache), for ``streaming``
    the text file's windows as LitData shards (``composer data convert``)."""
    from composer.cli.__main__ import main

    data = folder / "data"
    data.mkdir(parents=True)
    texts = documents(num_documents, seed=5)
    (data / "docs.txt").write_text("\n\n".join(texts), encoding="utf-8")
    trained_tokenizer(data)
    if "hf_dataset" in sources:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from composer.datasets import HFDataset

        pq.write_table(pa.table({"text": texts}), data / "rows.parquet")
        HFDataset(**dataset_section("hf_dataset", data, 0)["hf_dataset"]).torch_dataset(train=True)
    if "streaming" in sources:
        argv = ["data", "convert", str(data / "docs.txt"), str(data / "shards"), "--seq-len", str(SEQ_LEN)]
        assert main([*argv, "--tokenizer", str(data / "tok")]) == 0
    return data


def dataset_section(source: str, data: Path, workers: int) -> dict[str, Any]:
    """The recipe's ``train_dataset`` for ``source`` over ``data``, with ``workers`` DataLoader workers."""
    text = {"seq_len": SEQ_LEN, "tokenizer": str(data / "tok"), "num_workers": workers}
    sections = {
        "text_files": {"paths": [str(data / "docs.txt")], **text},
        "hf_dataset": {"path": str(data / "rows.parquet"), "text_column": "text", "cache_dir": str(data / "hf-cache")},
        "streaming": {"path": str(data / "shards"), "num_workers": workers},
    }
    if source == "hf_dataset":
        sections[source].update(text)
    return {source: sections[source]}


def recipe(source: str, data: Path, folder: Path, workers: int) -> dict[str, Any]:
    """A 2-epoch recipe: a 1-layer GPT with dropout, batch 4 a rank, a checkpoint after every batch, autoresume."""
    return {
        "model": {"gpt": {"vocab_size": 300, "max_sequence_length": SEQ_LEN, "n_layer": 1, "n_head": 2, "n_embd": 16}},
        "train_dataset": dataset_section(source, data, workers),
        "train_batch_size": 4,
        "max_duration": "2ep",
        "optimizer": {"adamw": {"lr": 0.01}},
        "progress_bar": False,
        "seed": 7,
        "save_folder": str(folder),
        "save_interval": "1ba",
        "autoresume": True,
        "run_name": "resume",
        "callbacks": {"kill_or_save": {}},
    }


def command(recipe_path: Path, nproc: int) -> list[str]:
    """``composer train -f RECIPE`` with the hooks imported; through ``composer launch`` for several ranks."""
    train = ["--import", "tests.datasets.kill_resume_hooks", "train", "-f", str(recipe_path)]
    if nproc == 1:
        return [sys.executable, "-m", "composer.cli", *train]
    launch = ["launch", "-n", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(free_port())]
    return [sys.executable, "-m", "composer.cli", *launch, "-m", "composer.cli", *train]


def run(recipe_path: Path, nproc: int, env: dict[str, str], log: Path) -> tuple[int, float]:
    """Runs the recipe once with ``env`` added (its output to ``log``); returns the exit status and the seconds."""
    path = os.environ.get("PYTHONPATH")
    base = {k: v for k, v in os.environ.items() if k not in ("KILL_AT", "SAMPLES_LOG")}
    base.update(PYTHONPATH=str(REPO) + (os.pathsep + path if path else ""), OMP_NUM_THREADS="1", **env)
    start = time.perf_counter()
    with open(log, "w") as output:  # a file, not a pipe: a killed run's workers may outlive it
        process = subprocess.Popen(
            command(recipe_path, nproc),
            cwd=REPO,
            env=base,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
    return code, time.perf_counter() - start


@dataclass
class Outcome:
    """One case: whether the resumed run ended as it should, and what it took.

    Resumed on the same number of ranks, it passes when its weights are bitwise equal to the uninterrupted run's; on
    another (``resume_nproc``), when the second epoch's samples (those the killed run trained up to its checkpoint,
    then the resumed run's) are the uninterrupted run's, none trained twice (on more ranks than before, all but the
    rest that ``drop_last`` cuts to whole steps).
    """

    source: str
    workers: int
    nproc: int
    resume_nproc: int
    codes: list[int] = field(default_factory=list)  # uninterrupted, killed, resumed
    seconds: list[float] = field(default_factory=list)
    steps_per_epoch: int | None = None
    kill_at: int | None = None
    resumed_at: int | None = None  # the batch the resumed run started from
    max_diff: float | None = None
    samples: tuple[int, int, int] | None = None  # the epoch's samples: uninterrupted, resumed, trained twice
    logs: dict[str, str] = field(default_factory=dict)

    @property
    def killed_code(self) -> int:
        """The killed run's expected exit status: -SIGKILL alone, 128 + SIGKILL through the launcher."""
        return -signal.SIGKILL if self.nproc == 1 else 128 + signal.SIGKILL

    @property
    def passed(self) -> bool:
        """Killed as planned, resumed mid-epoch from the batch before, and bitwise equal (or the same samples)."""
        planned = self.codes == [0, self.killed_code, 0] and self.kill_at is not None
        planned = planned and self.resumed_at == self.kill_at - 1
        if self.resume_nproc == self.nproc:
            return planned and self.max_diff == 0.0
        if self.samples is None or self.samples[2]:
            return False  # a sample trained twice
        expected, resumed = self.samples[:2]  # more ranks than before cut the rest to whole steps (drop_last)
        return planned and (resumed == expected or (self.resume_nproc > self.nproc and resumed <= expected))


def kill_and_resume(
    folder: Path, data: Path, source: str, workers: int, nproc: int, resume_nproc: int | None = None
) -> Outcome:
    """Runs one case in ``folder`` (the data from :func:`write_data`); kills at the middle of the second epoch."""
    outcome = Outcome(source, workers, nproc, resume_nproc or nproc)
    folder.mkdir(parents=True)
    finals = {name: folder / f"{name}.pt" for name in ("uninterrupted", "resumed")}
    for name, ranks in (("uninterrupted", nproc), ("killed", nproc), ("resumed", outcome.resume_nproc)):
        run_folder = folder / ("uninterrupted" if name == "uninterrupted" else "killed")
        recipe_path = folder / f"{run_folder.name}.yaml"
        recipe_path.write_text(json.dumps(recipe(source, data, run_folder, workers)))  # JSON is YAML
        env = {"FINAL_WEIGHTS": str(finals.get(name, folder / "killed.pt")), "SAMPLES_LOG": str(folder / name)}
        if name == "killed":
            if outcome.steps_per_epoch is None:
                break
            outcome.kill_at = outcome.steps_per_epoch + outcome.steps_per_epoch // 2 + 1
            env["KILL_AT"] = str(outcome.kill_at)
        code, seconds = run(recipe_path, ranks, env, folder / f"{name}.log")
        outcome.codes.append(code)
        outcome.seconds.append(seconds)
        outcome.logs[name] = (folder / f"{name}.log").read_text()
        if name == "uninterrupted" and code == 0:
            outcome.steps_per_epoch = torch.load(finals[name], weights_only=True)["steps_per_epoch"]
    if all(path.is_file() for path in finals.values()):
        expected, resumed = (torch.load(path, weights_only=True) for path in finals.values())
        outcome.resumed_at = resumed["started_at"]
        diffs = [(resumed["weights"][k] - v).abs().max().item() for k, v in expected["weights"].items()]
        outcome.max_diff = max(diffs)
        outcome.samples = _second_epoch_samples(folder, outcome.resumed_at)
    return outcome


def _second_epoch_samples(folder: Path, resumed_at: int) -> tuple[int, int, int]:
    """The second epoch's samples of the uninterrupted run, of the killed run up to its checkpoint and the resumed
    run together, and how many of the latter were trained more often than the uninterrupted run trained them."""

    def samples(name: str, before: int | None = None) -> Counter[tuple[int, ...]]:
        found: Counter[tuple[int, ...]] = Counter()
        for log in folder.glob(f"{name}.rank*.jsonl"):
            for line in log.read_text().splitlines():
                epoch, batch, rows = json.loads(line)
                if epoch == 1 and (before is None or batch < before):
                    found.update(tuple(row) for row in rows)
        return found

    expected = samples("uninterrupted")
    resumed = samples("killed", before=resumed_at) + samples("resumed")
    return sum(expected.values()), sum(resumed.values()), sum((resumed - expected).values())
