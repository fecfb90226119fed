"""composer.utils.dist unlaunched (world size 1), and across 2 ranks in the shared torchrun job of
tests/distributed/launch.py (the Trainer creates the group there; the worker then calls every collective)."""

import pytest
import torch
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler, TensorDataset

from composer.utils import dist
from tests.distributed.launch import two_rank_train_job


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return two_rank_train_job(tmp_path_factory)


@pytest.mark.dist
def test_collectives_across_two_ranks(job):
    for rank in (0, 1):
        seen = job[rank]
        assert seen["all_reduce"] == {"sum": 5.0, "min": 2.0, "max": 3.0, "product": 6.0}  # ranks hold 2 and 3
        assert seen["broadcast"] == 10  # from rank 1
        assert seen["all_gather"] == [0, 1]
        assert seen["all_gather_object"] == [{"rank": 0}, {"rank": 1}]
        assert seen["broadcast_object_list"] == ["from rank 0"]
        assert seen["ranks"] == {"global": rank, "local": rank, "world": 2, "local_world": 2, "node": 0}
    shards = [job[rank]["sampler"] for rank in (0, 1)]
    assert sorted(shards[0] + shards[1]) == list(range(10))  # disjoint, and the same shuffle on both ranks
    for rank in (0, 1):
        assert shards[rank] == list(DistributedSampler(list(range(10)), num_replicas=2, rank=rank, seed=3))


def test_unlaunched_world(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert (dist.get_world_size(), dist.get_global_rank(), dist.get_local_rank(), dist.get_node_rank()) == (1, 0, 0, 0)
    assert not dist.initialize_dist()
    dist.barrier()
    t = torch.tensor([1.0, 2.0])
    assert dist.all_reduce(t, "max") is t
    assert dist.broadcast(t) is t
    assert dist.all_gather(t)[0] is t
    assert dist.all_gather_object({"a": 1}) == [{"a": 1}]


def test_env_read_before_the_group_exists(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.delenv("GROUP_RANK", raising=False)
    monkeypatch.delenv("NODE_RANK", raising=False)
    assert dist.get_world_size() == 4 and dist.get_node_rank() == 1
    monkeypatch.setenv("RANK", "three")
    with pytest.raises(ValueError, match="RANK='three'"):
        dist.get_global_rank()


def test_initialize_without_torchrun_variables_explains(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        dist.initialize_dist()


def test_bad_reduce_operation():
    with pytest.raises(ValueError, match="reduce_operation='mean'"):
        dist.all_reduce(torch.ones(1), "mean")


def test_sampler_unlaunched_is_seeded(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    data = TensorDataset(torch.arange(10))
    a, b = dist.get_sampler(data, shuffle=True, seed=3), dist.get_sampler(data, shuffle=True, seed=3)
    assert isinstance(a, RandomSampler) and list(a) == list(b)
    assert sorted(a) == list(range(10))
    assert isinstance(dist.get_sampler(data, shuffle=False), SequentialSampler)
