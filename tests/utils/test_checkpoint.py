import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from composer.core import Algorithm, Callback, State
from composer.models import ComposerClassifier
from composer.utils.checkpoint import (
    CheckpointError,
    NonFiniteWeightsError,
    find_checkpoints,
    format_checkpoint_name,
    is_safetensors_available,
    link_latest,
    load_checkpoint,
    load_model_state,
    local_io,
    prune_checkpoints,
    read_checkpoint,
    save_checkpoint,
)

REPO = Path(__file__).resolve().parents[2]


class Counter(Callback):
    def __init__(self, count=0):
        self.count = count

    def state_dict(self):
        return {"count": self.count, "history": [self.count, 0.5], "tensor": torch.full((2,), float(self.count))}

    def load_state_dict(self, state):
        self.count = state["count"]


class Remembers(Algorithm):
    def __init__(self):
        self.seen = 0

    def match(self, event, state):
        return False

    def apply(self, event, state, logger):
        return None

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = state["seen"]


def trained_state(seed=0, callbacks=(), algorithms=()):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    loader = torch.utils.data.DataLoader(list(range(8)), shuffle=True, generator=torch.Generator().manual_seed(seed))
    state = State(
        model=model,
        max_duration="10ep",
        optimizers=optimizer,
        schedulers=scheduler,
        train_dataloader=loader,
        callbacks=list(callbacks),
        algorithms=list(algorithms),
        scale_schedule_ratio=0.5,
        rank_zero_seed=seed,
    )
    state.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(5, 4)).sum().backward()
        optimizer.step()
        scheduler.step()
        state.timer.on_batch_complete(samples=5)
    state.scaler.scale(torch.ones(()))  # the scaler starts lazily
    state.scaler.update(new_scale=123.0)
    torch.rand(3, generator=state.rng)
    return state


def flip_bit(path, offset):
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x10
    path.write_bytes(bytes(data))


# ---- format and round trip -------------------------------------------------------------------------------------


def test_a_checkpoint_loads_with_plain_torch_load_weights_only(tmp_path):
    state = trained_state(callbacks=[Counter(3)], algorithms=[Remembers()])
    path = save_checkpoint(state, tmp_path / "ckpt.pt", metadata={"run_name": "r", "lr": 0.01})
    raw = torch.load(path, weights_only=True)  # no safe globals added, nothing but tensors and plain values
    assert raw["format_version"] == 1
    metadata = raw["metadata"]
    assert metadata["library"] == "opencomposer" and metadata["config"] == {"run_name": "r", "lr": 0.01}
    assert metadata["torch_version"] == str(torch.__version__) and metadata["python_version"].count(".") == 2
    assert set(raw["state"]) >= {"model", "optimizers", "schedulers", "timer", "scaler", "rng", "process_rng"}


def test_every_stateful_component_round_trips(tmp_path):
    callback, algorithm = Counter(7), Remembers()
    algorithm.seen = 11
    source = trained_state(seed=1, callbacks=[callback], algorithms=[algorithm])
    source.epoch_start_rng = source.capture_rng()
    path = save_checkpoint(source, tmp_path / "ckpt.pt")
    # What the process's generators produce next, right after the save.
    next_draws = (torch.rand(2), np.random.rand(), next(iter(source.train_dataloader)))

    target = trained_state(seed=2, callbacks=[Counter()], algorithms=[Remembers()])
    load_checkpoint(target, path)
    for p, q in zip(source.model.parameters(), target.model.parameters()):
        assert torch.equal(p, q)
    src_opt, dst_opt = source.optimizers[0].state_dict(), target.optimizers[0].state_dict()
    for key in src_opt["state"]:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(src_opt["state"][key][name], dst_opt["state"][key][name])
    assert target.schedulers[0].state_dict() == source.schedulers[0].state_dict()
    assert target.optimizers[0].param_groups[0]["lr"] == source.optimizers[0].param_groups[0]["lr"]
    assert target.scaler.get_scale() == 123.0
    assert target.timer == source.timer
    assert target.scale_schedule_ratio == 0.5 and str(target.max_duration) == "5ep"
    assert target.rank_zero_seed == 1
    assert target.callbacks[0].count == 7 and target.algorithms[0].seen == 11
    assert torch.equal(target.rng.get_state(), source.rng.get_state())
    # The process's random states and the loader's generator come back when the Trainer asks for them.
    target.restore_rng(target.resume_rng)
    assert torch.equal(torch.rand(2), next_draws[0]) and np.random.rand() == next_draws[1]
    assert torch.equal(next(iter(target.train_dataloader)), next_draws[2])
    assert target.epoch_start_rng is not None


