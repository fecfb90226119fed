"""The Trainer on torch.distributed: 2 CPU processes (gloo, one thread each) against single-process references.

The multi-process tests (marked ``dist``) share one torchrun job (tests/trainer/dist_worker.py, ``train``) and launch
two more for the faults; the rest test composer.distributed's helpers in this process, with the launcher's
environment variables set by hand where they need a rank.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset, WeightedRandomSampler

from composer import Trainer
from composer.algorithms import ChannelsLast, LayerFreezing
from composer.core import DataSpec, Evaluator
from composer.core.time import Timer
from composer.distributed.data import (
    UnpaddedDistributedSampler,
    batch_totals,
    distribute_evaluator,
    distribute_train_data,
    set_sampler_epoch,
)
from composer.distributed.ddp import DDPSyncStrategy, ddp_sync_context
from composer.distributed.process_group import add_rank_note, heartbeat, rank_zero_destinations
from composer.loggers import RANK_ZERO_DESTINATIONS, ConsoleLogger, CSVLogger, InMemoryLogger, ProgressBarLogger
from composer.utils.checkpoint import read_checkpoint
from composer.utils.dist import Heartbeat, RankBeat, describe_lagging, read_heartbeats
from tests.distributed.launch import start_ranks, stop, torchrun_nodes, two_rank_train_job, wait_for
from tests.trainer import dist_worker as worker

ATOL = 1e-6


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The shared 2-rank torchrun job (run once per session)."""
    return two_rank_train_job(tmp_path_factory)


def one_rank_loader(batch_size: int = 2 * worker.PER_RANK_BATCH) -> DataLoader:
    """The 2-rank run's data on one rank: the same shuffle (DistributedSampler over 1 replica), twice the batch."""
    sampler = DistributedSampler(worker.train_data(), num_replicas=1, rank=0, shuffle=True, seed=worker.SEED)
    return DataLoader(worker.train_data(), batch_size=batch_size, sampler=sampler)


