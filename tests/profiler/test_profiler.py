"""The Trainer's profiler: named ranges in the traces, the schedule's trace files, the summary, and zero cost off."""

from __future__ import annotations

import json
import time

import pytest
import torch

from composer import Algorithm, Callback, Event, Trainer
from composer.callbacks import SpeedMonitor
from composer.config.config_error import ConfigError
from composer.config.trainer_hparams import TrainerHparams
from composer.profiler import range_timer
from composer.profiler.profiler import Profiler, ProfilerSession, resolve_profiler
from tests.common import EventRecorder, SimpleModel, make_dataloader
from tests.distributed.launch import two_rank_train_job


class Scale(Algorithm):
    """A do-nothing method at AFTER_DATALOADER, so that the trace has an algorithm range."""

    def match(self, event, state):
        return event == Event.AFTER_DATALOADER

    def apply(self, event, state, logger):
        return None


class Sleep(Callback):
    """Sleeps at BATCH_END: a callback whose cost is known to be most of each step."""

    def __init__(self, seconds):
        self.seconds = seconds

    def batch_end(self, state, logger):
        time.sleep(self.seconds)


class SlowLoader:
    """Each batch takes ``seconds`` to arrive."""

    def __init__(self, seconds, num_samples=32):
        self.batches, self.seconds = list(make_dataloader(num_samples=num_samples, batch_size=4)), seconds

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            time.sleep(self.seconds)
            yield batch