def test_weights_only_saves_and_loads_the_model_alone(tmp_path):
    source = trained_state(seed=1)
    path = save_checkpoint(source, tmp_path / "weights.pt", weights_only=True)
    assert set(read_checkpoint(path)["state"]) == {"model"}
    target = trained_state(seed=2)
    timer_before = target.timer.state_dict()
    load_checkpoint(target, path, weights_only=True)
    assert torch.equal(target.model[0].weight, source.model[0].weight)
    assert target.timer.state_dict() == timer_before
    with pytest.raises(CheckpointError, match="holds only model weights.*load_weights_only=True"):
        load_checkpoint(target, path)


def test_a_plain_torch_state_dict_loads_as_weights(tmp_path):
    source = trained_state(seed=1)
    torch.save(source.model.state_dict(), tmp_path / "plain.pt")
    target = trained_state(seed=2)
    load_checkpoint(target, tmp_path / "plain.pt", weights_only=True)
    assert torch.equal(target.model[2].bias, source.model[2].bias)


def test_a_value_that_would_not_load_safely_is_refused_at_save_time_naming_where(tmp_path):
    class NumpyState(Callback):
        def state_dict(self):
            return {"loss": np.float64(0.5)}

    state = trained_state(callbacks=[NumpyState()])
    with pytest.raises(TypeError, match=r"checkpoint/state/callbacks/0/state/loss is a numpy.float64"):
        save_checkpoint(state, tmp_path / "ckpt.pt")
    assert not list(tmp_path.iterdir())


# ---- corruption and crafted files --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [0.02, 0.5, 0.98, -1])
def test_a_flipped_bit_is_caught_and_names_the_file(tmp_path, where):
    path = save_checkpoint(trained_state(), tmp_path / "ckpt.pt")
    size = path.stat().st_size
    flip_bit(path, int(size * where) if where >= 0 else size - 1)
    with pytest.raises(CheckpointError, match=str(path).replace("\\", "\\\\")):
        read_checkpoint(path)


def test_large_tensors_are_checked_too(tmp_path):
    state = State(model=torch.nn.Linear(2048, 2048), max_duration="1ep")  # 16 MiB: hashed in more than one read
    path = save_checkpoint(state, tmp_path / "big.pt")
    assert torch.equal(read_checkpoint(path)["state"]["model"]["weight"], state.model.weight)
    flip_bit(path, path.stat().st_size // 2)
    with pytest.raises(CheckpointError, match="failed its checksum"):
        read_checkpoint(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.999])
def test_a_truncated_file_is_caught_and_names_the_file(tmp_path, keep):
    path = save_checkpoint(trained_state(), tmp_path / "ckpt.pt")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match=r"ckpt\.pt.*(truncated|corrupt)"):
        read_checkpoint(path)


