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

#: floor of squared distances (docs/methods/dart3.md): a zero distance keeps a finite gradient
MIN_SQ_DIST = 1e-12


#: batches of at least this many rows use the gallery-major ("columns") layout
COLUMNS_MIN_BATCH = 16


class PreparedGallery:
    """The gallery a DART3 loss is computed against, laid out for the batch size.

    ``gallery`` [Ng, d]. Two layouts, chosen by ``batch_size`` (measured on CPU, where the
    GEMM kernels for a few query columns are far from their peak in some orientations):

    * ``"rows"`` (batches < :data:`COLUMNS_MIN_BATCH`): the gallery row-major [Ng, d], walked
      in blocks of ≈ 8 MiB that stay in cache for both GEMMs (``ẑ Gᵀ`` and ``C G``), work
      matrices [B, n]; small batches are bound by memory bandwidth, so the gallery is read
      from memory once per step.
    * ``"columns"``: the gallery stored transposed [d, Ng], work matrices [n, B] (``G ẑᵀ``
      and ``Gᵀ C``), blocks of ≈ 4 M distances.

    ``rows`` is always the gallery [Ng, d] (a view in the columns layout).
    ``precision="bf16"`` keeps the gallery in bfloat16 and runs both GEMMs in bfloat16 (the
    element-wise softmax, top-k and accumulation stay float32): half the memory and, on CPUs
    with AVX-512 BF16 / AMX or on GPUs, about 3× faster, at ≈0.4 % relative error on the
    dot products (``--precision bf16``; the default is float32).
    """

    def __init__(self, gallery, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32, batch_size: int = 8,
                 layout: str = "auto", block: int | None = None, precision: str = "fp32"):
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision {precision!r}")
        g = torch.as_tensor(gallery).to(device=device or torch.as_tensor(gallery).device,
                                        dtype=dtype)
        self.precision = precision
        if precision == "bf16":
            g = g.to(torch.bfloat16)
        if layout == "auto":
            layout = "columns" if batch_size >= COLUMNS_MIN_BATCH else "rows"
        if layout not in ("rows", "columns"):
            raise ValueError(f"gallery layout {layout!r}")
        self.layout = layout
        self.num_rows, self.dim = g.shape
        if layout == "columns":
            self.cols = g.t().contiguous()                             # [d, Ng]
            self.rows = self.cols.t()
        else:
            self.rows = g.contiguous()
        self.sq_norms = g.float().pow(2).sum(1).to(dtype)       # of the stored (rounded) rows
        if block is None:
            on_gpu = g.device.type == "cuda"
            if layout == "rows":
                target = (256 << 20) if on_gpu else (8 << 20)          # bytes of gallery
                block = target // (g.element_size() * max(self.dim, 1))
            else:                                                      # distances per block
                block = ((1 << 28) if on_gpu else (1 << 22)) // max(batch_size, 1)
        self.block = int(max(256, block))


#: gallery rows per GEMM of the gradient accumulation: a fixed reduction length, summed in
#: gallery order, so the result does not depend on how the BLAS library splits a long
#: reduction over threads (it may split the gallery axis of one big GEMM differently from run
#: to run with MKL's dynamic threading, changing the float sums' order)
REDUCTION_CHUNK = 1024


