"""Same seed → same bits on the CPU whatever the number of torch threads (issue 28: DART3 LITE
differed between runs and between 1 thread and the default).

Each test runs the same work with 1 and with 2 intra-op threads in this process and compares
the results exactly. The inputs are just large enough for torch to split the work over
threads (more than 32,768 elements per op).
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F


@contextlib.contextmanager
def threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def on_1_and_2_threads(run):
    """``run()`` with 1 thread, then with 2 threads (a tuple of results each)."""
    with threads(1):
        one = run()
    with threads(2):
        two = run()
    return one, two


def assert_same_bits(one, two):
    for a, b in zip(one, two, strict=True):
        a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
        np.testing.assert_array_equal(a, b)


def _lite_inputs():
    from reidcli.adapt.run import inputs_from_arrays

    rng = np.random.default_rng(0)
    n, d, nq = 640, 768, 128                   # a batch of 64 × 768 = 49,152 elements
    x = rng.standard_normal((n, d)).astype(np.float32)
    cams = rng.integers(0, 4, n)
    x += cams[:, None] * 0.3
    pool = rng.standard_normal((64, d)).astype(np.float32)
    return inputs_from_arrays(x[:nq], cams[:nq], x[nq:], cams[nq:], grounding=pool,
                              grounding_cams=rng.integers(0, 4, 64))


# -- case: DART3 LITE differed from run to run and between 1 and 2 threads (the per-camera
# sums of the correction's gradient were atomic adds in thread order); every other
# store-only method checked too
@pytest.mark.parametrize("method,settings", [
    ("dart3-lite", dict(batch_size=64)),
    ("dart3-lite", dict(batch_size=64, lr=1e-2, steps=2, emit="post")),
    ("dart3-lite", dict(batch_size=48, grounding=16, split_by_query_camera=True)),
    ("dart3-lite", dict(batch_size=64, distance="cosine", tau=0.05, precision="bf16",
                        optimizer="sgd")),
    ("norm", {}),
    ("none", {}),
])
def test_store_methods_same_bits_on_1_and_2_threads(method, settings):
    from reidcli.adapt import AdaptConfig
    from reidcli.adapt.run import adapt_features

    inputs = _lite_inputs()
    cfg = AdaptConfig(method=method, seed=1, **settings)

    def run():
        out = adapt_features(inputs, cfg)
        return (out.queries, out.gallery, *(out.arrays[k] for k in sorted(out.arrays)))

    one, two = on_1_and_2_threads(run)
    assert_same_bits(one, two)


# -- case: the model-based methods (TENT, TEMP, full DART3) differed between 1 and 2 threads
# (BatchNorm1d's statistics and γ/β gradients, the classifier's backward GEMM)
@pytest.mark.parametrize("settings", [
    dict(method="tent", batch_size=9),
    dict(method="temp", batch_size=8, temp_k=5),
    dict(method="dart3", mode="full", bn_mode="running", batch_size=4),
    pytest.param(dict(method="tent", tent_logits="features", batch_size=8),
                 marks=pytest.mark.slow),
    pytest.param(dict(method="dart3", mode="full", batch_size=9), marks=pytest.mark.slow),
])
def test_model_methods_same_bits_on_1_and_2_threads(tiny_model_store, settings):
    from reidcli.adapt import AdaptConfig
    from reidcli.adapt.inputs import read_inputs
    from reidcli.adapt.run import adapt_features

    model, store, images = tiny_model_store
    cfg = AdaptConfig(seed=1, lr=1e-2, **settings)

    def run():
        out = adapt_features(read_inputs(store), cfg, model=model, images_root=images)
        return (out.queries, *(out.arrays[k] for k in sorted(out.arrays)))

    one, two = on_1_and_2_threads(run)
    assert_same_bits(one, two)


# -- case: a tiny `reid train` gave different weights with 1 and 2 threads (BatchNorm1d,
# oneDNN's convolution weight gradient)
@pytest.mark.parametrize("method,batch", [
    ("bot", dict(p=4, k=2)),
    pytest.param("pcb", dict(batch_size=8), marks=pytest.mark.slow),
])
def test_tiny_training_same_weights_on_1_and_2_threads(tiny_synthetic_root, tmp_path, method,
                                                       batch):
    from reidcli.training.config import make_config
    from reidcli.training.engine import train_model

    cfg = make_config(method, preset="tiny", dataset="synthetic",
                      root=str(tiny_synthetic_root), options={"name": "tiny"}, max_iters=2,
                      workers=0, **batch)

    def run():
        run_dir = tmp_path / f"run{torch.get_num_threads()}"
        train_model(cfg, run_dir, progress=False)
        state = torch.load(run_dir / "model.pt", weights_only=True)["model_state"]
        return [state[k] for k in sorted(state)]

    one, two = on_1_and_2_threads(run)
    assert_same_bits(one, two)


# -- the ops behind the cases above, each on its own ------------------------------------------
@pytest.mark.parametrize("training", [True, False])
def test_batchnorm1d_same_bits(training):
    from reidcli.models.fixed_order import BatchNorm1d

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 4096, generator=gen, requires_grad=True)
    grad = torch.randn(9, 4096, generator=gen)

    def run():
        bn = BatchNorm1d(4096).train(training)
        with torch.no_grad():
            bn.running_var.uniform_(0.5, 2.0, generator=torch.Generator().manual_seed(1))
        x.grad = None
        y = bn(x)
        y.backward(grad)
        return y, x.grad, bn.weight.grad, bn.bias.grad, bn.running_mean, bn.running_var

    one, two = on_1_and_2_threads(run)
    assert_same_bits(one, two)


def test_linear_backward_same_bits():
    from reidcli.models.fixed_order import Linear

    torch.manual_seed(0)
    fc = Linear(128, 3)
    x = torch.randn(9, 128, requires_grad=True)       # 9 rows: MKL's split differed

    def run():
        x.grad = fc.weight.grad = fc.bias.grad = None
        y = fc(x)
        y.backward(torch.linspace(-1, 1, 27).reshape(9, 3))
        return y, x.grad, fc.weight.grad, fc.bias.grad

    one, two = on_1_and_2_threads(run)
    assert_same_bits(one, two)


@pytest.mark.parametrize("x_shape,w_shape,stride", [
    ((8, 3, 64, 32), (8, 3, 3, 3), 2),          # oneDNN: the weight gradient differed
    ((8, 128, 6, 1), (256, 128, 1, 1), 1),      # PCB's 1×1 reduction: the output differed
])
def test_convolutions_same_bits_in_fixed_order_convolutions(x_shape, w_shape, stride):
    from reidcli.models.fixed_order import fixed_order_convolutions

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*x_shape, generator=gen, requires_grad=True)
    w = torch.randn(*w_shape, generator=gen, requires_grad=True)
    mkldnn = torch.backends.mkldnn.enabled

    def run():
        x.grad = w.grad = None
        with fixed_order_convolutions("cpu"):
            y = F.conv2d(x, w, stride=stride, padding=w_shape[-1] // 2)
            y.backward(torch.linspace(-1, 1, y.numel()).reshape(y.shape))
        return y, x.grad, w.grad

    one, two = on_1_and_2_threads(run)
    assert_same_bits(one, two)
    assert torch.backends.mkldnn.enabled == mkldnn                  # restored
