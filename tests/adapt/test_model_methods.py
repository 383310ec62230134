"""Full DART3, TENT and TEMP on a tiny BN model: docs/methods/dart3.md T11 and T13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reidcli.adapt import AdaptConfig, adapt_features
from reidcli.adapt.bn import BatchNormAdaptation
from reidcli.adapt.inputs import read_inputs
from reidcli.errors import UsageError
from reidcli.models.checkpoint import load_model

BN = torch.nn.modules.batchnorm._BatchNorm


def _state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _split_changes(before, after):
    """Names of changed tensors, grouped: BN affine, BN buffers, other parameters."""
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    bn_affine = {k for k in changed if k.endswith(("bn1.weight", "bn1.bias", ".1.weight",
                                                   ".1.bias", "bottleneck.weight",
                                                   "bottleneck.bias"))}
    buffers = {k for k in changed if k.endswith(("running_mean", "running_var",
                                                 "num_batches_tracked"))}
    return bn_affine, buffers, changed - bn_affine - buffers


def _bn_affine_names(module):
    return {f"{n}.{p}" for n, m in module.named_modules() if isinstance(m, BN)
            for p in ("weight", "bias")}


def test_t11_full_mode_changes_only_bn_affine_and_keeps_running_stats(tiny_model_store):
    model_path, store, images = tiny_model_store
    loaded = load_model(model_path)
    before = _state(loaded.module)
    inputs = read_inputs(store)
    cfg = AdaptConfig("dart3", mode="full", batch_size=4, lr=1e-2, order="stored")
    inputs.selected = inputs.selected[:4]                       # one batch of 4
    out = adapt_features(inputs, cfg, model=loaded, images_root=images)
    after = _state(loaded.module)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    affine = _bn_affine_names(loaded.module)
    assert changed and changed <= affine                          # only BN γ/β moved
    assert any(k.endswith("weight") for k in changed) and any(k.endswith("bias") for k in
                                                              changed)
    for k in before:                                              # running statistics kept
        if k.endswith(("running_mean", "running_var", "num_batches_tracked")):
            assert torch.equal(before[k], after[k]), k
    norm = adapt_features(read_inputs(store), AdaptConfig("norm"))
    np.testing.assert_array_equal(out.arrays["M_g"], norm.arrays["M_g"])
    np.testing.assert_array_equal(out.arrays["S_g"], norm.arrays["S_g"])
    assert not np.array_equal(out.arrays["M_q"], out.arrays["M_q_init"])
    assert any(k.startswith("bn/") for k in out.arrays)


def test_t11_batch_of_one_rejected_and_final_single_batch_merged(tiny_model_store):
    model_path, store, images = tiny_model_store
    with pytest.raises(UsageError, match="at least 2 rows"):
        AdaptConfig("dart3", mode="full", batch_size=1).resolved()
    inputs = read_inputs(store)                                    # 9 queries
    out = adapt_features(inputs, AdaptConfig("dart3", mode="full", batch_size=4, lr=1e-3),
                         model=model_path, images_root=images)
    sizes = np.bincount(out.arrays["batch_id"])
    assert sizes.tolist() == [4, 5]                                # 4 + 4 + 1 → 4 + 5


def test_bn_adaptation_batch_mode_uses_batch_statistics_without_touching_buffers():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                              torch.nn.Dropout(0.5))
    net[1].running_mean.fill_(5.0)
    bn = BatchNormAdaptation(net, "batch")
    x = torch.randn(16, 4)
    y = net(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(3), atol=1e-5, rtol=0)   # batch stats
    assert torch.equal(net[1].running_mean, torch.full((3,), 5.0))
    assert not net[2].training                                     # dropout off
    assert [p.requires_grad for p in net.parameters()] == [False, False, True, True]
    with torch.no_grad():
        net[1].weight.add_(1.0)
    bn.reset()
    assert torch.equal(net[1].weight, bn.initial[0])
    running = BatchNormAdaptation(net, "running")
    assert not net[1].training and running.names == ["1.weight", "1.bias"]


@pytest.mark.parametrize("method,extra", [("tent", {}), ("tent", {"tent_logits": "features"}),
                                          ("temp", {}), ("temp", {"bn_mode": "batch"})])
def test_t13_tent_and_temp_complete_and_change_only_bn_affine(tiny_model_store, method, extra):
    model_path, store, images = tiny_model_store
    loaded = load_model(model_path)
    before = _state(loaded.module)
    inputs = read_inputs(store)
    out = adapt_features(inputs, AdaptConfig(method, batch_size=4, lr=1e-2, **extra),
                         model=loaded, images_root=images)
    after = _state(loaded.module)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and changed <= _bn_affine_names(loaded.module)
    assert out.queries.shape == (9, 128) and np.isfinite(out.queries).all()
    np.testing.assert_array_equal(out.gallery, inputs.gallery)     # stored G, unchanged
    assert np.isfinite(out.arrays["loss"]).all()


def test_none_and_norm_baselines_on_the_model_store(tiny_model_store):
    _, store, _ = tiny_model_store
    inputs = read_inputs(store)
    none = adapt_features(inputs, AdaptConfig("none"))
    norm = adapt_features(inputs, AdaptConfig("norm"))
    np.testing.assert_array_equal(none.queries, inputs.queries)
    assert np.allclose(norm.queries.mean(), 0.0, atol=0.5)


def test_no_external_trains_bn_on_the_raw_gallery(tiny_model_store):
    model_path, store, images = tiny_model_store
    inputs = read_inputs(store)
    out = adapt_features(inputs, AdaptConfig("dart3", mode="full", external=False,
                                             batch_size=4, lr=1e-2),
                         model=model_path, images_root=images)
    np.testing.assert_array_equal(out.gallery, inputs.gallery)
    assert "M_q" not in out.arrays and any(k.startswith("bn/") for k in out.arrays)
    with pytest.raises(UsageError, match="external=False with mode=lite"):
        AdaptConfig("dart3", external=False).resolved()


def test_model_methods_need_a_model_and_the_right_feature(tiny_model_store):
    _, store, images = tiny_model_store
    with pytest.raises(UsageError, match="needs model"):
        adapt_features(read_inputs(store), AdaptConfig("tent"))
    with pytest.raises(UsageError, match="images_root=DIR"):
        adapt_features(read_inputs(store), AdaptConfig("tent", batch_size=4),
                       model=tiny_model_store[0], images_root=None)
