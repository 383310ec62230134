"""reidcli.models.fixed_order under CPU autocast: the one-thread Linear gives what nn.Linear
gives (a bf16 training step used to fail in its backward: float32 weight × bf16 gradient)."""
from __future__ import annotations

import torch
from torch import nn

from reidcli.models.fixed_order import Linear


def test_linear_under_bf16_autocast_matches_torch():
    torch.manual_seed(0)
    ours, ref = Linear(16, 5), nn.Linear(16, 5)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(9, 16)
    grads = []
    for layer in (ours, ref):
        xi = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(xi)
        assert out.dtype == torch.bfloat16
        out.float().square().sum().backward()
        grads.append((out.detach(), xi.grad, layer.weight.grad, layer.bias.grad))
    for a, b in zip(*grads):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=0, atol=0)
