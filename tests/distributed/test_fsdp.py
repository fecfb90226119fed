"""FSDP2 (``fully_shard``) on 2 gloo CPU ranks against one process training on the same global batch.

The two ranks run once for the whole module (:func:`sharded_runs`): each sees half of every global batch, and
what they end with is compared with plain single-process training, which is the reference.
"""

from __future__ import annotations

import datetime
import os
import socket

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp
from torch import nn

from composer.distributed.fsdp import (
    FSDPConfig,
    full_model_state_dict,
    full_optimizer_state_dict,
    load_full_model_state_dict,
    load_full_optimizer_state_dict,
    prepare_fsdp_module,
    select_fsdp_modules,
)

WORLD_SIZE = 2
STEPS = 4
PER_CLASS = FSDPConfig(module_classes=["Linear"], min_params=None)  # every Linear is a unit, then the root
BY_SIZE = FSDPConfig(min_params=100, reshard_after_forward=False)  # units: 0 and 2; the last Linear stays in the root


def _model() -> nn.Module:
    torch.manual_seed(0)
    # Output sizes 15, 9 and 3 do not split evenly over 2 ranks: FSDP pads the shards.
    return nn.Sequential(nn.Linear(6, 15), nn.ReLU(), nn.Linear(15, 9), nn.ReLU(), nn.Linear(9, 3))


def _global_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 6, generator=generator), torch.randn(8, 3, generator=generator)) for _ in range(STEPS)]


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, rank: int, world_size: int, accum: int = 1) -> None:
    """Trains on this rank's share of every global batch, stepping every ``accum`` batches."""
    for i, (x, y) in enumerate(_global_batches()):
        last = (i + 1) % accum == 0
        if world_size > 1:
            model.set_requires_gradient_sync(last)  # type: ignore[operator]  # FSDP's no_sync
        x, y = x.chunk(world_size)[rank], y.chunk(world_size)[rank]
        (nn.functional.mse_loss(model(x), y) / accum).backward()
        if last:
            optimizer.step()
            optimizer.zero_grad()


def _reference(accum: int = 1) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    _train(model, optimizer, 0, 1, accum)
    return model, optimizer


def _worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    torch_dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=60))
    results = {}
    try:
        # The optimizer is built before sharding, as a Trainer given optimizers= does.
        model = _model()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        prepare_fsdp_module(model, PER_CLASS, optimizer)
        results["param_types"] = {type(p).__name__ for p in model.parameters()}
        results["local_numel"] = sum(p.to_local().numel() for p in model.parameters())  # type: ignore[attr-defined]
        _train(model, optimizer, rank, WORLD_SIZE)
        results["per_class"] = full_model_state_dict(model)
        optimizer_state = full_optimizer_state_dict(model, optimizer)

        # Resume: fresh sharded model and optimizer, loaded from what rank 0 holds, then one more step on both.
        resumed = prepare_fsdp_module(_model(), PER_CLASS)
        resumed_optimizer = torch.optim.Adam(resumed.parameters(), lr=0.01)
        load_full_model_state_dict(resumed, results["per_class"])  # {} on rank 1: rank 0's is broadcast
        load_full_optimizer_state_dict(resumed, resumed_optimizer, optimizer_state)
        x, y = _global_batches()[0]
        for m, opt in ((model, optimizer), (resumed, resumed_optimizer)):
            nn.functional.mse_loss(m(x.chunk(2)[rank]), y.chunk(2)[rank]).backward()
            opt.step()
        results["continued"], results["resumed"] = full_model_state_dict(model), full_model_state_dict(resumed)

        # Gradient accumulation over 2 batches without gradient sync on the first, size-based units, no reshard.
        model = prepare_fsdp_module(_model(), BY_SIZE)
        _train(model, torch.optim.Adam(model.parameters(), lr=0.01), rank, WORLD_SIZE, accum=2)
        results["by_size_accum"] = full_model_state_dict(model)

        # bf16 compute: record the dtype the weights have while forward runs.
        model = prepare_fsdp_module(_model(), FSDPConfig(param_dtype="bf16", reduce_dtype="fp32"))
        seen: set[torch.dtype] = set()
        model[0].register_forward_hook(lambda module, args, output: seen.add(module.weight.dtype))
        _train(model, torch.optim.Adam(model.parameters(), lr=0.01), rank, WORLD_SIZE)
        results["bf16_forward_dtypes"], results["bf16"] = seen, full_model_state_dict(model)
        results["bf16_shard_dtypes"] = {p.dtype for p in model.parameters()}

        # Buffers are not sharded: the snapshot must not follow the live BatchNorm statistics.
        model = prepare_fsdp_module(nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4)), PER_CLASS)
        snapshot = full_model_state_dict(model)
        model(torch.randn(4, 6))
        if rank == 0:
            results["buffer_changed"] = not torch.equal(model[1].running_mean, snapshot["1.running_mean"])
            results["snapshot_unchanged"] = torch.equal(snapshot["1.running_mean"], torch.zeros(4))

        try:
            prepare_fsdp_module(_model(), {"cpu_offload": True})
        except ValueError as error:
            results["cpu_offload_error"] = str(error)
    finally:
        torch.save(results, os.path.join(out, f"rank{rank}.pt"))
        torch_dist.destroy_process_group()