def reference_run(epochs: int = 2) -> tuple[torch.nn.Module, list[float]]:
    """A hand-written one-process loop with batch 2B: the model (from rank 0's initial weights) and its losses."""
    model = worker.make_model(seed=0)
    optimizer = worker.sgd(model)
    loader = one_rank_loader()
    losses = []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model.module(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return model, losses


def assert_close(weights: dict[str, torch.Tensor], model: torch.nn.Module, atol: float = ATOL) -> None:
    reference = model.state_dict()
    assert list(weights) == list(reference)
    for key, value in reference.items():
        torch.testing.assert_close(weights[key], value, atol=atol, rtol=0, msg=key)


def assert_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


# ---- two ranks, one torchrun job ---------------------------------------------------------------------------------


@pytest.mark.dist
def test_two_ranks_of_batch_b_match_one_rank_of_batch_2b(job):
    reference, losses = reference_run()
    for run in ("plain", "accum3"):
        assert_equal(job[0][run]["weights"], job[1][run]["weights"])  # the replicas never drift apart
        assert_close(job[0][run]["weights"], reference)
    # One gradient all-reduce per optimizer step (the model fits one DDP bucket), with and without accumulation;
    # multi_auto_sync all-reduces after each of the 3 microbatches instead.
    for rank in (0, 1):
        for run in ("plain", "accum3"):
            assert job[rank][run]["allreduces"] == job[rank][run]["batches"] == 12
        assert job[rank]["multi"]["allreduces"] == 3 * job[rank]["multi"]["batches"] == 6
        # The timer counts both ranks' samples: times 2 for even batches, summed for uneven ones (4 and 3 a batch).
        assert job[rank]["plain"]["samples"] == 2 * worker.NUM_TRAIN
        assert job[rank]["uneven"] == {"batches": 3, "samples": 3 * (4 + 3)}
        assert job[rank]["train_sampler"] == "DistributedSampler"
    # Each rank logs the loss of its half of the batch; their mean is the one-process loss of the whole batch.
    rank_losses = [job[rank]["plain"]["losses"] for rank in (0, 1)]
    assert rank_losses[0] != rank_losses[1]
    assert [(a + b) / 2 for a, b in zip(*rank_losses)] == pytest.approx(losses, abs=ATOL)


@pytest.mark.dist
def test_channels_last_under_ddp_rewraps_without_the_stride_warning_and_matches_one_process(job):
    torch.manual_seed(0)
    model = worker.make_conv_model(seed=0)
    sampler = DistributedSampler(worker.image_loader().dataset, num_replicas=1, rank=0, shuffle=True, seed=worker.SEED)
    loader = worker.image_loader(batch_size=2 * worker.PER_RANK_BATCH, sampler=sampler)
    reference = Trainer(
        model=model,
        train_dataloader=loader,
        optimizers=worker.sgd(model),
        max_duration="4ba",
        algorithms=[ChannelsLast()],
        progress_bar=False,
        seed=worker.SEED,
    )
    reference.fit()
    reference.close()
    assert_equal(job[0]["channels_last"]["weights"], job[1]["channels_last"]["weights"])
    assert_close(job[0]["channels_last"]["weights"], model)
    for rank in (0, 1):
        run = job[rank]["channels_last"]
        assert run["rewrapped"] and run["channels_last"]
        assert run["warnings"] == []  # "Grad strides do not match bucket view strides" before the rewrap
        assert run["allreduces"] == 4  # the hook moved to the new wrapper; the old one reduces nothing


@pytest.mark.dist
def test_evaluation_on_37_samples_equals_one_process(job):
    model = worker.make_model(seed=0)
    model.load_state_dict(job[0]["plain"]["weights"])
    x, y = worker.eval_data().tensors
    with torch.no_grad():
        logits = model.module(x)
    expected = {
        "metrics/eval/Accuracy": (logits.argmax(dim=1) == y).float().mean().item(),
        "metrics/eval/CrossEntropy": F.cross_entropy(logits, y).item(),
    }
    for rank in (0, 1):
        assert job[rank]["eval"] == pytest.approx(expected, abs=ATOL)
        assert job[rank]["eval_sampler"] == "UnpaddedDistributedSampler"
        assert job[rank]["plain"]["logged_eval"][-1] == pytest.approx(expected["metrics/eval/Accuracy"], abs=ATOL)
    # 19 and 18 samples in batches of 9: the ranks run different numbers of batches, yet the same collectives.
    assert (job[0]["eval_batches"], job[1]["eval_batches"]) == (3, 2)


@pytest.mark.dist
def test_checkpoints_are_written_once_and_resume_exactly(job):
    folder = job["folder"] / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == worker.CHECKPOINT_FILES
    # Each rank's random states are in the file, so that each resumes its own.
    rank_states = read_checkpoint(folder / "ep0-ba4-rank0.pt")["state"]["rank_states"]
    assert len(rank_states) == 2
    assert not torch.equal(*(s["process_rng"]["current"]["torch"] for s in rank_states))
    # Resumed on two ranks from batch 4 (mid-epoch): bit for bit the uninterrupted run.
    for rank in (0, 1):
        assert job[rank]["resumed_at"] == 4 * 2 * worker.PER_RANK_BATCH
        assert_equal(job[rank]["resume"]["weights"], job[0]["plain"]["weights"])
        # With autoresume, rank 0 picks the checkpoint and every rank loads the same one.
        assert job[rank]["autoresumed_from"].endswith("autoresume/ep0-ba4-rank0.pt")
        assert_equal(job[rank]["autoresume"]["weights"], job[0]["plain"]["weights"])
    assert sorted(p.name for p in (job["folder"] / "autoresume").iterdir()) == [
        "ep0-ba4-rank0.pt",
        "ep1-ba6-rank0.pt",
        "ep2-ba12-rank0.pt",
        "latest-rank0.pt",
    ]
    # Resumed on one rank with twice the batch and the same sample budget: the same run, to float tolerance.
    model = worker.make_model(seed=100)
    budget = f"{2 * worker.NUM_TRAIN}sp"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The checkpoint holds state for callbacks")  # the 2-rank run's saver
        trainer = Trainer(
            model=model,
            train_dataloader=one_rank_loader(),
            max_duration=budget,
            optimizers=worker.sgd(model),
            load_path=folder / "ep0-ba4-rank0.pt",
            progress_bar=False,
        )
    assert int(trainer.state.timer.sample) == 32
    trainer.fit()
    assert int(trainer.state.timer.batch) == 12
    assert_close({k: v.detach() for k, v in model.state_dict().items()}, reference_run()[0])


@pytest.mark.dist
def test_layer_freezing_runs_under_ddp_with_find_unused_parameters(job):
    torch.manual_seed(0)
    model = worker.make_model(seed=0)
    reference = Trainer(
        model=model,
        train_dataloader=one_rank_loader(),
        max_duration="4ep",
        algorithms=[LayerFreezing(freeze_start=0.5)],
        grad_accum=2,
        optimizers=worker.sgd(model),
        seed=worker.SEED,
        progress_bar=False,
    )
    reference.fit()
    for rank in (0, 1):
        assert job[rank]["find_unused"] is False and job[rank]["freeze_find_unused"] is True
        assert job[rank]["freeze"]["requires_grad"] == [p.requires_grad for p in model.parameters()]
        assert_close(job[rank]["freeze"]["weights"], model)
    assert job[0]["freeze"]["requires_grad"][0] is False  # something was frozen


@pytest.mark.dist
def test_ranks_start_equal_draw_their_own_numbers_and_log_once(job):
    assert_equal(job[0]["initial"], job[1]["initial"])  # built from different seeds; DDP broadcast rank 0's
    assert not torch.equal(job[0]["mask"], job[1]["mask"])  # dropout masks differ across ranks
    assert [job[r]["seed"] for r in (0, 1)] == [worker.SEED, worker.SEED]
    assert [job[r]["state_seed"] for r in (0, 1)] == [worker.SEED, worker.SEED + 1]
    assert job[0]["num_threads"] == job[1]["num_threads"] == 1
    assert job[0]["destinations"] == ["ProgressBarLogger", "ConsoleLogger", "InMemoryLogger"]
    assert job[1]["destinations"] == ["InMemoryLogger"]
    assert job["stderr"].count("Epoch 0: 6/6 batches") == 1  # one progress bar


# ---- faults: two plain processes, so that no launcher agent ends the job for us ----------------------------------


def _failure_time(text: str) -> float:
    match = re.search(r"FAILING AT ([0-9.]+)", text)
    assert match, text[-3000:]
    return float(match.group(1))


@pytest.mark.dist
def test_a_rank_that_raises_ends_the_job_with_an_error_naming_it(tmp_path):
    ranks = start_ranks("fault", tmp_path)
    try:
        wait_for(ranks, lambda rs: all(r.ended_at is not None for r in rs))
    finally:
        stop(ranks)
    failing, other = ranks[1], ranks[0]
    assert failing.process.returncode != 0 and other.process.returncode != 0
    assert "RuntimeError: injected failure at batch 3" in failing.text
    assert "rank 1 of 2 raised this error" in failing.text
    assert "rank 0 of 2: a collective operation failed" in other.text
    failed_at = _failure_time(failing.text)
    assert failing.ended_at is not None and other.ended_at is not None
    assert max(failing.ended_at, other.ended_at) - failed_at < 20  # dist_timeout in this scenario


@pytest.mark.dist
def test_a_rank_that_stops_answering_fails_the_others_after_dist_timeout(tmp_path):
    ranks = start_ranks("hang", tmp_path)
    try:
        wait_for(ranks, lambda rs: all(r.ended_at is not None for r in rs))
    finally:
        stop(ranks)
    hung, other = ranks[1], ranks[0]
    # Both processes end by themselves (no launcher here): the heartbeat ends a stalled job, the hung rank included.
    assert hung.process.returncode == 1, hung.text[-3000:]
    assert other.process.returncode != 0
    # Each names the rank that stopped answering, where it stopped, and the fix; the hung rank shows its frames.
    # Whichever heartbeat fires first ends its process; the hung rank then finds the store (on rank 0) gone.
    named = "rank 1 stopped answering at batch 3 (1 step(s) behind)"
    assert named in other.text, other.text[-3000:]
    assert named in hung.text or "while this rank (at batch 3) was not answering" in hung.text, hung.text[-3000:]
    assert "rank 1 of 2: ending this process" in hung.text
    assert "in batch_start\n    time.sleep(600)" in hung.text
    assert "raise dist_timeout" in hung.text
    assert (
        "rank 0 of 2: a collective operation failed" in other.text or "rank 0 of 2: ending this process" in other.text
    )
    assert hung.ended_at is not None and other.ended_at is not None
    # dist_timeout=5 in this scenario; benchmarks/hung_rank.py measures the time under torchrun.
    assert 4 < max(hung.ended_at, other.ended_at) - _failure_time(hung.text) < 5 + 20


@pytest.mark.dist
def test_a_rank_that_dies_is_named_at_the_batch_it_reached(tmp_path):
    # Two nodes of one rank each (one torchrun per node), as on a cluster: rank 1's death (SIGKILL at batch 3, most
    # likely before its heartbeat thread published anything since batch 0) is seen by its own agent only, and rank 0
    # fails in the collective of batch 3, noting the heartbeats.
    node0, node1 = torchrun_nodes("kill", tmp_path)
    assert node0.returncode != 0 and node1.returncode != 0
    assert "FAILING AT" in node1.stderr, node1.stderr[-3000:]
    assert "rank 0 of 2: a collective operation failed" in node0.stderr, node0.stderr[-3000:]
    assert "Heartbeats: rank 1 stopped answering at batch 3" in node0.stderr, node0.stderr[-3000:]


# ---- the helpers in one process ------------------------------------------------------------------------------------


@pytest.fixture
def as_rank_1_of_2(monkeypatch):
    """The launcher's variables for rank 1 of 2, without a process group (enough for the data and logging helpers)."""
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)