def _accumulate(acc: torch.Tensor, gallery_block: torch.Tensor, expo: torch.Tensor,
                columns: bool, low: bool) -> None:
    """``acc += G̃_blockᵀ (exp/D)`` as GEMMs over :data:`REDUCTION_CHUNK` gallery rows each,
    added in a fixed order. ``gallery_block`` [d, n] (columns) or [n, d] (rows); ``expo``
    [n, B] (columns) or [B, n] (rows); ``acc`` [d, B] or [B, d]."""
    n = expo.shape[0] if columns else expo.shape[1]
    for c in range(0, n, REDUCTION_CHUNK):
        e = min(c + REDUCTION_CHUNK, n)
        if columns:
            g, x = gallery_block[:, c:e], expo[c:e]
        else:
            g, x = gallery_block[c:e], expo[:, c:e]
        if low:
            acc.add_(torch.mm(g, x.to(torch.bfloat16)) if columns
                     else torch.mm(x.to(torch.bfloat16), g))
        elif columns:
            acc.addmm_(g, x)
        else:
            acc.addmm_(x, g)


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
    def forward(ctx, zhat, gallery, tau, k):
        tau, k = float(tau), int(k)
        batch, dim = zhat.shape
        z = zhat.detach()
        z_sq = (z * z).sum(1)                                          # [B]
        floor = MIN_SQ_DIST ** 0.5
        columns = gallery.layout == "columns"
        gdim = 0 if columns else 1                 # axis of the gallery in the work matrices
        per_query = (lambda v: v[None, :]) if columns else (lambda v: v[:, None])
        row_min = torch.full((batch,), float("inf"), dtype=z.dtype, device=z.device)
        s = torch.zeros(batch, dtype=z.dtype, device=z.device)
        w = torch.zeros_like(s)
        # a_i: [d, B] (columns) or [B, d] (rows)
        acc = torch.zeros((dim, batch) if columns else (batch, dim), dtype=z.dtype,
                          device=z.device)
        top_d = top_j = None
        low = gallery.precision == "bf16"
        zg = z.to(torch.bfloat16) if low else z                        # GEMM operand
        for start in range(0, gallery.num_rows, gallery.block):
            stop = min(start + gallery.block, gallery.num_rows)
            g_sq = gallery.sq_norms[start:stop]
            g_sq = g_sq[:, None] if columns else g_sq[None, :]
            if columns:                                                # [n, B]
                cols = gallery.cols[:, start:stop]
                prod = (cols.t(), zg.t())
            else:                                                      # [B, n]
                rows = gallery.rows[start:stop]
                prod = (zg, rows.t())
            if low:
                dist = torch.mm(*prod).float().mul_(-2.0).add_(g_sq)
            else:
                dist = torch.addmm(g_sq, *prod, alpha=-2.0)
            dist.add_(per_query(z_sq)).clamp_min_(MIN_SQ_DIST).sqrt_()
            block_d, block_j = torch.topk(dist, min(k, stop - start), dim=gdim, largest=False)
            if not columns:
                block_d, block_j = block_d.t(), block_j.t()            # [kk, B]
            block_j = block_j + start
            if top_d is None:
                top_d, top_j = block_d, block_j
            else:                                                      # merge the running top-k
                cand_d, cand_j = torch.cat([top_d, block_d]), torch.cat([top_j, block_j])
                top_d, pos = torch.topk(cand_d, min(k, len(cand_d)), dim=0, largest=False)
                top_j = cand_j.gather(0, pos)
            new_min = torch.minimum(row_min, block_d[0])
            rescale = torch.exp((new_min - row_min) / tau)             # 0 on the first block
            expo = torch.add(per_query(new_min / tau), dist, alpha=-1.0 / tau).exp_()
            s.mul_(rescale).add_(expo.sum(gdim))
            expo.div_(dist)                                            # exp(…)/D
            if bool(block_d[0].min() <= floor):
                expo.masked_fill_(dist <= floor, 0.0)
            w.mul_(rescale).add_(expo.sum(gdim))
            acc.mul_(per_query(rescale))
            _accumulate(acc, cols if columns else rows, expo, columns, low)   # + G̃ᵀ(exp/D)
            row_min = new_min
        lse = torch.log(s) - row_min / tau
        loss = (top_d.sum(0) / tau + k * lse).sum() / batch
        # mask part: Σ_{j∈K_i} (ẑ_i − g̃_j)/D_ij  (floored distances: no gradient)
        inv = torch.where(top_d > floor, 1.0 / top_d, torch.zeros_like(top_d))   # [k, B]
        near = gallery.rows[top_j].to(z.dtype)                         # [k, B, d]
        mask_part = z * inv.sum(0)[:, None] - (inv[:, :, None] * near).sum(0)
        a = acc.t() if columns else acc
        dense_part = (k / s)[:, None] * (w[:, None] * z - a)
        ctx.save_for_backward((mask_part - dense_part) / (batch * tau))
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad * grad_out, None, None, None


def dart3_loss(zhat: torch.Tensor, gallery: PreparedGallery, tau: float, k: int,
               distance: str = "euclidean") -> torch.Tensor:
    """DART3's loss (Eq 2/11) of ẑ [B, d] against the prepared gallery; a scalar tensor.

    ``distance="cosine"`` (δ = 1 − cos, the Tab 7 ablation) uses the autograd reference.
    """
    k = min(int(k), gallery.num_rows)
    if distance == "euclidean":
        return EuclideanTopKSoftmaxLoss.apply(zhat, gallery, float(tau), k)
    return dart3_loss_reference(zhat, gallery.rows, tau, k, distance)


def distance_matrix(zhat: torch.Tensor, gallery: torch.Tensor,
                    distance: str = "euclidean") -> torch.Tensor:
    """δ(ẑ, G) [B, Ng]: Euclidean (floored, docs/methods/dart3.md) or 1 − cosine (autograd)."""
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
           "distance_matrix", "softmax_entropy", "tent_loss", "temp_loss", "MIN_SQ_DIST",
           "COLUMNS_MIN_BATCH"]