@pytest.fixture(scope="module")
def sharded_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(port, str(out)), nprocs=WORLD_SIZE)
    return [torch.load(out / f"rank{rank}.pt", weights_only=False) for rank in range(WORLD_SIZE)]


def _assert_close(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], **tolerance: float) -> None:
    assert state.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(state[name], expected[name], msg=lambda m, name=name: f"{name}: {m}", **tolerance)


def test_parameters_are_sharded_across_the_ranks(sharded_runs):
    full = sum(p.numel() for p in _model().parameters())
    assert all(run["param_types"] == {"DTensor"} for run in sharded_runs)
    local = [run["local_numel"] for run in sharded_runs]
    assert sum(local) == full and max(local) < full  # each rank holds about half; uneven rows split 8/7, 5/4, 2/1


def test_sharded_training_equals_one_process_on_the_same_global_batch(sharded_runs):
    rank0, rank1 = sharded_runs
    _assert_close(rank0["per_class"], _reference()[0].state_dict(), rtol=1e-5, atol=1e-6)
    _assert_close(rank0["by_size_accum"], _reference(accum=2)[0].state_dict(), rtol=1e-5, atol=1e-6)
    assert rank1["per_class"] == {}  # the full state is gathered on rank 0 only


def test_the_full_state_dict_loads_into_the_unsharded_model(sharded_runs):
    model = _model()
    model.load_state_dict(sharded_runs[0]["per_class"])  # strict: same names and shapes, plain tensors
    x = _global_batches()[0][0]
    torch.testing.assert_close(model(x), _reference()[0](x), rtol=1e-5, atol=1e-6)


def test_resuming_from_the_full_state_dicts_continues_exactly(sharded_runs):
    rank0 = sharded_runs[0]
    _assert_close(rank0["resumed"], rank0["continued"], rtol=0, atol=0)  # model and Adam moments came back
    model, optimizer = _reference()
    x, y = _global_batches()[0]
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    _assert_close(rank0["continued"], model.state_dict(), rtol=1e-5, atol=1e-6)


def test_bf16_compute_keeps_float32_shards(sharded_runs):
    rank0 = sharded_runs[0]
    assert rank0["bf16_forward_dtypes"] == {torch.bfloat16}
    assert rank0["bf16_shard_dtypes"] == {torch.float32}
    _assert_close(rank0["bf16"], _reference()[0].state_dict(), rtol=0, atol=2e-2)  # bf16 rounding only


def test_full_state_dicts_are_snapshots(sharded_runs):
    assert sharded_runs[0]["buffer_changed"] and sharded_runs[0]["snapshot_unchanged"]