def trainer(tmp_path, profiler, max_duration="8ba", loader=None, **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    return Trainer(
        model=model,
        train_dataloader=loader or make_dataloader(num_samples=32, batch_size=4),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        progress_bar=False,
        run_name="run",
        profiler=profiler,
        **kwargs,
    )


def trace_names(path):
    return {event.get("name") for event in json.loads(path.read_text())["traceEvents"]}


def test_the_trace_holds_a_named_range_for_every_event_method_callback_and_stage(tmp_path):
    config = Profiler(wait=0, warmup=1, active=2, folder=str(tmp_path / "{run_name}"), print_summary=False)
    t = trainer(tmp_path, config, max_duration="3ba", algorithms=[Scale()], callbacks=[SpeedMonitor()])
    t.fit()
    assert [p.name for p in t.profiler.traces] == ["rank0.3.pt.trace.json"]  # <worker>.<span>: TensorBoard's naming
    names = trace_names(t.profiler.traces[0])
    per_batch = [
        "AFTER_DATALOADER",
        "BATCH_START",
        "BEFORE_TRAIN_BATCH",
        "BEFORE_FORWARD",
        "AFTER_FORWARD",
        "BEFORE_LOSS",
        "AFTER_LOSS",
        "BEFORE_BACKWARD",
        "AFTER_BACKWARD",
        "AFTER_TRAIN_BATCH",
        "BATCH_END",
        "BATCH_CHECKPOINT",
    ]
    expected = {f"event/{e}" for e in per_batch}  # every event of a step, handled or not
    expected |= {"algorithm/Scale/AFTER_DATALOADER", "callback/SpeedMonitor/BATCH_END"}
    expected |= {f"trainer/{s}" for s in ("dataloader", "batch", "forward", "loss", "backward", "optimizer_step")}
    assert expected <= names, expected - names
    t.close()


@pytest.mark.parametrize(
    ("schedule", "batches"),
    [
        ({"wait": 1, "warmup": 1, "active": 2, "repeat": 2}, 10),  # two cycles of 4, then 2 idle steps
        ({"skip_first": 3, "wait": 0, "warmup": 1, "active": 2, "repeat": 1}, 10),
        ({"wait": 0, "warmup": 1, "active": 1, "repeat": 0}, 7),  # cycles until the run ends, one cut short
    ],
)
def test_the_schedule_gives_one_trace_per_cycle(tmp_path, schedule, batches):
    config = Profiler(**schedule, folder=str(tmp_path / "p"), print_summary=False)
    t = trainer(tmp_path, config, max_duration=f"{batches}ba", loader=make_dataloader(num_samples=48, batch_size=4))
    t.fit()
    # Independent count: full cycles after skip_first (at most `repeat` of them), plus a last cycle the run's end cuts
    # during its recorded steps.
    cycle = config.wait + config.warmup + config.active
    steps = batches - config.skip_first
    full = steps // cycle if config.repeat == 0 else min(config.repeat, steps // cycle)
    cut = config.repeat == 0 and steps % cycle > config.wait
    files = sorted((tmp_path / "p").glob("rank0.*.pt.trace.json"))
    assert len(files) == full + cut == len(t.profiler.traces)
    t.close()


@pytest.fixture
def one_thread():
    # Two threads on a shared, loaded machine make a tiny backward take tens of milliseconds (threads spin waiting for
    # each other); one thread keeps the model's share small beside the sleeps.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_summary_shows_a_sleeping_callback_and_a_slow_loader(tmp_path, capsys, one_thread):
    trainer(tmp_path, None, max_duration="1ba").fit()  # a process's first backward starts autograd's threads
    config = Profiler(folder=str(tmp_path / "p"))
    t = trainer(tmp_path, config, max_duration="6ba", loader=SlowLoader(0.02), callbacks=[Sleep(0.06), SpeedMonitor()])
    t.fit()
    summary = t.profiler.summary
    assert summary is not None and summary.steps == 6
    rows = {row.name: row for row in summary.rows if row.depth == 0}
    # Relations only: the sleeping callback dominates every other callback and stage, and nests in its event.
    sleep = summary.share("callback/Sleep")
    others = [n for n in rows if n.startswith(("callback/", "algorithm/")) and n != "callback/Sleep"]
    stages = ["trainer/forward", "trainer/loss", "trainer/backward", "trainer/dataloader"]
    assert all(sleep > summary.share(name) for name in others + stages)
    assert summary.share("event/BATCH_END") >= sleep
    assert rows["callback/Sleep"].calls == 6
    # The slow loader shows as the dataloader stall, larger than the model's own work.
    assert summary.dataloader_seconds == rows["trainer/dataloader"].seconds
    assert summary.share("trainer/dataloader") > summary.share("trainer/forward")
    assert summary.step_seconds == pytest.approx(rows["trainer/dataloader"].seconds + rows["trainer/batch"].seconds)
    # Self time: the event's own dispatch, without the callbacks inside it.
    assert rows["event/BATCH_END"].self_seconds < rows["callback/Sleep"].seconds
    # Printed on rank 0, saved as text, and charted.
    table = summary.table()
    assert table in capsys.readouterr().out
    assert (tmp_path / "p" / "summary-rank0.txt").read_text() == table + "\n"
    assert (tmp_path / "p" / "summary-rank0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = next(line for line in table.splitlines() if line.startswith("callback/Sleep "))
    assert float(line.split()[4]) == pytest.approx(100 * sleep, abs=0.06)  # the "% step" column
    t.close()


def test_without_a_profiler_nothing_is_wrapped(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(range_timer, "record_function", lambda name: opened.append(name))
    recorder = EventRecorder()
    t = trainer(tmp_path, None, callbacks=[recorder])
    t.fit()
    assert opened == [] and t.profiler is None
    # The plain objects themselves: no wrapper is called per step.
    assert "run_event" not in vars(t.engine) and "_train_batch" not in vars(t)
    assert t._forward is t.state.model and t._loss == t.state.model.loss and t._backward is torch.Tensor.backward
    assert not any(hasattr(call, "__wrapped__") for call in t.engine._plans[Event.BATCH_END].calls)
    assert not (tmp_path / "profiler").exists()
    t.close()


def test_profiling_keeps_the_event_order(tmp_path):
    orders = []
    for profiler in (None, Profiler(folder=str(tmp_path / "p"), print_summary=False)):
        recorder = EventRecorder()
        t = trainer(
            tmp_path,
            profiler,
            max_duration="2ep",
            loader=make_dataloader(num_samples=8, batch_size=4),
            callbacks=[recorder],
            eval_dataloader=make_dataloader(num_samples=4, seed=1),
        )
        t.fit()
        orders.append(recorder.events)
        t.close()
    assert orders[0] == orders[1]


def test_an_error_names_the_callback_when_profiled(tmp_path):
    class Fails(Callback):
        def batch_start(self, state, logger):
            raise RuntimeError("boom")

    t = trainer(tmp_path, Profiler(folder=str(tmp_path / "p")), callbacks=[Fails()])
    with pytest.raises(RuntimeError, match="boom") as error:
        t.fit()
    assert "Raised by callback Fails at Event.BATCH_START." in error.value.__notes__


def test_profiler_arguments_are_checked():
    assert resolve_profiler(True) == Profiler() and resolve_profiler(None) is None
    assert resolve_profiler({"active": 2}) == Profiler(active=2)
    with pytest.raises(ValueError, match=r"Profiler.wait must be an integer >= 0 .*received -1"):
        Profiler(wait=-1)
    with pytest.raises(ValueError, match=r"Unknown profiler key\(s\) \['steps'\]"):
        resolve_profiler({"steps": 3})
    with pytest.raises(TypeError, match="profiler must be a Profiler, a mapping of its fields, True"):
        resolve_profiler("on")  # type: ignore[arg-type]
    session = ProfilerSession(Profiler(folder="out/{run_name}"), run_name="r1", rank=1, cuda=False)
    assert session.folder.as_posix() == "out/r1"


def test_the_recipe_key_is_checked():
    recipe = {"model": "simple_cnn", "train_dataset": "digits", "train_batch_size": 8, "max_duration": "1ba"}
    assert TrainerHparams.from_dict({**recipe, "profiler": {"active": 2}}).profiler == {"active": 2}
    with pytest.raises(ConfigError, match=r"profiler.*Unknown profiler key\(s\) \['activ'\]"):
        TrainerHparams.from_dict({**recipe, "profiler": {"activ": 2}})


@pytest.mark.dist
def test_two_ranks_each_write_their_own_trace(tmp_path_factory):
    job = two_rank_train_job(tmp_path_factory)
    folder = job["folder"] / "profile"
    for rank in (0, 1):
        assert job[rank]["profile"]["traces"] == [f"rank{rank}.3.pt.trace.json"]
        assert "event/BATCH_END" in trace_names(folder / f"rank{rank}.3.pt.trace.json")
        assert (folder / f"summary-rank{rank}.txt").exists()
