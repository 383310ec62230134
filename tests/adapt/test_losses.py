"""T8 golden loss values, T9 gradient check, and the fused loss against the autograd form."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch

from reidcli.adapt import losses
from reidcli.workers import torch_uses_openmp
from reidcli.adapt.losses import (PreparedGallery, dart3_loss, dart3_loss_reference,
                                  softmax_entropy, temp_loss, tent_loss)

GOLDEN_GALLERY = [[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_golden_values(layout):
    z = torch.zeros(1, 2, dtype=torch.float64)
    g = torch.tensor(GOLDEN_GALLERY, dtype=torch.float64)
    gallery = PreparedGallery(g, dtype=torch.float64, layout=layout)
    h1 = -torch.log_softmax(-torch.tensor([1.0, 2.0, 5.0], dtype=torch.float64), 0)
    np.testing.assert_allclose(h1.numpy(), [0.326563, 1.326563, 4.326563], atol=1e-6)
    assert dart3_loss(z, gallery, 1.0, 1).item() == pytest.approx(0.326563, abs=1e-6)
    assert dart3_loss(z, gallery, 1.0, 2).item() == pytest.approx(1.653125, abs=1e-6)
    assert dart3_loss(z, gallery, 100.0, 2).item() == pytest.approx(2.174179, abs=1e-5)
    h100 = -torch.log_softmax(-torch.tensor([1.0, 2.0, 5.0], dtype=torch.float64) / 100, 0)
    np.testing.assert_allclose(h100.numpy(), [1.082090, 1.092090, 1.122090], atol=1e-6)


def test_gradcheck_wrt_shift_and_scale_with_the_mask_held():
    torch.manual_seed(0)
    dt = torch.float64
    z = torch.randn(4, 6, dtype=dt)
    g = torch.randn(30, 6, dtype=dt) * 1.5
    gallery = PreparedGallery(g, dtype=dt, layout="rows")
    mean = torch.randn(6, dtype=dt, requires_grad=True)
    scale = (torch.rand(6, dtype=dt) + 0.5).requires_grad_()
    # the top-k mask is fixed at these values: small moves keep the same k nearest
    fn = lambda m, s: dart3_loss((z - m) / s, gallery, 2.0, 3)
    assert torch.autograd.gradcheck(fn, (mean, scale), eps=1e-6, atol=1e-6)
    fn_ref = lambda m, s: dart3_loss_reference((z - m) / s, g, 2.0, 3)
    assert torch.autograd.gradcheck(fn_ref, (mean, scale), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("schedule", ["shards", "blocks"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("tau,k,batch", [(0.5, 1, 1), (1.0, 3, 7), (100.0, 5, 16),
                                         (2000.0, 2, 40)])
def test_fused_loss_and_gradient_equal_the_autograd_reference(tau, k, batch, layout, schedule):
    torch.manual_seed(1)
    z = torch.randn(batch, 16, requires_grad=True)
    g = torch.randn(3000, 16) * 2
    g[10] = z[0].detach()                                   # a zero distance (floored)
    # 10 blocks (3 shards of ≤ 4 in the shards schedule): the block and shard merges run
    gallery = PreparedGallery(g, layout=layout, block=300, schedule=schedule)
    assert len(gallery.shards) == (3 if schedule == "shards" else 1)
    loss = dart3_loss(z, gallery, tau, k)
    grad, = torch.autograd.grad(loss, z)
    ref = dart3_loss_reference(z, g, tau, k)
    grad_ref, = torch.autograd.grad(ref, z)
    # float32: the zero distance comes out of ‖z‖² + ‖g‖² − 2z·g as rounding noise (≈1e-3
    # here), summed in a different order by the two implementations
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5, abs=5e-4)
    torch.testing.assert_close(grad, grad_ref, rtol=1e-4, atol=1e-7)


def test_loss_is_about_k_log_ng_at_large_tau_and_mask_is_the_k_nearest():
    torch.manual_seed(2)
    z = torch.randn(3, 8, requires_grad=True)
    g = torch.randn(500, 8)
    loss = dart3_loss(z, PreparedGallery(g), 2000.0, 3)
    assert loss.item() == pytest.approx(3 * np.log(500), rel=0.01)
    # moving z towards its 3 nearest gallery rows lowers the loss
    grad, = torch.autograd.grad(loss, z)
    with torch.no_grad():
        lower = dart3_loss(z - 10.0 * grad, PreparedGallery(g), 2000.0, 3)
    assert lower.item() < loss.item()


def test_cosine_distance_ablation_runs_through_the_reference():
    torch.manual_seed(3)
    z = torch.randn(2, 4, requires_grad=True)
    g = torch.randn(20, 4)
    loss = dart3_loss(z, PreparedGallery(g), 1.0, 2, distance="cosine")
    assert loss.item() == pytest.approx(dart3_loss_reference(z, g, 1.0, 2, "cosine").item())
    loss.backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()


def test_entropies():
    uniform = torch.zeros(4, 10)
    assert softmax_entropy(uniform).item() == pytest.approx(np.log(10), rel=1e-6)
    peaked = torch.tensor([[50.0, 0.0, 0.0]])
    assert softmax_entropy(peaked).item() < 1e-6
    assert tent_loss([uniform, peaked.expand(4, 3)]).item() == pytest.approx(np.log(10) / 2,
                                                                               rel=1e-5)
    g = torch.nn.functional.normalize(torch.randn(100, 8), dim=1)
    q = g[:3] * 5.0                                          # scale-free (cosine)
    assert temp_loss(q, g, 50).item() == pytest.approx(temp_loss(g[:3], g, 50).item(),
                                                        rel=1e-5)
    assert temp_loss(q, g, 1).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_bf16_gemms_stay_close_to_float32(layout):
    torch.manual_seed(4)
    z = torch.randn(8, 64, requires_grad=True)
    g = torch.randn(2000, 64)
    f32 = PreparedGallery(g, layout=layout)
    b16 = PreparedGallery(g, layout=layout, precision="bf16")
    assert b16.rows.dtype == torch.bfloat16 and f32.rows.dtype == torch.float32
    loss32, loss16 = dart3_loss(z, f32, 100.0, 3), dart3_loss(z, b16, 100.0, 3)
    g32, = torch.autograd.grad(loss32, z)
    g16, = torch.autograd.grad(loss16, z)
    assert loss16.item() == pytest.approx(loss32.item(), rel=1e-4)
    # the gradient is a small difference of two near-equal terms: direction is what counts
    assert torch.nn.functional.cosine_similarity(g32.flatten(), g16.flatten(), 0) > 0.95


def _loss_and_grad(z, gallery):
    z = z.clone().requires_grad_()
    loss = dart3_loss(z, gallery, 100.0, 3)
    return loss.detach(), torch.autograd.grad(loss, z)[0]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_sharded_pass_does_not_depend_on_the_thread_count(precision):
    """The shards and their merge order are fixed: 1 or 2 worker threads, same bits."""
    torch.manual_seed(5)
    z = torch.randn(8, 32)
    gallery = PreparedGallery(torch.randn(5000, 32), block=256, precision=precision)
    assert gallery.schedule == "shards" and len(gallery.shards) == 5   # 20 blocks, 4 each
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _loss_and_grad(z, gallery)
        torch.set_num_threads(2)
        two = _loss_and_grad(z, gallery)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])


@pytest.mark.skipif(not torch_uses_openmp(), reason="torch's intra-op threads are not OpenMP's")
def test_each_shard_is_one_single_threaded_pass_and_the_thread_setting_is_restored():
    """The invariant behind the CPU speed (issue 21): one pass per shard, each with one torch
    intra-op thread (no fork/join per block), every shard once; torch's thread count is
    back to the caller's afterwards."""
    torch.manual_seed(6)
    gallery = PreparedGallery(torch.randn(5000, 32), block=256)
    seen = []
    real_pass = losses._pass

    def spy(z, zg, z_sq, gal, start, stop, *rest):
        seen.append((start, stop, torch.get_num_threads()))
        return real_pass(z, zg, z_sq, gal, start, stop, *rest)

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with mock.patch.object(losses, "_pass", spy):
            _loss_and_grad(torch.randn(4, 32), gallery)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert sorted((a, b) for a, b, _ in seen) == gallery.shards
    assert {n for _, _, n in seen} == {1}