def test_cpu_offload_on_gloo_says_it_needs_cuda(sharded_runs):
    assert "cpu_offload=True needs CUDA" in sharded_runs[0]["cpu_offload_error"]


# ---- the policy and the config: no process group needed ----------------------------------------------------------


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.attention, self.mlp = nn.Linear(width, width), nn.Linear(width, width)


def test_units_are_the_named_classes_and_marked_modules_children_first():
    model = nn.Sequential(nn.Embedding(50, 8), Block(8), Block(8), nn.Linear(8, 50))
    assert select_fsdp_modules(model, module_classes=[Block]) == ["1", "2"]
    # A Block whose Linears are all units has nothing left to shard itself.
    assert select_fsdp_modules(model, module_classes=["Block", "Linear"]) == [
        "1.attention",
        "1.mlp",
        "2.attention",
        "2.mlp",
        "3",
    ]
    model[3]._fsdp_wrap = True
    model[2]._fsdp_wrap = False
    assert select_fsdp_modules(model, module_classes=["Block"]) == ["1", "3"]


def test_the_size_rule_counts_parameters_no_smaller_unit_holds():
    model = nn.Sequential(nn.Linear(10, 10), nn.Sequential(nn.Linear(10, 8), nn.Linear(8, 8)), nn.Linear(2, 2))
    sizes = [110, 88, 72, 6]  # 0, 1.0, 1.1, 2
    assert [sum(p.numel() for p in m.parameters()) for m in (model[0], model[1][0], model[1][1], model[2])] == sizes
    assert select_fsdp_modules(model, min_params=100) == ["0", "1"]  # 1 holds 160 in two children of < 100
    assert select_fsdp_modules(model, min_params=80) == ["0", "1.0"]  # then 1 holds only 72 of its own
    assert select_fsdp_modules(model) == []  # no rule: the root takes everything
    assert select_fsdp_modules(nn.Sequential(nn.ReLU(), nn.Linear(2, 2)), module_classes=["ReLU"]) == []


def test_tied_weights_split_across_units_are_refused():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight
    with pytest.raises(ValueError, match=r"Parameter '0.weight' is shared with '1.weight' \(tied weights\)"):
        select_fsdp_modules(model, module_classes=["Linear"])
    assert select_fsdp_modules(model) == []  # both in the root: fine


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"min_params": 0}, ValueError, "FSDPConfig.min_params must be a positive number of parameters or None"),
        ({"param_dtype": "float16"}, ValueError, "FSDPConfig.param_dtype must be one of ['fp32', 'bf16', 'fp16']"),
        ({"module_classes": [42]}, TypeError, "FSDPConfig.module_classes takes nn.Module subclasses or their names"),
        ({"reshard_after_forward": "yes"}, TypeError, "FSDPConfig.reshard_after_forward must be True or False"),
        ({"limit_all_gathers": True}, ValueError, "Unknown fsdp_config key(s) ['limit_all_gathers']; expected some of"),
    ],
)
def test_config_mistakes_say_what_to_change(fields, error, message):
    with pytest.raises(error) as raised:
        FSDPConfig.from_dict(fields)
    assert message in str(raised.value)


def test_an_unknown_state_dict_type_names_the_choices():
    with pytest.raises(ValueError, match=r"state_dict_type must be one of \['full', 'sharded'\], received 'local'"):
        FSDPConfig(state_dict_type="local")
    assert FSDPConfig.from_dict({"state_dict_type": "sharded"}).to_dict()["state_dict_type"] == "sharded"


def test_preparing_without_a_process_group_says_how_to_launch():
    assert not torch_dist.is_initialized()
    with pytest.raises(RuntimeError, match="FSDP needs the torch.distributed process group.*torchrun --nproc_per_node"):
        prepare_fsdp_module(_model())


def test_an_optimizer_that_has_stepped_is_refused():
    model, optimizer = _reference()
    with pytest.raises(ValueError, match=r"Optimizer\(s\) \['Adam'\] already hold state"):
        prepare_fsdp_module(model, PER_CLASS, optimizer)
