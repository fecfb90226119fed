"""A small trained State with stateful callbacks and algorithms, for the checkpoint tests."""

import torch

from composer.core import Algorithm, Callback, State


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


def assert_same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert [k.replace("_orig_mod.", "") for k in sa] == [k.replace("_orig_mod.", "") for k in sb]
    for x, y in zip(sa.values(), sb.values()):
        assert torch.equal(x, y)
