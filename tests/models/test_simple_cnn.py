"""SimpleCNN's optional classifier dropout: none by default (the module list and outputs unchanged), a dropout before
the linear layer when asked, and a bad probability refused by name."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from composer.models import SimpleCNN


def test_no_dropout_by_default_and_one_before_the_classifier_when_asked():
    assert not any(isinstance(m, nn.Dropout) for m in SimpleCNN(widths=(4,)).modules())
    torch.manual_seed(0)
    net = SimpleCNN(in_channels=1, widths=(4, 8), num_classes=3, dropout=0.5)
    assert isinstance(net.dropout, nn.Dropout) and net.dropout.p == 0.5
    x = torch.randn(2, 1, 8, 8)
    net.eval()
    pooled = torch.flatten(net.pool(net.features(x)), 1)
    torch.testing.assert_close(net(x), net.fc(pooled))  # evaluation: the dropout is the identity
    net.train()
    out = net.dropout(torch.ones(64, 8))
    assert set(out.unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("dropout", [1.0, -0.1, True])
def test_a_bad_dropout_is_refused(dropout: object):
    with pytest.raises(ValueError, match="SimpleCNN dropout must be a probability in"):
        SimpleCNN(dropout=dropout)  # type: ignore[arg-type]
