import warnings

import pytest
import torch
from torch import nn

from composer.utils import count_module_instances, replace_module_classes, update_optimizer_params


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


# ---- replace_module_classes / count_module_instances ---------------------------------------------------------------


def _no_bias(layer: nn.Module, index: int) -> nn.Module:
    assert isinstance(layer, nn.Linear)
    return nn.Linear(layer.in_features, layer.out_features, bias=False)


def test_replaces_every_instance_in_nested_containers_and_returns_old_to_new():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 3)), nn.ModuleList([nn.Linear(3, 1)]))
    old = [model[0], model[1][1], model[2][0]]
    replaced = replace_module_classes(model, {nn.Linear: _no_bias})
    assert list(replaced) == old  # traversal order: definition order, depth first
    assert [replaced[m] for m in old] == [model[0], model[1][1], model[2][0]]
    assert all(m.bias is None for m in model.modules() if isinstance(m, nn.Linear))
    assert count_module_instances(model, nn.Linear) == 3


def test_policy_gets_a_running_index_per_class_and_none_keeps_the_module():
    model = nn.Sequential(nn.Linear(2, 2), nn.Conv2d(1, 1, 1), nn.Linear(2, 2), nn.Conv2d(1, 1, 1), nn.Linear(2, 2))
    seen: list[tuple[str, int]] = []

    def keep_odd(module: nn.Module, index: int) -> nn.Module | None:
        seen.append((type(module).__name__, index))
        return nn.Identity() if index % 2 == 0 else None

    replaced = replace_module_classes(model, {nn.Linear: keep_odd, nn.Conv2d: keep_odd})
    assert seen == [("Linear", 0), ("Conv2d", 0), ("Linear", 1), ("Conv2d", 1), ("Linear", 2)]
    assert [type(m).__name__ for m in model] == ["Identity", "Identity", "Linear", "Conv2d", "Identity"]
    assert len(replaced) == 3


def test_shared_module_is_replaced_under_every_parent_with_one_policy_call():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(nn.Sequential(shared), nn.Sequential(shared))
    calls = []

    def policy(module: nn.Module, index: int) -> nn.Module:
        calls.append(index)
        return nn.Identity()

    replaced = replace_module_classes(model, {nn.Linear: policy})
    assert calls == [0] and len(replaced) == 1
    assert model[0][0] is model[1][0] and isinstance(model[0][0], nn.Identity)


def test_replacements_are_not_searched_unless_asked():
    # The Linear policy wraps the layer with a ReLU; the ReLU policy turns ReLUs into Tanhs.
    policies = {nn.Linear: lambda m, i: nn.Sequential(m, nn.ReLU()), nn.ReLU: lambda m, i: nn.Tanh()}

    model = nn.Sequential(nn.Linear(2, 2))
    replace_module_classes(model, policies)
    assert isinstance(model[0][0], nn.Linear) and isinstance(model[0][1], nn.ReLU)  # replacement left as built

    model = nn.Sequential(nn.Linear(2, 2))
    replace_module_classes(model, policies, recurse_on_replacements=True)
    # Policies apply inside the replacement, except to the module it stands for (which is not wrapped twice).
    assert isinstance(model[0][0], nn.Linear) and isinstance(model[0][1], nn.Tanh)


def test_warns_naming_the_classes_when_nothing_is_replaced():
    model = nn.Sequential(nn.Linear(2, 2))
    with pytest.warns(UserWarning, match=r"looked for \['Conv2d', 'BatchNorm2d'\].*found no module"):
        assert replace_module_classes(model, {nn.Conv2d: _no_bias, nn.BatchNorm2d: _no_bias}) == {}
    with pytest.warns(UserWarning, match=r"1 matching module\(s\) were all kept"):
        replace_module_classes(model, {nn.Linear: lambda m, i: None})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replace_module_classes(model, {nn.Linear: _no_bias})


def test_optimizer_param_groups_are_remapped_when_given():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    opt = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[1].parameters(), "lr": 0.5}], lr=0.1)
    replace_module_classes(model, {nn.Linear: lambda m, i: _no_bias(m, i) if i == 1 else None}, optimizers=opt)
    assert [p is q for p, q in zip(opt.param_groups[1]["params"], model[1].parameters())] == [True]
    assert len(opt.param_groups[0]["params"]) == 2
    # The optimizer now trains the new layer.
    before = model[1].weight.detach().clone()
    model(torch.randn(4, 2)).sum().backward()
    opt.step()
    assert not torch.equal(model[1].weight, before)


def test_refuses_data_parallel_wrappers_and_bad_policies():
    with pytest.raises(TypeError, match="DataParallel-wrapped.*before wrapping"):
        replace_module_classes(nn.DataParallel(nn.Linear(2, 2)), {nn.Linear: _no_bias})
    with pytest.raises(ValueError, match="empty policies"):
        replace_module_classes(nn.Linear(2, 2), {})
    with pytest.raises(TypeError, match="nn.Module classes"):
        replace_module_classes(nn.Sequential(nn.Linear(2, 2)), {int: _no_bias})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="must return an nn.Module"):
        replace_module_classes(nn.Sequential(nn.Linear(2, 2)), {nn.Linear: lambda m, i: "linear"})  # type: ignore[dict-item]


def test_count_module_instances_counts_shared_modules_once_and_includes_the_root():
    shared = nn.ReLU()
    model = nn.Sequential(shared, nn.Sequential(shared, nn.ReLU()))
    assert count_module_instances(model, nn.ReLU) == 2
    assert count_module_instances(model, nn.Sequential) == 2
    assert count_module_instances(model, (nn.ReLU, nn.Sequential)) == 4


def test_update_optimizer_params_twice_changes_nothing_the_second_time():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = dict(model.named_parameters())
    model[0] = torch.nn.Linear(2, 2)
    after = dict(model.named_parameters())
    assert update_optimizer_params([opt], before, after) == 4
    assert update_optimizer_params([opt], before, after) == 0
    assert len(opt.param_groups[0]["params"]) == 2