def test_blocks_schedule_keeps_the_previous_single_pass():
    gallery = PreparedGallery(torch.randn(5000, 32), batch_size=16, schedule="blocks")
    assert gallery.shards == [(0, 5000)] and gallery.layout == "columns"
    assert PreparedGallery(torch.randn(5000, 32), batch_size=16).layout == "rows"
    with pytest.raises(ValueError):
        PreparedGallery(torch.randn(10, 2), schedule="threads")


@pytest.mark.parametrize("gemm", ["onednn", "blas"])
def test_cpu_gemm_libraries_agree_and_neither_depends_on_the_thread_count(gemm):
    """The shards' float32 GEMMs in oneDNN (issue 32) or torch.mm: the same loss and gradient
    up to float32 rounding, and each the same bits on 1 and 2 threads."""
    if gemm == "onednn" and losses._onednn_linear() is None:
        pytest.skip("torch has no oneDNN here")
    torch.manual_seed(7)
    z, g = torch.randn(16, 48), torch.randn(4000, 48)
    gallery = PreparedGallery(g, block=256, gemm=gemm)
    assert gallery.gemm == gemm and len(gallery.shards) == 4
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _loss_and_grad(z, gallery)
        torch.set_num_threads(2)
        two = _loss_and_grad(z, gallery)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])
    ref = _loss_and_grad(z, PreparedGallery(g, block=256, gemm="blas"))
    assert one[0].item() == pytest.approx(ref[0].item(), rel=1e-6)
    torch.testing.assert_close(one[1], ref[1], rtol=1e-4, atol=1e-7)
    # float64, bfloat16, the blocks schedule and CUDA keep torch.mm
    assert PreparedGallery(g, dtype=torch.float64, gemm=gemm).gemm == "blas"
    assert PreparedGallery(g, precision="bf16", gemm=gemm).gemm == "blas"
    assert PreparedGallery(g, schedule="blocks", gemm=gemm).gemm == "blas"
    with pytest.raises(ValueError):
        PreparedGallery(g, gemm="mkl")