def test_unpadded_sampler_gives_every_sample_to_one_rank():
    shards = [list(UnpaddedDistributedSampler(range(37), num_replicas=2, rank=r)) for r in (0, 1)]
    assert sorted(shards[0] + shards[1]) == list(range(37)) and [len(s) for s in shards] == [19, 18]
    shuffled = [UnpaddedDistributedSampler(range(37), num_replicas=2, rank=r, shuffle=True, seed=5) for r in (0, 1)]
    for s in shuffled:
        s.set_epoch(3)
    assert sorted(list(shuffled[0]) + list(shuffled[1])) == list(range(37))
    assert len(shuffled[0]) == 19
    with pytest.raises(ValueError, match=r"rank=2 must lie in \[0, num_replicas=2\)"):
        UnpaddedDistributedSampler(range(4), num_replicas=2, rank=2)


def test_train_loader_is_rebuilt_with_a_distributed_sampler(as_rank_1_of_2):
    def collate(items):
        return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])

    data = TensorDataset(torch.arange(10.0), torch.arange(10))
    spec = DataSpec(DataLoader(data, batch_size=3, shuffle=True, collate_fn=collate, drop_last=True))
    sharded = distribute_train_data(spec, seed=7)
    loader = sharded.dataloader
    assert sharded is not spec and spec.dataloader.sampler.__class__.__name__ == "RandomSampler"  # not mutated
    assert isinstance(loader.sampler, DistributedSampler)
    assert (loader.sampler.rank, loader.sampler.num_replicas, loader.sampler.shuffle) == (1, 2, True)
    assert (loader.sampler.seed, loader.sampler.drop_last) == (7, True)
    assert (loader.batch_size, loader.collate_fn, loader.drop_last) == (3, collate, True)
    expected = DistributedSampler(data, num_replicas=2, rank=1, shuffle=True, seed=7, drop_last=True)
    assert [int(i) for x, _ in loader for i in x] == list(expected)[:3]  # one full batch of 3 from 5 samples
    set_sampler_epoch(loader, 4)
    assert loader.sampler.epoch == 4
    # Already sharded: left alone.
    assert distribute_train_data(sharded, seed=7) is sharded


