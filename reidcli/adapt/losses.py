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

import contextlib
import dataclasses
import itertools

import torch
import torch.nn.functional as F

from reidcli.models.fixed_order import linear
from reidcli.workers import ReusedThreadPool, one_intra_op_thread, torch_uses_openmp

#: floor of squared distances (docs/methods/dart3.md): a zero distance keeps a finite gradient
MIN_SQ_DIST = 1e-12


#: batches of at least this many rows use the gallery-major ("columns") layout in the
#: ``"blocks"`` schedule (the ``"shards"`` schedule always walks the gallery row-major)
COLUMNS_MIN_BATCH = 16

#: the ``"shards"`` schedule's gallery blocks: ≈ this many bytes of gallery rows (CPU)
SHARD_BLOCK_BYTES = 4 << 20
#: gallery blocks per shard (the unit of work of one worker thread)
SHARD_BLOCKS = 4

#: the pass schedule :class:`PreparedGallery` uses when none is given: ``"auto"`` is
#: ``"shards"`` on CPU and ``"blocks"`` on CUDA
SCHEDULE = "auto"

#: the library of the float32 GEMMs of the ``"shards"`` schedule when none is given:
#: ``"auto"`` is ``"onednn"`` where torch has oneDNN (its matmul ran both GEMM shapes of a
#: block 1.6–2× faster than the BLAS behind ``torch.mm`` on one thread of an AVX-512 CPU,
#: issue 32), else ``"blas"`` (``torch.mm``/``addmm``)
CPU_GEMM = "auto"


def _onednn_linear():
    """torch's oneDNN float32 linear, ``op(x, w, bias, "none", [], "")`` = x wᵀ + bias, or
    None where torch has no oneDNN or lets it round float32 products to a lower precision
    (``torch.backends.mkldnn.matmul.fp32_precision`` other than none/ieee)."""
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        mode = getattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision",
                       "none")
        if mode not in ("none", "ieee"):
            return None
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


