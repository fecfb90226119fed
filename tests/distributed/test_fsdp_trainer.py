"""The Trainer with ``fsdp_config``: 2 CPU ranks (gloo, one thread each) sharding with FSDP against one process.

One torchrun job runs this file as its script (``main``, at the bottom): several FSDP Trainer runs on 2 ranks with
per-rank batch B, each rank saving what it saw. The tests compare that with 1-process Trainer runs of batch 2B on
the same data order (tests/trainer/dist_worker.py's data, model and optimizer), which are the references, and read
the checkpoints the job wrote. The errors, and FSDP over a process group of one, run in this process.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist
from torch.utils.data import DataLoader, DistributedSampler

from composer import Trainer
from composer.algorithms import ChannelsLast
from composer.core import Callback, State
from composer.core.logging.logger import Logger
from composer.distributed.fsdp import FSDPConfig, full_model_state_dict
from composer.functional import apply_channels_last
from composer.loggers import InMemoryLogger
from composer.utils import dist
from composer.utils.checkpoint import read_checkpoint
from tests.distributed import launch
from tests.trainer import dist_worker as worker

ATOL = 1e-6
UNITS = {"module_classes": ["Linear"], "min_params": None}  # each Linear a unit: every forward gathers twice
CLIP = 0.2  # below the gradient norms of these runs (about 0.3 to 1): clipping changes every step
ONE_PROCESS = "one_process"  # the subfolder of the job's folder with the 1-process run's checkpoints


def one_rank_loader() -> DataLoader:
    """The 2-rank runs' data on one rank: the same shuffle (a DistributedSampler over 1 replica), twice the batch."""
    dataset = worker.train_data()
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=worker.SEED)
    return DataLoader(dataset, batch_size=2 * worker.PER_RANK_BATCH, sampler=sampler)


def make_trainer(model: torch.nn.Module, train_dataloader: Any, **kwargs: Any) -> Trainer:
    kwargs.setdefault("max_duration", "2ep")
    return Trainer(
        model=model,  # type: ignore[arg-type]
        train_dataloader=train_dataloader,
        optimizers=worker.sgd(model),  # momentum: the checkpoints hold optimizer state
        seed=worker.SEED,
        progress_bar=False,
        dist_timeout=30,  # a rank stuck in a collective fails the job instead of hanging
        **kwargs,
    )


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], atol: float = ATOL) -> None:
    assert list(actual) == list(expected)
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, atol=atol, rtol=0, msg=key)