def test_eval_loader_is_rebuilt_without_padding(as_rank_1_of_2):
    data = TensorDataset(torch.arange(7.0), torch.arange(7))
    evaluator = Evaluator(label="val", dataloader=DataLoader(data, batch_size=2))
    sharded = distribute_evaluator(evaluator)
    assert sharded is not evaluator and sharded.label == "val"
    assert [int(i) for x, _ in sharded.dataloader.dataloader for i in x] == [1, 3, 5]
    padded = Evaluator(label="p", dataloader=DataLoader(data, sampler=DistributedSampler(data, num_replicas=2, rank=1)))
    with pytest.warns(UserWarning, match="pads .* evaluated twice"):
        assert distribute_evaluator(padded) is padded


def test_loaders_the_trainer_cannot_shard_are_refused_or_warned_about(as_rank_1_of_2):
    data = TensorDataset(torch.arange(8.0))
    weighted = DataLoader(data, sampler=WeightedRandomSampler([1.0] * 8, 8))
    with pytest.raises(ValueError, match="WeightedRandomSampler.*get_sampler"):
        distribute_train_data(DataSpec(weighted), seed=0)
    batch_sampler = DataLoader(data, batch_sampler=[[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="custom batch_sampler"):
        distribute_train_data(DataSpec(batch_sampler), seed=0)
    with pytest.raises(ValueError, match="with replacement"):
        distribute_train_data(DataSpec(DataLoader(data, sampler=torch.utils.data.RandomSampler(data, True))), seed=0)

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(4))

    with pytest.warns(UserWarning, match="IterableDataset"):
        distribute_train_data(DataSpec(DataLoader(Stream())), seed=0)
    with pytest.warns(UserWarning, match="not a torch DataLoader"):
        distribute_train_data(DataSpec([torch.zeros(2)]), seed=0)


def test_only_rank_zero_keeps_console_and_file_destinations(as_rank_1_of_2, tmp_path):
    memory = InMemoryLogger()
    destinations = [ProgressBarLogger(), ConsoleLogger(), CSVLogger(str(tmp_path / "x.csv")), memory]
    kept = rank_zero_destinations(destinations, RANK_ZERO_DESTINATIONS)
    assert kept == [memory]


def test_errors_note_their_rank(as_rank_1_of_2):
    error = RuntimeError("bad batch")
    add_rank_note(error)
    add_rank_note(error)  # once only
    assert error.__notes__ == [
        "rank 1 of 2 raised this error; the other ranks stop at their next collective (at most dist_timeout)."
    ]
    collective = RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:123")
    add_rank_note(collective)
    assert collective.__notes__[0].startswith("rank 1 of 2: a collective operation failed")


def test_heartbeats_name_the_ranks_the_others_wait_for():
    def beat(rank, progress, batch=None, running=True, stack=""):
        return RankBeat(rank, progress, progress if batch is None else batch, running, beats=7, stack=stack)

    assert describe_lagging([beat(0, 4), beat(1, 4)]) == []  # nobody behind: left to the collective's timeout
    assert describe_lagging([beat(0, 4, batch=3), beat(1, 3, batch=3, stack="  File x")]) == [
        "rank 1 stopped answering at batch 3 (1 step(s) behind), in:\n  File x"
    ]
    assert describe_lagging([beat(0, 4), beat(1, 4)], frozen=[1]) == [
        "rank 1 stopped answering at batch 4 (its heartbeat stopped: frozen or dead)"
    ]
    # A heartbeat from before the batch the others wait in is older than the rank's last step: rank 1 took part in
    # the collectives of batches 0 to 2, so it stopped answering at batch 3, whatever its last heartbeat said.
    assert describe_lagging([beat(0, 4, batch=3), beat(1, 0)]) == [
        "rank 1 stopped answering at batch 3, where the others wait for it (its last heartbeat, from batch 0, is "
        "older than that)"
    ]
    assert describe_lagging([beat(0, 4, batch=3, running=False), beat(1, 1)], frozen=[1]) == [
        "rank 1 stopped answering at batch 3, where the others wait for it (its last heartbeat, from batch 1, is "
        "older than that; its heartbeat stopped: frozen or dead)"
    ]
    # A rank whose fit ended is never waited for; one that never published has not started.
    assert describe_lagging([beat(0, 4), beat(1, 2, running=False), None]) == [
        "rank 2 never published a heartbeat (it has not started training)"
    ]
    with pytest.raises(ValueError, match="timeout=0 must be a positive number of seconds"):
        Heartbeat(0)


def test_single_process_helpers_change_nothing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    spec = DataSpec(DataLoader(TensorDataset(torch.zeros(4)), shuffle=True))
    assert distribute_train_data(spec, seed=0) is spec
    error = ValueError("x")
    add_rank_note(error)
    assert not hasattr(error, "__notes__")
    assert batch_totals(spec, 4, None) == (4, 0, False) and batch_totals(spec, 4, 9, True) == (4, 9, True)
    with ddp_sync_context(None, DDPSyncStrategy.SINGLE_AUTO_SYNC, is_final_microbatch=False):
        pass
    model = torch.nn.Linear(2, 2)
    with heartbeat(model, Timer()):  # unlaunched: no thread, no hook (no per-batch cost)
        assert not model._forward_pre_hooks and read_heartbeats() == []


def test_trainer_validates_its_distributed_arguments():
    model = worker.make_model(seed=0)
    loader = DataLoader(worker.train_data(), batch_size=4)
    with pytest.raises(ValueError, match=r"ddp_sync_strategy='sometimes'; expected one of \['single_auto_sync'"):
        Trainer(model=model, train_dataloader=loader, max_duration="1ba", ddp_sync_strategy="sometimes")
    expected = r"dist_timeout=0; expected a finite number > 0 \(seconds to wait for the other processes\)\. To fix: "
    with pytest.raises(ValueError, match=expected):
        Trainer(model=model, train_dataloader=loader, max_duration="1ba", dist_timeout=0)
    trainer = Trainer(model=model, train_dataloader=loader, max_duration="1ba", progress_bar=False)
    assert trainer.ddp_model is None