class PreparedGallery:
    """The gallery a DART3 loss is computed against, laid out and cut up for the batch size.

    ``gallery`` [Ng, d]. The loss walks it in blocks of rows (both GEMMs of a block while it
    is in cache, :class:`EuclideanTopKSoftmaxLoss`), under one of two schedules:

    * ``"shards"`` (CPU): the blocks are grouped into fixed shards of :data:`SHARD_BLOCKS`
      blocks (≈ :data:`SHARD_BLOCK_BYTES` each); worker threads take whole shards, each
      shard's pass runs with **one** torch intra-op thread, and the shards' partial sums are
      merged in shard order. One fork/join per loss evaluation, and the result does not
      depend on the number of threads (the shards and the merge order are fixed).
    * ``"blocks"`` (CUDA; on CPU the schedule before this one): one pass in the calling
      thread, torch's intra-op threads inside every GEMM and element-wise op of every block.
      On a CPU whose cores are shared with other processes each of these hundreds of
      fork/joins per step can cost ≈ 15 ms: after every parallel region OpenMP's idle
      threads spin-wait (libgomp's default wait policy) on the core the working thread
      needs. That made batches 2–15 several times slower per query than batch 1, whose
      GEMVs run on one thread (issue 21).

    Layouts: ``"rows"`` the gallery row-major [Ng, d], work matrices [B, n]; ``"columns"``
    the gallery stored transposed [d, Ng], work matrices [n, B] (``"auto"``: rows, except
    for batches ≥ :data:`COLUMNS_MIN_BATCH` in the ``"blocks"`` schedule).
    ``rows`` is always the gallery [Ng, d] (a view in the columns layout); ``shards`` the
    [start, stop) row ranges of the shards, ``block`` the rows per block.
    ``precision="bf16"`` keeps the gallery in bfloat16 and runs both GEMMs in bfloat16 (the
    element-wise softmax, top-k and accumulation stay float32): half the memory and, on CPUs
    with AVX-512 BF16 / AMX or on GPUs, about 2–3× faster, at ≈0.4 % relative error on the
    dot products (``--precision bf16``; the default is float32).
    """

    def __init__(self, gallery, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32, batch_size: int = 8,
                 layout: str = "auto", block: int | None = None, precision: str = "fp32",
                 schedule: str | None = None, gemm: str | None = None):
        if precision not in ("fp32", "float32", "bf16"):   # reidcli.params.PRECISION
            raise ValueError(f"precision {precision!r}")
        g = torch.as_tensor(gallery).to(device=device or torch.as_tensor(gallery).device,
                                        dtype=dtype)
        self.precision = precision
        if precision == "bf16":
            g = g.to(torch.bfloat16)
        on_gpu = g.device.type == "cuda"
        schedule = SCHEDULE if schedule is None else schedule
        if schedule == "auto":
            schedule = "blocks" if on_gpu else "shards"
        if schedule not in ("shards", "blocks"):
            raise ValueError(f"gallery pass schedule {schedule!r}")
        self.schedule = schedule
        if layout == "auto":
            layout = "columns" if schedule == "blocks" and batch_size >= COLUMNS_MIN_BATCH \
                else "rows"
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
        gemm = CPU_GEMM if gemm is None else gemm
        if gemm not in ("auto", "onednn", "blas"):
            raise ValueError(f"gemm library {gemm!r}")
        # oneDNN: float32 row-major blocks of the CPU shards (one thread per GEMM, so the
        # bits do not depend on the thread count); anything else takes torch.mm
        self.linear = _onednn_linear() if (
            gemm != "blas" and schedule == "shards" and layout == "rows" and not on_gpu
            and g.dtype == torch.float32) else None
        self.gemm = "onednn" if self.linear is not None else "blas"
        if block is None:
            if layout == "rows":
                target = (256 << 20) if on_gpu else \
                    (SHARD_BLOCK_BYTES if schedule == "shards" else (8 << 20))
                block = target // (g.element_size() * max(self.dim, 1))   # rows of gallery
            else:                                                      # distances per block
                block = ((1 << 28) if on_gpu else (1 << 22)) // max(batch_size, 1)
        self.block = int(max(256, block))
        span = self.block * (SHARD_BLOCKS if schedule == "shards" else
                             max(-(-self.num_rows // self.block), 1))
        self.shards = [(a, min(a + span, self.num_rows))
                       for a in range(0, self.num_rows, span)] or [(0, 0)]


#: gallery rows per GEMM of the gradient accumulation in the ``"blocks"`` schedule: a fixed
#: reduction length, summed in gallery order, so the result does not depend on how the BLAS
#: library splits a long reduction over threads (it may split the gallery axis of one big
#: GEMM differently from run to run with MKL's dynamic threading). The ``"shards"`` schedule
#: runs every GEMM on one thread and needs no such cut.
REDUCTION_CHUNK = 1024


def _accumulate(acc: torch.Tensor, gallery_block: torch.Tensor, expo: torch.Tensor,
                columns: bool, low: bool, chunk: int) -> None:
    """``acc += G̃_blockᵀ (exp/D)`` as GEMMs over ``chunk`` gallery rows each, added in a
    fixed order. ``gallery_block`` [d, n] (columns) or [n, d] (rows); ``expo`` [n, B]
    (columns) or [B, n] (rows); ``acc`` [d, B] or [B, d]."""
    n = expo.shape[0] if columns else expo.shape[1]
    for c in range(0, n, chunk):
        e = min(c + chunk, n)
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


@dataclasses.dataclass
class PartialPass:
    """The running sums of one pass over a range of gallery rows, per query i (B queries):
    ``row_min`` m_i, ``s`` Σ exp((m_i − D_ij)/τ), ``w`` Σ exp((m_i − D_ij)/τ)/D_ij, ``acc``
    a_i = Σ exp((m_i − D_ij)/τ)/D_ij · g̃_j ([d, B] columns layout, [B, d] rows), ``top_d``
    / ``top_j`` [k', B] the k smallest distances seen and their gallery rows."""

    row_min: torch.Tensor
    s: torch.Tensor
    w: torch.Tensor
    acc: torch.Tensor
    top_d: torch.Tensor
    top_j: torch.Tensor


def _merge_top(top_d, top_j, cand_d, cand_j, k):
    """The k smallest of two [·, B] candidate lists (running top-k)."""
    cand_d, cand_j = torch.cat([top_d, cand_d]), torch.cat([top_j, cand_j])
    top_d, pos = torch.topk(cand_d, min(k, len(cand_d)), dim=0, largest=False)
    return top_d, cand_j.gather(0, pos)


def _pass(z, zg, z_sq, gallery: PreparedGallery, start: int, stop: int, tau: float, k: int,
          chunk: int) -> PartialPass:
    """The running sums over gallery rows [start, stop) in blocks (online softmax, running
    top-k; see :class:`EuclideanTopKSoftmaxLoss`). ``z`` [B, d] float, ``zg`` its GEMM
    operand, ``z_sq`` [B]."""
    batch, dim = z.shape
    floor = MIN_SQ_DIST ** 0.5
    columns = gallery.layout == "columns"
    gdim = 0 if columns else 1                     # axis of the gallery in the work matrices
    per_query = (lambda v: v[None, :]) if columns else (lambda v: v[:, None])
    row_min = torch.full((batch,), float("inf"), dtype=z.dtype, device=z.device)
    s = torch.zeros(batch, dtype=z.dtype, device=z.device)
    w = torch.zeros_like(s)
    acc = torch.zeros((dim, batch) if columns else (batch, dim), dtype=z.dtype,
                      device=z.device)
    top_d = top_j = None
    low = gallery.precision == "bf16"
    linear = gallery.linear                        # oneDNN: zg = −2 ẑ (exact), rows layout
    for a in range(start, stop, gallery.block):
        b = min(a + gallery.block, stop)
        g_sq = gallery.sq_norms[a:b]
        if linear is not None:                                         # [B, n], one op
            block = gallery.rows[a:b]
            dist = linear(zg, block, g_sq, "none", [], "")             # ‖g̃‖² − 2 ẑ·g̃
        else:
            g_sq = g_sq[:, None] if columns else g_sq[None, :]
            if columns:                                                # [n, B]
                block = gallery.cols[:, a:b]
                prod = (block.t(), zg.t())
            else:                                                      # [B, n]
                block = gallery.rows[a:b]
                prod = (zg, block.t())
            if low:
                dist = torch.mm(*prod).float().mul_(-2.0).add_(g_sq)
            else:
                dist = torch.addmm(g_sq, *prod, alpha=-2.0)
        dist.add_(per_query(z_sq)).clamp_min_(MIN_SQ_DIST).sqrt_()
        block_d, block_j = torch.topk(dist, min(k, b - a), dim=gdim, largest=False)
        if not columns:
            block_d, block_j = block_d.t(), block_j.t()                # [kk, B]
        block_j = block_j + a
        if top_d is None:
            top_d, top_j = block_d, block_j
        else:
            top_d, top_j = _merge_top(top_d, top_j, block_d, block_j, k)
        new_min = torch.minimum(row_min, block_d[0])
        rescale = torch.exp((new_min - row_min) / tau)                 # 0 on the first block
        expo = torch.add(per_query(new_min / tau), dist, alpha=-1.0 / tau).exp_()
        s.mul_(rescale).add_(expo.sum(gdim))
        expo.div_(dist)                                                # exp(…)/D
        if bool(block_d[0].min() <= floor):
            expo.masked_fill_(dist <= floor, 0.0)
        w.mul_(rescale).add_(expo.sum(gdim))
        acc.mul_(per_query(rescale))
        if linear is not None:                                         # + (exp/D) G̃_block
            acc.add_(linear(expo, block.t(), None, "none", [], ""))
        else:
            _accumulate(acc, block, expo, columns, low, chunk or (b - a))  # + G̃ᵀ(exp/D)
        row_min = new_min
    return PartialPass(row_min, s, w, acc, top_d, top_j)


def _merge(parts: list[PartialPass], tau: float, k: int, columns: bool) -> PartialPass:
    """The running sums of consecutive row ranges combined, in the given order (the online
    softmax's rescaling to the smaller row minimum)."""
    out = parts[0]
    per_query = (lambda v: v[None, :]) if columns else (lambda v: v[:, None])
    for p in parts[1:]:
        new_min = torch.minimum(out.row_min, p.row_min)
        r_out = torch.exp((new_min - out.row_min) / tau)
        r_p = torch.exp((new_min - p.row_min) / tau)
        top_d, top_j = _merge_top(out.top_d, out.top_j, p.top_d, p.top_j, k)
        out = PartialPass(new_min, out.s * r_out + p.s * r_p, out.w * r_out + p.w * r_p,
                          out.acc * per_query(r_out) + p.acc * per_query(r_p), top_d, top_j)
    return out


#: the threads that run the ``"shards"`` schedule
_SHARD_WORKERS = ReusedThreadPool("dart3-shard")


def _shard_passes(z, zg, z_sq, gallery: PreparedGallery, tau: float, k: int,
                  threads: int = 1) -> list[PartialPass]:
    """Every shard's :class:`PartialPass`, in shard order. ``"shards"`` schedule (called
    under :func:`~reidcli.workers.one_intra_op_thread`; ``threads`` the caller's torch thread
    count): on the calling thread for one shard or one thread, else on up to ``threads``
    workers that take the next unclaimed shard (a worker the OS deschedules simply takes
    fewer)."""
    if gallery.schedule == "blocks":
        return [_pass(z, zg, z_sq, gallery, a, b, tau, k, REDUCTION_CHUNK)
                for a, b in gallery.shards]
    shards = gallery.shards
    workers = min(threads if torch_uses_openmp() else 1, len(shards))
    if workers <= 1:
        return [_pass(z, zg, z_sq, gallery, a, b, tau, k, 0) for a, b in shards]
    parts: list[PartialPass | None] = [None] * len(shards)
    claim = itertools.count()

    def work():
        for i in iter(claim.__next__, None):
            if i >= len(shards):
                return
            a, b = shards[i]
            parts[i] = _pass(z, zg, z_sq, gallery, a, b, tau, k, 0)

    pool = _SHARD_WORKERS.get(workers)
    for f in [pool.submit(work) for _ in range(workers)]:
        f.result()
    return parts


class EuclideanTopKSoftmaxLoss(torch.autograd.Function):
    """DART3's loss with Euclidean δ, loss and gradient w.r.t. ẑ in one pass over the gallery.

    Per gallery block (rows j) and query i: ``D_ij = sqrt(max(‖g̃_j‖² + ‖ẑ_i‖² − 2 g̃_j·ẑ_i,
    1e-12))``. With the running row minimum ``m_i`` (online softmax, rescaled as it falls):
    ``s_i = Σ_j exp((m_i − D_ij)/τ)``, ``w_i = Σ_j exp((m_i − D_ij)/τ)/D_ij`` and
    ``a_i = Σ_j exp((m_i − D_ij)/τ)/D_ij · g̃_j``; the k smallest D_ij of each row (= the k
    smallest H_ij, the mask) are merged block by block, and the shards' sums likewise
    (:class:`PreparedGallery`). Then

        lse_i = log Σ_j exp(−D_ij/τ) = log s_i − m_i/τ,    H_ij = D_ij/τ + lse_i
        L = (1/B) Σ_i [Σ_{j∈K_i} D_ij/τ + k·lse_i]                              (Eq 2/11)
        ∂L/∂ẑ_i = (1/(Bτ)) [Σ_{j∈K_i} (ẑ_i − g̃_j)/D_ij − (k/s_i)(w_i ẑ_i − a_i)]

    (∂L/∂D_ij = (Mask_ij − k·softmax_ij)/(Bτ); ∂D_ij/∂ẑ_i = (ẑ_i − g̃_j)/D_ij; floored
    distances get no gradient, as with autograd through the clamp). The gradient is computed
    in the forward pass and scaled in ``backward``.
    """

    @staticmethod
    def forward(ctx, zhat, gallery, tau, k):
        # "shards": no OpenMP parallel region at all in here (PreparedGallery)
        with (one_intra_op_thread() if gallery.schedule == "shards"
              else contextlib.nullcontext(torch.get_num_threads())) as threads:
            grad, loss = EuclideanTopKSoftmaxLoss._loss_and_grad(zhat, gallery, float(tau),
                                                                 int(k), threads)
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def _loss_and_grad(zhat, gallery, tau: float, k: int, threads: int):
        """(∂L/∂ẑ [B, d], L) of the class doc."""
        batch = zhat.shape[0]
        z = zhat.detach()
        z_sq = (z * z).sum(1)                                          # [B]
        floor = MIN_SQ_DIST ** 0.5
        columns = gallery.layout == "columns"
        zg = z.to(torch.bfloat16) if gallery.precision == "bf16" else \
            z * -2.0 if gallery.linear is not None else z               # GEMM operand
        total = _merge(_shard_passes(z, zg, z_sq, gallery, tau, k, threads), tau, k, columns)
        top_d, top_j, s = total.top_d, total.top_j, total.s
        lse = torch.log(s) - total.row_min / tau
        loss = (top_d.sum(0) / tau + k * lse).sum() / batch
        # mask part: Σ_{j∈K_i} (ẑ_i − g̃_j)/D_ij  (floored distances: no gradient)
        inv = torch.where(top_d > floor, 1.0 / top_d, torch.zeros_like(top_d))   # [k, B]
        near = gallery.rows[top_j].to(z.dtype)                         # [k, B, d]
        mask_part = z * inv.sum(0)[:, None] - (inv[:, :, None] * near).sum(0)
        a = total.acc.t() if columns else total.acc
        dense_part = (k / s)[:, None] * (total.w[:, None] * z - a)
        return (mask_part - dense_part) / (batch * tau), loss

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad * grad_out, None, None, None


def dart3_loss(zhat: torch.Tensor, gallery: PreparedGallery, tau: float, k: int,
               distance: str = "euclidean") -> torch.Tensor:
    """DART3's loss (Eq 2/11) of ẑ [B, d] against the prepared gallery; a scalar tensor.

    ``distance="cosine"`` (δ = 1 − cos, the Tab 7 ablation) uses the autograd reference, in
    float32 (with ``precision="bf16"`` on the bfloat16-rounded gallery).
    """
    k = min(int(k), gallery.num_rows)
    if distance == "euclidean":
        return EuclideanTopKSoftmaxLoss.apply(zhat, gallery, float(tau), k)
    return dart3_loss_reference(zhat, gallery.rows.to(zhat.dtype), tau, k, distance)


def distance_matrix(zhat: torch.Tensor, gallery: torch.Tensor,
                    distance: str = "euclidean") -> torch.Tensor:
    """δ(ẑ, G) [B, Ng]: Euclidean (floored, docs/methods/dart3.md) or 1 − cosine (autograd;
    the GEMM on one CPU thread, :func:`reidcli.models.fixed_order.linear`)."""
    if distance == "cosine":
        return 1.0 - linear(F.normalize(zhat, dim=1), F.normalize(gallery, dim=1))
    d2 = (zhat * zhat).sum(1, keepdim=True) + (gallery * gallery).sum(1)[None, :] \
        - 2.0 * linear(zhat, gallery)
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
    entropy, mean over the batch. The similarity GEMM runs on one CPU thread (the same bits
    whatever the thread count, :func:`reidcli.models.fixed_order.linear`)."""
    sim = linear(F.normalize(query.float(), dim=1), gallery_unit)
    top = torch.topk(sim, min(int(k), sim.shape[1]), dim=1).values
    return softmax_entropy(top)


__all__ = ["PreparedGallery", "EuclideanTopKSoftmaxLoss", "dart3_loss", "dart3_loss_reference",
           "distance_matrix", "softmax_entropy", "tent_loss", "temp_loss", "MIN_SQ_DIST",
           "COLUMNS_MIN_BATCH", "SCHEDULE", "CPU_GEMM"]