def assert_equal(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert list(actual) == list(expected) and all(torch.equal(actual[k], expected[k]) for k in expected)


# ---- the 2-rank job (each rank runs this) -------------------------------------------------------------------------


def fsdp_trainer(model: torch.nn.Module, **kwargs: Any) -> Trainer:
    loader = DataLoader(worker.train_data(), batch_size=worker.PER_RANK_BATCH, shuffle=True)
    return make_trainer(model, loader, fsdp_config=kwargs.pop("fsdp_config", FSDPConfig(**UNITS)), **kwargs)


class GradientsUnset(Callback):
    """Records after each backward whether the sharded gradients are still unset (accumulated, not reduced)."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def after_backward(self, state: State, logger: Logger) -> None:
        del logger
        self.seen.append(all(p.grad is None for p in state.model.parameters()))


def run_job(folder: Path) -> dict[str, Any]:
    rank = dist.get_global_rank()
    out: dict[str, Any] = {}
    # Each rank builds its model from its own seed: sharding must start from rank 0's weights.
    model = worker.make_model(seed=rank)
    memory = InMemoryLogger()
    trainer = fsdp_trainer(
        model,
        fsdp_config=UNITS,  # a mapping, as from YAML
        eval_dataloader=DataLoader(worker.eval_data(), batch_size=worker.EVAL_BATCH),  # 3 batches and 2
        save_folder=str(folder / "checkpoints"),
        save_interval="4ba",
        loggers=[memory],
    )
    out["initial"] = full_model_state_dict(model)
    out["ddp_model"] = trainer.ddp_model
    out["param_types"] = {type(p).__name__ for p in model.parameters()}
    out["local_numel"] = sum(p.to_local().numel() for p in model.parameters())  # type: ignore[operator]
    out["saved_config"] = trainer._run_config["fsdp_config"]  # what checkpoints store
    trainer.fit()
    out["plain"] = {
        "weights": full_model_state_dict(model),
        "samples": int(trainer.state.timer.sample),
        "logged_eval": memory.values("metrics/eval/Accuracy"),
    }
    out["eval"] = trainer.eval()
    try:  # one sample: rank 1 gets none, so it could not join rank 0's forward pass
        trainer.eval(DataLoader(torch.utils.data.Subset(worker.eval_data(), [0])))
    except ValueError as error:
        out["no_batch_error"] = str(error)
    trainer.close()

    model, unsynced = worker.make_model(seed=0), GradientsUnset()
    fsdp_trainer(model, grad_accum=2, callbacks=[unsynced]).fit()
    out["accum2"], out["accum2_unset"] = full_model_state_dict(model), unsynced.seen
    model = worker.make_model(seed=0)
    fsdp_trainer(model, grad_clip_norm=CLIP).fit()
    out["clip"] = full_model_state_dict(model)

    # Resumed mid-epoch from the job's own checkpoint and from the 1-process run's: the checkpoint overwrites these.
    for name, path in (
        ("resume", folder / "checkpoints" / "ep0-ba4-rank0.pt"),
        ("from_one_process", folder / ONE_PROCESS / "ep0-ba4-rank0.pt"),
    ):
        model = worker.make_model(seed=100 + rank)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "The checkpoint holds state for callbacks")
            trainer = fsdp_trainer(model, load_path=path)
        out[f"{name}_at"] = int(trainer.state.timer.sample)
        trainer.fit()
        out[name] = full_model_state_dict(model)
    return out


def main() -> None:
    folder = Path(sys.argv[2])
    out = run_job(folder)
    torch.save(out, folder / f"rank{dist.get_global_rank()}.pt")
    worker.end_job()


# ---- the references and the job ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[str, Any]:
    """1-process Trainer runs of batch 2B; the plain one saves the checkpoint the job also resumes from."""
    folder = tmp_path_factory.mktemp("fsdp_trainer")
    refs: dict[str, Any] = {"folder": folder}
    model = worker.make_model(seed=0)
    trainer = make_trainer(
        model,
        one_rank_loader(),
        eval_dataloader=DataLoader(worker.eval_data(), batch_size=worker.EVAL_BATCH),
        save_folder=str(folder / ONE_PROCESS),
        save_interval="4ba",
    )
    trainer.fit()
    refs["plain"], refs["eval"] = weights(model), trainer.eval()
    for name, extra in (("accum2", {"grad_accum": 2}), ("clip", {"grad_clip_norm": CLIP})):
        model = worker.make_model(seed=0)
        make_trainer(model, one_rank_loader(), **extra).fit()
        refs[name] = weights(model)
    return refs


@pytest.fixture(scope="module")
def job(references) -> dict[Any, Any]:
    folder = references["folder"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launch, "WORKER", Path(__file__))  # torchrun runs this file's main() on each rank
        result = launch.torchrun("fsdp", folder)
    if result.returncode != 0:
        pytest.fail(
            f"The 2-rank FSDP job failed ({result.returncode}):\n{result.stdout[-5000:]}\n{result.stderr[-10000:]}"
        )
    return {"folder": folder, **{r: torch.load(folder / f"rank{r}.pt", weights_only=False) for r in (0, 1)}}


# ---- two ranks -------------------------------------------------------------------------------------------------------


@pytest.mark.dist
def test_the_model_is_sharded_from_rank_zeros_weights(job):
    full = sum(p.numel() for p in worker.make_model(seed=0).parameters())
    for rank in (0, 1):
        assert job[rank]["ddp_model"] is None
        assert job[rank]["param_types"] == {"DTensor"}
    assert job[0]["local_numel"] + job[1]["local_numel"] == full
    assert max(job[0]["local_numel"], job[1]["local_numel"]) < full
    assert_equal(job[0]["initial"], weights(worker.make_model(seed=0)))  # rank 1 built its own from seed 1
    assert job[1]["initial"] == {}  # the whole state is gathered on rank 0 only
    assert job[0]["saved_config"] == {**FSDPConfig(**UNITS).to_dict(), "module_classes": "['Linear']"}


@pytest.mark.dist
def test_two_ranks_of_batch_b_match_one_rank_of_batch_2b(job, references):
    assert_close(job[0]["plain"]["weights"], references["plain"])
    assert job[0]["plain"]["samples"] == 2 * worker.NUM_TRAIN
    assert_close(job[0]["accum2"], references["accum2"])
    # The first microbatch's backward accumulates unsharded gradients without reducing them; the second reduces.
    assert job[0]["accum2_unset"] == job[1]["accum2_unset"] == [True, False] * 12
    assert_close(job[0]["clip"], references["clip"])  # the norm is the whole gradient's, over both shards
    assert not torch.allclose(references["clip"]["module.0.weight"], references["plain"]["module.0.weight"])


@pytest.mark.dist
def test_evaluation_on_37_samples_equals_one_process(job, references):
    # Rank 0 evaluates 3 batches and rank 1 2: rank 1 joins rank 0's third forward pass without counting it.
    for rank in (0, 1):
        assert job[rank]["eval"] == pytest.approx(references["eval"], abs=ATOL)
        assert job[rank]["plain"]["logged_eval"][-1] == pytest.approx(references["eval"]["metrics/eval/Accuracy"])
        # Both ranks stop together when one has no batch at all, instead of one waiting for the other forever.
        assert "1 of 2 ranks got no evaluation batch" in job[rank]["no_batch_error"]


@pytest.mark.dist
def test_checkpoints_hold_the_whole_state_in_the_unsharded_format(job, references):
    folder = job["folder"] / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == worker.CHECKPOINT_FILES
    sharded = read_checkpoint(folder / "ep0-ba4-rank0.pt")["state"]
    unsharded = read_checkpoint(job["folder"] / ONE_PROCESS / "ep0-ba4-rank0.pt")["state"]
    assert_close(sharded["model"], unsharded["model"])
    [sharded_sgd], [unsharded_sgd] = sharded["optimizers"], unsharded["optimizers"]
    assert sharded_sgd["param_groups"] == unsharded_sgd["param_groups"]  # parameters numbered 0..3, not named
    assert list(sharded_sgd["state"]) == list(unsharded_sgd["state"]) == [0, 1, 2, 3]
    for index, values in unsharded_sgd["state"].items():
        assert_close(sharded_sgd["state"][index], values)  # the whole momentum buffers, plain tensors
    # The last checkpoint loads into an unsharded model as it is.
    model = worker.make_model(seed=5)
    model.load_state_dict(read_checkpoint(folder / "ep1-ba12-rank0.pt")["state"]["model"])
    assert_equal(weights(model), job[0]["plain"]["weights"])


@pytest.mark.dist
def test_fsdp_checkpoints_resume_in_two_ranks_and_in_one(job, references):
    for name in ("resume", "from_one_process"):  # the 1-process run's checkpoint loads into 2 sharded ranks
        assert job[0][f"{name}_at"] == job[1][f"{name}_at"] == 4 * 2 * worker.PER_RANK_BATCH
    assert_equal(job[0]["resume"], job[0]["plain"]["weights"])  # bit for bit the uninterrupted run
    assert_close(job[0]["from_one_process"], references["plain"])
    # The job's checkpoint in one process with twice the batch: the same run, to float tolerance.
    model = worker.make_model(seed=100)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The checkpoint holds state for callbacks")
        trainer = make_trainer(model, one_rank_loader(), load_path=job["folder"] / "checkpoints" / "ep0-ba4-rank0.pt")
    assert int(trainer.state.timer.sample) == 32
    trainer.fit()
    assert_close(weights(model), references["plain"])


# ---- one process ------------------------------------------------------------------------------------------------------


def test_fsdp_without_a_process_group_says_how_to_launch():
    assert not torch_dist.is_initialized()
    model = worker.make_model(seed=0)
    with pytest.raises(RuntimeError, match=r"fsdp_config was given, but there is no torch.distributed process group"):
        make_trainer(model, one_rank_loader(), fsdp_config=UNITS)
    with pytest.raises(RuntimeError, match=r"`torchrun --nproc_per_node N script.py` or `composer launch -n N"):
        make_trainer(model, one_rank_loader(), fsdp_config=FSDPConfig())


def test_fsdp_over_a_group_of_one_trains_as_one_process(group_of_one):
    model = worker.make_model(seed=0)
    with pytest.raises(ValueError, match=r"precision='amp' cannot be combined with fsdp_config"):
        make_trainer(model, one_rank_loader(), fsdp_config=UNITS, precision="amp")
    trainer = make_trainer(model, one_rank_loader(), fsdp_config=UNITS, grad_accum=2, max_duration="4ba")
    trainer.fit()
    assert {type(p).__name__ for p in model.parameters()} == {"DTensor"}
    reference = worker.make_model(seed=0)
    make_trainer(reference, one_rank_loader(), grad_accum=2, max_duration="4ba").fit()
    assert_close(full_model_state_dict(model), weights(reference))


def test_channels_last_leaves_an_fsdp_model_as_it_is_and_says_why(group_of_one):
    model = worker.make_conv_model(seed=0)
    trainer = make_trainer(
        model, worker.image_loader(), fsdp_config={}, max_duration="2ba", algorithms=[ChannelsLast()]
    )
    with pytest.warns(UserWarning, match=r"ChannelsLast does nothing here: the model is sharded with FSDP"):
        trainer.fit()  # sharded at construction, before FIT_START: FSDP cannot take channels-last weights
    assert int(trainer.state.timer.batch) == 2
    with pytest.raises(ValueError, match=r"apply_channels_last: the model is sharded with FSDP"):
        apply_channels_last(model)


if __name__ == "__main__":
    main()
