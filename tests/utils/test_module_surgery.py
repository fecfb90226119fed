import pytest
import torch

from composer.utils import update_optimizer_params


def test_removed_params_and_state_leave_new_params_join_the_replaced_group():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(
        [{"params": model[0].parameters(), "lr": 0.1}, {"params": model[1].parameters(), "lr": 0.01}], momentum=0.9
    )
    model(torch.randn(4, 2)).sum().backward()
    opt.step()
    before = dict(model.named_parameters())
    old = model[1]
    model[1] = torch.nn.Linear(3, 1)
    changes = update_optimizer_params([opt], before, dict(model.named_parameters()))
    assert changes == 4
    group1 = opt.param_groups[1]["params"]
    assert len(group1) == 2 and group1[0] is model[1].weight and group1[1] is model[1].bias
    assert all(p not in opt.state for p in old.parameters())
    assert len(opt.param_groups[0]["params"]) == 2


def test_new_module_joins_group_of_enclosing_module():
    model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(2, 2)), torch.nn.Linear(2, 2))
    opt = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[1].parameters()}], lr=0.1)
    before = dict(model.named_parameters())
    model[0].append(torch.nn.Linear(2, 2))  # brand-new names 0.1.weight, 0.1.bias
    update_optimizer_params([opt], before, dict(model.named_parameters()))
    assert any(p is model[0][1].weight for p in opt.param_groups[0]["params"])


def test_uninspectable_optimizer_raises():
    class Opaque:
        param_groups = None

    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match="param_groups"):
        update_optimizer_params([Opaque()], dict(model.named_parameters()), {})
