"""Training losses: PCB's summed part cross-entropies, label-smoothed softmax and the
batch-hard triplet loss (docs/methods/bot.md)."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from reidcli.models.fixed_order import linear


def _at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """fp16/bf16 (AMP) → fp32; fp32 and fp64 unchanged (float64 gradient checks)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def part_cross_entropy(logits: Sequence[torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
    """PCB loss: Σ_i CE(logits_i, y) over the p part classifiers, each weight 1 (docs/methods/pcb.md)."""
    return sum(F.cross_entropy(z.float(), labels) for z in logits)


def label_smoothing_cross_entropy(logits: torch.Tensor, labels: torch.Tensor,
                                  epsilon: float = 0.1) -> torch.Tensor:
    """L_soft = −(1/B) Σ_j Σ_c q_jc log softmax(z_j)_c, q = (1−ε)[c=y] + ε/K (docs/methods/bot.md)."""
    logp = F.log_softmax(_at_least_fp32(logits), dim=1)
    k = logits.shape[1]
    target = torch.full_like(logp, epsilon / k)
    target.scatter_(1, labels.view(-1, 1), 1.0 - epsilon + epsilon / k)
    return -(target * logp).sum(dim=1).mean()


def pairwise_euclidean(x: torch.Tensor) -> torch.Tensor:
    """[B, d] → [B, B] sqrt(clamp(|a|²+|b|²−2a·b, 1e-12)) (finite gradient at 0)."""
    x = _at_least_fp32(x)
    sq = (x * x).sum(dim=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * linear(x, x)     # one-thread GEMM (fixed_order.py)
    return d2.clamp_min(1e-12).sqrt()


def batch_hard_triplet(features: torch.Tensor, labels: torch.Tensor,
                       margin: float = 0.3) -> torch.Tensor:
    """L_tri = (1/B) Σ_a max(0, max_p d(a,p) − min_n d(a,n) + m) (docs/methods/bot.md).

    Anchors without a positive or a negative in the batch contribute 0.
    """
    dist = pairwise_euclidean(features)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    pos = same & ~eye
    neg = ~same
    big = torch.finfo(dist.dtype).max
    hardest_pos = torch.where(pos, dist, torch.zeros_like(dist)).max(dim=1).values
    hardest_neg = torch.where(neg, dist, torch.full_like(dist, big)).min(dim=1).values
    valid = pos.any(dim=1) & neg.any(dim=1)
    loss = F.relu(hardest_pos - hardest_neg + margin)
    return torch.where(valid, loss, torch.zeros_like(loss)).mean()


__all__ = ["part_cross_entropy", "label_smoothing_cross_entropy", "batch_hard_triplet",
           "pairwise_euclidean"]
