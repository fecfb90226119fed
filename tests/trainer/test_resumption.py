"""A training process killed with SIGKILL, at a batch or inside a save, finishes bitwise equal when re-run.

This file is also the training command the tests kill and re-run::

    python tests/trainer/test_resumption.py FOLDER NUM_WORKERS

It trains with ``autoresume=True`` into FOLDER (shuffling without a generator, a random transform, Dropout, MixUp,
LabelSmoothing, SelectiveBackprop, a composer scheduler, a save every 3 batches), then writes the final weights to
``FOLDER/final.pt`` and appends the checkpoint it resumed from (or ``-``) to ``FOLDER/resumed.txt``.
``KILL_AT=<batch>:<event>`` makes it SIGKILL itself at that event of that batch (1-based), and
``KILL_AT=<batch>:<event>:SIGTERM`` sends itself SIGTERM there (a list of them, separated by commas, each one);
``KILL_IN_SAVE=<moment>:<glob>`` kills it inside the save of a checkpoint whose file name matches the glob, at
``after_write`` (written, not yet flushed to disk) or ``after_fsync`` (on disk, not yet renamed): the command patches
the writer's seams for that (``composer.utils.checkpoint.local_io.after_write`` and ``after_fsync``);
``SOAK_BALLAST_MB=<n>`` adds
an n-MB buffer to the model, so that every save writes that much more (the kill soak's slow saves).

Importing torch and composer takes seconds, so the tests start the command's process image once (``--serve``, a
fork server: it imports, then forks one child per run and reports how the child ended); each run is a fresh child
process, killed for real. One test checks that a run started as a plain command ends bitwise equal to a forked one.
"""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

from composer import Callback, Trainer
from composer.algorithms import LabelSmoothing, MixUp, SelectiveBackprop
from composer.models import ComposerClassifier
from composer.optim.scheduler_functions import cosine_annealing_scheduler
from composer.utils.checkpoint import find_checkpoints, local_io, read_checkpoint

REPO = Path(__file__).resolve().parents[2]
PATTERN = "ep{epoch}-ba{batch}-rank{rank}.pt"
BATCHES_PER_EPOCH, EPOCHS = 6, 3
BALLAST_ENV_VAR = "SOAK_BALLAST_MB"
SAVE_KILL_ENV_VAR = "KILL_IN_SAVE"
SAVE_MOMENTS = ("after_write", "after_fsync")


# ---- the training command ------------------------------------------------------------------------------------------


class NoisyDataset(torch.utils.data.Dataset):
    """Fixed points plus fresh noise at every access (a random transform, in the main process or in workers)."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(22, 6, generator=g)
        self.y = torch.randint(0, 3, (22,), generator=g)

    def __len__(self) -> int:
        return 22

    def __getitem__(self, i: int):
        return self.x[i] + 0.1 * torch.rand(6), self.y[i]


class KillAt(Callback):
    """SIGKILLs this process at ``event`` of batch ``batch`` (1-based), as a crash or a pre-emption would; a spec
    ``<batch>:<event>:<SIGNAL>`` sends that signal instead (``10:after_forward:SIGTERM``), and several specs
    separated by commas send one each."""

    def __init__(self, spec: str) -> None:
        self.moments = {}
        for moment in spec.split(","):
            batch, event, *name = moment.split(":")
            self.moments[(int(batch), event)] = signal.Signals[name[0]] if name else signal.SIGKILL

    def run_event(self, event, state, logger):
        current = state.timer.batch.value + (0 if event.value in ("batch_end", "batch_checkpoint") else 1)
        signum = self.moments.pop((current, event.value), None)
        if signum is not None:
            os.kill(os.getpid(), signum)


def kill_in_save(spec: str) -> None:
    """Makes the checkpoint writer SIGKILL this process at ``<moment>:<glob>``: at that moment of writing a file
    whose name matches the glob (by patching the writer's seam for the moment)."""
    moment, _, name_glob = spec.partition(":")
    if moment not in SAVE_MOMENTS:
        raise ValueError(f"{SAVE_KILL_ENV_VAR}={spec!r}: expected one of {list(SAVE_MOMENTS)}, then ':<glob>'.")

    def kill(path: Path) -> None:
        if fnmatch.fnmatchcase(path.name, name_glob or "*"):
            os.kill(os.getpid(), signal.SIGKILL)

    setattr(local_io, moment, kill)


def main(folder: str, num_workers: int) -> None:
    if os.environ.get(SAVE_KILL_ENV_VAR):
        kill_in_save(os.environ[SAVE_KILL_ENV_VAR])
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
    ballast_mb = int(os.environ.get(BALLAST_ENV_VAR, "0"))
    if ballast_mb:  # a checkpoint that takes a while to write, so that a kill at a random moment may land in a write
        net.register_buffer("ballast", torch.zeros(ballast_mb * 2**18))
    model = ComposerClassifier(net, num_classes=3)
    trainer = Trainer(
        model=model,
        train_dataloader=torch.utils.data.DataLoader(
            NoisyDataset(), batch_size=4, shuffle=True, num_workers=num_workers
        ),
        max_duration=f"{EPOCHS}ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        schedulers=cosine_annealing_scheduler,
        algorithms=[
            LabelSmoothing(alpha=0.1),  # listed before MixUp: the order that once crashed; both orders compose
            MixUp(alpha=0.2),
            SelectiveBackprop(start=0.3, end=0.9, keep=0.5, scale_factor=1.0, interrupt=2),
        ],
        callbacks=[KillAt(os.environ["KILL_AT"])] if os.environ.get("KILL_AT") else [],
        seed=7,
        deterministic_mode=True,
        progress_bar=False,
        save_folder=folder,
        save_interval="3ba",
        run_name="resumption",
        autoresume=True,
    )
    loaded = trainer.checkpointing.loaded_path
    with open(Path(folder) / "resumed.txt", "a") as f:
        f.write(f"{loaded.name if loaded else '-'}\n")
    trainer.fit()
    trainer.close()
    torch.save([p.detach() for p in model.parameters()], Path(folder) / "final.pt")


def serve() -> None:
    """Reads one JSON request a line ({folder, num_workers, env}); runs each in a forked child; answers its status."""
    # Each run stands for a command started in the foreground, where Ctrl-C raises KeyboardInterrupt, even when the
    # suite itself runs as a background job (whose SIGINT is ignored, a disposition the library leaves as it is).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: a fresh process that has only imported modules
            code = 1
            try:
                log = os.open(Path(request["folder"]) / "log.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ.update(request["env"])
                main(request["folder"], request["num_workers"])
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"returncode": returncode}), flush=True)


