"""Test-time adaptation losses: DART3's top-k distance loss, TENT's and TEMP's entropies.

DART3 (Eq 1–2 / 10–11, Alg 2) for a corrected query batch ẑ [B, d] and the normalised
gallery G̃ [Ng, d]:

    D = δ(ẑ, G̃)                    Euclidean, sqrt(max(‖ẑ_i − g̃_j‖², 1e-12))      [B, Ng]
    H = −log softmax(−D / τ)        over the Ng gallery entries of each row           [B, Ng]
    L = (1/B) Σ_i Σ_j H_ij · Mask_ij,  Mask = the k smallest H of each row (no gradient)

:func:`dart3_loss` evaluates it with an analytic gradient in a single pass over the gallery
(:class:`EuclideanTopKSoftmaxLoss`): per block of gallery rows, one GEMM for the distances
and one for the gradient while the block is in cache, an online softmax, and a running top-k;
the B×Ng matrices are never formed. :func:`dart3_loss_reference` is the same loss written
with plain autograd (used for ``--distance cosine`` and in tests).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

#: floor of squared distances (dart3.md §3.10): a zero distance keeps a finite gradient
MIN_SQ_DIST = 1e-12


class PreparedGallery:
    """The gallery a DART3 loss is computed against: ``rows`` [Ng, d] (contiguous) and
    ``sq_norms`` [Ng] on ``device``, walked in blocks of ``block_rows`` rows.

    The default block keeps one block of the gallery (≈ 8 MiB on CPU) in cache while both of
    its GEMMs run, so the gallery is read from memory once per step.
    """

    def __init__(self, gallery, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32, block_rows: int | None = None):
        g = torch.as_tensor(gallery)
        self.rows = g.to(device=device or g.device, dtype=dtype).contiguous()
        self.sq_norms = (self.rows * self.rows).sum(1)
        self.num_rows, self.dim = self.rows.shape
        if block_rows is None:
            target = (256 << 20) if self.rows.device.type == "cuda" else (8 << 20)
            block_rows = max(256, target // (self.rows.element_size() * max(self.dim, 1)))
        self.block_rows = int(max(1, block_rows))


class EuclideanTopKSoftmaxLoss(torch.autograd.Function):
    """DART3's loss with Euclidean δ, loss and gradient w.r.t. ẑ in one pass over the gallery.

    Per gallery block (rows j) and query i: ``D_ij = sqrt(max(‖g̃_j‖² + ‖ẑ_i‖² − 2 g̃_j·ẑ_i,
    1e-12))``. With the running row minimum ``m_i`` (online softmax, rescaled as it falls):
    ``s_i = Σ_j exp((m_i − D_ij)/τ)``, ``w_i = Σ_j exp((m_i − D_ij)/τ)/D_ij`` and
    ``a_i = Σ_j exp((m_i − D_ij)/τ)/D_ij · g̃_j``; the k smallest D_ij of each row (= the k
    smallest H_ij, the mask) are merged block by block. Then

        lse_i = log Σ_j exp(−D_ij/τ) = log s_i − m_i/τ,    H_ij = D_ij/τ + lse_i
        L = (1/B) Σ_i [Σ_{j∈K_i} D_ij/τ + k·lse_i]                              (Eq 2/11)
        ∂L/∂ẑ_i = (1/(Bτ)) [Σ_{j∈K_i} (ẑ_i − g̃_j)/D_ij − (k/s_i)(w_i ẑ_i − a_i)]

    (∂L/∂D_ij = (Mask_ij − k·softmax_ij)/(Bτ); ∂D_ij/∂ẑ_i = (ẑ_i − g̃_j)/D_ij; floored
    distances get no gradient, as with autograd through the clamp). The gradient is computed
    in the forward pass and scaled in ``backward``.
    """

    @staticmethod
    def forward(ctx, zhat, gallery_rows, gallery_sq, tau, k, block_rows):
        tau, k = float(tau), int(k)
        batch, dim = zhat.shape
        num = gallery_rows.shape[0]
        z = zhat.detach()
        z_sq = (z * z).sum(1)                                          # [B]
        zt = z.t()                                                     # [d, B]
        floor = MIN_SQ_DIST ** 0.5
        row_min = torch.full((batch,), float("inf"), dtype=z.dtype, device=z.device)
        s = torch.zeros(batch, dtype=z.dtype, device=z.device)
        w = torch.zeros_like(s)
        acc = torch.zeros(dim, batch, dtype=z.dtype, device=z.device)  # a_i as columns
        top_d = top_j = None
        for start in range(0, num, block_rows):
            rows = gallery_rows[start:start + block_rows]              # [n, d]
            dist = torch.addmm(gallery_sq[start:start + block_rows, None], rows, zt,
                               alpha=-2.0)                             # [n, B]
            dist.add_(z_sq[None, :]).clamp_min_(MIN_SQ_DIST).sqrt_()
            kk = min(k, dist.shape[0])
            block_d, block_j = torch.topk(dist, kk, dim=0, largest=False)
            block_j += start
            if top_d is None:
                top_d, top_j = block_d, block_j
            else:                                                      # merge the running top-k
                cand_d, cand_j = torch.cat([top_d, block_d]), torch.cat([top_j, block_j])
                keep_d, pos = torch.topk(cand_d, min(k, len(cand_d)), dim=0, largest=False)
                top_d, top_j = keep_d, cand_j.gather(0, pos)
            new_min = torch.minimum(row_min, block_d[0])
            rescale = torch.exp((new_min - row_min) / tau)             # 0 on the first block
            expo = torch.add(new_min[None, :] / tau, dist, alpha=-1.0 / tau).exp_()
            s.mul_(rescale).add_(expo.sum(0))
            expo.div_(dist)                                            # exp(…)/D
            if bool(block_d[0].min() <= floor):
                expo.masked_fill_(dist <= floor, 0.0)
            w.mul_(rescale).add_(expo.sum(0))
            acc.mul_(rescale[None, :]).addmm_(rows.t(), expo)          # + G̃_blockᵀ (exp/D)
            row_min = new_min
        lse = torch.log(s) - row_min / tau
        loss = (top_d.sum(0) / tau + k * lse).sum() / batch
        # mask part: Σ_{j∈K_i} (ẑ_i − g̃_j)/D_ij  (floored distances: no gradient)
        inv = torch.where(top_d > floor, 1.0 / top_d, torch.zeros_like(top_d))   # [k, B]
        near = gallery_rows[top_j]                                     # [k, B, d]
        mask_part = z * inv.sum(0)[:, None] - (inv[:, :, None] * near).sum(0)
        dense_part = (k / s)[:, None] * (w[:, None] * z - acc.t())
        ctx.save_for_backward((mask_part - dense_part) / (batch * tau))
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad * grad_out, None, None, None, None, None


def dart3_loss(zhat: torch.Tensor, gallery: PreparedGallery, tau: float, k: int,
               distance: str = "euclidean") -> torch.Tensor:
    """DART3's loss (Eq 2/11) of ẑ [B, d] against the prepared gallery; a scalar tensor.

    ``distance="cosine"`` (δ = 1 − cos, the Tab 7 ablation) uses the autograd reference.
    """
    k = min(int(k), gallery.num_rows)
    if distance == "euclidean":
        return EuclideanTopKSoftmaxLoss.apply(zhat, gallery.rows, gallery.sq_norms, float(tau),
                                              k, gallery.block_rows)
    return dart3_loss_reference(zhat, gallery.rows, tau, k, distance)


def distance_matrix(zhat: torch.Tensor, gallery: torch.Tensor,
                    distance: str = "euclidean") -> torch.Tensor:
    """δ(ẑ, G) [B, Ng]: Euclidean (floored, dart3.md §3.10) or 1 − cosine (autograd)."""
    if distance == "cosine":
        return 1.0 - F.normalize(zhat, dim=1) @ F.normalize(gallery, dim=1).t()
    d2 = (zhat * zhat).sum(1, keepdim=True) + (gallery * gallery).sum(1)[None, :] \
        - 2.0 * zhat @ gallery.t()
    return d2.clamp_min(MIN_SQ_DIST).sqrt()


def dart3_loss_reference(zhat: torch.Tensor, gallery: torch.Tensor, tau: float, k: int,
                         distance: str = "euclidean") -> torch.Tensor:
    """Eq 2/11 written directly with autograd: H = −log_softmax(−D/τ), top-k mask on H."""
    h = -torch.log_softmax(-distance_matrix(zhat, gallery, distance) / tau, dim=1)
    idx = torch.topk(h.detach(), min(int(k), h.shape[1]), dim=1, largest=False).indices
    return h.gather(1, idx).sum() / zhat.shape[0]


def softmax_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean over rows of H(p) = −Σ_c p_c log p_c, p = softmax(logits) [B, C] (TENT Eq 7)."""
    logp = torch.log_softmax(logits.float(), dim=1)
    return -(logp.exp() * logp).sum(1).mean()


def tent_loss(logits: list[torch.Tensor]) -> torch.Tensor:
    """TENT's entropy, averaged over the heads (PCB: the 6 part classifiers)."""
    return torch.stack([softmax_entropy(x) for x in logits]).mean()


def temp_loss(query: torch.Tensor, gallery_unit: torch.Tensor, k: int) -> torch.Tensor:
    """TEMP's retrieval entropy (Eq 8–9): the k largest cosine similarities of each query to
    the gallery ``gallery_unit`` [Ns, d] (rows L2-normalised), softmax (temperature 1),
    entropy, mean over the batch."""
    sim = F.normalize(query.float(), dim=1) @ gallery_unit.t()
    top = torch.topk(sim, min(int(k), sim.shape[1]), dim=1).values
    return softmax_entropy(top)


__all__ = ["PreparedGallery", "EuclideanTopKSoftmaxLoss", "dart3_loss", "dart3_loss_reference",
           "distance_matrix", "softmax_entropy", "tent_loss", "temp_loss", "MIN_SQ_DIST"]