class RunsCode:
    """Unpickling this object touches a marker file (a stand-in for any code an attacker would run)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("writer", ["torch", "pickle"])
def test_a_file_crafted_to_run_code_is_refused_and_runs_nothing(tmp_path, writer):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    payload = {"format_version": 1, "state": {"model": {}}, "x": RunsCode(marker)}
    if writer == "torch":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(CheckpointError, match=r"Refusing to load .*evil\.pt.*could run code"):
        read_checkpoint(path, verify=False)
    assert not marker.exists()
    # The same file does run code when unpickled without the guard: the test's payload is real.
    if writer == "pickle":
        pickle.loads(path.read_bytes())
        assert marker.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"x",  # a checkpoint truncated to its first byte would be b"P" (a zip archive); both are 1 byte
        b"P",
        b"lorem ipsum dolor sit amet\n",  # a plain text file
        b'{"epoch": 3, "note": "not a checkpoint"}\n',
        b"import os\nos.system('echo hi')\n",  # text that looks like code is still only text
    ],
)
def test_a_file_that_is_no_checkpoint_at_all_says_so_and_not_that_it_could_run_code(tmp_path, content):
    path = tmp_path / "ckpt.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint(path)
    message = str(caught.value)
    assert f"not a checkpoint: truncated or corrupt ({len(content)} bytes)" in message
    assert "ckpt.pt" in message and "could run code" not in message and "crafted" not in message


def test_a_checkpoint_truncated_to_one_byte_is_reported_as_truncated(tmp_path):
    path = save_checkpoint(trained_state(), tmp_path / "ckpt.pt")
    path.write_bytes(path.read_bytes()[:1])
    with pytest.raises(CheckpointError, match=r"ckpt\.pt is not a checkpoint: truncated or corrupt \(1 bytes\)"):
        read_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"not a checkpoint: truncated or corrupt \(1 bytes\)"):
        read_checkpoint(path, verify=False)


def test_non_finite_weights_are_refused_naming_them_unless_told(tmp_path):
    state = trained_state()
    with torch.no_grad():
        state.model[2].weight[0, :2] = float("inf")
        state.model[0].bias[3] = float("nan")
    with pytest.raises(
        NonFiniteWeightsError,
        match=r"weight '0\.bias' is not finite \(1 NaN and 0 infinite of 8 values\), and so are \['2\.weight'\]",
    ):
        save_checkpoint(state, tmp_path / "ckpt.pt")
    with pytest.raises(NonFiniteWeightsError, match="check_finite=False"):
        save_checkpoint(state, tmp_path / "weights.pt", weights_only=True)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temporary file
    path = save_checkpoint(state, tmp_path / "ckpt.pt", check_finite=False)
    assert torch.isnan(read_checkpoint(path)["state"]["model"]["0.bias"][3])


def test_a_non_finite_buffer_is_refused_too(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model[1].running_var.fill_(float("inf"))
    state = State(model=model, max_duration="1ep")
    with pytest.raises(NonFiniteWeightsError, match=r"'1\.running_var' is not finite \(0 NaN and 2 infinite"):
        save_checkpoint(state, tmp_path / "ckpt.pt")


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="No checkpoint at"):
        read_checkpoint(tmp_path / "nope.pt")


# ---- atomic writes and fault injection ---------------------------------------------------------------------------


@pytest.mark.parametrize("moment", ["after_write", "after_fsync"])
def test_an_interrupted_write_leaves_the_previous_file_and_link_alone(tmp_path, monkeypatch, moment):
    state = trained_state()
    old = save_checkpoint(state, tmp_path / "ep0-ba1.pt")
    link_latest(tmp_path / "latest.pt", old)
    old_bytes = old.read_bytes()

    class Killed(BaseException):
        pass

    seen = []

    def crash(path):
        seen.append(path.name)
        if path.name == "ep0-ba2.pt":
            raise Killed

    monkeypatch.setattr(local_io, moment, crash)  # the seam the writer calls at that moment
    state.timer.on_batch_complete()
    save_checkpoint(state, tmp_path / "ep0-ba1-other.pt")  # not the crashing name: written normally
    with pytest.raises(Killed):
        save_checkpoint(state, tmp_path / "ep0-ba2.pt")
    assert seen == ["ep0-ba1-other.pt", "ep0-ba2.pt"]
    assert not (tmp_path / "ep0-ba2.pt").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # an exception (not a kill) cleans up
    assert old.read_bytes() == old_bytes and (tmp_path / "latest.pt").resolve() == old.resolve()


FAULT_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, torch
    from composer.core import State
    from composer.utils.checkpoint import local_io, save_checkpoint

    def kill(path):
        if path.name == "ep0-ba2.pt":
            os.kill(os.getpid(), signal.SIGKILL)

    setattr(local_io, sys.argv[2], kill)
    state = State(model=torch.nn.Linear(64, 64), max_duration="1ep")
    save_checkpoint(state, sys.argv[1] + "/ep0-ba1.pt")
    state.timer.on_batch_complete()
    save_checkpoint(state, sys.argv[1] + "/ep0-ba2.pt")
    print("not killed")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["after_write", "after_fsync"])
def test_a_writer_killed_between_the_steps_leaves_only_a_temporary_file(tmp_path, moment):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", FAULT_SCRIPT, str(tmp_path), moment],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -9, result.stderr
    assert "not killed" not in result.stdout
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".ep0-ba2.pt.tmp-" + names[0].rsplit("-", 1)[1], "ep0-ba1.pt"]
    # The temporary file holds the complete checkpoint, but nothing treats it as one.
    assert find_checkpoints(tmp_path, "ep{epoch}-ba{batch}.pt") == [tmp_path / "ep0-ba1.pt"]
    read_checkpoint(tmp_path / "ep0-ba1.pt")


# ---- names and discovery -----------------------------------------------------------------------------------------


def test_checkpoints_are_found_newest_first_ignoring_temporary_files_and_links(tmp_path):
    for name in ["ep0-ba3-rank0.pt", "ep2-ba12-rank0.pt", "ep1-ba6-rank0.pt", "ep2-ba12-rank1.pt", "notes.txt"]:
        (tmp_path / name).write_text("x")
    (tmp_path / ".ep3-ba15-rank0.pt.tmp-123").write_text("x")
    link_latest(tmp_path / "ep9-ba99-rank0.pt", tmp_path / "ep0-ba3-rank0.pt")  # a link that fits the pattern
    found = find_checkpoints(tmp_path, "ep{epoch}-ba{batch}-rank{rank}.pt")
    assert [p.name for p in found] == ["ep2-ba12-rank0.pt", "ep1-ba6-rank0.pt", "ep0-ba3-rank0.pt"]
    assert find_checkpoints(tmp_path / "missing", "ep{epoch}.pt") == []


def test_finding_checkpoints_passes_over_folders_being_written_and_entries_that_vanish(tmp_path, monkeypatch):
    """A saver's upload thread prunes while the training thread writes: a checkpoint folder renamed into place, or a
    file removed, between the listing and the stat must not fail the scan (a 2-node job once died of it)."""
    for name in ["ep0-ba4", "ep1-ba8"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "composer.pt").write_text("x")
    (tmp_path / ".ep2-ba12.tmp-7").mkdir()  # a sharded checkpoint being written: never entered
    (tmp_path / ".ep2-ba12.tmp-7" / "ep9-ba99").mkdir()
    scandir, stat = os.scandir, Path.stat

    def renamed_scandir(path):  # the folder being written is renamed into place as it is listed
        if Path(path).name.startswith(".ep2-ba12"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", renamed_scandir)
    assert find_checkpoints(tmp_path, "ep{epoch}-ba{batch}") == [tmp_path / "ep1-ba8", tmp_path / "ep0-ba4"]

    def vanishing_stat(self, *args, **kwargs):  # pruned between the listing and the stat
        if self.name == "ep1-ba8":
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return stat(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", vanishing_stat)
    assert find_checkpoints(tmp_path, "ep{epoch}-ba{batch}") == [tmp_path / "ep0-ba4"]


def test_pruning_keeps_the_one_just_written_and_the_newest_behind_it(tmp_path):
    names = ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "ep1-ba5-rank0.pt", "ep2-ba9-rank0.pt", "ep2-ba9-rank1.pt"]
    for name in [*names, "ep0-ba0-rank0.pt.bak", "notes.txt", ".ep0-ba0-rank0.pt.tmp-1"]:
        (tmp_path / name).write_text("x")
    link_latest(tmp_path / "latest-rank0.pt", tmp_path / "ep0-ba1-rank0.pt")
    pattern = "ep{epoch}-ba{batch}-rank{rank}.pt"
    deleted = prune_checkpoints(
        tmp_path, pattern, 2, tmp_path / "ep1-ba5-rank0.pt", protect=[tmp_path / "latest-rank0.pt"]
    )
    # ba9 claims more training than the one just written (a run this one went back from): it goes first; ba1 is
    # the target of 'latest', which could not be moved, so it stays.
    assert [p.name for p in deleted] == ["ep2-ba9-rank0.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            ".ep0-ba0-rank0.pt.tmp-1",
            "ep0-ba0-rank0.pt.bak",
            "ep0-ba1-rank0.pt",
            "ep0-ba2-rank0.pt",
            "ep1-ba5-rank0.pt",
            "ep2-ba9-rank1.pt",
            "latest-rank0.pt",
            "notes.txt",
        ]
    )
    deleted = prune_checkpoints(tmp_path, pattern, 1, tmp_path / "ep1-ba5-rank0.pt")
    assert sorted(p.name for p in deleted) == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt"]
    assert (tmp_path / "latest-rank0.pt").is_symlink()  # a link is never a candidate
    with pytest.raises(ValueError, match="keep=0 must be at least 1"):
        prune_checkpoints(tmp_path, pattern, 0, tmp_path / "ep1-ba5-rank0.pt")


def test_checkpoints_in_subfolders_and_with_the_run_name(tmp_path):
    for name in ["r1/ba10/model.pt", "r1/ba9/model.pt", "r2/ba11/model.pt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    found = find_checkpoints(tmp_path, "{run_name}/ba{batch}/model.pt", run_name="r1")
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["r1/ba10/model.pt", "r1/ba9/model.pt"]


def test_name_patterns_are_checked():
    state = trained_state()
    assert format_checkpoint_name("ep{epoch}-ba{batch}-sp{sample}-rank{rank}.pt", state) == "ep0-ba3-sp15-rank0.pt"
    with pytest.raises(ValueError, match=r"unknown_field.*ep\{epoch\}"):
        format_checkpoint_name("ep{unknown_field}.pt", state)


def test_the_latest_link_moves_atomically(tmp_path):
    first, second = tmp_path / "a.pt", tmp_path / "b.pt"
    first.write_text("a")
    second.write_text("b")
    link_latest(tmp_path / "latest", first)
    link_latest(tmp_path / "latest", second)
    assert (tmp_path / "latest").read_text() == "b" and os.readlink(tmp_path / "latest") == "b.pt"


# ---- model keys: wrappers, strictness, ignored keys --------------------------------------------------------------


def classifier(num_classes=3, seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, num_classes))
    return ComposerClassifier(net, num_classes=num_classes)  # its own keys start with 'module.'


def assert_same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert [k.replace("_orig_mod.", "") for k in sa] == [k.replace("_orig_mod.", "") for k in sb]
    for x, y in zip(sa.values(), sb.values()):
        assert torch.equal(x, y)


@pytest.fixture
def process_group(tmp_path):
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    torch.distributed.destroy_process_group()


def test_ddp_keys_load_into_a_bare_model_and_back(tmp_path, process_group):
    source, target = classifier(seed=0), classifier(seed=1)
    wrapped = torch.nn.parallel.DistributedDataParallel(source)
    assert next(iter(wrapped.state_dict())).startswith("module.module.")
    load_model_state(target, wrapped.state_dict())  # a raw DDP state dict
    assert_same_weights(target, source)
    # A checkpoint of the State whose model is DDP-wrapped holds bare keys, which load into a wrapped model too.
    path = save_checkpoint(State(model=wrapped, max_duration="1ep"), tmp_path / "ddp.pt", weights_only=True)
    assert list(read_checkpoint(path)["state"]["model"]) == list(source.state_dict())
    other = torch.nn.parallel.DistributedDataParallel(classifier(seed=2))
    load_checkpoint(State(model=other, max_duration="1ep"), path, weights_only=True)
    assert_same_weights(other.module, source)


def test_compiled_model_keys_load_into_a_bare_model_and_back(tmp_path):
    source = classifier(seed=0)
    compiled = torch.compile(source)  # wrapping compiles nothing until the model is called
    assert next(iter(compiled.state_dict())).startswith("_orig_mod.")
    bare = classifier(seed=1)
    load_model_state(bare, compiled.state_dict())
    assert_same_weights(bare, source)
    path = save_checkpoint(State(model=compiled, max_duration="1ep"), tmp_path / "c.pt", weights_only=True)
    assert list(read_checkpoint(path)["state"]["model"]) == list(source.state_dict())
    # Into a model compiled as a whole, and one with only its inner network compiled.
    whole = torch.compile(classifier(seed=2))
    inner = classifier(seed=3)
    inner.module = torch.compile(inner.module)
    for target in (whole, inner):
        load_checkpoint(State(model=target, max_duration="1ep"), path, weights_only=True)
        assert_same_weights(target, source)


def test_strict_loading_lists_missing_and_unexpected_keys():
    source = classifier()
    bigger = classifier()
    bigger.extra = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"missing keys \['extra.bias', 'extra.weight'\].*load_strict_model_weights"):
        load_model_state(bigger, source.state_dict())
    missing, unexpected = load_model_state(bigger, source.state_dict(), strict=False)
    assert missing == ["extra.bias", "extra.weight"] and unexpected == []
    assert torch.equal(bigger.module[0].weight, source.module[0].weight)
    missing, unexpected = load_model_state(source, bigger.state_dict(), strict=False)
    assert missing == [] and unexpected == ["extra.bias", "extra.weight"]


def test_ignored_keys_let_a_new_classification_head_load():
    pretrained, finetune = classifier(num_classes=3, seed=0), classifier(num_classes=5, seed=1)
    head_before = finetune.module[2].weight.clone()
    with pytest.raises(ValueError, match=r"shape mismatch for \['module.2.weight: saved \(3, 8\), model \(5, 8\)'"):
        load_model_state(finetune, pretrained.state_dict())
    load_model_state(finetune, pretrained.state_dict(), ignore_keys=["module.2.*"])
    assert torch.equal(finetune.module[0].weight, pretrained.module[0].weight)
    assert torch.equal(finetune.module[2].weight, head_before)
    with pytest.warns(UserWarning, match=r"\['nothing.*'\] match no model key"):
        load_model_state(finetune, pretrained.state_dict(), ignore_keys=["module.2.*", "nothing.*"])


# ---- safetensors -------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not is_safetensors_available(), reason="safetensors is not installed")
def test_weights_round_trip_through_safetensors(tmp_path):
    source = trained_state(seed=1)
    path = save_checkpoint(source, tmp_path / "weights.safetensors", weights_only=True, metadata={"lr": 0.1})
    checkpoint = read_checkpoint(path)
    assert checkpoint["metadata"]["config"] == {"lr": 0.1}
    target = trained_state(seed=2)
    load_checkpoint(target, path, weights_only=True)
    assert_same_weights(target.model, source.model)
    flip_bit(path, path.stat().st_size // 2)
    with pytest.raises(CheckpointError, match=r"weights\.safetensors failed its checksum"):
        read_checkpoint(path)
    with pytest.raises(ValueError, match="safetensors files hold tensors only"):
        save_checkpoint(source, tmp_path / "full.safetensors")