# ---- the tests ---------------------------------------------------------------------------------------------------

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork and SIGKILL"),
    pytest.mark.timeout(600),
]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KILL_AT", SAVE_KILL_ENV_VAR, BALLAST_ENV_VAR)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


class Runner:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=_env(),
        )
        self.baselines: dict[int, list[torch.Tensor]] = {}

    def run(self, folder: Path, num_workers: int, **env: str) -> int:
        folder.mkdir(parents=True, exist_ok=True)
        request = {"folder": str(folder), "num_workers": num_workers, "env": env}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the fork server died"
        return int(json.loads(answer)["returncode"])

    def baseline(self, tmp_path_factory: pytest.TempPathFactory, num_workers: int) -> list[torch.Tensor]:
        if num_workers not in self.baselines:
            folder = tmp_path_factory.mktemp(f"baseline{num_workers}")
            assert self.run(folder, num_workers) == 0, (folder / "log.txt").read_text()
            self.baselines[num_workers] = final_weights(folder)
        return self.baselines[num_workers]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def runner():
    runner = Runner()
    yield runner
    runner.close()


def final_weights(folder: Path) -> list[torch.Tensor]:
    return torch.load(folder / "final.pt", weights_only=True)


def assert_bitwise_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y), f"max difference {(x - y).abs().max()}"


def assert_every_checkpoint_is_valid(folder: Path) -> list[Path]:
    found = find_checkpoints(folder, PATTERN)
    for path in found:
        read_checkpoint(path)  # raises on a corrupt one
    return found


def batch_of(name: str) -> int:
    return int(name.split("-ba")[1].split("-")[0])


# (num_workers, batch, event). The suite runs two kills (this one and one inside a save); the soak,
# `python scripts/kill_soak.py`, kills at random batches and events and at random wall-clock moments.
KILLS = [(0, 10, "batch_end")]


@pytest.mark.parametrize(("num_workers", "batch", "event"), KILLS)
def test_sigkill_at_a_batch_then_the_same_command_finishes_bitwise_equal(
    runner, tmp_path, tmp_path_factory, num_workers, batch, event
):
    expected = runner.baseline(tmp_path_factory, num_workers)
    assert runner.run(tmp_path, num_workers, KILL_AT=f"{batch}:{event}") == -signal.SIGKILL
    assert not (tmp_path / "final.pt").exists()
    saved = assert_every_checkpoint_is_valid(tmp_path)
    assert runner.run(tmp_path, num_workers) == 0, (tmp_path / "log.txt").read_text()
    assert_bitwise_equal(final_weights(tmp_path), expected)
    resumed_from = (tmp_path / "resumed.txt").read_text().split()[1]
    newest_before_kill = max((batch - 1) // 3 * 3, 0)
    if newest_before_kill == 0:
        assert resumed_from == "-" and not saved
    else:
        assert batch_of(resumed_from) == newest_before_kill and saved[0].name == resumed_from


@pytest.mark.parametrize("moment", ["after_fsync"])
def test_sigkill_inside_a_save_then_the_same_command_finishes_bitwise_equal(runner, tmp_path, tmp_path_factory, moment):
    expected = runner.baseline(tmp_path_factory, 0)
    # Killed while writing the checkpoint of batch 9: its complete temporary file is left behind, never renamed.
    assert runner.run(tmp_path, 0, **{SAVE_KILL_ENV_VAR: f"{moment}:*-ba9-*"}) == -signal.SIGKILL
    leftovers = [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert len(leftovers) == 1 and leftovers[0].startswith(".ep1-ba9-rank0.pt.tmp-")
    assert [p.name for p in assert_every_checkpoint_is_valid(tmp_path)] == ["ep0-ba6-rank0.pt", "ep0-ba3-rank0.pt"]
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep0-ba6-rank0.pt"
    assert runner.run(tmp_path, 0) == 0, (tmp_path / "log.txt").read_text()
    assert (tmp_path / "resumed.txt").read_text().split()[1] == "ep0-ba6-rank0.pt"
    assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]  # the re-run cleaned it up
    assert_bitwise_equal(final_weights(tmp_path), expected)


def test_the_plain_command_ends_like_the_forked_runs(runner, tmp_path, tmp_path_factory):
    result = subprocess.run(
        [sys.executable, str(Path(__file__)), str(tmp_path), "0"], cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert_bitwise_equal(final_weights(tmp_path), runner.baseline(tmp_path_factory, 0))


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(sys.argv[1], int(sys.argv[2]))
